"""Scalar: one float that records its arithmetic (the micrograd-sized lesson).

This module lets you differentiate expressions of single numbers::

    >>> import microtape as mt
    >>> a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    >>> y = (a * b + a ** 2).tanh()
    >>> y.backward()
    >>> round(a.grad, 6), round(b.grad, 6)
    (0.070651, 0.141302)

Every operator runs a primitive from :mod:`microtape.ops` and records it,
so a Scalar computation lands on the same kind of tape as a Tensor one and
is differentiated by the same ops' VJPs. ``a * b`` and ``y.backward()`` take
the float fast path (:mod:`microtape.engine.fast_scalar`), which a test proves
gives the reference path's gradients bit for bit.

Comparisons (``a < b``, ``a == b``) compare values and give plain bools: they
are not differentiable, so they are not recorded (as in numpy and PyTorch).
Scalars still hash by identity, so they work as dictionary keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ops.core import Op


import math
import numbers

from .. import ops
from ..engine import Node, backward_pass, record
from ..engine.fast_scalar import backward as fast_backward
from ..engine.fast_scalar import float_operator, record_floats
from .elementwise import SharedElementwise

__all__ = ["Scalar"]


def _number(value: Any, what: str) -> float:
    if value.__class__ is float:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what}: expected a real number, got {type(value).__name__} {value!r:.60}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{what}: {value!r:.60} is too large for a float (about 1.8e308 at most)") from None


def _lift(value: Any) -> Any:
    """Use a Scalar as it is; wrap a plain number as a constant (it needs no gradient)."""
    if value.__class__ is Scalar or isinstance(value, Scalar):
        return value
    constant = object.__new__(Scalar)
    if value.__class__ is not float:
        value = _number(value, "Scalar arithmetic")
    constant._init_leaf(value, False, None)
    return constant


# The arithmetic operators are their ops' float_operators, made here once (``a * b`` is one call;
# they stay bound to these ops). The other methods look their op up when called, through
# record_floats, so a lesson that swaps ``microtape.ops.tanh`` for a broken one reaches Scalars too.
_ADD, _SUB, _MUL, _DIV = (float_operator(op) for op in (ops.add, ops.sub, ops.mul, ops.div))


class Scalar(SharedElementwise, Node):
    """A float on the tape. ``.data`` is the value, ``.grad`` its gradient.

    The arithmetic is written out here; trigonometry, more logs and the
    two-input functions come from :class:`~.elementwise.SharedElementwise`
    (the same methods a Tensor has), through the hooks ``_unary``, ``_with``,
    ``_refuse`` and ``_refuse_overflow`` below.
    """

    __slots__ = ()
    _output_data = float

    def __init__(self, value: Any, name: str | None = None) -> None:
        if isinstance(value, Scalar):
            value = value.data
        self._init_leaf(_number(value, "Scalar(value)"), True, name)

    @classmethod
    def _constant(cls, value: Any, like: Any = None) -> Scalar:
        """A number used inside an expression (``2 * a``): it needs no gradient."""
        return _lift(value)

    def __repr__(self) -> str:
        label = f"{self.name}=" if self.name else ""
        grad = "" if self.grad is None else f", grad={_number_text(self.grad)}"
        return f"Scalar({label}{self.data:.6g}{grad})"

    def __float__(self) -> float:
        return self.data

    def backward(self, grad: Any = None, *, create_graph: bool = False) -> None:
        """Backpropagate from this Scalar and *add* the gradients into ``.grad``.

        ``grad`` is the gradient of some final quantity with respect to this
        Scalar (default 1.0: "dy/dy = 1"). Works with or without an active
        Tape (the graph is found by following ``inputs``); leaves accumulate
        (``+=``) across calls. The first-order pass runs
        :func:`microtape.engine.fast_scalar.backward`: the reference pass's
        gradients (:func:`microtape.engine.reverse.backward_pass`) bit for
        bit, with fewer Python calls. ``create_graph=True`` takes the
        reference pass: each ``.grad`` is then a Scalar you can differentiate again.
        """
        if create_graph is False:
            fast_backward(self, grad)
        else:
            backward_pass(self, grad, create_graph)

    # Comparisons look at values and are not recorded (no gradient flows through
    # them); hashing stays by identity, so Scalars remain dictionary keys.
    __hash__ = Node.__hash__

    def __eq__(self, other: Any) -> Any:
        if not isinstance(other, (Scalar, numbers.Real)):
            return NotImplemented
        return self.data == _value(other)

    def __ne__(self, other: Any) -> Any:
        if not isinstance(other, (Scalar, numbers.Real)):
            return NotImplemented
        return self.data != _value(other)

    def __lt__(self, other: Any) -> Any:
        return self.data < _value(other)

    def __le__(self, other: Any) -> Any:
        return self.data <= _value(other)

    def __gt__(self, other: Any) -> Any:
        return self.data > _value(other)

    def __ge__(self, other: Any) -> Any:
        return self.data >= _value(other)

    # -- arithmetic: each operator is one primitive op, and ``a + b`` *is* its
    # float_operator (the method is the recording: a call saved per op is a
    # sixth of a Scalar op's cost). A reflected operator's other operand is
    # never a Scalar.

    __add__ = _ADD

    def __radd__(self, other: Any) -> Scalar:
        return _ADD(_lift(other), self)

    __sub__ = _SUB

    def __rsub__(self, other: Any) -> Scalar:
        return _SUB(_lift(other), self)

    __mul__ = _MUL

    def __rmul__(self, other: Any) -> Scalar:
        return _MUL(_lift(other), self)

    __truediv__ = _DIV

    def __rtruediv__(self, other: Any) -> Scalar:
        return _DIV(_lift(other), self)

    def __neg__(self) -> Scalar:
        return record_floats(ops.neg, self)

    def __pow__(self, exponent: Any) -> Scalar:
        return self.pow(exponent)

    def pow(self, exponent: Any, name: str | None = None) -> Scalar:
        if isinstance(exponent, Scalar):
            return self.power(exponent, name)  # a Scalar exponent gets its gradient too
        exponent = _number(exponent, "Scalar ** exponent")
        if self.data < 0.0 and not exponent.is_integer():
            raise ValueError(f"Scalar ** {exponent}: a non-integer power of {self.data} is not a real number")
        if self.data == 0.0 and exponent < 0:
            raise ValueError(f"Scalar ** {exponent}: a negative power of 0 is not a number (division by zero)")
        try:
            finite = math.isfinite(self.data**exponent)
        except OverflowError:
            finite = False
        if not finite and math.isfinite(self.data):  # NaN and ±inf in give NaN and ±inf out, as numpy's
            raise ValueError(f"Scalar ** {exponent}: {self.data} ** {exponent} overflows a float")
        return record(ops.pow_, (self,), {"exponent": exponent}, name)

    def exp(self, name: str | None = None) -> Scalar:
        if self.data > 709.78:
            raise ValueError(f"Scalar.exp(): exp({self.data}) overflows a float (the largest is exp(709.78))")
        return record_floats(ops.exp, self, None, name)

    def log(self, name: str | None = None) -> Scalar:
        if self.data <= 0.0:
            raise ValueError(f"Scalar.log(): log of {self.data} is undefined; expected a positive value")
        return record_floats(ops.log, self, None, name)

    def tanh(self, name: str | None = None) -> Scalar:
        return record_floats(ops.tanh, self, None, name)

    def relu(self, name: str | None = None) -> Scalar:
        return record_floats(ops.relu, self, None, name)

    def sqrt(self, name: str | None = None) -> Scalar:
        return self.pow(0.5, name)

    def sigmoid(self, name: str | None = None) -> Scalar:
        """``1 / (1 + exp(-x))``, without overflow for large ``|x|``."""
        return record_floats(ops.sigmoid, self, None, name)

    def gelu(self, name: str | None = None) -> Scalar:
        """GELU, tanh approximation (as :meth:`microtape.Tensor.gelu`)."""
        return record_floats(ops.gelu, self, None, name)

    def abs(self, name: str | None = None) -> Scalar:
        """``|x|`` (its gradient at 0 is 0)."""
        return record_floats(ops.abs_, self, None, name)

    def __abs__(self) -> Scalar:
        return self.abs()

    def maximum(self, other: Any, name: str | None = None) -> Scalar:
        """The larger of ``self`` and ``other`` (a tie shares the gradient equally)."""
        return record_floats(ops.maximum, self, other, name)

    def minimum(self, other: Any, name: str | None = None) -> Scalar:
        """The smaller of ``self`` and ``other`` (a tie shares the gradient equally)."""
        return record_floats(ops.minimum, self, other, name)

    # -- beyond the arithmetic: the hooks SharedElementwise's methods call, and powers either way round

    def _refuse(self, bad: Any, what: str, expected: str) -> None:
        if bad:
            raise ValueError(f"Scalar.{what}(): {what} of {self.data} is undefined; expected {expected}")

    def _refuse_overflow(self, what: str, too_big: Any) -> None:
        if too_big():
            raise ValueError(f"Scalar.{what}(): {what}({self.data}) overflows a float")

    # A Scalar records these built-in, parameter-free ops by the engine's float fast path (engine/fast_scalar.py).
    def _unary(self, op: Op, name: str | None) -> Scalar:
        return record_floats(op, self, None, name)

    def _with(self, op: Op, other: Any, what: str, name: str | None) -> Scalar:
        return record_floats(op, self, self._constant(other), name)

    def __pos__(self) -> Scalar:
        # +a is a itself: nothing to record.
        return self

    def __rpow__(self, base: Any) -> Scalar:
        return _power(self._constant(base), self, None)

    def power(self, exponent: Any, name: str | None = None) -> Scalar:
        """``self ** exponent`` with a Scalar exponent: d/dy xʸ = xʸ ln x (so x must be >= 0)."""
        return _power(self, exponent if isinstance(exponent, Node) else self._constant(exponent), name)


def _power(base: Any, exponent: Any, name: str | None) -> Scalar:
    """``base ** exponent`` for two Scalars (the ``power`` op), refusing what has no real value or slope."""
    x, y = base.data, exponent.data
    if x < 0.0 and exponent.requires_grad:
        raise ValueError(
            f"Scalar ** Scalar: the base is {x} and the exponent needs a gradient, d/dy x**y = x**y * ln(x), "
            "and ln of a negative number is not real (NaN): expected a base >= 0"
        )
    if x < 0.0 and not y.is_integer():
        raise ValueError(f"Scalar ** Scalar: {x} ** {y} is not a real number")
    if x == 0.0 and y < 0.0:
        raise ValueError(f"Scalar ** Scalar: {x} ** {y} is not a number (division by zero)")
    try:
        finite = math.isfinite(x**y)
    except OverflowError:
        finite = False
    if not finite:
        raise ValueError(f"Scalar ** Scalar: {x} ** {y} overflows a float")
    return record(ops.power, (base, exponent), None, name)


def _number_text(value: Any) -> str:
    """A number to 6 digits; anything else (a .grad set by hand to junk) as its repr: a repr never fails."""
    return f"{value:.6g}" if isinstance(value, numbers.Real) else repr(value)


def _value(value: Any) -> float:
    return value.data if isinstance(value, Scalar) else value
