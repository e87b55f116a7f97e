"""Elementwise functions of two inputs: logaddexp, arctan2 and power (a tensor exponent).

Each op says its two partial derivatives once (``partials(ans, a, b)``, the
slopes ∂y/∂a and ∂y/∂b at every entry, before any broadcasting is undone);
:func:`elementwise_pair` turns them into both modes: the VJP multiplies ``g``
by each slope and sums it back to its input's shape (:func:`unbroadcasting`),
the JVP adds ``tangent * slope`` over the inputs. The slopes are written with
operators and ops, so they record on Scalars and Tensors (second order).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.protocols import Value
from .broadcasting import sum_of, unbroadcasting
from .core import Grads, Op, primitive, value_of
from .elementwise import exp, log, no_second_derivative
from .exp_log import exp2

__all__ = ["logaddexp", "logaddexp2", "arctan2", "power", "elementwise_pair"]


def elementwise_pair(
    name: str,
    forward: Callable[..., Any],
    partials: Callable[..., Any],
    grads: Sequence[str],
    latex: Sequence[str],
    **fields: Any,
) -> Op:
    """Register a two-input elementwise op from its forward and its ``partials(ans, a, b)``."""

    def vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
        slope_a, slope_b = partials(ans, a, b)
        return g * slope_a, g * slope_b

    def jvp(tangents: Sequence[Value | None], ans: Value, a: Value, b: Value) -> Value:
        slopes = partials(ans, a, b)
        return sum_of(*(None if t is None else t * slope for t, slope in zip(tangents, slopes)))

    return primitive(name, forward, unbroadcasting(vjp), grads, latex, jvp=jvp, **fields)


def _as_constant(condition: Value, like: Value) -> Value:
    """A boolean test of the values as 0/1 numbers in ``like``'s dtype (a float for a Python float)."""
    if isinstance(condition, np.ndarray):
        return condition.astype(np.result_type(value_of(like)))
    return float(condition)


def _nan_where(condition: Value, like: Value) -> Value:
    """NaN where ``condition`` holds, 0 elsewhere: a constant that marks undefined slopes."""
    if isinstance(condition, np.ndarray):
        return np.where(condition, np.nan, 0.0).astype(np.result_type(value_of(like)))
    return math.nan if condition else 0.0


# ---------------------------------------------------------------- logaddexp


def _logaddexp_float(a: Value, b: Value) -> float:
    if a == b:  # also ±inf twice, where a − b would be NaN
        return a + math.log(2.0)
    top = max(a, b)
    return top + math.log1p(math.exp(-abs(a - b)))


def _logaddexp_forward(a: Value, b: Value) -> Value:
    if a.__class__ is float and b.__class__ is float:
        return _logaddexp_float(a, b)
    return np.logaddexp(a, b)


def _logaddexp_partials(ans: Value, a: Value, b: Value) -> Grads:
    # At a = b = -inf, a − y is -inf − (-inf): NaN, as PyTorch gives, without numpy's warning.
    with np.errstate(invalid="ignore"):
        return exp.bind(a - ans), exp.bind(b - ans)


logaddexp = elementwise_pair(
    "logaddexp",
    _logaddexp_forward,
    # y = log(e^a + e^b): ∂y/∂a = e^a / (e^a + e^b) = exp(a − y), and the same for b.
    _logaddexp_partials,
    ["{g} * exp({a} - {y})", "{g} * exp({b} - {y})"],
    [r"\bar a = \bar y\, e^{a - y}", r"\bar b = \bar y\, e^{b - y}"],
    note="y = log(exp(a) + exp(b)), computed without overflow",
    reads=("a", "b", "y"),
)


# ---------------------------------------------------------------- logaddexp2


def _logaddexp2_float(a: Value, b: Value) -> float:
    if a == b:  # also ±inf twice
        return a + 1.0
    top = max(a, b)
    return top + math.log1p(2.0 ** -abs(a - b)) / math.log(2.0)


def _logaddexp2_forward(a: Value, b: Value) -> Value:
    if a.__class__ is float and b.__class__ is float:
        return _logaddexp2_float(a, b)
    return np.logaddexp2(a, b)


def _logaddexp2_partials(ans: Value, a: Value, b: Value) -> Grads:
    # y = log₂(2^a + 2^b): ∂y/∂a = 2^a / (2^a + 2^b) = 2^(a − y), and the same for b (NaN at a = b = -inf).
    with np.errstate(invalid="ignore"):
        return exp2.bind(a - ans), exp2.bind(b - ans)


logaddexp2 = elementwise_pair(
    "logaddexp2",
    _logaddexp2_forward,
    _logaddexp2_partials,
    ["{g} * 2**({a} - {y})", "{g} * 2**({b} - {y})"],
    [r"\bar a = \bar y\, 2^{a - y}", r"\bar b = \bar y\, 2^{b - y}"],
    note="y = log2(2**a + 2**b), computed without overflow",
    reads=("a", "b", "y"),
)


# ---------------------------------------------------------------- arctan2


def _arctan2_partials(ans: Value, a: Value, b: Value) -> Grads:
    """y = atan2(a, b), the angle of the point (b, a): ∂y/∂a = b / r², ∂y/∂b = −a / r².

    At the origin r² = 0 and both are 0 / 0; PyTorch's slopes there are 0 and −0,
    given here by taking r² as 1 at the origin (a constant of the derivative).
    No second derivative exists there: a recorded pass marks it NaN.
    """
    a_value, b_value = value_of(a), value_of(b)
    origin = (a_value == 0) & (b_value == 0)
    radius_squared = a * a + b * b
    if np.any(origin):
        safe = radius_squared + _as_constant(origin, ans)
        slope_a, slope_b = b / safe, -a / safe
        if a is not a_value or b is not b_value:
            undefined = no_second_derivative(radius_squared)
            slope_a, slope_b = slope_a + undefined, slope_b + undefined
        return slope_a, slope_b
    return b / radius_squared, -a / radius_squared


arctan2 = elementwise_pair(
    "arctan2",
    lambda a, b: math.atan2(a, b) if a.__class__ is float and b.__class__ is float else np.arctan2(a, b),
    _arctan2_partials,
    ["{g} * {b} / ({a}**2 + {b}**2)", "-{g} * {a} / ({a}**2 + {b}**2)"],
    [r"\bar a = \bar y\, b / (a^2 + b^2)", r"\bar b = -\bar y\, a / (a^2 + b^2)"],
    note="y = atan2(a, b): the angle of the point (b, a)",
    reads=("a", "b"),
)


# ---------------------------------------------------------------- power: a ** b, both differentiable


def _power_forward(a: Value, b: Value) -> Value:
    # numpy's power also for two floats (0.0 ** -1 gives inf there instead of raising).
    result = np.power(a, b)
    return float(result) if a.__class__ is float and b.__class__ is float else result


def _power_partials(ans: Value, a: Value, b: Value) -> Grads:
    """∂(aᵇ)/∂a = b·aᵇ⁻¹ and ∂(aᵇ)/∂b = aᵇ·ln a, with PyTorch's values where those are 0·∞.

    Where b = 0 the slope in a is 0 (a⁰ is the constant 1, even at a = 0).
    Where a = 0 the slope in b is 0 (PyTorch's convention: 0ᵇ is 0 for b > 0
    and 1 at b = 0 — flat in b from the right), and where a < 0 it is NaN
    (ln of a negative number). Those positions are read from the values and
    steered with constants, so the formula stays the same program everywhere.
    """
    a_value, b_value = value_of(a), value_of(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        # 0 * 0**-1 would be NaN where a = b = 0: there the base is taken as 1 (b = 0 makes the slope 0).
        base = a + _as_constant((a_value == 0) & (b_value == 0), ans)
        slope_a = b * power.bind(base, b - 1.0)
        # ln a where a > 0; ln 1 = 0 where a <= 0, then NaN added where a < 0.
        positive_base = a + _as_constant(a_value <= 0, ans) * (1.0 - a_value)
        slope_b = ans * log.bind(positive_base)
        if np.any(a_value < 0):
            slope_b = slope_b + _nan_where(a_value < 0, ans)
    if a is not a_value and np.any((a_value == 0) & (b_value == 0)):
        # Recorded (create_graph=True) at 0⁰: aᵇ is not even continuous there, so the slopes
        # chosen above have no derivative (PyTorch: NaN); a zero with a NaN slope says so.
        undefined = no_second_derivative(a * a + b * b)
        slope_a, slope_b = slope_a + undefined, slope_b + undefined
    return slope_a, slope_b


power = elementwise_pair(
    "power",
    _power_forward,
    _power_partials,
    ["{g} * {b} * {a}**({b} - 1)", "{g} * {a}**{b} * ln({a})"],
    [r"\bar a = \bar y\, b\, a^{b-1}", r"\bar b = \bar y\, a^{b} \ln a"],
    domain="positive",
    note="d/db is NaN where a < 0 and 0 where a = 0 (as in PyTorch)",
    reads=("a", "b", "y"),
)
