"""Where a NaN or an infinity first appeared: the first equation of a tape, or of its reverse pass, that made one.

A NaN spreads: once one value is NaN, every value computed from it is too,
so the place it shows up (the loss, a gradient) says nothing about where it
came from. Reading the tape in order finds the first equation whose output
is not finite — ``%3 = log(%2)`` with ``%2`` holding a negative number — and
reading the reverse pass in its order finds the first step that sent a
non-finite gradient (``sqrt``'s slope at 0, ``arcsin``'s at ±1)::

    >>> import numpy as np, microtape as mt
    >>> x = mt.Tensor(np.array([1.0, 0.0]), requires_grad=True)
    >>> with mt.Tape() as tape:
    ...     y = (x * x).sqrt().sum()
    >>> first_nonfinite_gradient(tape, y)
    'the gradient first became non-finite at tape[1] (sqrt, %1 = sqrt(%0)): inf at index (1,) sent to %0'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .node import Node
from .protocols import Value
from .reverse import gradients
from .tape import Tape

__all__ = ["first_nonfinite_value", "first_nonfinite_gradient"]


def _first_bad(value: Value) -> tuple[tuple[int, ...], Any] | None:
    """``(index, entry)`` of the first NaN or ±inf in ``value``, or None when all are finite."""
    array = np.asarray(value, dtype=np.float64)
    bad = ~np.isfinite(array)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return index, array[index]


def _equation_text(tape: Tape, names: dict[Node, str], index: int) -> str:
    equation = tape[index]
    args = ", ".join(names.get(x, "?") for x in equation.inputs)
    return f"tape[{index}] ({equation.op.name}, {names[equation.output]} = {equation.op.name}({args}))"


def first_nonfinite_value(tape: Tape) -> str | None:
    """Words for the first equation of ``tape`` whose output holds a NaN or ±inf (its inputs all finite), or None."""
    names = tape.variable_names()
    for equation in tape:
        found = _first_bad(equation.output.data)
        if found is not None:
            index, entry = found
            where = _equation_text(tape, names, equation.index)
            return f"the value first became non-finite at {where}: {entry} at index {index}"
    return None


def first_nonfinite_gradient(tape: Tape, output: Node, grad: Value = None) -> str | None:
    """Words for the first step of the reverse pass (from ``output``) that sent a NaN or ±inf, or None.

    The pass is run again, as a pure function: no ``.grad`` changes.
    """
    names = tape.variable_names()
    with np.errstate(all="ignore"):
        steps = gradients(output, grad, tape=tape, steps=True)
        for step in steps.steps or ():  # (kept: steps=True)
            for x, sent in zip(step.equation.inputs, step.grad_inputs):
                found = None if sent is None else _first_bad(getattr(sent, "data", sent))
                if found is not None:
                    index, entry = found
                    where = _equation_text(tape, names, step.index)
                    return (
                        f"the gradient first became non-finite at {where}: {entry} at index {index} "
                        f"sent to {names.get(x, '?')}"
                    )
    return None
