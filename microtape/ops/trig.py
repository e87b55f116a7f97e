"""Trigonometric and hyperbolic functions: sin, cos, tan, arcsin, arccos, arctan, sinh, cosh.

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

import numpy as np

from ..engine.protocols import Value
from .core import Op
from .elementwise import float_or_array, sqrt, unary

__all__ = ["sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "divide"]


def divide(g: Value, denominator: Value) -> Value:
    """``g / denominator``, infinite (not an error) where the denominator is 0: numpy's and PyTorch's answer.

    A Python float divided by 0.0 raises ZeroDivisionError; an array warns.
    Both say here what the mathematics says: the slope is infinite there.
    """
    if denominator.__class__ is float and denominator == 0.0:
        return g * math.inf if g != 0.0 else math.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        return g / denominator


sin = unary(
    "sin",
    float_or_array(math.sin, np.sin),
    lambda g, ans, x: (g * cos.bind(x),),
    "{g} * cos({x})",
    r"\bar x = \bar y \cos x",
    reads=("x",),
)


cos: Op = unary(
    "cos",
    float_or_array(math.cos, np.cos),
    lambda g, ans, x: (-g * sin.bind(x),),
    "-{g} * sin({x})",
    r"\bar x = -\bar y \sin x",
    reads=("x",),
)


tan = unary(
    "tan",
    float_or_array(math.tan, np.tan),
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


arctan = unary(
    "arctan",
    float_or_array(math.atan, np.arctan),
    lambda g, ans, x: (g / (1.0 + x * x),),
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
