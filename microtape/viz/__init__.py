"""Pictures of a computation: graphs (graphviz) and attention heatmaps (matplotlib).

This package lets you see what the tape recorded::

    import microtape as mt
    g = mt.viz.graph(tape)                          # a graphviz.Digraph (shows in Jupyter)
    mt.viz.render(g, "forward.svg")                 # or .png / .pdf
    mt.viz.graph(tape, backward=True)               # gradients, and what flows along each edge
    mt.viz.graph(attn, expand="attention")          # a layer: its parameters styled as such
    frames = mt.viz.backward_frames(tape, out_dir="frames")   # one picture per step + index.html
    fig = mt.viz.attention_heatmaps(attn)           # a matplotlib Figure, one panel per head
    fig = mt.viz.attention_heatmaps(attn, which="grad_scores")
    figs = mt.viz.paired_heatmaps({"before": w0, "after": w1})   # one colour scale for both
    fig = mt.viz.head_gradients(attn)               # per head: P, dP, dQ, dK, dV on shared scales
    fig = mt.viz.tile_schedule(attn)                # tiled attention: which tiles ran, in what order
    fig = mt.viz.training_curve(history)            # loss and accuracy of a training run
    mt.viz.report_graph(report, attn)               # analytic against tape: where a derivation broke
    mt.viz.save_slide(layer, "slides/encoder")      # 16:9 SVG and PNG: boxes with shapes, edges with formulas
    fig = mt.viz.memory(attn)                       # live bytes, forward then backward; fig.table: the rows
    mt.viz.graph(attn, saved=True)                  # what each step's VJP reads, kept or dropped
    fig = mt.viz.memory_scaling()                   # peak memory against T: slope 2 (tape), 1 (tiled)
    view = mt.viz.explore(y)                        # click a node, see its local derivative; view.save("y.html")

A graph is drawn in four steps, each a module that graph and frames share:
:mod:`.program` reads the computation (equations, leaves, names, the
reverse pass), :mod:`.view` decides which boxes stand for what,
:mod:`.paint` writes what every box and edge says, and :mod:`.picture`
turns that into DOT; :mod:`.layout` pins one layout for every frame and
:mod:`.player` is the page that plays them.

It only *reads* tapes and layers: drawing never changes a value or a gradient.
graphviz and matplotlib are imported here and nowhere else in microtape, and
both only when a picture is drawn.
"""

from .curves import training_curve
from .explorer import explore
from .figure import new_figure
from .frames import BackwardFrames, backward_frames
from .graph import GraphCollapsedWarning, graph
from .headgrads import head_gradients
from .heatmap import attention_heatmaps
from .memory import compare_attention, memory
from .pairs import paired_heatmaps
from .render import GraphvizNotFound, render, svg
from .scaling import memory_scaling
from .slides import save_slide, slide
from .tiles import online_softmax, tile_schedule
from .verdict import report_graph

__all__ = [
    "graph",
    "explore",
    "backward_frames",
    "attention_heatmaps",
    "paired_heatmaps",
    "head_gradients",
    "render",
    "svg",
    "BackwardFrames",
    "GraphvizNotFound",
    "GraphCollapsedWarning",
    "tile_schedule",
    "online_softmax",
    "training_curve",
    "report_graph",
    "slide",
    "save_slide",
    "new_figure",
    "memory",
    "compare_attention",
    "memory_scaling",
]
