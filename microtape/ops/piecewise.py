"""Piecewise choices: clip (to a range) and where (one of two values by a condition).

Both pass the gradient along the branch that was taken and nothing along the
other: the branch is read from the values — a constant of the derivative,
like relu's step — so the VJPs are one multiplication and record on Tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.protocols import Value
from .broadcasting import sum_of, unbroadcast
from .core import Grads, primitive, value_of
from .elementwise import diagonal_jvp

__all__ = ["clip", "where"]


def _in_dtype_of(condition: Value, like: Value) -> Value:
    """A boolean test as 0/1 numbers in ``like``'s dtype (a Python float for a float)."""
    if isinstance(condition, np.ndarray):
        return condition.astype(np.result_type(value_of(like)))
    return float(condition)


def _clip_forward(x: Value, lower: float | None = None, upper: float | None = None) -> Value:
    if x.__class__ is float:
        # A NaN bound gives NaN, as numpy's clip does: comparisons with NaN are all False.
        if (lower is not None and lower != lower) or (upper is not None and upper != upper):
            return float("nan")
        if lower is not None and x < lower:
            return float(lower)
        if upper is not None and x > upper:
            return float(upper)
        return x
    return np.clip(x, lower, upper)


def _inside(x: Value, lower: float | None, upper: float | None) -> Value:
    """[lower <= x <= upper]: where clip let x through (the ends included, as PyTorch's clamp)."""
    x = value_of(x)
    inside = np.ones(np.shape(x), dtype=bool) if isinstance(x, np.ndarray) else True
    if lower is not None:
        inside = inside & (x >= lower)
    if upper is not None:
        inside = inside & (x <= upper)
    return inside


def _clip_vjp(g: Value, ans: Value, x: Value, lower: float | None = None, upper: float | None = None) -> Grads:
    return (g * _in_dtype_of(_inside(x, lower, upper), g),)


def _clip_label(params: dict[str, Any]) -> str:
    lower, upper = params.get("lower"), params.get("upper")
    return f"[{'' if lower is None else f'{lower:g}'}, {'' if upper is None else f'{upper:g}'}]"


clip = primitive(
    "clip",
    _clip_forward,
    _clip_vjp,
    ["{g} * ({lower} <= {x} <= {upper})"],
    [r"\bar x = \bar y\,[\mathrm{lower} \le x \le \mathrm{upper}]"],
    example_params={"lower": -1.0, "upper": 1.0},
    label=_clip_label,
    jvp=diagonal_jvp(_clip_vjp),
    reads=("x",),
)


def _where_forward(condition: Value, a: Value, b: Value) -> Value:
    if condition.__class__ is float:
        return a if condition else b
    return np.where(condition, a, b)


def _taken(condition: Value, like: Value) -> Value:
    """1 where the condition picked ``a``, 0 where it picked ``b`` (in ``like``'s dtype)."""
    return _in_dtype_of(value_of(condition) != 0, like)


def _where_vjp(g: Value, ans: Value, condition: Value, a: Value, b: Value) -> Grads:
    picked_a = _taken(condition, g)
    return None, unbroadcast(g * picked_a, a), unbroadcast(g * (1.0 - picked_a), b)


def _where_jvp(tangents: Sequence[Value | None], ans: Value, condition: Value, a: Value, b: Value) -> Value:
    picked_a = _taken(condition, ans)
    _, ta, tb = tangents
    return sum_of(None if ta is None else ta * picked_a, None if tb is None else tb * (1.0 - picked_a))


where = primitive(
    "where",
    _where_forward,
    _where_vjp,
    [None, "{g} where {condition}, 0 elsewhere", "{g} where not {condition}, 0 elsewhere"],
    [None, r"\bar a = \bar y\,[c]", r"\bar b = \bar y\,[\lnot c]"],
    inputs=("condition", "a", "b"),
    jvp=_where_jvp,
    note="the condition is data: it receives no gradient",
    reads=("condition",),
)
