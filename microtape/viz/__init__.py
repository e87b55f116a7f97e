"""Pictures of a computation: graphs (graphviz) and attention heatmaps (matplotlib).

This package lets you see what the tape recorded::

    import microtape as mt
    g = mt.viz.graph(tape)                          # a graphviz.Digraph (shows in Jupyter)
    mt.viz.render(g, "forward.svg")                 # or .png / .pdf
    mt.viz.graph(tape, backward=True)               # gradients and VJP formulas
    frames = mt.viz.backward_frames(tape, out_dir="frames")   # one picture per step + index.html
    fig = mt.viz.attention_heatmaps(attn)           # a matplotlib Figure, one panel per head
    fig = mt.viz.attention_heatmaps(attn, which="grad_scores")

It only *reads* tapes and layers: drawing never changes a value or a gradient.
graphviz and matplotlib are imported here and nowhere else in microtape, and
matplotlib only when a heatmap is drawn.
"""

from .frames import BackwardFrames, backward_frames
from .graph import GraphCollapsedWarning, graph
from .heatmap import attention_heatmaps
from .render import GraphvizNotFound, render, svg
from .tiles import online_softmax, tile_schedule  # noqa: F401  (tiled attention: see tiles.py)

__all__ = [
    "graph",
    "backward_frames",
    "attention_heatmaps",
    "render",
    "svg",
    "BackwardFrames",
    "GraphvizNotFound",
    "GraphCollapsedWarning",
]
