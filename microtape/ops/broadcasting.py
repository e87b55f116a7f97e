"""Undoing numpy broadcasting in a gradient: :func:`unbroadcast`, for every binary op.

If ``x`` of shape (3, 1) was broadcast to (2, 3, 4) in the forward pass,
every copy of ``x`` received some gradient: the total gradient of ``x`` is
the sum over the broadcast axes. The helpers here work on numpy arrays,
Python floats and — in a recorded reverse pass — on Scalars and Tensors
(whose ``.sum`` records).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine import Node
from ..engine.protocols import Value
from .core import Axis, Grads, Shape

__all__ = [
    "unbroadcast",
    "unbroadcast_both",
    "unbroadcasting",
    "shape_of",
    "kept_shape",
    "tangent_or_zeros",
    "sum_of",
    "linear_jvp",
]


def shape_of(x: Value) -> Shape:
    """The shape of an array, a Tensor, a number or a Scalar (``()`` for the last two)."""
    return getattr(x, "shape", ())


def kept_shape(shape: Shape, axis: Axis) -> Shape:
    """``shape`` with the reduced ``axis`` (None, an int or a tuple) kept as size 1."""
    if axis is None:
        return (1,) * len(shape)
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def unbroadcast(grad: Value, like: Value) -> Value:
    """Sum ``grad`` down to the shape of ``like`` (undoing numpy broadcasting).

    Python floats (Scalar's values) never broadcast, so they pass straight through.
    """
    if grad.__class__ is float:
        return grad
    shape = shape_of(like)
    if shape_of(grad) == shape:
        return grad
    # Axes that numpy prepended to match ranks: sum them away.
    extra = len(shape_of(grad)) - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    # Axes that were 1 in the input and stretched in the output: sum, keep the 1.
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and shape_of(grad)[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def unbroadcast_both(grad_a: Value, a: Value, grad_b: Value, b: Value) -> tuple[Value, Value]:
    """:func:`unbroadcast` for both operands of a binary op, in one call.

    Scalars pay for every Python call in their backward pass, and their
    gradients (floats) never need reducing: they skip both calls at once.
    """
    if grad_a.__class__ is float and grad_b.__class__ is float:
        return grad_a, grad_b
    return unbroadcast(grad_a, a), unbroadcast(grad_b, b)


def unbroadcasting(partials: Callable[..., Any]) -> Callable[..., Grads]:
    """The VJP of a broadcasting binary op from its elementwise one, ``partials(g, ans, a, b)``.

    The VJP sums each of the two gradients back to its operand's shape. The
    elementwise one stays reachable as ``vjp.for_floats``: Python floats never
    broadcast, so the Scalar fast path (:attr:`.core.Op.float_vjp`) calls it
    directly — one derivative, specialised once, when the op is registered.
    """

    @functools.wraps(partials)  # (its name and module: the op's family is the module of its VJP)
    def vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
        grad_a, grad_b = partials(g, ans, a, b)
        return unbroadcast_both(grad_a, a, grad_b, b)

    vjp.for_floats = partials  # type: ignore[attr-defined]  # (a function's attribute: Op.float_vjp reads it)
    return vjp


def sum_of(*terms: Value | None) -> Value:
    """The sum of the terms that are there: a JVP's input without a tangent contributes nothing."""
    present = [t for t in terms if t is not None]
    total = present[0]
    for term in present[1:]:
        total = total + term
    return total


def tangent_or_zeros(tangent: Value, x: Value) -> Value:
    """A forward-mode tangent, or zeros of ``x``'s shape for an input that has none."""
    if tangent is not None:
        return tangent
    data = x.data if isinstance(x, Node) else x
    return 0.0 if data.__class__ is float else np.zeros_like(data)


def linear_jvp(forward: Callable[..., Any]) -> Callable[..., Value]:
    """The JVP of an op that is linear in all its inputs: the forward applied to the tangents.

    An input without a tangent contributes zeros (:func:`tangent_or_zeros`).
    """

    def jvp(tangents: Sequence[Value | None], ans: Value, *inputs: Sequence[str] | None, **params: Any) -> Value:
        return forward(*[tangent_or_zeros(t, x) for t, x in zip(tangents, inputs)], **params)

    return jvp
