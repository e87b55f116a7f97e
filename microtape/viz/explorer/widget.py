"""The explorer as a Jupyter widget (anywidget): the same page, live, following its object.

This module lets :func:`microtape.viz.explore` return something Jupyter keeps
alive::

    view = mt.viz.explore(attn)     # shows in JupyterLab, Notebook 7 and VS Code
    attn(x); attn.backward(g)       # in a later cell: the view reads the layer again by itself
    view.update(other)              # or show something else in the same place
    view.save("attn.html")          # the same view as one file

The widget's front end is the page's own script (``assets/explore.js``)
wrapped as an ES module; the view's data travels as one JSON object (the
``data`` trait). Following: every second the front end asks the kernel
(a custom message) whether the object changed — its tape, its length, the
sum of its leaves' values and gradients (:func:`.explore.fingerprint`) —
and the kernel sends new data only when it did. Messages wait while a cell
runs, so the view catches up when the cell ends.

A saved notebook reopened without a kernel: shown in a notebook, the widget
is two outputs — the explorer as a page (static: script and data inside,
no kernel needed), then the widget itself. Live, the widget hides the page;
reopened with no widget model (JupyterLab would say "Error displaying
widget: model not found"), the page stays and hides that line. Renderers
without widgets (nbconvert, GitHub, the docs site) show the page. Called
for its ``_repr_mimebundle_`` alone, the widget's ``text/html`` is the
graph as last shown (the whole explorer when ``MICROTAPE_STATIC_PAGES`` is set).

anywidget is imported here only, and only when a widget is made.
"""

import html
import os
import uuid
from functools import cache
from typing import Any

from ..frames import STATIC_PAGES
from .page import asset, fragment

__all__ = ["widget_class", "esm"]

POLL_MS = 1000  # how often the front end asks whether the object changed

_WRAPPER = """
function mtMount(model, el) {
  var view = null;
  // Live: hide the static copy shown beside this widget (it is for a notebook reopened without a kernel).
  var copy = model.get("static_id") ? document.getElementById(model.get("static_id")) : null;
  if (copy) (copy.closest(".jp-OutputArea-child, .output_area") || copy).style.display = "none";
  var own = el.closest(".jp-OutputArea-child, .output_area");
  if (own) own.style.display = "";
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


def esm() -> Any:
    """The widget's front end: the page's script and the anywidget entry point."""
    return asset("explore.js") + _WRAPPER % POLL_MS


def _static_view(explorer: Any) -> Any:
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


# long on purpose: the class is defined inside, on first use, so that importing microtape never imports anywidget
@cache
def widget_class() -> Any:
    """The widget class (made on first use, so that importing microtape never imports anywidget)."""
    import anywidget
    import traitlets

    class ExploreWidget(anywidget.AnyWidget):
        """The explorer in Jupyter (see :mod:`microtape.viz.explorer.widget`)."""

        _esm = esm()
        _css = asset("explore.css")
        data = traitlets.Dict().tag(sync=True)  # the whole view (sent as JSON, kept in a saved widget state)
        follow = traitlets.Bool(True).tag(sync=True)
        static_id = traitlets.Unicode("").tag(sync=True)  # the static copy beside the widget (see _ipython_display_)

        def __init__(self, explorer: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.explorer = explorer
            self.data = explorer.data
            self.on_msg(self._on_message)

        def update(self, obj: Any) -> Any:
            """Show ``obj`` instead (a bad object raises and leaves the view as it was); returns the widget."""
            self.explorer.update(obj)
            self.data = self.explorer.data
            return self

        def refresh(self) -> Any:
            """Read the object again if it changed (what the front end asks every second); True if it did."""
            changed = self.explorer.refresh()
            if changed:
                self.data = self.explorer.data
            return changed

        def save(self, path: Any) -> Any:
            """Write the view as one HTML file (no kernel, no network needed) and return its path."""
            return self.explorer.save(path)

        def html(self) -> Any:
            """The page :meth:`save` writes."""
            return self.explorer.html()

        def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict) and content.get("kind") == "poll" and self.follow:
                self.refresh()

        def _ipython_display_(self, **kwargs: Any) -> None:
            # Two outputs: the explorer as a page (static: it needs no kernel), then the widget. Live, the
            # widget hides the page; reopened without a kernel, the page stays and hides the widget's
            # "model not found" (JupyterLab shows a widget's own output type whenever it has one).
            from IPython.display import display

            self.static_id = "mt-explore-" + uuid.uuid4().hex[:8]
            display({"text/html": fragment(self.explorer.data, uid=self.static_id, beside_widget=True)}, raw=True)
            data, metadata = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]  # a (data, metadata) pair
            display({**data, "text/html": ""}, metadata=metadata, raw=True)  # (the page above is the fallback)

        def _repr_mimebundle_(self, **kwargs: Any) -> Any:
            bundle = super()._repr_mimebundle_(**kwargs)
            static = {"text/html": _static_view(self.explorer)}
            if bundle is None:
                return static
            if isinstance(bundle, tuple):  # (data, metadata)
                return ({**bundle[0], **static}, bundle[1])
            return {**bundle, **static}

        def __repr__(self) -> str:
            return f"<ExploreWidget: {self.explorer!r}>"

    return ExploreWidget
