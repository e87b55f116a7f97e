"""The rest of numpy's elementwise functions on a Scalar: trigonometry, more logs and powers, two-input ops.

Each method runs the same primitive as the Tensor method of its name (the
op's forward takes the math module's path for a float), so micrograd-style
lessons can use ``a.sin()``, ``2 ** a`` or ``a ** b``. Where the function is
undefined or overflows a float, the method says so with a ``ValueError``
(a Python float would raise a bare ``ValueError("math domain error")`` or
``OverflowError`` from deep inside).
"""

import math
import numbers

from . import ops
from .tape import Node, record

__all__ = ["ScalarMath"]


class ScalarMath:
    """Scalar methods beyond the arithmetic (mixed into :class:`~microtape.scalar.Scalar`)."""

    __slots__ = ()

    def _refuse(self, bad, what, expected):
        if bad:
            raise ValueError(f"Scalar.{what}(): {what} of {self.data} is undefined; expected {expected}")

    def _unary(self, op, name):
        return record(op, (self,), None, name)

    def _below_overflow(self, limit, what):
        if abs(self.data) > limit:
            raise ValueError(f"Scalar.{what}(): {what}({self.data}) overflows a float")

    def __pos__(self):
        # +a is a itself: nothing to record.
        return self

    def __rpow__(self, base):
        return _power(self._constant(base), self, None)

    def power(self, exponent, name=None):
        """``self ** exponent`` with a Scalar exponent: d/dy xʸ = xʸ ln x (so x must be >= 0)."""
        return _power(self, exponent if isinstance(exponent, Node) else self._constant(exponent), name)

    # -- trigonometry

    def sin(self, name=None):
        return self._unary(ops.sin, name)

    def cos(self, name=None):
        return self._unary(ops.cos, name)

    def tan(self, name=None):
        return self._unary(ops.tan, name)

    def arcsin(self, name=None):
        self._refuse(abs(self.data) > 1.0, "arcsin", "a value in [-1, 1]")
        return self._unary(ops.arcsin, name)

    def arccos(self, name=None):
        self._refuse(abs(self.data) > 1.0, "arccos", "a value in [-1, 1]")
        return self._unary(ops.arccos, name)

    def arctan(self, name=None):
        return self._unary(ops.arctan, name)

    def sinh(self, name=None):
        self._below_overflow(710.47, "sinh")
        return self._unary(ops.sinh, name)

    def cosh(self, name=None):
        self._below_overflow(710.47, "cosh")
        return self._unary(ops.cosh, name)

    def arctan2(self, other, name=None):
        """The angle of the point (other, self): ``atan2(self, other)``."""
        return record(ops.arctan2, (self, self._constant(other)), None, name)

    # -- logs, exponentials, powers

    def log1p(self, name=None):
        self._refuse(self.data <= -1.0, "log1p", "a value > -1")
        return self._unary(ops.log1p, name)

    def log2(self, name=None):
        self._refuse(self.data <= 0.0, "log2", "a positive value")
        return self._unary(ops.log2, name)

    def log10(self, name=None):
        self._refuse(self.data <= 0.0, "log10", "a positive value")
        return self._unary(ops.log10, name)

    def expm1(self, name=None):
        if self.data > 709.78:
            raise ValueError(f"Scalar.expm1(): expm1({self.data}) overflows a float")
        return self._unary(ops.expm1, name)

    def exp2(self, name=None):
        if self.data >= 1024.0:
            raise ValueError(f"Scalar.exp2(): 2 ** {self.data} overflows a float")
        return self._unary(ops.exp2, name)

    def cbrt(self, name=None):
        return self._unary(ops.cbrt, name)

    def square(self, name=None):
        return self._unary(ops.square, name)

    def reciprocal(self, name=None):
        self._refuse(self.data == 0.0, "reciprocal", "a value other than 0")
        return self._unary(ops.reciprocal, name)

    def logaddexp(self, other, name=None):
        """``log(exp(self) + exp(other))`` without overflow."""
        return record(ops.logaddexp, (self, self._constant(other)), None, name)

    def clip(self, lower=None, upper=None, name=None):
        """The value kept within ``[lower, upper]`` (either may be None); the gradient passes inside."""
        for what, bound in (("lower", lower), ("upper", upper)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, numbers.Real)):
                raise TypeError(f"Scalar.clip({what}={bound!r:.40}): expected a number or None")
        if lower is None and upper is None:
            raise ValueError("Scalar.clip(): give lower, upper or both")
        if lower is not None and upper is not None and lower > upper:
            raise ValueError(f"Scalar.clip(lower={lower}, upper={upper}): lower must not exceed upper")
        bounds = {"lower": None if lower is None else float(lower), "upper": None if upper is None else float(upper)}
        return record(ops.clip, (self,), bounds, name)


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
