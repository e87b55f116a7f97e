"""Check your own hand-derived gradients against the tape, by name.

This module lets a student (or an exercise) derive gradients on paper, type
them in numpy, and see which ones the tape agrees with::

    >>> import numpy as np, microtape as mt
    >>> x = mt.Tensor(np.array([[1.0, 2.0, 0.5]]), requires_grad=True, name="x")
    >>> with mt.Tape() as tape:
    ...     p = x.softmax(-1, name="p")
    ...     loss = (p * p).sum(name="loss")
    >>> P = p.data
    >>> dP = 2 * P                                      # d(sum p²)/dp
    >>> dx = P * (dP - (dP * P).sum(-1, keepdims=True))  # softmax's VJP, by hand
    >>> report = mt.check.compare(tape, loss, {"p": dP, "x": dx})
    >>> report.ok
    True

Names are the ``name=`` given to nodes on the tape (``tape.find`` finds them)
or to its leaves (inputs and parameters, e.g. ``"q_proj.weight"``). Rows come
in backward order, and the report prints and renders exactly like
:func:`microtape.check.attention_report`'s. No ``.grad`` is changed: the taped
values come from the pure reverse pass, :func:`microtape.gradients`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..engine import Node, Tape, gradients
from .rows import GradientReport, default_tolerance, make_row

__all__ = ["compare", "NameNotOnTape"]


class NameNotOnTape(KeyError, ValueError):
    """A gradient was given for a name the tape does not have (the message lists those it has).

    Both a ``KeyError`` (a lookup failed) and a ``ValueError`` (a bad argument).
    """

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0])


def _shape(node: Any) -> Any:
    return np.shape(node.data)


def _consumer_formula(tape: Any, node: Any, output: Any, names: Any) -> Any:
    """How the tape computes ``node``'s gradient: the sum over its uses, each its op's formula."""
    if node is output:
        return "seed: the upstream gradient", r"\bar y"
    texts, latexes = [], []
    for consumer in tape.nodes:
        for position, x in enumerate(consumer.inputs):
            if x is node:
                operands = {name: names.get(value, "const") for name, value in zip(consumer.op.inputs, consumer.inputs)}
                operands.update({consumer.op.output: names[consumer], "g": f"d{names[consumer]}"})
                texts.append(f"via {consumer.op.name}: {consumer.op.formula_for(position, operands)}")
                latexes.append(consumer.op.grads_latex[position] or "")
    if not texts:
        return "(not used on this tape)", r"\text{(unused)}"
    return " + ".join(texts), r" \;+\; ".join(latexes)


def _dtype_of(node: Any) -> Any:
    return np.float64 if node.data.__class__ is float else np.asarray(node.data).dtype


def compare(
    tape: Tape,
    output: Node,
    analytic: Mapping[str, Any],
    grad: Any = None,
    *,
    atol: float | None = None,
    rtol: float | None = None,
) -> GradientReport:
    """Line up hand-derived gradients with the tape's, name by name.

    ``analytic`` maps node names to your gradient of ``sum(grad * output)``
    with respect to that node (``grad`` defaults to ones, as in
    :meth:`Tape.backward`). ``atol`` and ``rtol`` default to 1e-10 for a
    float64 output, 1e-4 for float32. Returns a
    :class:`~microtape.check.rows.GradientReport`; no ``.grad`` changes.

    Raises :class:`NameNotOnTape` for a name the tape does not have (listing
    the names it has) and ``ValueError`` for a gradient of the wrong shape.
    """
    if not isinstance(tape, Tape):
        raise TypeError(f"compare(tape, ...): expected a microtape Tape, got {type(tape).__name__}")
    if not isinstance(output, Node):
        raise TypeError(f"compare(tape, output, ...): output must be a Scalar or Tensor, got {type(output).__name__}")
    if not isinstance(analytic, Mapping):
        raise TypeError(
            f"compare(tape, output, analytic): analytic must be a dict {{node name: gradient}}, "
            f"got {type(analytic).__name__}"
        )
    default = default_tolerance(_dtype_of(output))
    atol = default if atol is None else _tolerance(atol, "atol")
    rtol = default if rtol is None else _tolerance(rtol, "rtol")

    wanted = _checked_gradients(tape, analytic)  # every name and shape, before running anything
    result = gradients(output, grad, tape=tape, steps=True)
    rows = _rows(tape, output, wanted, result, atol, rtol)
    upstream = "ones (the default)" if grad is None else "given (grad)"
    details = [f"output: {_label(tape, output)}; upstream gradient: {upstream}"]
    inherits = _inherits_on_tape({name: node for name, node, _ in wanted})
    return GradientReport(
        rows, atol=atol, rtol=rtol, details=details, gradients=result, analytic=dict(analytic), inherits=inherits
    )


def _checked_gradients(tape: Any, analytic: Any) -> Any:
    """``[(name, node, array)]`` for each hand-derived gradient, once its name and shape are checked."""
    wanted = []
    for name, value in analytic.items():
        try:
            node = tape.variable(name)
        except KeyError as error:
            raise NameNotOnTape(f"compare(): {error.args[0]}") from None
        array = np.asarray(getattr(value, "data", value))
        if array.dtype.kind not in "fiu":
            raise TypeError(f"compare(): analytic[{name!r}] must hold real numbers, got dtype {array.dtype}")
        if array.shape != _shape(node):
            raise ValueError(
                f"compare(): analytic[{name!r}] has shape {array.shape}, but the tape's {name!r} has shape "
                f"{_shape(node)}; a gradient has the shape of the value it belongs to"
            )
        wanted.append((name, node, array))
    return wanted


def _rows(tape: Any, output: Any, wanted: Any, result: Any, atol: float, rtol: float) -> Any:
    """The rows, in backward order: later steps first; at one step, the node's own gradient before the
    leaves its VJP completes; nodes no gradient reaches last."""
    names = tape.variable_names()
    recorded = {id(node) for node in tape.nodes}
    rows = []
    for order, (name, node, array) in enumerate(wanted):
        taped = result.get(node)
        note = ""
        if taped is None:
            taped = np.zeros(_shape(node))
            note = "no gradient reaches this node from the output: the tape's gradient is zero"
        formula, latex = _consumer_formula(tape, node, output, names)
        row = make_row(name, name, formula, latex, array, taped, atol=atol, rtol=rtol,
                       step=result.completed_at(node), note=note)  # fmt: skip
        step = row.step if row.step is not None else -1
        rows.append(((-step, id(node) not in recorded, order), row))
    return [row for _, row in sorted(rows, key=lambda pair: pair[0])]


def _inherits_on_tape(named: Any) -> Any:
    """``{name: names computed from it}``: a node's gradient is computed from those of the nodes it feeds."""
    feeds = {}
    for name, node in named.items():
        # Everything node was computed from (its ancestors) gets its gradient through it.
        ancestors, stack = set(), list(node.inputs)
        while stack:
            x = stack.pop()
            if id(x) not in ancestors:
                ancestors.add(id(x))
                stack.extend(x.inputs)
        feeds[name] = tuple(other for other, x in named.items() if id(x) in ancestors)
    return feeds


def _label(tape: Any, node: Any) -> Any:
    return tape.variable_names().get(node, node.name or "output")


def _tolerance(value: Any, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"compare({what}={value!r}): expected a number with 0 <= {what} < 1")
    return float(value)
