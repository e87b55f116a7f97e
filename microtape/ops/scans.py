"""Running totals along an axis: cumsum and cumprod (and the product of all the other entries).

``cumsum``'s Jacobian is a triangle of ones, so its VJP is the running sum
taken backwards (flip, cumsum, flip). ``cumprod``'s is a triangle of partial
products: where no entry is 0 its VJP is ``revcumsum(g * y) / x``; where one
is, dividing by it would give 0/0, so each entry's share is built from the
running product with that entry left out (:func:`_cumprod_vjp_with_zeros`).
:func:`others_product` (each entry's product of all the others, without a
division) is ``prod``'s VJP. Written with ops: the VJPs record on Tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..engine.protocols import Value
from .broadcasting import linear_jvp, shape_of
from .core import Grads, primitive, value_of
from .piecewise import where
from .shape import broadcast_to, concatenate, index, reshape, transpose

__all__ = ["cumsum", "cumprod", "others_product", "flip_last", "to_last_axis"]


def flip_last(x: Value) -> Value:
    """``x`` reversed along its last axis (an ``index`` op with the step -1)."""
    return index.bind(x, key=(Ellipsis, slice(None, None, -1)))


def to_last_axis(x: Value, axis: int) -> tuple[Value, Callable[[Value], Value]]:
    """``x`` with ``axis`` moved to the end, and the function that moves it back."""
    ndim = len(shape_of(x))
    axis %= ndim
    order = tuple(a for a in range(ndim) if a != axis) + (axis,)
    back = tuple(int(i) for i in np.argsort(order))
    return transpose.bind(x, axes=order), lambda y: transpose.bind(y, axes=back)


def _along(x: Value, axis: int | None) -> tuple[Value, Callable[[Value], Value]]:
    """(x with the scanned axis last, the way back): ``axis=None`` scans the flattened array, as numpy does."""
    if axis is None:
        return reshape.bind(x, shape=(-1,)), lambda y: y
    return to_last_axis(x, axis)


def _cumsum_forward(x: Value, axis: int | None = None) -> Value:
    return np.cumsum(x, axis=axis)


def _reverse_cumsum(g: Value) -> Value:
    """Σ_{i >= k} g_i along the last axis: what each running total passes back to entry k."""
    return flip_last(cumsum.bind(flip_last(g), axis=-1))


def _cumsum_vjp(g: Value, ans: Value, x: Value, axis: int | None = None) -> Grads:
    moved, back = _along(g, axis)
    return (reshape.bind(back(_reverse_cumsum(moved)), shape=shape_of(x)),)


cumsum = primitive(
    "cumsum",
    _cumsum_forward,
    _cumsum_vjp,
    ["reversed running sum of {g} along the axis"],
    [r"\bar x_k = \textstyle\sum_{i \ge k} \bar y_i"],
    example_params={"axis": -1},
    jvp=linear_jvp(_cumsum_forward),
    reads=(),
)


def _cumprod_vjp_with_zeros(g: Value, x: Value) -> Value:
    """Along the last axis: grad_k = Σ_{i>=k} g_i · Π_{j<=i, j≠k} x_j, without dividing by x_k.

    Row k of an n × n stack is x with x_k replaced by 1; its running product
    is Π_{j<=i, j≠k} x_j for every i >= k. O(n²) memory, used only when an
    entry is 0 (elsewhere the division is exact and O(n)).
    """
    n = shape_of(x)[-1]
    dtype = np.result_type(value_of(x))
    square = (*shape_of(x)[:-1], n, n)
    rows = broadcast_to.bind(reshape.bind(x, shape=(*shape_of(x)[:-1], 1, n)), shape=square)
    left_out = where.bind(np.eye(n, dtype=dtype), np.ones((), dtype=dtype), rows)
    partial = cumprod.bind(left_out, axis=-1)
    later = np.triu(np.ones((n, n), dtype=dtype))  # [i >= k] at row k, column i
    spread_g = reshape.bind(g, shape=(*shape_of(g)[:-1], 1, n))
    return (partial * spread_g * later).sum(axis=-1)


def _cumprod_vjp(g: Value, ans: Value, x: Value, axis: int | None = None) -> Grads:
    moved_x, back = _along(x, axis)
    moved_g, _ = _along(g, axis)
    if np.any(value_of(x) == 0):
        grad = _cumprod_vjp_with_zeros(moved_g, moved_x)
    else:
        moved_ans, _ = _along(ans, axis)
        grad = _reverse_cumsum(moved_g * moved_ans) / moved_x
    return (reshape.bind(back(grad), shape=shape_of(x)),)


def _cumprod_jvp(tangents: Sequence[Value | None], ans: Value, x: Value, axis: int | None = None) -> Value:
    # The transpose of the VJP's triangle: dy_i = Σ_{k<=i} (∂y_i/∂x_k) t_k, exact also at zeros.
    (t,) = tangents
    moved_x, back = _along(x, axis)
    moved_t, _ = _along(t, axis)
    n = moved_x.shape[-1]
    rows = np.broadcast_to(moved_x[..., None, :], (*moved_x.shape, n)).copy()
    rows[..., np.arange(n), np.arange(n)] = moved_t  # row k: x with x_k replaced by t_k
    partial = np.cumprod(rows, axis=-1) * np.triu(np.ones((n, n), dtype=moved_x.dtype))
    return np.reshape(back(partial.sum(axis=-2)), np.shape(ans))


cumprod = primitive(
    "cumprod",
    lambda x, axis=None: np.cumprod(x, axis=axis),
    _cumprod_vjp,
    ["reversed running sum of {g} * {y}, divided by {x} (by the products without x_k where x_k = 0)"],
    [r"\bar x_k = \textstyle\sum_{i \ge k} \bar y_i \prod_{j \le i,\, j \ne k} x_j"],
    example_params={"axis": -1},
    jvp=_cumprod_jvp,
    reads=("x", "y"),
)


def others_product(x: Value) -> Value:
    """Each entry's product of all the *other* entries along the last axis, with no division.

    The running product from the left (stopping before the entry) times the
    running product from the right: exact where entries are 0, where ``prod / x`` is 0/0.
    """
    n = shape_of(x)[-1]
    dtype = np.result_type(value_of(x))
    ones = np.ones((*shape_of(x)[:-1], 1), dtype=dtype)
    if n == 0:
        return x * 0.0
    before = concatenate.bind(ones, cumprod.bind(index.bind(x, key=(Ellipsis, slice(None, -1))), axis=-1), axis=-1)
    reversed_x = flip_last(x)
    after = concatenate.bind(
        ones, cumprod.bind(index.bind(reversed_x, key=(Ellipsis, slice(None, -1))), axis=-1), axis=-1
    )
    return before * flip_last(after)
