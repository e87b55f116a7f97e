"""The pictures of ``microtape demo``: a small causal attention, drawn every way we can.

This module lets you (or the command line) make the demo pictures::

    from microtape.viz.demo import DEMO, render_demo
    paths = render_demo("demo-output")     # {"graph_forward": Path(...), ...}
    render_demo("out", seq=4)              # any setting of DEMO can be changed

:data:`DEMO` holds the demo's settings, once (``embed=16, heads=4, batch=1,
seq=6``, causal, seeded); the command line and the README's pictures read
them from here. The demo runs a forward pass and a backward pass with a
seeded random ``grad_output``, and writes:

* ``graph_forward.svg`` — the tape, forward, grouped by module;
* ``graph_backward.svg`` — the same graph with gradients, and what flows along
  each edge (the attention core open, each projection one box: it reads at
  900 px wide);
* ``backward_frames/`` — one SVG per backward step (one layout for all, the
  same view) and ``index.html`` to step through them;
* ``attention_heatmaps.png`` — the attention weights of every head;
* ``grad_heatmaps.png`` — ``dP`` and ``dS`` for every head, with row sums.

Without Graphviz's ``dot``, the heatmaps are still written, the graphs are
saved as ``.dot`` files, and :class:`~microtape.viz.GraphvizNotFound` says how
to install Graphviz. ``python -m microtape.viz.demo DIR`` writes the two
README images into ``DIR``.
"""

import sys
from pathlib import Path
from typing import Any

import numpy as np

from .fit import NOTEBOOK_WIDTH
from .frames import backward_frames
from .graph import graph
from .heatmap import attention_heatmaps
from .memory import compare_attention, memory
from .render import INSTALL_HINT, GraphvizNotFound, render
from .scaling import memory_scaling

__all__ = [
    "DEMO",
    "DEMO_TOKENS",
    "render_demo",
    "render_graph",
    "render_heatmap",
    "render_memory",
    "render_readme_images",
    "readme_graph",
    "README_SCALE",
    "demo_attention",
    "demo_tokens",
    "write_pictures",
]

#: The demo's settings: the one place they are written.
DEMO = dict(embed=16, heads=4, batch=1, seq=6, seed=0, dropout=0.0, causal=True)
DEMO_TOKENS = ("the", "cat", "sat", "on", "the", "mat", "and", "then", "it", "slept", "all", "day")


def _settings(overrides: Any) -> Any:
    unknown = set(overrides) - set(DEMO)
    if unknown:
        raise TypeError(f"demo settings: unknown {', '.join(sorted(unknown))}; the settings are {', '.join(DEMO)}")
    return {**DEMO, **overrides}


def demo_attention(**overrides: Any) -> Any:
    """The demo layer after one forward and one backward: ``(attn, x, grad_output)``.

    ``overrides`` change any of :data:`DEMO`. Everything comes from the seed:
    the weights, ``x`` (``[batch, seq, embed]``, standard normal) and
    ``grad_output`` (standard normal, of the output's shape).
    """
    from ..nn import MultiHeadAttention

    settings = _settings(overrides)
    attn = MultiHeadAttention(
        settings["embed"],
        settings["heads"],
        dropout=settings["dropout"],
        causal=settings["causal"],
        seed=settings["seed"],
    )
    rng = np.random.default_rng(settings["seed"])
    x = rng.standard_normal((settings["batch"], settings["seq"], settings["embed"]))
    y = attn(x)
    grad_output = rng.standard_normal(np.shape(getattr(y, "data", y)))
    attn.backward(grad_output)
    return attn, x, grad_output


def demo_tokens(seq: Any) -> Any:
    """Words to label ``seq`` positions in the demo's heatmaps (None if there are too few)."""
    return list(DEMO_TOKENS[:seq]) if seq <= len(DEMO_TOKENS) else None


def write_pictures(attn: Any, grad_output: Any, out_dir: Any, *, tokens: Any = None, frames_format: str = "svg") -> Any:
    """Write the five demo pictures of a layer that ran forward and backward.

    Returns ``{name: path}``. The heatmaps come first (they need no Graphviz);
    if ``dot`` is missing, the graphs are saved as ``.dot`` files and
    :class:`GraphvizNotFound` is raised at the end, with ``.paths`` listing
    what was written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    batch_size = int(np.shape(attn.attention_weights)[0])
    batch = "" if batch_size == 1 else " (batch 0)"

    figure = attention_heatmaps(attn, tokens=tokens)
    paths["attention_heatmaps"] = out / "attention_heatmaps.png"
    figure.savefig(paths["attention_heatmaps"], dpi=110)
    figure = attention_heatmaps(attn, which=("grad_weights", "grad_scores"), tokens=tokens)
    paths["grad_heatmaps"] = out / "grad_heatmaps.png"
    figure.savefig(paths["grad_heatmaps"], dpi=110)

    missing = []
    pictures = {
        "graph_forward": graph(attn, title=f"forward pass: the tape of the attention{batch}"),
        "graph_backward": graph(
            attn,
            backward=True,
            grad=grad_output,
            expand="attention",
            title="backward pass: each gradient, and what flows along each edge",
        ),
    }
    for name, digraph in pictures.items():
        try:
            paths[name] = render(digraph, out / f"{name}.svg")
        except GraphvizNotFound as error:
            paths[name] = error.dot_path
            missing.append(error.dot_path)
    frames_dir = out / "backward_frames"
    frames = backward_frames(attn, grad=grad_output, expand="attention", title="the backward pass, one box at a time")
    try:
        frames.save(frames_dir, format=frames_format)
        paths["backward_frames"] = frames_dir / "index.html"
    except GraphvizNotFound:
        paths["backward_frames"] = frames_dir
        missing.append(frames_dir)
    if missing:
        error = GraphvizNotFound(
            "Graphviz's `dot` program was not found on PATH: the heatmaps were written, but the graphs "
            "were saved as DOT source only:\n  " + "\n  ".join(str(p) for p in missing) + "\n" + INSTALL_HINT,
            dot_path=missing[0],
        )
        error.paths = paths
        raise error
    return paths


def render_demo(out_dir: str = "demo-output", *, frames_format: str = "svg", **overrides: Any) -> Any:
    """Build the demo attention and write its pictures into ``out_dir``; return ``{name: path}``.

    Names: ``graph_forward``, ``graph_backward``, ``backward_frames`` (the
    ``index.html`` of the frames folder), ``attention_heatmaps``,
    ``grad_heatmaps``. ``overrides`` change any of :data:`DEMO`. Raises
    :class:`GraphvizNotFound` (after writing the heatmaps and the ``.dot``
    sources) when ``dot`` is missing.
    """
    attn, _, grad_output = demo_attention(**overrides)
    seq = _settings(overrides)["seq"]
    return write_pictures(attn, grad_output, out_dir, tokens=demo_tokens(seq), frames_format=frames_format)


def render_graph(
    path: Any,
    *,
    backward: bool = False,
    step: Any = None,
    detail: str = "auto",
    expand: Any = None,
    width: Any = NOTEBOOK_WIDTH,
    **overrides: Any,
) -> Any:
    """Write one graph of the demo attention to ``path`` (format from the suffix); return the path.

    ``expand`` and ``width`` are :func:`~microtape.viz.graph`'s (``width=None``: every op, whatever its width).
    """
    attn, _, grad_output = demo_attention(**overrides)
    drawn = graph(attn, backward=backward, step=step, detail=detail, expand=expand, width=width, grad=grad_output)
    return render(drawn, path)


def render_memory(out_dir: Any, **overrides: Any) -> Any:
    """What backward keeps, for the demo attention: write the memory pictures into ``out_dir``.

    Returns ``({name: path}, ledger)``: ``memory_timeline.png`` (live bytes
    against the step, :func:`~microtape.viz.memory`), ``saved_values.svg``
    (the graph with what each step's VJP reads, its attention core open),
    ``memory_compare.png`` (full tape, lean tape, tiled op at T=256) and
    ``memory_scaling.png`` (peak against T, 128 to 4096, with the slopes).
    The graph is written last: without Graphviz's ``dot`` it is saved as
    ``.dot`` and :class:`GraphvizNotFound` is raised with ``.paths``.
    """
    attn, _, grad_output = demo_attention(**overrides)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    timeline = memory(attn, grad=grad_output, title="the demo attention: live bytes, forward then backward")
    paths["memory_timeline"] = out / "memory_timeline.png"
    timeline.savefig(paths["memory_timeline"], dpi=100)
    paths["memory_compare"] = out / "memory_compare.png"
    compare_attention(256).savefig(paths["memory_compare"], dpi=100)
    paths["memory_scaling"] = out / "memory_scaling.png"
    memory_scaling().savefig(paths["memory_scaling"], dpi=100)
    # values=False: the numbers are not the point here, and without them the graph reads at 900 px.
    drawn = graph(attn, saved=True, expand="attention", values=False, title="what backward keeps")
    try:
        paths["saved_values"] = render(drawn, out / "saved_values.svg")
    except GraphvizNotFound as error:
        paths["saved_values"] = error.dot_path
        error.paths = paths
        raise
    return paths, timeline.table


def render_heatmap(path: Any, *, which: Any = "weights", **overrides: Any) -> Any:
    """Write one heatmap figure of the demo attention to ``path``; return the path.

    ``which``: ``"weights"``, ``"dropped"``, ``"grad_scores"``, ``"grad_weights"``
    or a tuple of them.
    """
    attn, _, _ = demo_attention(**overrides)
    figure = attention_heatmaps(attn, which=which, tokens=demo_tokens(int(np.shape(attn.attention_weights)[2])))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


#: The README shows its images at half their pixels: crisp on a high-density screen, readable at 900 px.
README_SCALE = 2


def readme_graph() -> Any:
    """The README's graph: the demo's backward pass, its attention core open, the projections one box each."""
    attn, _, grad_output = demo_attention()
    return graph(
        attn, backward=True, grad=grad_output, expand="attention", title="The backward pass of the demo attention"
    )


def render_readme_images(folder: Any) -> Any:
    """The README's two pictures of the demo, at twice the size they are shown: graph and attention weights."""
    attn, _, _ = demo_attention()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figure = attention_heatmaps(attn, tokens=demo_tokens(DEMO["seq"]))
    heatmaps = folder / "attention_heatmaps.png"
    figure.savefig(heatmaps, dpi=100 * README_SCALE)  # a figure is 9 inches wide at most: 900 px shown
    path = folder / "attention_backward_graph.png"
    return {"graph": render(readme_graph(), path, dpi=96 * README_SCALE), "heatmaps": heatmaps}


if __name__ == "__main__":  # python -m microtape.viz.demo DIR: the README's images
    if len(sys.argv) != 2:
        sys.exit("usage: python -m microtape.viz.demo DIR   (writes the README's two images into DIR)")
    for written in render_readme_images(sys.argv[1]).values():
        print(f"Wrote {written}")
