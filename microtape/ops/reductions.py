"""Reductions: sum, mean, max, min, prod and logsumexp over an axis (or several, or all).

A reduction's gradient is the incoming ``g`` spread back over the reduced
axes (:func:`spread`: a reshape that puts the reduced axes back as size 1,
then ``broadcast_to``), weighted by how much each entry counted: equally for
``sum``, ``1/n`` for ``mean``, only the arg-max for ``max`` (arg-min for
``min``), the product of the other entries for ``prod``, the softmax for
``logsumexp``. Written with :meth:`~.core.Op.bind`, so the VJPs record on Tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine import Node
from ..engine.protocols import Value
from .broadcasting import kept_shape, shape_of
from .core import Axis, Grads, Op, Shape, primitive, value_of
from .elementwise import exp
from .piecewise import where
from .scans import others_product
from .shape import broadcast_to, reshape, transpose

__all__ = ["sum_", "mean", "max_", "min_", "prod", "logsumexp", "spread", "with_kept_axes"]


def with_kept_axes(value: Value, axis: Axis, keepdims: bool, shape: Shape) -> Value:
    """A reduced result with its reduced axes back as size 1, so it broadcasts against the input."""
    if keepdims or axis is None:
        return value
    return reshape.bind(value, shape=kept_shape(shape, axis))


def spread(g: Value, x: Value, axis: Axis, keepdims: bool) -> Value:
    """Broadcast a reduced gradient back to the shape of the reduced input ``x``."""
    shape = shape_of(x)
    return broadcast_to.bind(with_kept_axes(g, axis, keepdims, shape), shape=shape)


def _reduce_jvp(reduce: Callable[..., Any]) -> Callable[..., Value]:
    def jvp(tangents: Sequence[Value | None], ans: Value, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        return reduce(tangents[0], axis=axis, keepdims=keepdims)

    return jvp


def _sum_forward(x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
    return np.sum(x, axis=axis, keepdims=keepdims)


sum_ = primitive(
    "sum",
    _sum_forward,
    lambda g, ans, x, axis=None, keepdims=False: (spread(g, x, axis, keepdims),),
    ["broadcast({g})"],
    [r"\bar x_i = \bar y"],
    example_params={"axis": -1, "keepdims": False},
    jvp=_reduce_jvp(_sum_forward),
    reads=(),
)


def _mean_forward(x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
    return np.mean(x, axis=axis, keepdims=keepdims)


def _mean_vjp(g: Value, ans: Value, x: Value, axis: Axis = None, keepdims: bool = False) -> Grads:
    count = np.size(value_of(x)) // max(np.size(value_of(ans)), 1)
    return (spread(g, x, axis, keepdims) / count,)


mean = primitive(
    "mean",
    _mean_forward,
    _mean_vjp,
    ["broadcast({g}) / n"],
    [r"\bar x_i = \bar y / n"],
    example_params={"axis": 0, "keepdims": True},
    jvp=_reduce_jvp(_mean_forward),
    reads=(),
)


def _extreme_share(ans: Value, x: Value, axis: Axis, keepdims: bool) -> Value:
    """Where the max (or min) is: 1 / number of ties there, 0 elsewhere — a constant of the derivative."""
    x = value_of(x)
    peak = value_of(ans) if (keepdims or axis is None) else np.expand_dims(value_of(ans), axis)
    winners = x == peak
    return winners / np.sum(winners, axis=axis, keepdims=True, dtype=x.dtype)


def _extreme_jvp(
    tangents: Sequence[Value | None], ans: Value, x: Value, axis: Axis = None, keepdims: bool = False
) -> Value:
    return np.sum(tangents[0] * _extreme_share(ans, x, axis, keepdims), axis=axis, keepdims=keepdims)


def _extreme(name: str, forward: Callable[..., Any], which: str) -> Op:
    """max or min: the gradient goes to the arg-max (arg-min); ties share it equally."""
    return primitive(
        name,
        lambda x, axis=None, keepdims=False: forward(x, axis=axis, keepdims=keepdims),
        lambda g, ans, x, axis=None, keepdims=False: (
            spread(g, x, axis, keepdims) * _extreme_share(ans, x, axis, keepdims),
        ),
        [f"{{g}} at the arg-{which} of {{x}} (ties share), 0 elsewhere"],
        [rf"\bar x_i = \bar y\,[x_i = \{which} x] / \#\mathrm{{ties}}"],
        example_params={"axis": -1, "keepdims": True},
        jvp=_extreme_jvp,
        reads=("x", "y"),
    )


max_ = _extreme("max", np.max, "max")
min_ = _extreme("min", np.min, "min")


def _prod_forward(x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
    return np.prod(x, axis=axis, keepdims=keepdims)


def _prod_vjp(g: Value, ans: Value, x: Value, axis: Axis = None, keepdims: bool = False) -> Grads:
    # ∂(Π x)/∂x_k is the product of the other entries: no division, so a 0 is exact
    # (one zero: only its own slope survives; two zeros: every slope is 0).
    shape = shape_of(x)
    axes = tuple(range(len(shape))) if axis is None else tuple(a % len(shape) for a in np.atleast_1d(axis))
    kept = tuple(a for a in range(len(shape)) if a not in axes)
    order = kept + axes
    back = tuple(int(i) for i in np.argsort(order))
    moved = transpose.bind(x, axes=order) if order != tuple(range(len(shape))) else x
    reduced = int(np.prod([shape[a] for a in axes], dtype=int))
    flat = reshape.bind(moved, shape=(*[shape[a] for a in kept], reduced))
    others = reshape.bind(others_product(flat), shape=tuple(shape[a] for a in order))
    if order != tuple(range(len(shape))):
        others = transpose.bind(others, axes=back)
    return (spread(g, x, axis, keepdims) * others,)


prod = primitive(
    "prod",
    _prod_forward,
    _prod_vjp,
    ["broadcast({g}) * (product of the other entries of {x})"],
    [r"\bar x_k = \bar y \textstyle\prod_{j \ne k} x_j"],
    example_params={"axis": -1, "keepdims": False},
    jvp=lambda tangents, ans, x, axis=None, keepdims=False: np.sum(
        tangents[0] * _prod_vjp(np.ones_like(ans), ans, x, axis, keepdims)[0], axis=axis, keepdims=keepdims
    ),
    reads=("x",),
)


def _logsumexp_forward(x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
    # log Σ exp(x) = m + log Σ exp(x − m) with m the max: no exp can overflow,
    # and the largest term is exp(0) = 1, so the log never sees 0.
    peak = np.max(x, axis=axis, keepdims=True)
    # Where the max is infinite it is the answer (a row of -inf gives -inf, a
    # row holding +inf gives +inf, as in PyTorch); shifting by it would make
    # inf - inf = NaN, so those rows are shifted by 0 and the exp/log say it.
    shift = np.where(np.isinf(peak), 0.0, peak)
    with np.errstate(over="ignore", divide="ignore"):  # exp(+inf) = inf, log(0) = -inf: the edge values
        total = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
    return total if keepdims else np.squeeze(total, axis=axis)


def _logsumexp_weights(ans: Value, x: Value, axis: Axis, keepdims: bool) -> Value:
    # d/dx_i log Σ exp(x) = exp(x_i) / Σ exp(x) = softmax(x)_i = exp(x_i − y).
    result = with_kept_axes(ans, axis, keepdims, shape_of(x))
    infinite = np.isinf(value_of(result))
    if not np.any(infinite):
        return exp.bind(x - result)  # (on the tape in a recorded pass)
    # At an infinite result softmax's limit is max's gradient: the entries
    # equal to the max (the +inf ones; in a row of -inf, all) share it — a
    # constant, so its own derivative there is 0. (PyTorch gives NaN there.)
    with np.errstate(invalid="ignore"):  # 0/0 in the finite rows, which keep their weights
        share = _extreme_share(result, x, axis, True)
    rows = np.broadcast_to(infinite, shape_of(x))
    if isinstance(x, Node):
        # A recorded pass: exp(x − y) on the tape, computed on 0s in the infinite rows, so
        # that no inf − inf (NaN) reaches the tape or a second derivative through where.
        finite = exp.bind(where.bind(rows, 0.0, x) - where.bind(infinite, 0.0, result))
        return where.bind(rows, share, finite)
    with np.errstate(invalid="ignore"):  # inf - inf where the result is infinite: replaced below
        weights = np.exp(x - result)
    return np.where(infinite, share, weights)


def _logsumexp_jvp(
    tangents: Sequence[Value | None], ans: Value, x: Value, axis: Axis = None, keepdims: bool = False
) -> Value:
    return np.sum(tangents[0] * _logsumexp_weights(ans, x, axis, keepdims), axis=axis, keepdims=keepdims)


logsumexp = primitive(
    "logsumexp",
    _logsumexp_forward,
    lambda g, ans, x, axis=None, keepdims=False: (
        with_kept_axes(g, axis, keepdims, shape_of(x)) * _logsumexp_weights(ans, x, axis, keepdims),
    ),
    ["broadcast({g}) * softmax({x})"],
    [r"\bar x = \bar y\, \mathrm{softmax}(x)"],
    note="a row of -inf gives -inf and one holding +inf gives +inf, where the entries equal to the max share g",
    example_params={"axis": -1, "keepdims": False},
    jvp=_logsumexp_jvp,
    reads=("x", "y"),
)
