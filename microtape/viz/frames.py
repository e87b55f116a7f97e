"""The backward pass as a flip-book: one graph per step, and a page to step through them.

This module lets you watch gradients flow, one equation at a time::

    frames = mt.viz.backward_frames(tape)          # BackwardFrames, one Digraph per step
    frames[3]                                      # the graph after step 3 (shows in Jupyter)
    frames.save("frames/")                         # frame_000.svg, ... and index.html
    frames                                         # in Jupyter: the pictures with a slider
    frames.widget()                                # an ipywidgets slider, if installed

Frame ``k`` is ``graph(tape, step=frames.steps[k])``: steps come in reverse
tape order, step 0 handles the output, the last one the first equation; after
it every leaf has its gradient. With ``detail="full"`` there is a frame for
every step; with ``"auto"``, steps hidden inside one box (a chain of reshapes)
share a frame. All frames share one private replay of the backward pass
(no ``.grad`` field changes) and one layout, so only the colours move.

``index.html`` is plain HTML and JavaScript (no server, no libraries): a
slider, previous/next/play buttons, the arrow keys, and a caption saying what
happens at each step.
"""

import html
import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ._trace import collect, grad_summary, trace_backward
from .graph import _Builder, _draw, _formula_part, _options, _simplify
from .render import GraphvizNotFound, render, svg

__all__ = ["backward_frames", "BackwardFrames"]


def backward_frames(
    tape_or_output,
    output=None,
    *,
    grad=None,
    out_dir=None,
    format="svg",
    group="module",
    detail="auto",
    values=True,
    parameters=None,
    max_nodes=150,
    rankdir=None,
    legend=True,
    title=None,
):
    """One graph per backward step; with ``out_dir``, also write them and ``index.html``.

    Takes what :func:`microtape.viz.graph` takes (a tape, a result, a layer).
    Returns a :class:`BackwardFrames`. ``format`` (``"svg"`` or ``"png"``) is
    the format of the files written to ``out_dir``.
    """
    program = collect(tape_or_output, output)
    trace = trace_backward(program, grad)
    if len(trace) == 0:
        raise ValueError("backward_frames: the output is a leaf, so the backward pass has no steps to show")
    options = _options(group, detail, values, parameters, max_nodes, rankdir, legend, title)
    boxes = _Builder(program, None, None, options["group"], options["values"], options["parameters"])
    _simplify(boxes, options, warn=False)
    steps = _frame_steps(trace, boxes)
    digraphs = [_draw(program, trace, k, options, warn=n == 0) for n, k in enumerate(steps)]
    frames = BackwardFrames(digraphs, [_caption(program, trace, boxes, k) for k in steps], steps)
    if out_dir is not None:
        frames.save(out_dir, format=format)
    return frames


def _frame_steps(trace, boxes):
    """The steps worth a frame: the last step spent on each drawn box.

    With ``detail="auto"`` a box may stand for several equations (a chain of
    reshapes, a module summary); the steps inside it would give identical
    pictures, so only the step that finishes the box gets a frame.
    """
    ids = [boxes.box_of(i) for i in trace.order]
    return [k for k in range(len(ids)) if k == len(ids) - 1 or ids[k + 1] != ids[k]]


def _caption(program, trace, boxes, k):
    """What step ``k`` does, in one line."""
    i = trace.order[k]
    node = program.equations[i]
    sends = [
        _formula_part(node.op, position)
        for position, x in enumerate(node.inputs)
        if x.requires_grad and _formula_part(node.op, position)
    ]
    text = f"step {k} of {len(trace) - 1}: {boxes.box_title(i)} receives {grad_summary(trace.grad_out[i])}"
    if sends:
        text += "; sends " + ";  ".join(sends)
    if k == len(trace) - 1:
        text += "  — done: every leaf has its gradient"
    return text


class BackwardFrames:
    """The frames of a backward pass: ``frames[k]`` is a ``graphviz.Digraph``.

    ``captions[k]`` says what step ``k`` does. :meth:`svgs` draws them (needs
    Graphviz's ``dot``), :meth:`save` writes files and ``index.html``,
    :meth:`html` gives a self-contained page; in Jupyter the object shows as
    that page, and :meth:`widget` gives an ipywidgets slider if available.
    """

    def __init__(self, digraphs, captions, steps=None):
        self.digraphs = list(digraphs)
        self.captions = list(captions)
        # steps[k]: the backward step frame k shows (graph(..., step=steps[k])).
        self.steps = list(range(len(self.digraphs))) if steps is None else list(steps)
        self.paths = []  # files written by save(), frames first, index.html last
        self._svgs = None

    def __len__(self):
        return len(self.digraphs)

    def __getitem__(self, k):
        return self.digraphs[k]

    def __iter__(self):
        return iter(self.digraphs)

    def __repr__(self):
        return f"<BackwardFrames: {len(self)} steps>"

    def svgs(self):
        """Every frame as an SVG string (drawn once, then kept)."""
        if self._svgs is None:
            with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
                self._svgs = list(pool.map(svg, self.digraphs))
        return list(self._svgs)

    def save(self, out_dir, format="svg"):
        """Write ``frame_000.<format>``, … and ``index.html`` into ``out_dir``; return the paths.

        Without Graphviz, the frames are saved as ``.dot`` files and
        :class:`~microtape.viz.GraphvizNotFound` is raised.
        """
        if format not in ("svg", "png"):
            raise ValueError(f"BackwardFrames.save(format=...): expected 'svg' or 'png', got {format!r}")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        width = max(3, len(str(len(self) - 1)))
        paths = [out / f"frame_{k:0{width}d}.{format}" for k in range(len(self))]
        try:
            if format == "svg" and self._svgs is not None:
                for path, text in zip(paths, self._svgs, strict=True):
                    path.write_text(text, encoding="utf-8")
            else:
                # One `dot` process per frame; they run side by side.
                with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
                    list(pool.map(render, self.digraphs, paths, [format] * len(paths)))
        except GraphvizNotFound as error:
            for k, digraph in enumerate(self.digraphs):
                render(digraph, out / f"frame_{k:0{width}d}.dot", "dot")
            raise GraphvizNotFound(
                f"{error}\nAll {len(self)} frames were saved as .dot files in {out}.", dot_path=out
            ) from None
        page = out / "index.html"
        page.write_text(self.html(sources=[p.name for p in paths]), encoding="utf-8")
        paths.append(page)
        self.paths = paths
        return paths

    def html(self, sources=None):
        """A page that steps through the frames: slider, buttons, arrow keys, captions.

        With ``sources`` (file names) the page shows those files; otherwise the
        SVGs are put inline and the page stands alone.
        """
        body = self._fragment(sources, uid="microtape-frames")
        return _PAGE.format(body=body, title="microtape: backward pass, step by step")

    def _fragment(self, sources=None, uid=None):
        # A page holds one player (a fixed id keeps saved files stable); a
        # notebook may hold many, so each inline player gets its own id.
        uid = uid or "mt" + uuid.uuid4().hex[:8]
        if sources is None:
            pictures = [_strip_xml_header(s) for s in self.svgs()]
        else:
            pictures = [f'<img src="{html.escape(src)}" alt="frame {k}">' for k, src in enumerate(sources)]
        frames = "\n".join(
            f'<div class="mt-frame" style="display:{"block" if k == 0 else "none"}">{p}</div>'
            for k, p in enumerate(pictures)
        )
        return _FRAGMENT.format(
            uid=uid,
            last=len(self) - 1,
            frames=frames,
            captions=json.dumps(self.captions),
            caption=html.escape(self.captions[0]),
        )

    def _repr_html_(self):
        try:
            return self._fragment()
        except GraphvizNotFound as error:
            return f"<pre>{html.escape(str(error))}</pre>"

    def widget(self):
        """An ipywidgets slider over the frames (needs ``ipywidgets``; optional)."""
        try:
            import ipywidgets
        except ImportError:
            raise ImportError(
                "BackwardFrames.widget() needs ipywidgets (pip install ipywidgets); "
                "without it, display the frames object itself: it has a plain-HTML slider"
            ) from None
        pictures = self.svgs()
        slider = ipywidgets.IntSlider(value=0, min=0, max=len(self) - 1, description="step")
        caption = ipywidgets.Label(self.captions[0])
        view = ipywidgets.HTML(_strip_xml_header(pictures[0]))

        def show(change):
            view.value = _strip_xml_header(pictures[change["new"]])
            caption.value = self.captions[change["new"]]

        slider.observe(show, names="value")
        return ipywidgets.VBox([ipywidgets.HBox([slider, caption]), view])


def _strip_xml_header(text):
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


_FRAGMENT = """<div id="{uid}" class="mt-frames">
<div class="mt-controls" style="font:13px sans-serif;margin:4px 0">
<button data-go="prev">&#9664; prev</button>
<input type="range" min="0" max="{last}" value="0" style="width:40%;vertical-align:middle">
<button data-go="next">next &#9654;</button>
<button data-go="play">play</button>
<span class="mt-caption" style="margin-left:8px">{caption}</span>
</div>
{frames}
<script>
(function() {{
  var root = document.getElementById("{uid}");
  var captions = {captions};
  var frames = root.querySelectorAll(".mt-frame");
  var slider = root.querySelector("input");
  var caption = root.querySelector(".mt-caption");
  var timer = null;
  function show(k) {{
    k = Math.max(0, Math.min(frames.length - 1, k));
    for (var i = 0; i < frames.length; i++) frames[i].style.display = i === k ? "block" : "none";
    slider.value = k;
    caption.textContent = captions[k];
  }}
  function current() {{ return parseInt(slider.value, 10); }}
  slider.addEventListener("input", function() {{ show(current()); }});
  root.querySelector('[data-go="prev"]').addEventListener("click", function() {{ show(current() - 1); }});
  root.querySelector('[data-go="next"]').addEventListener("click", function() {{ show(current() + 1); }});
  var play = root.querySelector('[data-go="play"]');
  play.addEventListener("click", function() {{
    if (timer) {{ clearInterval(timer); timer = null; play.textContent = "play"; return; }}
    if (current() === frames.length - 1) show(0);
    play.textContent = "pause";
    timer = setInterval(function() {{
      if (current() >= frames.length - 1) {{
        clearInterval(timer); timer = null; play.textContent = "play"; return;
      }}
      show(current() + 1);
    }}, 900);
  }});
  root.tabIndex = 0;
  root.addEventListener("keydown", function(e) {{
    if (e.key === "ArrowRight") {{ show(current() + 1); e.preventDefault(); }}
    if (e.key === "ArrowLeft") {{ show(current() - 1); e.preventDefault(); }}
  }});
}})();
</script>
</div>"""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 16px; }}
.mt-frame img, .mt-frame svg {{ max-width: 100%; height: auto; }}
</style>
</head>
<body>
<h1 style="font-size:18px">{title}</h1>
<p style="font-size:13px;color:#555">Use the slider, the buttons or the arrow keys (click the pictures first).
Orange: gradient finished; highlighted: the current step; grey: not reached yet.</p>
{body}
</body>
</html>
"""
