"""The ops attention and the Transformer's loss are built from: softmax and log_softmax.

Both normalise along ``axis``: one axis (attention's rows), several (a
tuple) or all of them (``None``; a 0-d softmax is 1).

``softmax``'s Jacobian ``diag(p) − p pᵀ`` is symmetric, so its JVP is its
VJP applied to the tangent. Its backward, :func:`softmax_backward`, is
written once: the op's VJP, the hand-derived attention chain and the tiled
kernel all call it. On plain arrays it makes one new array (attention's
backward lives on it); on Scalars and Tensors the same lines record.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..engine import Node
from ..engine.protocols import Value
from .core import Axis, Grads, primitive
from .elementwise import exp

__all__ = ["softmax", "log_softmax", "softmax_backward"]


def _softmax_forward(x: Value, axis: Axis = -1) -> Value:
    # Subtracting the row max changes nothing mathematically (it cancels in the
    # ratio) but keeps exp() from overflowing: the "numerically stable" softmax.
    with np.errstate(over="ignore"):  # [1.7e308, -1.7e308]: the gap overflows to -inf, whose exp is 0
        weights = np.asarray(x - np.max(x, axis=axis, keepdims=True))
    # exp and the division work in place: one score-sized array, not three.
    np.exp(weights, out=weights)
    weights /= np.sum(weights, axis=axis, keepdims=True)
    return weights


def _rowdot(a: Value, b: Value, axis: Axis) -> Value:
    """``sum(a * b, axis, keepdims=True)``: on arrays without building ``a * b`` (einsum fuses it)."""
    if isinstance(a, Node):
        return (a * b).sum(axis=axis, keepdims=True)
    if not isinstance(axis, int):  # None or a tuple of axes: normalised over several axes at once
        return np.sum(a * b, axis=axis, keepdims=True)
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    return np.expand_dims(np.einsum("...i,...i->...", a, b), axis)


def softmax_backward(g: Value, p: Value, axis: Axis = -1, row_sum: Value = None) -> Value:
    """``P ⊙ (dP − rowsum(dP ⊙ P))``: softmax's VJP, written once (the op, the analytic chain and the tiled kernel).

    The Jacobian of softmax is diag(p) - p p^T; applied to g, row by row. A
    caller that already knows ``rowsum(dP ⊙ P)`` (the tiled kernel's ``D``,
    with its row axis kept) passes it as ``row_sum``. On arrays it makes one
    new array; on Scalars and Tensors it records (``create_graph=True``).
    """
    grad_x = g - (_rowdot(g, p, axis) if row_sum is None else row_sum)
    grad_x *= p  # in place on an array (a Tensor has no in-place ops: this records a mul)
    return grad_x


def _softmax_vjp(g: Value, ans: Value, x: Value, axis: Axis = -1) -> Grads:
    return (softmax_backward(g, ans, axis),)


softmax = primitive(
    "softmax",
    _softmax_forward,
    _softmax_vjp,
    ["{p} * ({g} - rowsum({g} * {p}))"],
    [r"\bar S = P \odot (\bar P - \mathrm{rowsum}(\bar P \odot P))"],
    output="p",
    example_params={"axis": -1},
    jvp=lambda tangents, ans, x, axis=-1: _softmax_vjp(tangents[0], ans, x, axis)[0],
    reads=("p",),
)


def _log_softmax_forward(x: Value, axis: Axis = -1) -> Value:
    # log softmax(x) = x − logsumexp(x), with the row max taken out first
    # (see logsumexp): finite for any finite x, even where softmax is 0.
    with np.errstate(over="ignore"):  # as softmax: the gap of [1.7e308, -1.7e308] overflows to -inf, its log-weight
        shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _log_softmax_vjp(g: Value, ans: Value, x: Value, axis: Axis = -1) -> Grads:
    # y = x − logsumexp(x), so dx = g − softmax(x) · rowsum(g), and softmax(x) = exp(y).
    return (g - exp.bind(ans) * g.sum(axis=axis, keepdims=True),)


def _log_softmax_jvp(tangents: Sequence[Value | None], ans: Value, x: Value, axis: Axis = -1) -> Value:
    # dy = dx − rowsum(softmax(x) · dx): the transpose of the VJP's rank-one term.
    t = tangents[0]
    mean_tangent = _rowdot(np.exp(ans), t, axis)  # the tangent averaged by the softmax
    return t - mean_tangent


log_softmax = primitive(
    "log_softmax",
    _log_softmax_forward,
    _log_softmax_vjp,
    ["{g} - exp({y}) * rowsum({g})"],
    [r"\bar x = \bar y - e^{y}\, \mathrm{rowsum}(\bar y)"],
    example_params={"axis": -1},
    jvp=_log_softmax_jvp,
    reads=("y",),
)
