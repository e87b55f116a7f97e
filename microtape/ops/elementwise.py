"""Elementwise functions of one input: pow, exp, log, tanh, relu, sqrt, abs, sigmoid, gelu.

Each op's Jacobian is diagonal (output ``i`` depends on input ``i`` only), so
one derivative serves both modes: the VJP is ``g * f'(x)`` and the JVP is the
same function applied to the tangent, ``t * f'(x)`` (:func:`diagonal_jvp`).
The VJPs use operators and :meth:`~.core.Op.bind` only: on floats and arrays
they compute, on Scalars and Tensors they record (``create_graph=True``).
Python floats take the math module's path: for one number it is ~20x faster
than a numpy ufunc, and the scalar engine lives or dies by per-op cost.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine import Node
from ..engine.protocols import Value
from .core import Grads, Op, primitive, value_of

__all__ = [
    "pow_", "exp", "log", "tanh", "relu", "sqrt", "abs_", "sigmoid", "gelu", "GELU_C", "GELU_K",
    "diagonal_jvp", "float_or_array", "unary", "no_second_derivative", "divide",
]  # fmt: skip


def diagonal_jvp(vjp: Callable[..., Any]) -> Callable[..., Value]:
    """The JVP of an elementwise op from its VJP: a diagonal Jacobian is its own transpose."""

    def jvp(tangents: Sequence[Value | None], ans: Value, x: Value, **params: Any) -> Value:
        return vjp(tangents[0], ans, x, **params)[0]

    return jvp


def float_or_array(scalar_fn: Callable[..., Any], array_fn: Callable[..., Any]) -> Callable[[Value], Value]:
    """One forward for both engines: the math module's function for a float, numpy's for an array."""

    def fn(x: Value) -> Value:
        return scalar_fn(x) if x.__class__ is float else array_fn(x)

    fn.__name__ = array_fn.__name__
    return fn


def unary(name: str, forward: Callable[..., Any], vjp: Callable[..., Any], grad: str, latex: str, **fields: Any) -> Op:
    """Register an elementwise op of one input: one formula, and the JVP from the VJP (a diagonal Jacobian)."""
    return primitive(name, forward, vjp, [grad], [latex], jvp=diagonal_jvp(vjp), **fields)


def _pow_vjp(g: Value, ans: Value, x: Value, exponent: float) -> Grads:
    if exponent == 0:
        # x**0 is the constant 1 (also at x = 0, where x**-1 would give 0 * inf).
        return (g * 0.0 if g.__class__ is not np.ndarray else np.zeros_like(g * x),)
    if x.__class__ is float and x == 0.0 and exponent < 1:
        # d/dx x**p at 0 for p < 1 is infinite (Python floats raise instead of saying so).
        return (g * exponent * math.inf,)
    # The same infinity for arrays holding a 0, and for a recorded pass (create_graph=True):
    # ``bind`` records the op itself, where ``Tensor ** p`` would refuse a negative power of 0.
    with np.errstate(divide="ignore", invalid="ignore"):
        return (g * exponent * pow_.bind(x, exponent - 1),)


def _pow_forward(x: Value, exponent: float) -> Value:
    if x.__class__ is float and x == 0.0 and exponent < 0:
        # numpy's value, ±inf (Python floats raise ZeroDivisionError): reached by a
        # derivative at 0, such as d/dx x**0.5 = 0.5 x**-0.5 in a recorded pass.
        odd = float(exponent).is_integer() and int(exponent) % 2 == 1
        return math.copysign(math.inf, x) if odd else math.inf
    return x**exponent


def divide(g: Value, denominator: Value) -> Value:
    """``g / denominator``, infinite (not an error) where the denominator is 0: numpy's and PyTorch's answer.

    A Python float divided by 0.0 raises ZeroDivisionError, an array warns,
    and a Scalar or Tensor divided by a 0 refuses: here all three say what
    the mathematics says, the slope is infinite there (NaN for 0 / 0). A
    recorded denominator holding a 0 (``create_graph=True``) is inverted
    with ``pow``, whose derivative at 0 is infinite too.
    """
    if denominator.__class__ is float:
        if denominator == 0.0:
            return g * math.inf if g != 0.0 else math.nan
        return g / denominator
    with np.errstate(divide="ignore", invalid="ignore"):
        if isinstance(denominator, Node) and np.any(value_of(denominator) == 0):
            return g * pow_.bind(denominator, -1.0)
        return g / denominator


def no_second_derivative(zero: Value) -> Value:
    """A recorded 0 whose derivative is NaN where the tape value ``zero`` (>= 0) is 0: no derivative there.

    A VJP that picks a finite first derivative at a kink (the norm's 0 at the
    origin, PyTorch's choice) adds this term in a recorded pass, so the second
    derivative at the kink is NaN — as PyTorch gives — not the derivative of
    the branch the first one happened to take. The value is √zero · 0 = 0
    exactly; its slope 0 · 1/(2√zero) is 0 where ``zero`` > 0 and NaN at 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return pow_.bind(zero, 0.5) * 0.0


_SUPERSCRIPTS = str.maketrans("0123456789-.", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻·")


def _pow_label(params: dict[str, Any]) -> str:
    exponent = params.get("exponent")
    if isinstance(exponent, numbers.Real) and float(exponent).is_integer() and abs(float(exponent)) < 100:
        return str(int(float(exponent))).translate(_SUPERSCRIPTS)
    return f"^{exponent:g}" if isinstance(exponent, numbers.Real) else f"^{exponent}"


pow_ = unary(
    "pow",
    _pow_forward,
    _pow_vjp,
    "{g} * {exponent} * {x}**({exponent}-1)",
    r"\bar x = \bar y\, p\, x^{p-1}",
    domain="positive",
    example_params={"exponent": 1.5},
    label=_pow_label,
    reads=("x",),
)


exp = unary(
    "exp",
    float_or_array(math.exp, np.exp),
    lambda g, ans, x: (g * ans,),
    "{g} * exp({x})",
    r"\bar x = \bar y\, e^{x}",
    reads=("y",),
)


log = unary(
    "log",
    float_or_array(math.log, np.log),
    lambda g, ans, x: (g / x,),
    "{g} / {x}",
    r"\bar x = \bar y / x",
    domain="positive",
    reads=("x",),
)


tanh = unary(
    "tanh",
    float_or_array(math.tanh, np.tanh),
    lambda g, ans, x: (g * (1.0 - ans * ans),),
    "{g} * (1 - tanh({x})**2)",
    r"\bar x = \bar y\,(1 - \tanh^2 x)",
    reads=("y",),
)


def _relu_forward(x: Value) -> Value:
    if x.__class__ is float:
        return 0.0 if x <= 0.0 else x  # NaN stays NaN (as np.maximum): NaN <= 0 is False
    return np.maximum(x, 0)


def _relu_vjp(g: Value, ans: Value, x: Value) -> Grads:
    if x.__class__ is float:
        return (g if x > 0.0 else g * 0.0,)
    if g.__class__ is np.ndarray:
        return (g * (x > 0),)
    # Recorded: the step [x > 0] is a constant of the derivative, read from the values.
    return (g * np.greater(value_of(x), 0).astype(np.result_type(value_of(g))),)


relu = unary(
    "relu",
    _relu_forward,
    _relu_vjp,
    "{g} * ({x} > 0)",
    r"\bar x = \bar y\,[x > 0]",
    reads=("x",),
)


def _sqrt_vjp(g: Value, ans: Value, x: Value) -> Grads:
    # d√x/dx = 1 / (2√x): infinite at 0, said so rather than warned about (or raised, for a float).
    return (divide(0.5 * g, ans),)


sqrt = unary(
    "sqrt",
    np.sqrt,
    _sqrt_vjp,
    "{g} / (2 * sqrt({x}))",
    r"\bar x = \bar y / (2\sqrt{x})",
    domain="positive",
    reads=("y",),
)


abs_ = unary(
    "abs",
    np.abs,
    # sign(0) = 0: at the kink no gradient passes (PyTorch's convention too).
    lambda g, ans, x: (g * np.sign(value_of(x)),),
    "{g} * sign({x})",
    r"\bar x = \bar y\, \mathrm{sign}(x)",
    reads=("x",),
)


def _sigmoid_forward(x: Value) -> Value:
    # 1 / (1 + e^-x) overflows for very negative x; with e = exp(-|x|) (never
    # more than 1) both branches are safe: 1/(1+e) for x >= 0, e/(1+e) below.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))[()]  # [()]: a float stays a number


sigmoid = unary(
    "sigmoid",
    _sigmoid_forward,
    lambda g, ans, x: (g * ans * (1.0 - ans),),
    "{g} * s * (1 - s),  s = sigmoid({x})",
    r"\bar x = \bar y\, \sigma(x)\,(1 - \sigma(x))",
    reads=("y",),
)


#: GELU's tanh approximation (Hendrycks & Gimpel; PyTorch's ``approximate="tanh"``):
#: gelu(x) = x/2 · (1 + tanh(c (x + k x³))),  c = √(2/π),  k = 0.044715.
GELU_C = math.sqrt(2.0 / math.pi)
GELU_K = 0.044715
# Beyond |x| = 20, tanh(c (x + k x³)) is exactly ±1 in float64 (and float32):
# the cube is taken of x clipped there, so it cannot overflow (x³ does above
# ~5.6e102) and the numbers inside the range are unchanged.
_GELU_SATURATED = 20.0


def _saturating(x: Value) -> Value:
    """``x`` clipped to ±20, where tanh(c (x + k x³)) is already exactly ±1: its cube cannot overflow.

    (On Scalars and Tensors — a recorded pass — ``x`` is used as it is.)
    """
    return x if isinstance(x, Node) else np.clip(x, -_GELU_SATURATED, _GELU_SATURATED)


def _gelu_forward(x: Value) -> Value:
    inner = _saturating(x)
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (inner + GELU_K * inner * inner * inner)))


def _gelu_vjp(g: Value, ans: Value, x: Value) -> Grads:
    # Product rule on x/2 · (1 + t), t = tanh(u), u = c (x + k x³):
    #   d/dx = (1 + t)/2 + x/2 · (1 − t²) · c (1 + 3k x²)
    # (past the clip 1 − t² is exactly 0, so the clipped x changes nothing there)
    x = _saturating(x)
    t = tanh.bind(GELU_C * (x + GELU_K * x * x * x))
    slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_K * x * x)
    return (g * slope,)


gelu = unary(
    "gelu",
    _gelu_forward,
    _gelu_vjp,
    "{g} * ((1 + t)/2 + {x}/2 * (1 - t**2) * c * (1 + 3k {x}**2)),  t = tanh(c ({x} + k {x}**3))",
    r"\bar x = \bar y \left(\tfrac{1 + t}{2} + \tfrac{x}{2}(1 - t^2)\, c\,(1 + 3k x^2)\right)",
    note="tanh approximation: c = sqrt(2/pi), k = 0.044715",
    reads=("x",),
)
