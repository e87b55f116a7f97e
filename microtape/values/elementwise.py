"""The elementwise methods a Scalar and a Tensor share: one op each, and its checks, written once.

``a.sin()`` on a Scalar and ``x.sin()`` on a Tensor run the same method
here: it checks the domain (``arcsin`` outside [-1, 1], ``log1p`` at or
below -1, ``reciprocal`` of 0) and records one primitive of
:mod:`microtape.ops`. What differs between the two kinds is behind three
small hooks each class defines: ``_refuse(bad, what, expected)`` (how to
name the offending entry), ``_refuse_overflow(what, too_big)`` (a Python
float would raise ``OverflowError``; numpy gives inf) and
``_with(op, other, what, name)`` (how a second operand is lifted).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import ops
from ..engine import Node, record

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..ops.core import Op

    _Host = Node  # to the checker, the methods below run on a node: Scalar and Tensor are both
else:
    _Host = object  # (at run time the mixin is a plain class: Scalar and Tensor list Node after it)

__all__ = ["SharedElementwise"]


class SharedElementwise(_Host):
    """Trigonometry, more logs and powers, and two-input functions, for Scalar and Tensor alike."""

    __slots__ = ()

    if TYPE_CHECKING:  # the hooks each kind defines (see the module doc)

        def _refuse(self, bad: Any, what: str, expected: str) -> None: ...
        def _refuse_overflow(self, what: str, too_big: Any) -> None: ...
        def _with(self, op: Op, other: Any, what: str, name: str | None) -> Self: ...

    def _unary(self, op: Op, name: str | None) -> Self:
        return record(op, (self,), None, name)

    # -- trigonometry

    def sin(self, name: str | None = None) -> Self:
        return self._unary(ops.sin, name)

    def cos(self, name: str | None = None) -> Self:
        return self._unary(ops.cos, name)

    def tan(self, name: str | None = None) -> Self:
        return self._unary(ops.tan, name)

    def arcsin(self, name: str | None = None) -> Self:
        """The inverse sine (values in [-1, 1]; the slope is infinite at ±1)."""
        self._refuse(np.abs(self.data) > 1, "arcsin", "values in [-1, 1]")
        return self._unary(ops.arcsin, name)

    def arccos(self, name: str | None = None) -> Self:
        """The inverse cosine (values in [-1, 1]; the slope is infinite at ±1)."""
        self._refuse(np.abs(self.data) > 1, "arccos", "values in [-1, 1]")
        return self._unary(ops.arccos, name)

    def arctan(self, name: str | None = None) -> Self:
        return self._unary(ops.arctan, name)

    def sinh(self, name: str | None = None) -> Self:
        self._refuse_overflow("sinh", lambda: np.abs(self.data) > 710.47)
        return self._unary(ops.sinh, name)

    def cosh(self, name: str | None = None) -> Self:
        self._refuse_overflow("cosh", lambda: np.abs(self.data) > 710.47)
        return self._unary(ops.cosh, name)

    def arcsinh(self, name: str | None = None) -> Self:
        """The inverse hyperbolic sine."""
        return self._unary(ops.arcsinh, name)

    def arccosh(self, name: str | None = None) -> Self:
        """The inverse hyperbolic cosine (values >= 1; the slope is infinite at 1)."""
        self._refuse(self.data < 1, "arccosh", "values >= 1")
        return self._unary(ops.arccosh, name)

    def arctanh(self, name: str | None = None) -> Self:
        """The inverse hyperbolic tangent (values in [-1, 1]: ±inf at the ends, where the slope is infinite)."""
        self._refuse(np.abs(self.data) > 1, "arctanh", "values in [-1, 1]")
        return self._unary(ops.arctanh, name)

    def arctan2(self, other: Any, name: str | None = None) -> Self:
        """The angle of the point (other, self), entry by entry: ``numpy.arctan2(self, other)``."""
        return self._with(ops.arctan2, other, "arctan2", name)

    # -- logs, exponentials, powers

    def log2(self, name: str | None = None) -> Self:
        self._refuse(self.data <= 0, "log2", "positive values")
        return self._unary(ops.log2, name)

    def log10(self, name: str | None = None) -> Self:
        self._refuse(self.data <= 0, "log10", "positive values")
        return self._unary(ops.log10, name)

    def log1p(self, name: str | None = None) -> Self:
        """``log(1 + x)``, accurate near 0 (values must be > -1)."""
        self._refuse(self.data <= -1, "log1p", "values > -1")
        return self._unary(ops.log1p, name)

    def exp2(self, name: str | None = None) -> Self:
        """``2 ** x``."""
        self._refuse_overflow("exp2", lambda: self.data >= 1024.0)
        return self._unary(ops.exp2, name)

    def expm1(self, name: str | None = None) -> Self:
        """``exp(x) - 1``, without losing the digits near 0 that the subtraction would lose."""
        self._refuse_overflow("expm1", lambda: self.data > 709.78)
        return self._unary(ops.expm1, name)

    def square(self, name: str | None = None) -> Self:
        """``x * x`` as one op."""
        return self._unary(ops.square, name)

    def cbrt(self, name: str | None = None) -> Self:
        """The real cube root (negative for negative x); its slope is infinite at 0."""
        return self._unary(ops.cbrt, name)

    def reciprocal(self, name: str | None = None) -> Self:
        """``1 / x`` (values must not be 0)."""
        self._refuse(self.data == 0, "reciprocal", "values other than 0")
        return self._unary(ops.reciprocal, name)

    def logaddexp(self, other: Any, name: str | None = None) -> Self:
        """``log(exp(self) + exp(other))`` without overflow (broadcasting)."""
        return self._with(ops.logaddexp, other, "logaddexp", name)

    def logaddexp2(self, other: Any, name: str | None = None) -> Self:
        """``log2(2**self + 2**other)`` without overflow (broadcasting)."""
        return self._with(ops.logaddexp2, other, "logaddexp2", name)

    def clip(self, lower: float | None = None, upper: float | None = None, name: str | None = None) -> Self:
        """Values below ``lower`` raised to it, above ``upper`` lowered to it (numbers; either may be None).

        The gradient passes where ``lower <= x <= upper`` (the ends included, as
        PyTorch's ``clamp``) and is 0 where the value was cut.
        """
        what = f"{type(self).__name__}.clip"
        for side, bound in (("lower", lower), ("upper", upper)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, numbers.Real)):
                raise TypeError(
                    f"{what}({side}={bound!r:.40}): expected a number or None "
                    "(for a bound per entry use maximum/minimum)"
                )
        if lower is None and upper is None:
            raise ValueError(f"{what}(): give lower, upper or both (both None would change nothing)")
        if lower is not None and upper is not None and lower > upper:
            raise ValueError(f"{what}(lower={lower}, upper={upper}): lower must not exceed upper")
        bounds = {"lower": None if lower is None else float(lower), "upper": None if upper is None else float(upper)}
        return record(ops.clip, (self,), bounds, name)
