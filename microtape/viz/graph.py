"""Draw a computation as a graph: forward values, backward gradients, step by step.

This module lets you *see* a tape::

    import microtape as mt
    with mt.Tape() as tape:
        a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
        y = (a * b + a**2).tanh()
    mt.viz.graph(tape)                   # forward: names, ops, values
    mt.viz.graph(tape, backward=True)    # gradients, and what flows along each edge
    mt.viz.graph(tape, step=2)           # the backward pass frozen after step 2
    mt.viz.graph(layer)                  # a layer's last forward, its parameters styled as such
    mt.viz.graph(layer, expand="attention")   # at notebook width: one box per module, this one open
    mt.viz.graph(layer, full_size=True)  # every op, at natural size (the cell scrolls)

:func:`graph` returns a ``graphviz.Digraph``. In Jupyter it shows itself
scaled to the cell's width (``.full_size()`` shows it at 100 %);
:func:`microtape.viz.render` writes it to SVG/PNG/PDF.

What is drawn
-------------
* One box per equation, in tape order: its name, its op with its parameters
  (``pow ²``, ``scale ×0.5``, ``dropout p=0.1``), its shape and its value —
  arrays up to 3×3 in full. One box per leaf, in order of first use:
  **inputs**, **parameters** and **constants** (the rule is in
  :mod:`microtape.viz.program`: a parameter is what *is* a parameter — of the
  layer drawn, or given as ``parameters=`` — never what is named like one).
* The title on top, with a legend of the styles in use. Results have a
  double border. ``group="module"`` puts each module (``q_proj``,
  ``attention.head0``, set by :func:`microtape.module_scope`) in a cluster.
* The backward view (``backward=True``) draws the same layout with the arrows
  turned round, every box's gradient (``grad ≈0 (noise 2e-17)`` where exact
  arithmetic gives 0), and on every edge what flows along it, in the
  student's names: ``∂L/∂f = g·d = 1·4 = 4``, ``dQ_heads = dscores @ K_heads
  [4,6,4]``. Fills say where the pass is; borders still say what each box is.
* ``step=k`` freezes the pass after its step ``k``: the picture's steps are
  the boxes the pass finishes, in order (a reshape chain or a module summary
  is one step; with ``detail="full"`` one step per equation, as the engine
  counts them). Boxes not finished show what they have received so far.

Big graphs (see :mod:`microtape.viz.view`): ``detail="auto"`` folds
reshape/transpose chains and, above ``max_nodes`` (150) boxes, draws one
summary per module (with a warning and a note saying how to get more);
``expand="attention.head0"`` opens one module; ``detail="full"`` draws
everything. Summaries show their first and last equations, their gradient
norm and, step by step, their progress ("12 of 96 ops done").

The gradients come from one pure reverse pass (:func:`microtape.gradients`):
no ``.grad`` is touched. It starts from ``grad`` if given, else from the
output's ``.grad`` (so after ``attn.backward(g)`` the picture shows the same
numbers), else from ones. Same computation, same DOT source, byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import graphviz

    from ..engine import Node
    from ..viz.drawing import Drawing


from .drawing import GraphCollapsedWarning, check_options, takes_drawing_options, warn_if_collapsed
from .fit import fitted_picture
from .paint import paint
from .picture import to_digraph
from .program import collect, trace_backward
from .saved import add_saved, colour_orders
from .view import MAX_NODES, SHAPE_OPS

__all__ = ["graph", "GraphCollapsedWarning", "MAX_NODES", "SHAPE_OPS", "check_options", "warn_if_collapsed"]


@takes_drawing_options
def graph(
    tape_or_output: Any,
    *,
    backward: bool = False,
    step: int | None = None,
    output: Node | None = None,
    grad: Any = None,
    full_size: bool = False,
    saved: bool = False,
    drawing: Drawing,
) -> graphviz.Digraph:
    """Draw a tape (or the computation behind a result) as a ``graphviz.Digraph``.

    ``tape_or_output``: a :class:`~microtape.Tape`, a ``Scalar``/``Tensor``
    result (its graph is found by following ``.inputs``), a layer (its last
    forward; its parameters styled as parameters) or a scalar trace
    (``attn.trace_scalars(x)``: drawn from its whole output). ``backward=True``
    shows gradients and what flows along each edge; ``step=k`` the backward
    pass frozen after its step ``k`` (implies ``backward``). ``group``:
    ``"module"`` or None. ``detail``: ``"auto"``, ``"full"`` or ``"summary"``;
    ``expand``: a module path (or several) to draw in full while the others
    are summarised. ``values=False`` leaves numbers out. ``output``: which
    node of a tape is the result (default: the last one); ``grad``: the
    gradient to start the backward pass with. ``parameters``: a Module, or
    leaves (or their names), to style as parameters. ``rankdir``: ``"LR"``,
    ``"TB"``, or None: left to right for at most 12 boxes, else top to bottom
    — or the other way round when only that reads at ``width``. ``width``:
    the pixels the picture is shown at (a notebook cell: 900); with
    ``detail="auto"``, a graph whose smallest text would be unreadable at
    that width is drawn one box per module (:mod:`microtape.viz.fit`);
    ``width=None`` never summarises for width. ``full_size=True``: the whole
    graph (``width=None``) shown at its natural size in Jupyter, the cell
    scrolling — the switch for those who want every op. ``saved=True``:
    beside each step, the values its VJP will read (name, shape, dtype,
    bytes), joined by dotted lines, and on a lean tape what it dropped
    (:mod:`microtape.viz.saved`). Steps of a recorded derivative
    (``create_graph=True``) are filled by their order.
    """
    if not isinstance(full_size, bool):
        raise TypeError(f"graph(full_size=...): expected True or False, got {full_size!r}")
    if not isinstance(saved, bool):
        raise TypeError(f"graph(saved=...): expected True or False, got {saved!r}")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):  # before any drawing
        raise TypeError(f"graph(step=...): expected an integer, got {type(step).__name__}")
    width = None if full_size else drawing.width
    program = collect(tape_or_output, output, drawing.parameters)
    trace = trace_backward(program, grad) if (backward or step is not None) else None
    decorate = _saved_values if saved else colour_orders
    view, rankdir, measured = fitted_picture(
        program,
        drawing.view_options,
        trace,
        rankdir=drawing.rankdir,
        width=width,
        paint_options=drawing.paint_options,
        decorate=decorate,
    )
    warn_if_collapsed(view, drawing.max_nodes, stacklevel=3)  # this function, the decorator, the caller
    if step is not None:
        count = len(view.steps(trace))
        if not 0 <= step < count:
            raise ValueError(
                f"graph(step={step}): the backward pass of this picture has {count} steps, "
                f"so step must be in 0..{count - 1}"
            )
    if step is None and measured is not None:
        picture = measured  # painted once, to measure its width: the same picture
    else:
        picture = decorate(paint(view, trace, step, rankdir=rankdir, **drawing.paint_options), view)
    digraph = to_digraph(picture)
    return digraph.full_size() if full_size else digraph


def _saved_values(picture: Any, view: Any) -> Any:
    """Steps coloured by order, and the values each step's VJP reads beside it (``saved=True``)."""
    return add_saved(colour_orders(picture, view), view)
