"""Ops that move numbers without changing them: reshape, transpose, cast, broadcast_to,
picking entries (take, index) and putting them back (scatter_add, index_add), concatenate.

All are linear, so each JVP is the op itself applied to the tangent, and the
VJPs come in pairs: the VJP of ``take`` is a ``scatter_add`` and the VJP of
``scatter_add`` a ``take`` (likewise ``index``/``index_add`` and
``broadcast_to``/``sum``). Written with :meth:`~.core.Op.bind`, they record
on Tensors, so a reverse pass through them can be differentiated again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.listing import index_part_text
from ..engine.protocols import Value
from .broadcasting import linear_jvp, shape_of, unbroadcast
from .core import Grads, Op, Shape, primitive

__all__ = [
    "reshape",
    "transpose",
    "cast",
    "broadcast_to",
    "take",
    "scatter_add",
    "index",
    "index_add",
    "concatenate",
]


def _reshape_forward(x: Value, shape: Shape) -> Value:
    return np.reshape(x, shape)


reshape: Op = primitive(
    "reshape",
    _reshape_forward,
    lambda g, ans, x, shape: (reshape.bind(g, shape=shape_of(x)),),
    ["reshape({g}, shape of {x})"],
    [r"\bar x = \mathrm{reshape}(\bar y)"],
    example_params={"shape": (-1,)},
    jvp=linear_jvp(_reshape_forward),
    reads=(),
)


def _transpose_forward(x: Value, axes: tuple[int, ...] | None) -> Value:
    return np.transpose(x, axes)


transpose: Op = primitive(
    "transpose",
    _transpose_forward,
    # axes=None reverses the axes, and reversing is its own inverse.
    lambda g, ans, x, axes: (transpose.bind(g, axes=None if axes is None else tuple(np.argsort(axes).tolist())),),
    ["transpose({g}, inverse axes)"],
    [r"\bar x = \bar y^{\top}"],
    example_params={"axes": None},
    jvp=linear_jvp(_transpose_forward),
    reads=(),
)


def _cast_forward(x: Value, dtype: Any) -> Value:
    return x.astype(dtype)


cast = primitive(
    "cast",
    _cast_forward,
    # The gradient goes back in the input's own precision.
    lambda g, ans, x, dtype: (g.astype(x.dtype),),
    ["{g}, in the dtype of {x}"],
    [r"\bar x = \bar y"],
    example_params={"dtype": "float32"},
    label=lambda params: f"→{np.dtype(params['dtype']).name}" if "dtype" in params else "",
    jvp=linear_jvp(_cast_forward),
    reads=(),
)


def _broadcast_to_forward(x: Value, shape: Shape) -> Value:
    # A copy, not numpy's read-only view: the result may become a leaf's .grad.
    return np.broadcast_to(x, shape).copy()


broadcast_to = primitive(
    "broadcast_to",
    _broadcast_to_forward,
    lambda g, ans, x, shape: (unbroadcast(g, x),),
    ["sum of {g} over the broadcast axes"],
    [r"\bar x = \textstyle\sum_{\mathrm{broadcast}} \bar y"],
    example_params={"shape": (2, 1, 3)},
    label=lambda params: f"→{list(params['shape'])}" if "shape" in params else "",
    jvp=linear_jvp(_broadcast_to_forward),
    reads=(),
)


# ---------------------------------------------------------------- picking entries and putting them back


def _axis_index(ndim: int, axis: int, indices: Any) -> tuple[Any, ...]:
    """The numpy index that picks ``indices`` along ``axis`` (every other axis whole)."""
    return (slice(None),) * (axis % ndim) + (indices,)


def _index_text(indices: Any) -> str:
    indices = np.asarray(indices)
    if indices.size <= 4:
        return ", ".join(str(i) for i in indices.ravel())
    return f"{indices.size} indices"


def _take_forward(x: Value, indices: Any, axis: int = 0) -> Value:
    return np.take(x, indices, axis=axis)


take = primitive(
    "take",
    _take_forward,
    # Each output entry is a copy of one entry of x, so its gradient goes back
    # there: a scatter-add (an index used twice collects both gradients).
    lambda g, ans, x, indices, axis=0: (scatter_add.bind(g, shape=shape_of(x), indices=indices, axis=axis),),
    ["scatter-add of {g} into zeros at {indices} (repeated indices add up)"],
    [r"\bar x_{j} = \sum_{i:\ \mathrm{idx}_i = j} \bar y_i"],
    example_params={"indices": np.array([0, 0]), "axis": 0},
    label=lambda params: f"[{_index_text(params.get('indices'))}]",
    jvp=linear_jvp(_take_forward),
    reads=(),
)


def _scatter_add_forward(x: Value, shape: Shape, indices: Any, axis: int = 0) -> Value:
    # np.add.at adds repeated indices, where out[idx] += x would keep one.
    out = np.zeros(shape, dtype=np.result_type(x))
    np.add.at(out, _axis_index(len(shape), axis, indices), x)
    return out


scatter_add: Op = primitive(
    "scatter_add",
    _scatter_add_forward,
    lambda g, ans, x, shape, indices, axis=0: (take.bind(g, indices=indices, axis=axis),),
    ["{g} read at {indices} (the take it undoes)"],
    [r"\bar x_i = \bar y_{\mathrm{idx}_i}"],
    example_params={"shape": (3,), "indices": np.array([0, 0]), "axis": 0},
    label=lambda params: f"+[{_index_text(params.get('indices'))}]",
    jvp=linear_jvp(_scatter_add_forward),
    reads=(),
)


def _key_text(key: Any) -> str:
    """``x[...]``'s key as it was written: ``1:3, :, 0``, ``..., [0, 2]``, ``mask[2, 3]``."""
    parts = []
    for part in key:
        if isinstance(part, np.ndarray):
            parts.append(f"mask{list(part.shape)}" if part.dtype == np.bool_ else f"[{_index_text(part)}]")
        else:
            parts.append(index_part_text(part))
    return ", ".join(parts)


def _index_forward(x: Value, key: Any) -> Value:
    return x[key]


index = primitive(
    "index",
    _index_forward,
    # x[key] reads some entries of x (a slice, a row, a picked list): each
    # read entry gets its gradient back, the others get 0.
    lambda g, ans, x, key: (index_add.bind(g, shape=shape_of(x), key=key),),
    ["{g} put back where it was read from {x}, 0 elsewhere (repeated entries add up)"],
    [r"\bar x_{[\mathrm{key}]} \mathrel{+}= \bar y"],
    example_params={"key": (slice(None), np.array([0, 0]))},
    label=lambda params: f"[{_key_text(params.get('key', ()))}]",
    jvp=linear_jvp(_index_forward),
    reads=(),
)


def _index_add_forward(x: Value, shape: Shape, key: Any) -> Value:
    # An entry read twice (a repeated integer index) collects both: np.add.at adds them.
    out = np.zeros(shape, dtype=np.result_type(x))
    np.add.at(out, key, x)
    return out


index_add: Op = primitive(
    "index_add",
    _index_add_forward,
    lambda g, ans, x, shape, key: (index.bind(g, key=key),),
    ["{g} read at the key (the index it undoes)"],
    [r"\bar x = \bar y_{[\mathrm{key}]}"],
    example_params={"shape": (2, 3), "key": (slice(None), np.array([0, 0]))},
    label=lambda params: f"+[{_key_text(params.get('key', ()))}]",
    jvp=linear_jvp(_index_add_forward),
    reads=(),
)


def _concatenate_vjp(g: Value, ans: Value, a: Value, b: Value, axis: int = 0) -> Grads:
    # The output is a and b side by side: each takes back its own slice of g.
    ndim, split = len(shape_of(a)), shape_of(a)[axis]
    return g[_axis_index(ndim, axis, slice(0, split))], g[_axis_index(ndim, axis, slice(split, None))]


def _concatenate_forward(a: Value, b: Value, axis: int = 0) -> Value:
    return np.concatenate((a, b), axis=axis)


concatenate = primitive(
    "concatenate",
    _concatenate_forward,
    _concatenate_vjp,
    ["the part of {g} where {a} sits (along axis)", "the part of {g} where {b} sits (along axis)"],
    [r"\bar a = \bar y_{[:n_a]}", r"\bar b = \bar y_{[n_a:]}"],
    example_params={"axis": 0},
    jvp=linear_jvp(_concatenate_forward),
    reads=(),
)
