"""Click a node, see its local derivative: an explorer of the tape, in Jupyter and as one HTML file.

This package lets a student open any computation and ask it questions::

    view = mt.viz.explore(y)            # a tape, a result, a layer that ran, or a check result
    view                                # in Jupyter: the graph; click a node, step with ← →
    view.save("explore.html")           # the same view as one file: no kernel, no network
    view.update(other)                  # show something else in the same place

A click on a node opens its panel: the op and its shapes, its value (a
Tensor's heatmap, whose entries can be clicked), the gradient that reaches
it, the local derivative of each use — the op's formula and this run's
numbers (``∂(a·b)/∂a = b = -3``) — the chain rule's product (upstream ×
local = this use's share) and the sum over its uses, and what its VJP
saved. The arrow keys, the buttons and play step the backward pass; the
graph shows what has arrived where, and ``step k of steps 0–n`` which step.

The pieces: :mod:`.data` gathers everything as JSON-ready data
(:mod:`.model` the panels and steps, :mod:`.local` the local derivatives,
:mod:`.values` numbers and heatmaps, :mod:`.graphs` the SVG laid out by
Graphviz), :mod:`.page` writes the HTML, :mod:`.widget` is the Jupyter
widget (anywidget, imported only when a widget is made).
"""

from .explore import Explorer, explore

__all__ = ["explore", "Explorer"]
