"""The explorer as a Jupyter widget (anywidget): the same page, live, following its object.

This module lets :func:`microtape.viz.explore` return something Jupyter keeps
alive::

    view = mt.viz.explore(attn)     # shows in JupyterLab, Notebook 7 and VS Code
    attn(x); attn.backward(g)       # in a later cell: the view reads the layer again by itself
    view.update(other)              # or show something else in the same place
    view.save("attn.html")          # the same view as one file

The widget's front end is the page's own script (``assets/explore.js``)
wrapped as an ES module; the view's data travels as one JSON string (the
``data`` trait). Following: every second the front end asks the kernel
(a custom message) whether the object changed — its tape, its length, the
sum of its leaves' values and gradients (:func:`.explore.fingerprint`) —
and the kernel sends new data only when it did. Messages wait while a cell
runs, so the view catches up when the cell ends.

A saved notebook reopened without a kernel: the output also carries a
``text/html`` copy — the graph as last shown (and, in a page built from
executed notebooks with ``MICROTAPE_STATIC_PAGES`` set, as the docs site does,
the whole explorer, which needs no kernel) — which renderers without a
widget manager show (nbconvert, GitHub, the site). JupyterLab itself prefers the widget's own output type; with its
"Save Widget State Automatically" setting on, the widget comes back from
the saved state (its ``data`` holds the whole view) with no kernel.

anywidget is imported here only, and only when a widget is made.
"""

import html
import os
from functools import cache

from ..frames import STATIC_PAGES
from .page import asset

__all__ = ["widget_class", "esm"]

POLL_MS = 1000  # how often the front end asks whether the object changed

_WRAPPER = """
function mtMount(model, el) {
  var view = null;
  function draw() {
    var step = view ? view.state.step : undefined;
    var selected = view ? view.state.selected : null;
    view = mtExplore(el, model.get("data"), { step: step });
    if (selected) view.select(selected);
  }
  draw();
  model.on("change:data", draw);
  var timer = setInterval(function () {
    if (!el.isConnected) { clearInterval(timer); return; }
    if (model.get("follow")) model.send({ kind: "poll" });
  }, %d);
  return function () { clearInterval(timer); model.off("change:data", draw); };
}
export default { render: function (context) { return mtMount(context.model, context.el); } };
"""


def esm():
    """The widget's front end: the page's script and the anywidget entry point."""
    return asset("explore.js") + _WRAPPER % POLL_MS


def _static_view(explorer):
    """What the output shows where no widget can run: the whole explorer for a built site, else its graph.

    A page built from executed notebooks (``MICROTAPE_STATIC_PAGES`` set, as the
    site's build does) gets the explorer itself, script and data: it works
    with no kernel. A notebook saved from Jupyter keeps the graph as it was
    last shown and a line saying how to explore it (the whole view is
    already in the widget's state: stored twice it would double the file).
    """
    if os.environ.get(STATIC_PAGES):
        return explorer._repr_html_()
    data = explorer.data
    said = f"microtape explorer: {len(data['nodes'])} nodes, {len(data['steps'])} backward steps"
    said += " (a static copy: run the cell to click and step, or open what view.save(path) wrote)"
    return (
        f'<div class="mt-explore-static"><div style="font: 13px sans-serif">{html.escape(said)}</div>'
        f'<div style="overflow:auto">{data["views"][0]["svg"]}</div></div>'
    )


@cache
def widget_class():
    """The widget class (made on first use, so that importing microtape never imports anywidget)."""
    import anywidget
    import traitlets

    class ExploreWidget(anywidget.AnyWidget):
        """The explorer in Jupyter (see :mod:`microtape.viz.explorer.widget`)."""

        _esm = esm()
        _css = asset("explore.css")
        data = traitlets.Dict().tag(sync=True)  # the whole view (sent as JSON, kept in a saved widget state)
        follow = traitlets.Bool(True).tag(sync=True)

        def __init__(self, explorer, **kwargs):
            super().__init__(**kwargs)
            self.explorer = explorer
            self.data = explorer.data
            self.on_msg(self._on_message)

        def update(self, obj):
            """Show ``obj`` instead (a bad object raises and leaves the view as it was); returns the widget."""
            self.explorer.update(obj)
            self.data = self.explorer.data
            return self

        def refresh(self):
            """Read the object again if it changed (what the front end asks every second); True if it did."""
            changed = self.explorer.refresh()
            if changed:
                self.data = self.explorer.data
            return changed

        def save(self, path):
            """Write the view as one HTML file (no kernel, no network needed) and return its path."""
            return self.explorer.save(path)

        def html(self):
            """The page :meth:`save` writes."""
            return self.explorer.html()

        def _on_message(self, _widget, content, _buffers):
            if isinstance(content, dict) and content.get("kind") == "poll" and self.follow:
                self.refresh()

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            static = {"text/html": _static_view(self.explorer)}
            if bundle is None:
                return static
            if isinstance(bundle, tuple):  # (data, metadata)
                return ({**bundle[0], **static}, bundle[1])
            return {**bundle, **static}

        def __repr__(self):
            return f"<ExploreWidget: {self.explorer!r}>"

    return ExploreWidget
