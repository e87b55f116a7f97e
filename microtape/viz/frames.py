"""The backward pass as a flip-book: one graph per step, one layout for all, and a page to step through them.

This module lets you watch gradients flow, one box at a time::

    frames = mt.viz.backward_frames(tape)          # BackwardFrames, one Digraph per step
    frames[3]                                      # the graph after step 3 (shows in Jupyter)
    frames.captions[3]                             # "step 3 of steps 0–20: scores (matmul) receives …"
    frames.save("frames/")                         # frame_000.svg, … and index.html
    frames                                         # in Jupyter: the player, inline

Frame ``k`` shows what ``graph(tape, step=k)`` shows: the picture's step
``k`` (one per box the pass finishes; step 0 handles the output, the last one
completes every leaf's gradient). The slider, the captions and ``step=`` all
count the same steps.

One layout: the graph is laid out once, with every label at its final size
(each box's longest text over all frames), and every frame is drawn at
those positions (``neato -n2``), so between frames only colours and numbers
change — nothing moves. Without Graphviz's ``dot`` the frames are kept
unpinned (and saved as ``.dot`` files). All frames read one pure reverse pass:
no ``.grad`` changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..engine import Node
    from ..viz.drawing import Drawing


import html
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..nn.attention import derivation
from .drawing import takes_drawing_options, warn_if_collapsed
from .fit import fitted
from .layout import Layout, widest
from .paint import Painter, paint
from .picture import to_digraph
from .player import fragment, page
from .program import collect, trace_backward
from .progress import progress
from .render import GraphvizNotFound, fit_svg, render, svg
from .text import flatten, grad_lines, norm_text, step_text

__all__ = ["backward_frames", "BackwardFrames"]

LEGEND = (("state", "done"), ("state", "partial"), ("state", "current"), ("state", "pending"), ("state", "off"))


#: Set (to anything) by a build of static pages from executed notebooks (docs/conf.py): the
#: widget's output then also holds the plain-HTML player, every frame in it.
STATIC_PAGES = "MICROTAPE_STATIC_PAGES"


@takes_drawing_options
def backward_frames(
    tape_or_output: Any,
    output: Node | None = None,
    *,
    grad: Any = None,
    out_dir: str | os.PathLike[str] | None = None,
    format: str = "svg",
    drawing: Drawing,
) -> BackwardFrames:
    """One graph per backward step, all at one layout; with ``out_dir``, also write them and ``index.html``.

    Takes what :func:`microtape.viz.graph` takes (a tape, a result, a layer, a
    scalar trace; ``width=`` as there: frames read at that width too).
    Returns a :class:`BackwardFrames`. ``format`` (``"svg"`` or ``"png"``) is
    the format of the files written to ``out_dir``.
    """
    program = collect(tape_or_output, output, drawing.parameters)
    trace = trace_backward(program, grad)
    view, rankdir = fitted(
        program,
        drawing.view_options,
        trace,
        rankdir=drawing.rankdir,
        width=drawing.width,
        paint_options=drawing.paint_options,
    )
    warn_if_collapsed(view, drawing.max_nodes, stacklevel=3)  # this function, the decorator, the caller
    if len(trace) == 0:
        raise ValueError("backward_frames: the output is a leaf, so the backward pass has no steps to show")
    stops = view.steps(trace)
    received = trace.received_series(stops)
    painters = [Painter(view, trace, k, values=drawing.values, received=received[k]) for k in range(len(stops))]
    pictures = [painter.picture(drawing.title, legend=drawing.legend, rankdir=rankdir) for painter in painters]
    whole = paint(view, trace, rankdir=rankdir, **drawing.paint_options)
    for picture in pictures:
        # Every frame has the same caption on top (the step is said by the player's caption),
        # so that the pinned canvas fits them all.
        picture.note = view.note
        picture.legend = _union_legend(pictures + [whole]) if drawing.legend else []
    try:
        layout = Layout.of(to_digraph(widest(pictures)))
    except GraphvizNotFound:
        layout = None
    digraphs = [to_digraph(picture, layout) for picture in pictures]
    captions = [_caption(painter, len(stops)) for painter in painters]
    focus = [layout.focus(painter.current) for painter in painters] if layout is not None else None
    frames = BackwardFrames(digraphs, captions, focus=focus, engine_steps=stops)
    if out_dir is not None:
        frames.save(out_dir, format=format)
    return frames


def _union_legend(pictures: Any) -> Any:
    keys = {key for picture in pictures for key in picture.legend}
    kinds = [("kind", k) for k in ("input", "parameter", "constant") if ("kind", k) in keys]
    return [key for key in LEGEND if key in keys] + kinds


def _caption(painter: Any, count: int) -> Any:
    """What step ``k`` does, in one line, with the names the picture uses."""
    view, program, trace = painter.view, painter.program, painter.trace
    k, i = painter.step, trace.order[painter.engine_step]
    node = program.equations[i]
    node_name = program.name(node)
    box = view.by_id[painter.current]
    if box.kind == "summary":
        what = f"{box.group.partition('#')[0] or 'ops'} (summary of {len(box.equations)} ops)"
        exits = painter.exits(box.equations)
        grads = [trace.grad_out[e] for e in exits]
        noise = max(trace.noise(program.equations[e]) for e in exits)
        received = grad_lines(grads[0], noise)[0] if len(grads) == 1 else norm_text(flatten(grads), noise)
        text = f"{step_text(k, count)}: {what} receives {received} at its output; its first op {node_name} "
        text += _sends(painter, i) or "sends nothing on"
    else:
        if box.leaves:
            owner = program.name(program.leaves[box.leaves[0]])
            what = f"{node_name} ({node.op.name}, drawn in {owner}'s box)"
        else:
            ops = "→".join(program.equations[m].op.name for m in box.equations)
            what = f"{program.name(program.equations[box.equations[-1]])} ({ops})"
        text = f"{step_text(k, count)}: {what} receives " + " ".join(grad_lines(trace.grad_out[i], trace.noise(node)))
        sends = _sends(painter, i)
        if sends:
            text += "; " + sends
    text += _by_hand(node)
    if k == count - 1:
        text += "  — done: every leaf has its gradient"
    return text


def _by_hand(node: Any) -> Any:
    """An attention step's hand-derived formulas, as the derivation table writes them (or nothing)."""
    if node.module is None or node.module.rpartition(".")[2] != "attention":
        return ""
    formulas = derivation.step_formulas(derivation.ATTENTION, node.name, [x.name for x in node.inputs])
    return f"  (by hand: {';  '.join(formulas)})" if formulas else ""


def _sends(painter: Any, i: Any) -> Any:
    """``sends d… = …;  d… = …``: what equation ``i``'s VJP sends to its inputs, in the picture's words."""
    node = painter.program.equations[i]
    parts = [
        painter.formula(i, position, numbers=True)
        for position, x in enumerate(node.inputs)
        if x.requires_grad and node.op.grads[position] is not None
    ]
    return "sends " + ";  ".join(parts) if parts else ""


def _drawing(frames: Any, count: int) -> Any:
    # dot takes ~0.1 s a frame: a big tape's hundreds of frames get a bar (on a terminal or in Jupyter).
    return progress(frames, total=count, desc="drawing frames", unit="frame", leave=False, at_least=50)


class BackwardFrames:
    """The frames of a backward pass: ``frames[k]`` is a ``graphviz.Digraph``.

    ``captions[k]`` says what step ``k`` does; ``steps`` are the picture's
    steps ``0..n-1`` (what ``graph(..., step=k)`` counts) and
    ``engine_steps[k]`` the engine's step (:attr:`microtape.engine.tape.Gradients.steps`)
    that finishes frame ``k``'s box. ``pinned``: all frames share one layout.
    ``focus[k]``: where the current box sits (fractions of the picture).
    :meth:`svgs` draws them (needs Graphviz), :meth:`save` writes files and
    ``index.html``, :meth:`html` gives a self-contained page; in Jupyter the
    object shows as the player, and :meth:`widget` gives an ipywidgets slider
    (or, without ipywidgets, the player).
    """

    def __init__(self, digraphs: Any, captions: Any, *, focus: Any = None, engine_steps: Any = None) -> None:
        self.digraphs = list(digraphs)
        self.captions = list(captions)
        self.steps = list(range(len(self.digraphs)))
        self.engine_steps = list(engine_steps) if engine_steps is not None else list(self.steps)
        self.focus = focus
        self.pinned = bool(self.digraphs) and getattr(self.digraphs[0], "pinned", False)
        self.paths: list[Any] = []  # files written by save(), frames first, index.html last
        self._svgs: list[str] | None = None
        self._drawn: dict[Any, Any] = {}  # frames drawn one by one (the widget), by step

    def __len__(self) -> int:
        return len(self.digraphs)

    def __getitem__(self, k: Any) -> Any:
        return self.digraphs[k]

    def __iter__(self) -> Any:
        return iter(self.digraphs)

    def __repr__(self) -> str:
        return f"<BackwardFrames: {len(self)} steps{', one layout' if self.pinned else ''}>"

    def svgs(self) -> Any:
        """Every frame as an SVG string (drawn once, then kept)."""
        if self._svgs is None:
            with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
                self._svgs = list(_drawing(pool.map(svg, self.digraphs), len(self)))
        return list(self._svgs)

    def save(self, out_dir: Any, format: str = "svg") -> Any:
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
            if format == "svg":
                for path, text in zip(paths, self.svgs(), strict=True):
                    path.write_text(text, encoding="utf-8")
            else:
                with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
                    list(_drawing(pool.map(render, self.digraphs, paths, [format] * len(paths)), len(self)))
        except GraphvizNotFound as error:
            for k, digraph in enumerate(self.digraphs):
                render(digraph, out / f"frame_{k:0{width}d}.dot", "dot")
            raise GraphvizNotFound(
                f"{error}\nAll {len(self)} frames were saved as .dot files in {out}.", dot_path=out
            ) from None
        index = out / "index.html"
        index.write_text(self.html(sources=[p.name for p in paths]), encoding="utf-8")
        paths.append(index)
        self.paths = paths
        return paths

    def html(self, sources: Any = None) -> Any:
        """A page that steps through the frames: slider, buttons, arrow keys, captions.

        With ``sources`` (file names) the page shows those files; otherwise the
        SVGs are put inline and the page stands alone.
        """
        body = self._fragment(sources, uid="microtape-frames", page_keys=True)
        return page(body, "microtape: the backward pass, step by step")

    def _fragment(self, sources: Any = None, uid: Any = None, page_keys: bool = False) -> Any:
        # A page holds one player (a fixed id keeps saved files stable); a
        # notebook may hold many, so each inline player gets its own id.
        uid = uid or "mt" + uuid.uuid4().hex[:8]
        if sources is None:
            pictures = [fit_svg(s) for s in self.svgs()]
        else:
            pictures = [f'<img src="{html.escape(src)}" alt="step {k}">' for k, src in enumerate(sources)]
        return fragment(pictures, self.captions, self.focus, uid=uid, page_keys=page_keys)

    def _repr_html_(self) -> Any:
        try:
            return self._fragment()
        except GraphvizNotFound as error:
            return f"<pre>{html.escape(str(error))}</pre>"

    def widget(self) -> Any:
        """A slider that steps the backward pass inside Jupyter (ipywidgets); without ipywidgets, the player.

        The slider, ◀/▶ buttons and the caption change the picture shown;
        each frame is drawn when the slider first reaches it, and the notebook
        stores only the frame on show (the HTML player embeds them all). When
        ipywidgets is not installed (it comes with ``pip install
        microtape[notebooks]``), this returns the frames object itself, whose
        plain-HTML player needs no kernel: the static fallback. When the
        environment variable ``MICROTAPE_STATIC_PAGES`` is set (the site's build
        sets it), the widget's output carries that player too (as ``text/html``),
        so a page built from the executed notebook, where no kernel runs, still
        plays the frames; otherwise the notebook stores only the frame on show.
        """
        try:
            import ipywidgets
        except ImportError:
            return self
        slider = ipywidgets.IntSlider(value=0, min=0, max=len(self) - 1, description="step")
        back = ipywidgets.Button(description="◀ prev", layout=ipywidgets.Layout(width="80px"))
        forward = ipywidgets.Button(description="next ▶", layout=ipywidgets.Layout(width="80px"))
        caption = ipywidgets.HTML(self._caption_html(0))
        view = ipywidgets.HTML(self.picture(0))

        def show(change: Any) -> None:
            view.value = self.picture(change["new"])
            caption.value = self._caption_html(change["new"])

        slider.observe(show, names="value")
        back.on_click(lambda _: setattr(slider, "value", max(0, slider.value - 1)))
        forward.on_click(lambda _: setattr(slider, "value", min(len(self) - 1, slider.value + 1)))
        box = ipywidgets.VBox([ipywidgets.HBox([back, slider, forward]), caption, view])
        if not os.environ.get(STATIC_PAGES):
            return box
        frames = self

        class FlipBook(ipywidgets.VBox):
            # The widget needs a running kernel; a page built from the executed notebook (the
            # site) has none, so there the output also carries the plain-HTML player, which the
            # static page shows instead (the site's conf.py ranks it above the widget's view).
            def _repr_mimebundle_(self, **kwargs: Any) -> Any:
                bundle = super()._repr_mimebundle_(**kwargs)
                if bundle is not None:
                    bundle = {**bundle, "text/html": frames._repr_html_()}
                return bundle

        return FlipBook(box.children)

    def picture(self, k: Any) -> Any:
        """Frame ``k`` as an SVG that fits its container (drawn once, when first asked for)."""
        if self._svgs is not None:
            return fit_svg(self._svgs[k])
        if k not in self._drawn:
            self._drawn[k] = fit_svg(svg(self.digraphs[k]))
        return self._drawn[k]

    def _caption_html(self, k: Any) -> str:
        return f'<div style="font: 13px sans-serif; min-height: 2.6em">{html.escape(self.captions[k])}</div>'
