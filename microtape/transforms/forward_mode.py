"""Forward mode: the Jacobian-vector product, pushed forward through the tape one op at a time.

This module lets you ask how an output moves when the input moves in one
direction, ``J v``, in one pass::

    >>> import numpy as np, microtape as mt
    >>> y, dy = mt.jvp(lambda x: (x * x).sum(), (np.array([1.0, 2.0]),), (np.array([1.0, 0.0]),))
    >>> float(y.data), float(dy)
    (5.0, 2.0)

``jvp`` runs ``f`` on fresh leaves while a tape records it, then walks that
tape *forwards*: each equation's tangent comes from its inputs' tangents by
the op's JVP rule (kept beside its VJP in :mod:`microtape.ops`). Reverse
mode gives ``uᵀ J`` (one pass per *output*); forward mode gives ``J v`` (one
pass per *input direction*): for a scalar loss of many parameters, reverse
wins; for one input direction, forward does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine import Node, Tape, paused
from ..values.scalar import Scalar
from .higher_order import direction_like, leaf_from

__all__ = ["jvp", "push_forward"]


def push_forward(tape: Tape, tangents: dict[Node, Any]) -> dict[Node, Any]:
    """``{node: tangent}`` for every equation of ``tape`` that depends on a node of ``tangents``.

    ``tangents`` maps leaves to their tangents (arrays or floats). An op with
    no JVP rule on the way is refused by name.
    """
    tangents = dict(tangents)
    for node in tape.nodes:
        incoming = tuple(tangents.get(x) for x in node.inputs)
        if all(t is None for t in incoming):
            continue
        op = node.op
        if op.jvp is None:
            raise ValueError(f"jvp: op {op.name!r} has no JVP rule (forward mode); give it one with jvp=...")
        data = node.data
        tangent = op.jvp(incoming, data, *[x.data for x in node.inputs], **(node.params or {}))
        if data.__class__ is float:
            tangent = float(tangent)
        else:
            # A tangent is shaped like its value (an op may leave a broadcast implicit).
            tangent = np.asarray(tangent, dtype=data.dtype)
            if tangent.shape != data.shape:
                tangent = np.broadcast_to(tangent, data.shape).copy()
        tangents[node] = tangent
    return tangents


def jvp(f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
    """Forward mode: ``(outputs, output_tangents)`` of ``f`` at ``primals`` in the direction ``tangents``.

    ``primals`` and ``tangents`` are tuples (as in JAX), one entry per argument
    of ``f``: arrays or Tensors (a Tensor is made of each), or numbers (a
    Scalar). Each tangent has its primal's shape and dtype. ``outputs`` is what
    ``f`` returned (a Scalar or Tensor, or a tuple of them); each output
    tangent is a float or a numpy array of its output's shape.
    """
    if not callable(f):
        raise TypeError(f"jvp(f, ...): f must be callable, got {type(f).__name__}")
    for what, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, (tuple, list)):
            raise TypeError(
                f"jvp({what}=...): expected a tuple (one entry per argument of f), got {type(value).__name__}"
            )
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; give one tangent per primal")
    leaves = [leaf_from(p, f"jvp(primals[{i}])") for i, p in enumerate(primals)]
    directions = []
    for i, (t, leaf) in enumerate(zip(tangents, leaves)):
        if not isinstance(leaf, Scalar):
            given = np.asarray(t.data if isinstance(t, Node) else t)
            if given.dtype.kind == "f" and given.dtype != leaf.dtype:
                raise TypeError(f"jvp(tangents[{i}]): has dtype {given.dtype}, expected the primal's {leaf.dtype}")
        directions.append(direction_like(t, leaf, f"jvp(tangents[{i}])"))
    with paused(), Tape() as tape:
        outputs = f(*leaves)
    single = not isinstance(outputs, tuple)
    results = (outputs,) if single else outputs
    for i, out in enumerate(results):
        if not isinstance(out, Node):
            where = "" if single else f" (output {i})"
            raise TypeError(
                f"jvp(f, ...): f must return a Scalar or Tensor, or a tuple of them; got {type(out).__name__}{where}"
            )
    pushed = push_forward(tape, dict(zip(leaves, directions)))
    out_tangents = tuple(
        pushed[out] if out in pushed else (0.0 if out.data.__class__ is float else np.zeros_like(out.data))
        for out in results
    )
    return (outputs, out_tangents[0]) if single else (outputs, out_tangents)
