"""The pictures of ``microtape demo``: a small causal attention, drawn every way we can.

This module lets you (or the command line) make the demo pictures::

    from microtape.viz.demo import render_demo
    paths = render_demo("demo-output")     # {"graph_forward": Path(...), ...}

It builds the default layer (``embed=16, heads=4, batch=1, seq=6``, causal,
seeded), runs a forward pass and a backward pass with a seeded random
``grad_output``, and writes:

* ``graph_forward.svg`` — the tape, forward, grouped by module;
* ``graph_backward.svg`` — the same graph with gradients and VJP formulas;
* ``backward_frames/`` — one SVG per backward step and ``index.html`` to step
  through them;
* ``attention_heatmaps.png`` — the attention weights of every head;
* ``grad_heatmaps.png`` — ``dP`` and ``dS`` for every head.

Without Graphviz's ``dot``, the heatmaps are still written, the graphs are
saved as ``.dot`` files, and :class:`~microtape.viz.GraphvizNotFound` says how
to install Graphviz.
"""

from pathlib import Path

import numpy as np

from .frames import backward_frames
from .graph import graph
from .heatmap import attention_heatmaps
from .render import INSTALL_HINT, GraphvizNotFound, render

__all__ = ["render_demo", "render_graph", "render_heatmap", "demo_attention", "demo_tokens", "DEMO_TOKENS"]

DEMO_TOKENS = ("the", "cat", "sat", "on", "the", "mat", "and", "then", "it", "slept", "all", "day")
DEMO = dict(embed=16, heads=4, batch=1, seq=6, seed=0, dropout=0.0, causal=True)


def demo_attention(*, embed=16, heads=4, batch=1, seq=6, seed=0, dropout=0.0, causal=True):
    """The demo layer after one forward and one backward: ``(attn, x, grad_output)``.

    Everything comes from ``seed``: the weights, ``x`` (``[batch, seq, embed]``,
    standard normal) and ``grad_output`` (standard normal, of the output's shape).
    """
    import microtape as mt

    attn = mt.nn.MultiHeadAttention(embed, heads, dropout=dropout, causal=causal, seed=seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, seq, embed))
    y = attn(x)
    grad_output = rng.standard_normal(np.shape(getattr(y, "data", y)))
    attn.backward(grad_output)
    return attn, x, grad_output


def demo_tokens(seq):
    """Words to label ``seq`` positions in the demo's heatmaps (None if there are too few)."""
    return list(DEMO_TOKENS[:seq]) if seq <= len(DEMO_TOKENS) else None


def _output_of(tape):
    """The layer's result on its tape: the node named "output", else the last one."""
    try:
        return tape.find("output").output
    except KeyError:
        return tape.nodes[-1]


def write_pictures(attn, grad_output, out_dir, *, tokens=None, frames_format="svg"):
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

    tape = attn.tape
    output = _output_of(tape)
    missing = []
    pictures = {
        "graph_forward": graph(tape, output=output, title=f"forward pass: the tape of the attention{batch}"),
        "graph_backward": graph(
            tape,
            output=output,
            backward=True,
            grad=grad_output,
            title="backward pass: gradients, and the VJP formula on each edge",
        ),
    }
    for name, digraph in pictures.items():
        try:
            paths[name] = render(digraph, out / f"{name}.svg")
        except GraphvizNotFound as error:
            paths[name] = error.dot_path
            missing.append(error.dot_path)
    frames_dir = out / "backward_frames"
    frames = backward_frames(tape, output, grad=grad_output)
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


def render_demo(out_dir="demo-output", *, embed=16, heads=4, batch=1, seq=6, seed=0, frames_format="svg"):
    """Build the demo attention and write its pictures into ``out_dir``; return ``{name: path}``.

    Names: ``graph_forward``, ``graph_backward``, ``backward_frames`` (the
    ``index.html`` of the frames folder), ``attention_heatmaps``,
    ``grad_heatmaps``. Raises :class:`GraphvizNotFound` (after writing the
    heatmaps and the ``.dot`` sources) when ``dot`` is missing.
    """
    attn, _, grad_output = demo_attention(embed=embed, heads=heads, batch=batch, seq=seq, seed=seed)
    return write_pictures(attn, grad_output, out_dir, tokens=demo_tokens(seq), frames_format=frames_format)


def render_graph(path, *, backward=False, step=None, detail="auto", **attention):
    """Write one graph of the demo attention to ``path`` (format from the suffix); return the path.

    ``attention`` takes the keywords of :func:`demo_attention`.
    """
    attn, _, grad_output = demo_attention(**attention)
    output = _output_of(attn.tape)
    digraph = graph(attn.tape, output=output, backward=backward, step=step, detail=detail, grad=grad_output)
    return render(digraph, path)


def render_heatmap(path, *, which="weights", **attention):
    """Write one heatmap figure of the demo attention to ``path``; return the path.

    ``which``: ``"weights"``, ``"dropped"``, ``"grad_scores"``, ``"grad_weights"``
    or a tuple of them. ``attention`` takes the keywords of :func:`demo_attention`.
    """
    attn, _, _ = demo_attention(**attention)
    figure = attention_heatmaps(attn, which=which, tokens=demo_tokens(int(np.shape(attn.attention_weights)[2])))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path
