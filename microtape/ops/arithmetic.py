"""Arithmetic: add, sub, mul, div, neg, scale, a constant added (a mask), dropout, maximum, minimum.

Each op: its forward, its VJP (one gradient per input, summed back to the
input's shape by :func:`~.broadcasting.unbroadcast`; for add, sub, mul and
div the elementwise derivative, wrapped by :func:`~.broadcasting.unbroadcasting`),
its JVP, and one formula per input. The VJPs use only operators and :func:`unbroadcast`, so on
Scalars and Tensors they record (``create_graph=True``); the JVPs add the
tangents' contributions, one per input, from the same partial derivatives.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.protocols import Value
from .broadcasting import linear_jvp, sum_of, unbroadcast, unbroadcasting
from .core import Grads, Op, primitive, value_of

__all__ = ["add", "sub", "mul", "div", "neg", "scale", "add_constant", "dropout", "maximum", "minimum"]


def _add_vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
    return g, g


add = primitive(
    "add",
    operator.add,  # a + b (the C function: a Scalar op pays for every Python call)
    unbroadcasting(_add_vjp),
    ["{g}", "{g}"],
    [r"\bar a = \bar y", r"\bar b = \bar y"],
    jvp=linear_jvp(lambda a, b: a + b),
    reads=(),
)


def _sub_vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
    return g, -g


sub = primitive(
    "sub",
    operator.sub,  # a - b
    unbroadcasting(_sub_vjp),
    ["{g}", "-{g}"],
    [r"\bar a = \bar y", r"\bar b = -\bar y"],
    jvp=linear_jvp(lambda a, b: a - b),
    reads=(),
)


def _mul_vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
    return g * b, g * a


def _mul_jvp(tangents: Sequence[Value | None], ans: Value, a: Value, b: Value) -> Value:
    ta, tb = tangents
    return sum_of(None if ta is None else ta * b, None if tb is None else a * tb)


mul = primitive(
    "mul",
    operator.mul,  # a * b
    unbroadcasting(_mul_vjp),
    ["{g} * {b}", "{g} * {a}"],
    [r"\bar a = \bar y\, b", r"\bar b = \bar y\, a"],
    jvp=_mul_jvp,
    reads=("a", "b"),
)


def _div_vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
    grad_a = g / b
    return grad_a, -grad_a * ans


def _div_jvp(tangents: Sequence[Value | None], ans: Value, a: Value, b: Value) -> Value:
    # d(a/b) = da / b − db · (a/b) / b
    ta, tb = tangents
    return sum_of(None if ta is None else ta / b, None if tb is None else -tb * ans / b)


div = primitive(
    "div",
    operator.truediv,  # a / b
    unbroadcasting(_div_vjp),
    ["{g} / {b}", "-{g} * {a} / {b}**2"],
    [r"\bar a = \bar y / b", r"\bar b = -\bar y\, a / b^2"],
    jvp=_div_jvp,
    reads=("b", "y"),
)


def _add_constant_vjp(g: Value, ans: Value, x: Value, constant: Value) -> Grads:
    # The constant (a mask) receives no gradient: it is data, not a parameter.
    return unbroadcast(g, x), None


add_constant = primitive(
    "add_constant",
    lambda x, constant: x + constant,
    _add_constant_vjp,
    ["{g}", None],
    [r"\bar x = \bar y", None],
    inputs=("x", "constant"),
    jvp=lambda tangents, ans, x, constant: tangents[0],
    reads=(),
)


def _scale_vjp(g: Value, ans: Value, x: Value, factor: float) -> Grads:
    return (g * factor,)


def _number_text(value: Value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


scale = primitive(
    "scale",
    lambda x, factor: x * factor,
    _scale_vjp,
    ["{g} * {factor}"],
    [r"\bar x = c\,\bar y"],
    example_params={"factor": 0.5},
    label=lambda params: f"×{_number_text(params.get('factor', '?'))}",
    jvp=lambda tangents, ans, x, factor: tangents[0] * factor,
    reads=(),
)


neg = primitive(
    "neg",
    operator.neg,  # -x
    lambda g, ans, x: (-g,),
    ["-{g}"],
    [r"\bar x = -\bar y"],
    jvp=lambda tangents, ans, x: -tangents[0],
    reads=(),
)


def _dropout_vjp(g: Value, ans: Value, x: Value, keep: Value) -> Grads:
    # The mask is a constant input (so graphs can draw it), not a parameter.
    return g * keep, None


dropout = primitive(
    "dropout",
    # `keep` is the saved mask already scaled by 1/(1-p) ("inverted" dropout),
    # so the forward and the backward are the same multiplication.
    lambda x, keep: x * keep,
    _dropout_vjp,
    ["{g} * {keep}", None],
    [r"\bar x = \bar y \odot \mathrm{keep}", None],
    inputs=("x", "keep"),
    note="keep = 1/(1-p) where kept, 0 where dropped",
    jvp=lambda tangents, ans, x, keep: tangents[0] * keep,
    reads=("keep",),
)


# ---------------------------------------------------------------- maximum and minimum


def _winner_share(wins: Value, ties: Value, g: Value) -> Value:
    """1 where an operand won, 1/2 where it tied, 0 where it lost — in ``g``'s dtype (a float for Scalars)."""
    share = wins + 0.5 * ties
    if isinstance(share, np.ndarray):
        return share.astype(np.result_type(value_of(g)), copy=False)
    return float(share)


def _share_of_a(a: Value, b: Value, g: Value, a_wins: Value) -> Value:
    """The part of the gradient that goes to ``a``: where it wins, and half of each tie.

    Read from the values (a constant of the derivative): the gradient goes to
    the larger (maximum) or smaller (minimum) operand, a tie shares it
    equally, as max's does (and the central difference agrees).
    """
    a, b = value_of(a), value_of(b)
    return _winner_share(a > b if a_wins == "larger" else a < b, a == b, g)


def _pick_vjp(winner: str) -> Callable[..., Grads]:
    def vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
        share_a = _share_of_a(a, b, g, winner)
        return g * share_a, g * (1.0 - share_a)

    return unbroadcasting(vjp)


def _pick_jvp(winner: str) -> Callable[..., Value]:
    def jvp(tangents: Sequence[Value | None], ans: Value, a: Value, b: Value) -> Value:
        ta, tb = tangents
        share_a = _share_of_a(a, b, ans, winner)
        return sum_of(None if ta is None else ta * share_a, None if tb is None else tb * (1.0 - share_a))

    return jvp


def _pick(name: str, forward: Callable[..., Any], winner: str, sign: str) -> Op:
    """maximum or minimum: the gradient goes to the ``winner`` ("larger" or "smaller") operand."""
    return primitive(
        name,
        forward,
        _pick_vjp(winner),
        [f"{{g}} where {{a}} {sign} {{b}} (half at a tie)", f"{{g}} where {{b}} {sign} {{a}} (half at a tie)"],
        [rf"\bar a = \bar y\,[a {sign} b]", rf"\bar b = \bar y\,[b {sign} a]"],
        jvp=_pick_jvp(winner),
        reads=("a", "b"),
    )


maximum = _pick("maximum", np.maximum, "larger", ">")
minimum = _pick("minimum", np.minimum, "smaller", "<")
