"""Analytic against tape, in one picture: where a hand derivation broke, on the graph.

This module lets a student *see* the step-by-step report::

    report = mt.check.attention_report(attn, x, mistakes={"forgot_scale"})
    mt.viz.report_graph(report, attn)      # the backward graph, each edge coloured by the report

:func:`microtape.check.attention_report` compares each hand-derived gradient
(``dQ``, ``dS``, ``dW_q`` …) with the tape's, row by row. Here those verdicts
colour the tape's own backward graph (the attention core open, the
projections one box each, as :func:`~microtape.viz.graph` draws it):

* **agreed** (green): the gradient this edge carries into its box is the
  same both ways;
* **differs** (red): the box's gradient disagrees although what it was
  computed from agrees — the derivation broke *on this edge*; the first
  failing row of the report is drawn thicker;
* **depends on a failure** (orange, dashed): computed from a gradient that
  already differs, so it cannot be right (``dW_q`` after a wrong ``dQ``);
* boxes the analytic chain does not compute (``scores``, the transposes)
  have no verdict of their own (white); an edge into one is green unless
  it is computed from a failure.

The rule for an edge from box ``t`` (an input) to box ``h``: the gradient it
carries into ``t`` is computed from ``h``'s gradient, so it *depends on a
failure* when ``h``'s gradient is wrong, and it *differs* when ``t``'s row
fails while ``h``'s gradient is right.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import graphviz

from .drawing import check_options
from .fit import NOTEBOOK_WIDTH, fitted
from .paint import paint
from .picture import to_digraph
from .program import collect, trace_backward
from .view import MAX_NODES

__all__ = ["report_graph", "verdicts"]

WORSE = ("first", "wrong", "differs", "carried", "depends", "agreed", "right", "unchecked")  # worst first
#: A report whose rows carry their own ``state`` (``judged = True``: a stepped exercise's check) is
#: drawn as judged: only its rows' nodes coloured, nothing inferred from the graph.
JUDGED = ("right", "wrong", "carried", "unchecked")


def verdicts(program: Any, report: Any) -> Any:
    """``{node: verdict}`` for every equation and leaf of ``program``, from ``report``'s rows.

    A node with a row: ``"first"`` (the report's first failure), ``"differs"``
    (fails, computed from nodes that do not), ``"depends"`` (fails, computed
    from a failing node) or ``"agreed"``. A node without a row: ``"depends"``
    when computed from a failing node, else ``"unchecked"``.
    """
    by_name = {name: node for node, name in program.names.items()}
    rows = {}
    for row in report.rows:
        node = by_name.get(row.name)
        if node is not None:
            rows[node] = row
    if getattr(report, "judged", False):
        return {
            node: rows[node].state if node in rows else "unchecked" for node in [*program.equations, *program.leaves]
        }
    readers = {leaf: [program.equations[i] for i, _ in program.uses[j]] for j, leaf in enumerate(program.leaves)}
    for i, node in enumerate(program.equations):
        readers[node] = [program.equations[k] for k in program.consumers[i]]
    verdict: dict[Any, Any] = {}
    # A gradient is computed from the gradients of the nodes that read it: walk the tape backwards.
    for node in [*reversed(program.equations), *program.leaves]:
        tainted = any(verdict.get(reader) in ("first", "differs", "depends") for reader in readers[node])
        row = rows.get(node)
        if row is None:
            verdict[node] = "depends" if tainted else "unchecked"
        elif row.passed:
            verdict[node] = "agreed"
        elif tainted:
            verdict[node] = "depends"
        else:
            verdict[node] = "first" if row.label == report.first_failure else "differs"
    return verdict


def _edge_verdict(program: Any, verdict: Any, uses: Any) -> Any:
    """The verdict of an edge standing for ``uses`` ((equation, operand position) pairs): the worst one."""
    found = []
    for i, position in uses:
        head, tail = program.equations[i], program.equations[i].inputs[position]
        if verdict.get(head) in ("first", "differs", "depends"):
            found.append("depends")
        elif verdict.get(tail) in ("first", "differs"):
            found.append(verdict[tail])
        else:
            found.append("agreed")  # computed from gradients the report found right, into one it found right
    return min(found, key=WORSE.index)


def report_graph(
    report: Any,
    layer: Any,
    *,
    expand: str | None = "attention",
    title: str | None = None,
    width: int = NOTEBOOK_WIDTH,
    max_nodes: int = MAX_NODES,
) -> graphviz.Digraph:
    """The backward graph of ``layer``'s last forward, each box and edge coloured by ``report``'s verdicts.

    ``report``: from :func:`microtape.check.attention_report` (or any
    report whose rows name tape nodes) run on ``layer``; ``expand``: the
    module drawn op by op (default the attention core; None: what fits).
    Returns a ``graphviz.Digraph`` (see the module docstring for the colours).
    """
    rows = getattr(report, "rows", None)
    if rows is None or not hasattr(report, "first_failure"):
        raise TypeError(f"report_graph(report, ...): expected a step-by-step report, got {type(report).__name__}")
    program = collect(layer)
    options = check_options("module", "auto", max_nodes, None, expand, width)
    trace = trace_backward(program)
    drawn = dict(values=False, title=title, legend=False)
    # Measured with the short labels summary edges get with values (this picture drops theirs).
    view, rankdir = fitted(program, options, trace, width=width, paint_options={**drawn, "values": True})
    picture = paint(view, trace, rankdir=rankdir, **drawn)  # type: ignore[arg-type]  # drawn: paint's options
    verdict = verdicts(program, report)
    named = [row.name for row in rows]
    if not any(name in program.names.values() for name in named):
        raise ValueError(f"report_graph: no row of the report names a node of this tape (rows: {', '.join(named)})")
    for shape, box in zip(picture.shapes, view.boxes, strict=True):
        nodes = [program.equations[i] for i in box.equations] + [program.leaves[j] for j in box.leaves]
        shape.state = min((verdict[node] for node in nodes), key=WORSE.index) if nodes else "unchecked"
    judged = getattr(report, "judged", False)
    box_state = {box.id: shape.state for shape, box in zip(picture.shapes, view.boxes, strict=True)}
    for arrow, link in zip(picture.arrows, view.links, strict=True):
        if not link.constant:
            # Judged: the edge carries the state of the box its gradient flows into.
            arrow.state = box_state[link.tail] if judged else _edge_verdict(program, verdict, link.uses)
        if view.by_id[link.tail].summarised or view.by_id[link.head].summarised:
            arrow.label = None  # the colour says it; formulas are on the edges of the open module
    shown = {shape.state for shape in picture.shapes} | {arrow.state for arrow in picture.arrows}
    picture.legend = [("state", key) for key in WORSE if key in shown]
    first = report.first_failure
    picture.note = getattr(report, "note", None) or (
        f"analytic against tape: the first row that differs is {first}" if first else "analytic against tape: all agree"
    )
    return to_digraph(picture)
