"""More exponentials, logarithms and powers: log1p, expm1, log2, log10, exp2, cbrt, square, reciprocal.

``log1p(x) = log(1 + x)`` and ``expm1(x) = e^x − 1`` exist for the numerics
lesson: near 0 they keep the digits that ``log(1 + x)`` and ``exp(x) − 1``
lose. Each op is elementwise (VJP ``g * f'(x)``, JVP from it), its
derivative written with operators and ops so it records on Tensors.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.protocols import Value
from .core import Grads
from .elementwise import float_or_array, pow_, unary

__all__ = ["log1p", "expm1", "log2", "log10", "exp2", "cbrt", "square", "reciprocal"]

LN2 = math.log(2.0)
LN10 = math.log(10.0)


log1p = unary(
    "log1p",
    float_or_array(math.log1p, np.log1p),
    lambda g, ans, x: (g / (1.0 + x),),
    "{g} / (1 + {x})",
    r"\bar x = \bar y / (1 + x)",
    domain="positive",
    note="defined for x > -1",
    reads=("x",),
)


expm1 = unary(
    "expm1",
    float_or_array(math.expm1, np.expm1),
    # (e^x − 1)' = e^x = expm1(x) + 1: the output gives it.
    lambda g, ans, x: (g * (ans + 1.0),),
    "{g} * exp({x})",
    r"\bar x = \bar y\, e^{x}",
    reads=("y",),
)


log2 = unary(
    "log2",
    float_or_array(math.log2, np.log2),
    lambda g, ans, x: (g / (x * LN2),),
    "{g} / ({x} * ln(2))",
    r"\bar x = \bar y / (x \ln 2)",
    domain="positive",
    reads=("x",),
)


log10 = unary(
    "log10",
    float_or_array(math.log10, np.log10),
    lambda g, ans, x: (g / (x * LN10),),
    "{g} / ({x} * ln(10))",
    r"\bar x = \bar y / (x \ln 10)",
    domain="positive",
    reads=("x",),
)


exp2 = unary(
    "exp2",
    float_or_array(lambda x: 2.0**x, np.exp2),
    lambda g, ans, x: (g * ans * LN2,),
    "{g} * 2**{x} * ln(2)",
    r"\bar x = \bar y\, 2^{x} \ln 2",
    reads=("y",),
)


def _cbrt_vjp(g: Value, ans: Value, x: Value) -> Grads:
    # (x^(1/3))' = 1 / (3 x^(2/3)) = cbrt(x)⁻² / 3: infinite at 0, as in PyTorch. One power of the
    # output, so a recorded pass differentiates it as one: (cbrt⁻²)' · cbrt' = −2/9 · cbrt(x)⁻⁵, which
    # is −inf at 0 (PyTorch's second derivative), where 1 / (3·y·y) would give −inf · 0 = NaN.
    with np.errstate(divide="ignore"):
        return (g * pow_.bind(ans, -2.0) * (1.0 / 3.0),)


cbrt = unary(
    "cbrt",
    # The real cube root (negative for negative x), not x ** (1/3), which is complex there.
    float_or_array(lambda x: float(np.cbrt(x)), np.cbrt),
    _cbrt_vjp,
    "{g} / (3 * cbrt({x})**2)",
    r"\bar x = \bar y / (3 \sqrt[3]{x}^{2})",
    reads=("y",),
)


square = unary(
    "square",
    lambda x: x * x,
    lambda g, ans, x: (g * 2.0 * x,),
    "{g} * 2 * {x}",
    r"\bar x = 2 \bar y\, x",
    reads=("x",),
)


reciprocal = unary(
    "reciprocal",
    lambda x: 1.0 / x,
    # (1/x)' = −1/x² = −(1/x)²: the output squared.
    lambda g, ans, x: (-g * ans * ans,),
    "-{g} / {x}**2",
    r"\bar x = -\bar y / x^2",
    reads=("y",),
)
