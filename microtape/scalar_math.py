"""A Scalar's elementwise functions beyond the arithmetic: powers either way round, and numpy's functions.

``2 ** a`` and ``a ** b`` run the ``power`` op (a Scalar exponent gets its
gradient); ``a.sin()``, ``a.log1p()``, ``a.logaddexp(b)`` and the rest are
the methods a Tensor has too (:mod:`~microtape.elementwise_methods`), each
recording the same primitive (its forward takes the math module's path for a
float), so micrograd-style lessons can use them. Where a function is
undefined or overflows a float, the method says so with a ``ValueError`` (a
Python float would raise a bare ``ValueError("math domain error")`` or
``OverflowError`` from deep inside): the hooks below.
"""

import math

from . import ops
from .elementwise_methods import SharedElementwise
from .node import record_floats
from .tape import Node, record

__all__ = ["ScalarMath"]


class ScalarMath(SharedElementwise):
    """Scalar methods beyond the arithmetic (mixed into :class:`~microtape.scalar.Scalar`)."""

    __slots__ = ()

    def _refuse(self, bad, what, expected):
        if bad:
            raise ValueError(f"Scalar.{what}(): {what} of {self.data} is undefined; expected {expected}")

    def _refuse_overflow(self, what, too_big):
        if too_big():
            raise ValueError(f"Scalar.{what}(): {what}({self.data}) overflows a float")

    # A Scalar records these built-in, parameter-free ops by the float fast path (see scalar_pass).
    def _unary(self, op, name):
        return record_floats(op, self, None, name)

    def _with(self, op, other, what, name):
        return record_floats(op, self, self._constant(other), name)

    def __pos__(self):
        # +a is a itself: nothing to record.
        return self

    def __rpow__(self, base):
        return _power(self._constant(base), self, None)

    def power(self, exponent, name=None):
        """``self ** exponent`` with a Scalar exponent: d/dy xʸ = xʸ ln x (so x must be >= 0)."""
        return _power(self, exponent if isinstance(exponent, Node) else self._constant(exponent), name)


def _power(base, exponent, name):
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
