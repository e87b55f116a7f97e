"""Trigonometric and hyperbolic functions: sin, cos, tan, arcsin, arccos, arctan, sinh, cosh, and the inverses.

Each is elementwise, so its VJP is ``g * f'(x)`` and its JVP the same
function of the tangent (:func:`~.elementwise.diagonal_jvp`). The derivatives
are written with the ops themselves (``cos.bind(x)`` inside sin's VJP), so a
recorded reverse pass can be differentiated again: sin'' = -sin comes for free.

Domains follow numpy's forward and PyTorch's backward: ``arcsin`` and
``arccos`` are defined on [-1, 1] and their derivative is infinite at ±1
(:func:`divide`, which says so for a Python float rather than raising).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..engine.protocols import Value
from .core import Grads, Op
from .elementwise import divide, float_or_array, sqrt, unary

__all__ = [
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "divide",
]  # fmt: skip


def _nan_at_infinity(math_fn: Callable[[float], float]) -> Callable[[float], float]:
    """``math_fn`` on a float, NaN where it raises for ±inf (numpy's sin(inf) is NaN; math's raises)."""

    def fn(x: float) -> float:
        try:
            return math_fn(x)
        except ValueError:
            return math.nan

    fn.__name__ = math_fn.__name__
    return fn


sin = unary(
    "sin",
    float_or_array(_nan_at_infinity(math.sin), np.sin),
    lambda g, ans, x: (g * cos.bind(x),),
    "{g} * cos({x})",
    r"\bar x = \bar y \cos x",
    reads=("x",),
)


cos: Op = unary(
    "cos",
    float_or_array(_nan_at_infinity(math.cos), np.cos),
    lambda g, ans, x: (-g * sin.bind(x),),
    "-{g} * sin({x})",
    r"\bar x = -\bar y \sin x",
    reads=("x",),
)


tan = unary(
    "tan",
    float_or_array(_nan_at_infinity(math.tan), np.tan),
    # tan' = 1 / cos² = 1 + tan²: written with the output, no second trig call.
    lambda g, ans, x: (g * (1.0 + ans * ans),),
    "{g} * (1 + tan({x})**2)",
    r"\bar x = \bar y\,(1 + \tan^2 x)",
    reads=("y",),
)


def _one_minus_square_root(x: Value) -> Value:
    """√(1 − x²), the denominator of arcsin's and arccos's slopes (0 at x = ±1)."""
    return sqrt.bind(1.0 - x * x)


arcsin = unary(
    "arcsin",
    float_or_array(math.asin, np.arcsin),
    lambda g, ans, x: (divide(g, _one_minus_square_root(x)),),
    "{g} / sqrt(1 - {x}**2)",
    r"\bar x = \bar y / \sqrt{1 - x^2}",
    domain="unit",
    note="defined for -1 <= x <= 1; the slope is infinite at the ends",
    reads=("x",),
)


arccos = unary(
    "arccos",
    float_or_array(math.acos, np.arccos),
    lambda g, ans, x: (divide(-g, _one_minus_square_root(x)),),
    "-{g} / sqrt(1 - {x}**2)",
    r"\bar x = -\bar y / \sqrt{1 - x^2}",
    domain="unit",
    note="defined for -1 <= x <= 1; the slope is infinite at the ends",
    reads=("x",),
)


def _over_one_plus_square(g: Value, x: Value) -> Value:
    # For |x| > 1e154, x² overflows to inf and g / inf = 0: the right slope, not worth a warning.
    if x.__class__ is float:
        return g / (1.0 + x * x)  # a float product overflows to inf silently
    with np.errstate(over="ignore"):
        return g / (1.0 + x * x)


arctan = unary(
    "arctan",
    float_or_array(math.atan, np.arctan),
    lambda g, ans, x: (_over_one_plus_square(g, x),),
    "{g} / (1 + {x}**2)",
    r"\bar x = \bar y / (1 + x^2)",
    reads=("x",),
)


sinh = unary(
    "sinh",
    float_or_array(math.sinh, np.sinh),
    lambda g, ans, x: (g * cosh.bind(x),),
    "{g} * cosh({x})",
    r"\bar x = \bar y \cosh x",
    reads=("x",),
)


cosh: Op = unary(
    "cosh",
    float_or_array(math.cosh, np.cosh),
    lambda g, ans, x: (g * sinh.bind(x),),
    "{g} * sinh({x})",
    r"\bar x = \bar y \sinh x",
    reads=("x",),
)


# ---------------------------------------------------------------- the inverse hyperbolic functions


def _arcsinh_vjp(g: Value, ans: Value, x: Value) -> Grads:
    # asinh' = 1 / √(1 + x²); for |x| > 1e154, x² overflows to inf and the slope is 0: right, and silent.
    if x.__class__ is float:
        return (g / math.sqrt(1.0 + x * x),)
    with np.errstate(over="ignore"):
        return (g / sqrt.bind(1.0 + x * x),)


arcsinh = unary(
    "arcsinh",
    float_or_array(math.asinh, np.arcsinh),
    _arcsinh_vjp,
    "{g} / sqrt(1 + {x}**2)",
    r"\bar x = \bar y / \sqrt{1 + x^2}",
    reads=("x",),
)


def _acosh(x: float) -> float:
    return math.acosh(x) if x >= 1.0 or x != x else math.nan  # NaN below 1, as numpy (math raises)


arccosh = unary(
    "arccosh",
    float_or_array(_acosh, np.arccosh),
    # acosh' = 1 / √(x² − 1), written (x − 1)(x + 1) so no digits are lost near 1; infinite at 1.
    lambda g, ans, x: (divide(g, sqrt.bind((x - 1.0) * (x + 1.0))),),
    "{g} / sqrt({x}**2 - 1)",
    r"\bar x = \bar y / \sqrt{x^2 - 1}",
    domain="above_one",
    note="defined for x >= 1; the slope is infinite at 1",
    reads=("x",),
)


def _atanh(x: float) -> float:
    if x == 1.0 or x == -1.0:
        return math.copysign(math.inf, x)  # numpy's value (math raises)
    return math.atanh(x) if -1.0 < x < 1.0 else math.nan


arctanh = unary(
    "arctanh",
    float_or_array(_atanh, np.arctanh),
    # atanh' = 1 / (1 − x²), written (1 − x)(1 + x); infinite at ±1.
    lambda g, ans, x: (divide(g, (1.0 - x) * (1.0 + x)),),
    "{g} / (1 - {x}**2)",
    r"\bar x = \bar y / (1 - x^2)",
    domain="unit",
    note="defined for -1 <= x <= 1 (±inf at the ends); the slope is infinite at ±1",
    reads=("x",),
)
