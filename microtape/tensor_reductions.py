"""The reductions of a Tensor: sums, means, extremes, products, norms, running totals, softmax, variance.

Each method checks its ``axis`` (None, an integer or a tuple of distinct
integers in range; numpy's rule) and ``keepdims`` and runs one primitive
from :mod:`microtape.ops`, except ``var`` and ``std``, which are built from
primitives so the tape shows their steps.
"""

import numbers

import numpy as np

from . import ops
from .tape import record

__all__ = ["ReductionMethods"]


class ReductionMethods:
    """Tensor methods that reduce or scan along axes (mixed into :class:`~microtape.tensor.Tensor`)."""

    __slots__ = ()

    def _axis(self, axis, what):
        """Check ``axis`` (None, an int or a tuple of distinct ints in range) and return it."""
        if axis is None:
            return None
        axes = axis if isinstance(axis, tuple) else (axis,)
        for a in axes:
            if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
                raise TypeError(f"Tensor.{what}(axis={axis!r}): expected None, an integer or a tuple of integers")
            if not -self.ndim <= a < self.ndim:
                raise ValueError(f"Tensor.{what}(axis={axis!r}): axis out of range for a tensor of shape {self.shape}")
        if len({int(a) % self.ndim for a in axes}) != len(axes):
            raise ValueError(f"Tensor.{what}(axis={axis!r}): an axis is repeated")
        return tuple(int(a) for a in axes) if isinstance(axis, tuple) else int(axis)

    @staticmethod
    def _keepdims(keepdims, what):
        if not isinstance(keepdims, (bool, np.bool_)):
            raise TypeError(f"Tensor.{what}(keepdims={keepdims!r}): expected True or False")
        return bool(keepdims)

    def _check_not_empty(self, axis, what):
        if self._reduced_count(axis) == 0:
            raise ValueError(f"Tensor.{what}(axis={axis!r}): nothing to reduce (shape {self.shape} is empty there)")

    def sum(self, axis=None, keepdims=False, name=None):
        axis = self._axis(axis, "sum")
        keepdims = self._keepdims(keepdims, "sum")
        return record(ops.sum_, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def mean(self, axis=None, keepdims=False, name=None):
        axis = self._axis(axis, "mean")
        keepdims = self._keepdims(keepdims, "mean")
        self._check_not_empty(axis, "mean")
        return record(ops.mean, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def max(self, axis=None, keepdims=False, name=None):
        axis = self._axis(axis, "max")
        keepdims = self._keepdims(keepdims, "max")
        self._check_not_empty(axis, "max")
        return record(ops.max_, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def min(self, axis=None, keepdims=False, name=None):
        axis = self._axis(axis, "min")
        keepdims = self._keepdims(keepdims, "min")
        self._check_not_empty(axis, "min")
        return record(ops.min_, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def prod(self, axis=None, keepdims=False, name=None):
        """The product over ``axis``; its gradient is the product of the other entries (exact at zeros)."""
        axis = self._axis(axis, "prod")
        keepdims = self._keepdims(keepdims, "prod")
        return record(ops.prod, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def norm(self, axis=None, keepdims=False, ord=None, name=None):
        """The 2-norm ``sqrt(sum(x**2))`` over ``axis`` (all: the Frobenius norm); its gradient at 0 is 0.

        ``ord`` is accepted as None or 2 only (numpy's other norms are not here).
        """
        if ord not in (None, 2, "fro"):
            raise ValueError(f"Tensor.norm(ord={ord!r}): only the 2-norm is supported (ord=None, 2 or 'fro')")
        axis = self._axis(axis, "norm")
        keepdims = self._keepdims(keepdims, "norm")
        return record(ops.norm, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def cumsum(self, axis=None, name=None):
        """Running sums along ``axis`` (None: of the flattened tensor, as numpy)."""
        return record(ops.cumsum, (self,), {"axis": self._scan_axis(axis, "cumsum")}, name=name)

    def cumprod(self, axis=None, name=None):
        """Running products along ``axis`` (None: of the flattened tensor); exact gradients also at zeros."""
        return record(ops.cumprod, (self,), {"axis": self._scan_axis(axis, "cumprod")}, name=name)

    def _scan_axis(self, axis, what):
        if axis is None:
            return None
        if isinstance(axis, tuple) or self.ndim == 0:
            raise ValueError(f"Tensor.{what}(axis={axis!r}): give one integer axis (or None for the flattened tensor)")
        return self._axis(axis, what)

    def softmax(self, axis=-1, name=None):
        """Softmax over ``axis`` (one, a tuple, or None for all) as one fused, numerically stable op.

        A 0-d tensor's softmax is 1 (it is normalised over nothing but itself).
        """
        axis = self._normalised_axes(axis, "softmax")
        return record(ops.softmax, (self,), {"axis": axis}, name=name)

    def log_softmax(self, axis=-1, name=None):
        """``log(softmax(x))`` over ``axis`` (one, a tuple or None), as one stable op (finite where softmax is 0)."""
        axis = self._normalised_axes(axis, "log_softmax")
        return record(ops.log_softmax, (self,), {"axis": axis}, name=name)

    def logsumexp(self, axis=None, keepdims=False, name=None):
        """``log(sum(exp(x)))`` over ``axis``, stable (the max is taken out before the exp)."""
        axis = self._axis(axis, "logsumexp")
        keepdims = self._keepdims(keepdims, "logsumexp")
        self._check_not_empty(axis, "logsumexp")
        return record(ops.logsumexp, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def var(self, axis=None, keepdims=False, ddof=0, name=None):
        """The variance ``sum((x - mean(x))²) / (n - ddof)`` over ``axis`` (ddof=0 divides by n, like numpy).

        Not a primitive: it is built from ``mean``, ``sub``, ``mul`` and
        ``mean`` (or ``sum`` and ``scale`` for ``ddof``), so the tape shows its steps.
        """
        axis = self._axis(axis, "var")
        self._check_not_empty(axis, "var")
        count = self._reduced_count(axis)
        if isinstance(ddof, bool) or not isinstance(ddof, numbers.Real) or ddof < 0:
            raise ValueError(f"Tensor.var(ddof={ddof!r}): expected a number >= 0 (1 for the sample variance)")
        if count - ddof <= 0:
            raise ValueError(
                f"Tensor.var(ddof={ddof}): {count} value(s) per result, so n - ddof = {count - ddof} <= 0 "
                "(the variance would divide by it)"
            )
        centered = self - self.mean(axis, keepdims=True)
        squares = centered * centered
        if ddof == 0:
            return squares.mean(axis, keepdims=keepdims, name=name)
        return squares.sum(axis, keepdims=keepdims).scale(1.0 / (count - ddof), name=name)

    def std(self, axis=None, keepdims=False, ddof=0, name=None):
        """The standard deviation ``sqrt(var(x, ddof))``: its gradient is infinite where all values are equal."""
        return self.var(axis, keepdims=keepdims, ddof=ddof).sqrt(name=name)

    def _reduced_count(self, axis):
        """How many entries go into each result of a reduction over ``axis``."""
        if axis is None:
            return self.size
        return int(np.prod([self.shape[a] for a in (axis if isinstance(axis, tuple) else (axis,))], dtype=int))

    def _normalised_axes(self, axis, what):
        """softmax's axes: one, a tuple, or None (all; the only choice for a 0-d tensor), none of them empty."""
        if self.ndim == 0:
            if axis not in (None, 0, -1) or isinstance(axis, bool):
                raise ValueError(f"Tensor.{what}(axis={axis!r}): a 0-d tensor has only axis None (or -1, 0)")
            return None
        if isinstance(axis, bool):
            raise ValueError(f"Tensor.{what}(axis={axis!r}): expected an integer, a tuple of integers or None")
        axis = self._axis(axis, what)
        if self._reduced_count(axis) == 0:
            raise ValueError(
                f"Tensor.{what}(axis={axis!r}): the axis is empty (shape {self.shape}); nothing to normalise"
            )
        return axis
