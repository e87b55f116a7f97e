"""The elementwise methods of a Tensor: powers, exponentials and logs, trigonometry, activations, choices.

Each method runs one primitive from :mod:`microtape.ops` (``name=`` names
the result on the tape). Where a function is undefined for some entries
(``log`` of a negative number, ``arcsin`` outside [-1, 1]), the method says
so with a ``ValueError`` naming the first such entry, rather than passing a
NaN on; the ops themselves, called on plain arrays, give numpy's values.
"""

import numbers

import numpy as np

from . import ops
from .elementwise_methods import SharedElementwise
from .tape import Node, record

__all__ = ["ElementwiseMethods", "check_broadcast"]


class ElementwiseMethods(SharedElementwise):
    """Tensor methods that act entry by entry (mixed into :class:`~microtape.tensor.Tensor`).

    Those a Scalar has too (sin, log1p, clip, logaddexp, …) are in
    :mod:`~microtape.elementwise_methods`; these are the hooks they use.
    """

    __slots__ = ()

    def _refuse(self, bad, what, expected):
        """A ValueError naming the first entry where ``bad`` holds (the function is undefined there)."""
        if np.any(bad):
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"Tensor.{what}(): {what} of {self.data[where]} at index {where} is undefined; expected {expected}"
            )

    def _refuse_overflow(self, what, too_big):
        pass  # an array overflows to inf, as numpy's does (a Python float would raise instead)

    def _with(self, op, other, what, name):
        return self._binary_named(op, other, what, name)

    # -- powers

    def __pow__(self, exponent):
        return self.pow(exponent)

    def __rpow__(self, base):
        return _power(self._lift(base, "**"), self, None)

    def pow(self, exponent, name=None):
        """``self ** exponent``: a number (the ``pow`` op), or an array or Tensor (the ``power`` op).

        With a Tensor exponent that needs a gradient, d/dy xʸ = xʸ ln x: the
        base must then be >= 0 (ln of a negative number is not real).
        """
        if isinstance(exponent, (Node, np.ndarray, list, tuple)):
            return _power(self, self._lift(exponent, "**"), name)
        if isinstance(exponent, bool) or not isinstance(exponent, numbers.Real):
            raise TypeError(
                "Tensor ** exponent: the exponent must be a number, an array or a Tensor, "
                f"got {type(exponent).__name__}"
            )
        exponent = float(exponent)
        if not exponent.is_integer() and np.any(self.data < 0):
            raise ValueError(
                f"Tensor ** {exponent}: a non-integer power of a negative number is not real; all entries must be >= 0"
            )
        if exponent < 0 and np.any(self.data == 0):
            raise ValueError(f"Tensor ** {exponent}: a negative power of 0 is not a number (division by zero)")
        return record(ops.pow_, (self,), {"exponent": exponent}, name)

    # -- roots, exponentials and logs

    def sqrt(self, name=None):
        """The square root, entry by entry (entries must be >= 0)."""
        if np.any(self.data < 0):
            where = tuple(int(i) for i in np.argwhere(self.data < 0)[0])
            raise ValueError(
                f"Tensor.sqrt(): sqrt of {self.data[where]} at index {where} is not real; expected values >= 0"
            )
        return record(ops.sqrt, (self,), name=name)

    def exp(self, name=None):
        return record(ops.exp, (self,), name=name)

    def log(self, name=None):
        if np.any(self.data <= 0):
            where = tuple(int(i) for i in np.argwhere(self.data <= 0)[0])
            raise ValueError(
                f"Tensor.log(): log of {self.data[where]} at index {where} is undefined; expected positive values"
            )
        return record(ops.log, (self,), name=name)

    # -- activations and choices

    def tanh(self, name=None):
        return record(ops.tanh, (self,), name=name)

    def relu(self, name=None):
        return record(ops.relu, (self,), name=name)

    def gelu(self, name=None):
        """GELU, tanh approximation: ``x/2 · (1 + tanh(√(2/π) (x + 0.044715 x³)))``."""
        return record(ops.gelu, (self,), name=name)

    def sigmoid(self, name=None):
        """``1 / (1 + exp(-x))``, computed without overflow for large ``|x|``."""
        return record(ops.sigmoid, (self,), name=name)

    def abs(self, name=None):
        """``|x|`` (its gradient at 0 is 0)."""
        return record(ops.abs_, (self,), name=name)

    def __abs__(self):
        return self.abs()

    def maximum(self, other, name=None):
        """The larger of ``self`` and ``other``, entry by entry (broadcasting; a tie shares the gradient)."""
        return self._binary_named(ops.maximum, other, "maximum", name)

    def minimum(self, other, name=None):
        """The smaller of ``self`` and ``other``, entry by entry (broadcasting; a tie shares the gradient)."""
        return self._binary_named(ops.minimum, other, "minimum", name)

    def _binary_named(self, op, other, opname, name):
        other = self._lift(other, opname)
        check_broadcast(self.shape, other.shape, f"Tensor.{opname}")
        return record(op, (self, other), name=name)

    def scale(self, factor, name=None):
        """Multiply by a constant number (``scores / sqrt(d)`` is ``scores.scale(1/sqrt(d))``)."""
        if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
            raise TypeError(f"Tensor.scale(factor): expected a number, got {type(factor).__name__}")
        # A plain float: numpy 2 would let an np.float64 factor promote float32 data.
        return record(ops.scale, (self,), {"factor": float(factor)}, name=name)

    def add_constant(self, constant, name=None):
        """Add a constant array (a mask) that receives no gradient."""
        constant = self._lift(constant, "add_constant")
        if constant.requires_grad:
            raise ValueError("Tensor.add_constant(constant): the constant must not require a gradient")
        check_broadcast(self.shape, constant.shape, "Tensor.add_constant")
        return record(ops.add_constant, (self, constant), name=name)

    def dropout(self, keep, name=None):
        """Multiply by a saved dropout mask ``keep`` (already scaled by 1/(1-p))."""
        keep = self._lift(keep, "dropout")
        if keep.requires_grad:
            raise ValueError("Tensor.dropout(keep): the keep mask is a constant and must not require a gradient")
        if keep.shape != self.shape:
            raise ValueError(f"Tensor.dropout(keep): keep has shape {keep.shape}, expected {self.shape}")
        return record(ops.dropout, (self, keep), name=name)

    def astype(self, dtype, name=None):
        """The same values in another float dtype (recorded: gradients flow back)."""
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"Tensor.astype({dtype}): expected a float dtype such as float32 or float64")
        return record(ops.cast, (self,), {"dtype": dtype}, name=name)


def _power(base, exponent, name):
    """``base ** exponent`` with both Tensors (the ``power`` op), refusing what has no real value or slope."""
    check_broadcast(base.shape, exponent.shape, "Tensor ** Tensor")
    x, y = np.broadcast_arrays(base.data, exponent.data)
    negative = x < 0
    if exponent.requires_grad and np.any(negative):
        where = tuple(int(i) for i in np.argwhere(negative)[0])
        raise ValueError(
            f"Tensor ** Tensor: the base is {x[where]} at index {where}; the exponent needs a gradient, "
            "d/dy x**y = x**y * ln(x), and ln of a negative number is not real (NaN): expected a base >= 0"
        )
    if np.any(negative & (y != np.round(y))):
        raise ValueError("Tensor ** Tensor: a non-integer power of a negative number is not real")
    if np.any((x == 0) & (y < 0)):
        raise ValueError("Tensor ** Tensor: a negative power of 0 is not a number (division by zero)")
    return record(ops.power, (base, exponent), name=name)


def check_broadcast(left, right, what):
    """Refuse shapes numpy cannot broadcast, with a message naming both."""
    if left == right:
        return
    try:
        np.broadcast_shapes(left, right)
    except ValueError:
        raise ValueError(
            f"{what}: shapes {left} and {right} do not broadcast "
            "(each axis, aligned from the right, must match or be 1)"
        ) from None
