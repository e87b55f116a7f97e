"""Tensor: a numpy array that records its operations on the tape.

This module lets you differentiate whole-array computations::

    >>> import numpy as np, microtape as mt
    >>> x = mt.Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True, name="x")
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    array([[ 0.,  2.,  4.],
           [ 6.,  8., 10.]])

``tensor.data`` is the numpy array (no copy is made of an array you pass in:
the Tensor shares its memory, like ``torch.from_numpy``), ``tensor.grad`` the
gradient (a numpy array, or None before backward). Every method runs one
primitive from :mod:`microtape.ops` (and takes ``name=``, the name the tape
listing and the graphs use); numpy broadcasting works everywhere and the
backward pass sums gradients back to each input's shape.

Comparisons (``x == y``, ``x < 0``) are elementwise and give plain numpy
boolean arrays, as in numpy and PyTorch: they are not differentiable, so they
are not recorded. A Tensor still hashes by identity (it is a dictionary key in
the reverse pass); ask ``x is y`` for "the same node".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from ..ops.core import Op


import math
import numbers

import numpy as np

from .. import ops
from ..engine import Node, backward_pass, record
from .arguments import (
    axes_in_range,
    check_broadcast,
    index_key,
    integer_indices,
    picks_along_the_first_axis,
    shape_argument,
)
from .elementwise import SharedElementwise

__all__ = ["Tensor", "answer_numpy_with"]


# numpy's functions on a Tensor (``np.exp(t)``) are answered by :mod:`microtape.numpy_api.protocol`,
# which builds on Tensor and so sits above this module. It fills these slots when microtape is
# imported (MyGrad's pattern): the call goes up, the import never does. Why the slots are always
# filled before a Tensor exists: Python runs microtape/__init__ before any module of the package
# (`from microtape.values.tensor import Tensor` runs it first), and it imports the protocol.
# tests/values/test_fresh_import.py checks that in a fresh process, for Tensor and Scalar.
_numpy_protocol: dict[str, Any] = {"ufunc": None, "function": None}


def answer_numpy_with(array_ufunc: Callable[..., Any], array_function: Callable[..., Any]) -> None:
    """Called once, by :mod:`microtape.numpy_api.protocol` at import: who answers numpy's calls on a Tensor."""
    _numpy_protocol["ufunc"] = array_ufunc
    _numpy_protocol["function"] = array_function


def _as_float_array(data: Any, what: str) -> np.ndarray:
    """``data`` as a float numpy array: float32/float64 kept, ints become float64."""
    if isinstance(data, np.ma.MaskedArray):
        raise TypeError(
            f"{what}: masked arrays are not supported (the mask would be silently dropped); "
            "pass data.filled(value) or a plain array"
        )
    try:
        array = np.asarray(data)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f"{what}: expected a rectangular array of numbers ({error})") from None
    if array.dtype.kind == "f":
        return array
    if array.dtype.kind in "biu":
        return array.astype(np.float64)
    raise TypeError(f"{what}: expected real numbers (a float array, list or number), got dtype {array.dtype}")


class Tensor(SharedElementwise, Node):
    """An array on the tape. ``requires_grad=True`` marks it as something to differentiate.

    Its methods come in families, in this order: construction and numpy's
    protocols, the operators and comparisons, entry by entry (numpy's
    elementwise functions it shares with Scalar come from
    :class:`~.elementwise.SharedElementwise`, through the hooks ``_refuse``,
    ``_refuse_overflow`` and ``_with`` defined here), reductions, and shape.
    """

    __slots__ = ()
    _output_data = staticmethod(np.asarray)
    # Make numpy defer to Tensor's reflected operators (ndarray + Tensor -> Tensor.__radd__).
    __array_priority__ = 100

    def __init__(self, data: Any, requires_grad: bool = False, name: str | None = None) -> None:
        if isinstance(data, Tensor):
            data = data.data
        if isinstance(data, Node):
            raise TypeError(f"Tensor(data): expected an array, got {type(data).__name__}")
        if not isinstance(requires_grad, bool):
            raise TypeError(f"Tensor(requires_grad=...): expected True or False, got {requires_grad!r}")
        self._init_leaf(_as_float_array(data, "Tensor(data)"), requires_grad, name)

    @classmethod
    def zeros(
        cls, shape: Any, dtype: DTypeLike = np.float64, requires_grad: bool = False, name: str | None = None
    ) -> Tensor:
        """A tensor of zeros of the given shape."""
        return cls(np.zeros(shape, dtype=dtype), requires_grad, name)

    @classmethod
    def full(
        cls, shape: Any, value: Any, dtype: DTypeLike = np.float64, requires_grad: bool = False, name: str | None = None
    ) -> Tensor:
        """A tensor of the given shape filled with ``value``."""
        return cls(np.full(shape, value, dtype=dtype), requires_grad, name)

    @classmethod
    def _constant(cls, value: Any, like: Any) -> Tensor:
        """An array or number used inside an expression (``x * 2``): it needs no gradient."""
        if isinstance(value, Tensor):
            return value
        constant = cls.__new__(cls)
        array = _as_float_array(value, "Tensor arithmetic")
        if array.ndim == 0:
            # A plain number takes the tensor's dtype (float32 stays float32).
            array = array.astype(like.data.dtype)
        constant._init_leaf(array, False, None)
        return constant

    # -- numpy-like facts

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    def __len__(self) -> int:
        return len(self.data)

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        if self.data.__class__ is not np.ndarray:
            np.asarray(self.data)  # a value a lean tape did not keep: raises, saying how to keep it
        if dtype is not None and dtype != self.data.dtype:
            return self.data.astype(dtype)
        return self.data.copy() if copy else self.data

    # -- numpy's functions on a Tensor (np.exp(t), np.sum(t, axis=1)): recorded, or refused by name

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _numpy_protocol["ufunc"](ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _numpy_protocol["function"](func, args, kwargs)

    def backward(self, grad: Any = None, *, create_graph: bool = False) -> None:
        """Backpropagate from this Tensor and *add* the gradients into ``.grad``.

        ``grad`` is the gradient of some final quantity with respect to this
        Tensor; the default is ones (for a single number: 1, "dy/dy = 1").
        Works with or without an active :class:`~microtape.engine.tape.Tape`:
        the graph is found by following ``inputs``. Leaves accumulate (``+=``)
        across calls, and a pass that fails changes no ``.grad``. With
        ``create_graph=True`` the reverse pass is recorded and each ``.grad``
        is a Tensor you can differentiate again. (It is
        :func:`~microtape.engine.reverse.backward_pass`.)
        """
        backward_pass(self, grad, create_graph)

    def item(self) -> float:
        return self.data.item()

    def __float__(self) -> float:
        """The one number of a one-entry Tensor, as a plain float (no gradient flows through it).

        ``float(loss)``, as in PyTorch and for a Scalar. It is also what numpy
        reads from a list of 0-d Tensors: ``np.sum([loss1, loss2])`` sees their
        values, as it does for a list of any Tensors (docs/trust.md), and is a
        plain number; to keep the gradient, stack first: ``mt.stack([loss1, loss2]).sum()``.
        """
        if self.size != 1:
            raise TypeError(
                f"float(Tensor of shape {self.shape}): only a Tensor of one number converts to a float; "
                "to combine Tensors keeping their gradient, use mt.stack([...]) and Tensor ops"
            )
        return float(np.asarray(self).reshape(()))

    def numpy(self) -> np.ndarray:
        return self.data

    def __repr__(self) -> str:
        label = f", name={self.name!r}" if self.name else ""
        grad = ", requires_grad=True" if self.requires_grad and self.is_leaf else ""
        made_by = f", op={self.op.name}" if self.op is not None else ""
        if self.data.__class__ is not np.ndarray:  # dropped by a lean tape
            return f"Tensor({self.data!r}, shape={self.shape}{label}{made_by})"
        body = np.array2string(self.data, precision=4, separator=", ", threshold=20, prefix="Tensor(")
        return f"Tensor({body}{label}{grad}{made_by})"

    # -- elementwise arithmetic

    def _lift(self, other: Any, opname: str) -> Any:
        if isinstance(other, Tensor):
            return other
        if isinstance(other, Node) or not isinstance(other, (numbers.Real, np.ndarray, list, tuple)):
            raise TypeError(
                f"Tensor {opname}: cannot combine a Tensor with {type(other).__name__}; "
                "expected a Tensor, numpy array or number"
            )
        return Tensor._constant(other, self)

    def _binary(self, op: Op, other: Any, opname: str, reflected: bool = False) -> Tensor:
        other = self._lift(other, opname)
        inputs = (other, self) if reflected else (self, other)
        check_broadcast(inputs[0].shape, inputs[1].shape, f"Tensor {opname}")
        return record(op, inputs)

    # -- comparisons: elementwise, not recorded

    __hash__ = Node.__hash__

    def _compare(self, other: Any, compare: Callable[..., Any]) -> Any:
        if isinstance(other, Node) and not isinstance(other, Tensor):
            return NotImplemented
        right = other.data if isinstance(other, Tensor) else other
        return compare(self.data, right)

    def __eq__(self, other: Any) -> Any:
        return self._compare(other, np.equal)

    def __ne__(self, other: Any) -> Any:
        return self._compare(other, np.not_equal)

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, np.less)

    def __le__(self, other: Any) -> Any:
        return self._compare(other, np.less_equal)

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, np.greater)

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, np.greater_equal)

    def __add__(self, other: Any) -> Tensor:
        return self._binary(ops.add, other, "+")

    def __radd__(self, other: Any) -> Tensor:
        return self._binary(ops.add, other, "+", reflected=True)

    def __sub__(self, other: Any) -> Tensor:
        return self._binary(ops.sub, other, "-")

    def __rsub__(self, other: Any) -> Tensor:
        return self._binary(ops.sub, other, "-", reflected=True)

    def __mul__(self, other: Any) -> Tensor:
        return self._binary(ops.mul, other, "*")

    def __rmul__(self, other: Any) -> Tensor:
        return self._binary(ops.mul, other, "*", reflected=True)

    def __truediv__(self, other: Any) -> Tensor:
        return self._binary(ops.div, other, "/")

    def __rtruediv__(self, other: Any) -> Tensor:
        return self._binary(ops.div, other, "/", reflected=True)

    def __neg__(self) -> Tensor:
        return record(ops.neg, (self,))

    def neg(self, name: str | None = None) -> Tensor:
        return record(ops.neg, (self,), None, name)

    def __pos__(self) -> Tensor:
        # +x is x itself (as PyTorch's positive()): nothing to record, the gradient is the same.
        return self

    # ---------------------------------------------------------------- entry by entry

    def _refuse(self, bad: Any, what: str, expected: str) -> None:
        """A ValueError naming the first entry where ``bad`` holds (the function is undefined there)."""
        if np.any(bad):
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"Tensor.{what}(): {what} of {self.data[where]} at index {where} is undefined; expected {expected}"
            )

    def _refuse_overflow(self, what: str, too_big: Any) -> None:
        pass  # an array overflows to inf, as numpy's does (a Python float would raise instead)

    def _with(self, op: Op, other: Any, what: str, name: str | None) -> Tensor:
        return self._binary_named(op, other, what, name)

    # -- powers

    def __pow__(self, exponent: Any) -> Tensor:
        return self.pow(exponent)

    def __rpow__(self, base: Any) -> Tensor:
        return _power(self._lift(base, "**"), self, None)

    def pow(self, exponent: Any, name: str | None = None) -> Tensor:
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

    def sqrt(self, name: str | None = None) -> Tensor:
        """The square root, entry by entry (entries must be >= 0)."""
        if np.any(self.data < 0):
            where = tuple(int(i) for i in np.argwhere(self.data < 0)[0])
            raise ValueError(
                f"Tensor.sqrt(): sqrt of {self.data[where]} at index {where} is not real; expected values >= 0"
            )
        return record(ops.sqrt, (self,), name=name)

    def exp(self, name: str | None = None) -> Tensor:
        return record(ops.exp, (self,), name=name)

    def log(self, name: str | None = None) -> Tensor:
        if np.any(self.data <= 0):
            where = tuple(int(i) for i in np.argwhere(self.data <= 0)[0])
            raise ValueError(
                f"Tensor.log(): log of {self.data[where]} at index {where} is undefined; expected positive values"
            )
        return record(ops.log, (self,), name=name)

    # -- activations and choices

    def tanh(self, name: str | None = None) -> Tensor:
        return record(ops.tanh, (self,), name=name)

    def relu(self, name: str | None = None) -> Tensor:
        return record(ops.relu, (self,), name=name)

    def gelu(self, name: str | None = None) -> Tensor:
        """GELU, tanh approximation: ``x/2 · (1 + tanh(√(2/π) (x + 0.044715 x³)))``."""
        return record(ops.gelu, (self,), name=name)

    def sigmoid(self, name: str | None = None) -> Tensor:
        """``1 / (1 + exp(-x))``, computed without overflow for large ``|x|``."""
        return record(ops.sigmoid, (self,), name=name)

    def abs(self, name: str | None = None) -> Tensor:
        """``|x|`` (its gradient at 0 is 0)."""
        return record(ops.abs_, (self,), name=name)

    def __abs__(self) -> Tensor:
        return self.abs()

    def maximum(self, other: Any, name: str | None = None) -> Tensor:
        """The larger of ``self`` and ``other``, entry by entry (broadcasting; a tie shares the gradient)."""
        return self._binary_named(ops.maximum, other, "maximum", name)

    def minimum(self, other: Any, name: str | None = None) -> Tensor:
        """The smaller of ``self`` and ``other``, entry by entry (broadcasting; a tie shares the gradient)."""
        return self._binary_named(ops.minimum, other, "minimum", name)

    def _binary_named(self, op: Op, other: Any, opname: str, name: str | None) -> Tensor:
        other = self._lift(other, opname)
        check_broadcast(self.shape, other.shape, f"Tensor.{opname}")
        return record(op, (self, other), name=name)

    def scale(self, factor: float, name: str | None = None) -> Tensor:
        """Multiply by a constant number (``scores / sqrt(d)`` is ``scores.scale(1/sqrt(d))``)."""
        if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
            raise TypeError(f"Tensor.scale(factor): expected a number, got {type(factor).__name__}")
        # A plain float: numpy 2 would let an np.float64 factor promote float32 data.
        return record(ops.scale, (self,), {"factor": float(factor)}, name=name)

    def add_constant(self, constant: Any, name: str | None = None) -> Tensor:
        """Add a constant array (a mask) that receives no gradient."""
        constant = self._lift(constant, "add_constant")
        if constant.requires_grad:
            raise ValueError("Tensor.add_constant(constant): the constant must not require a gradient")
        check_broadcast(self.shape, constant.shape, "Tensor.add_constant")
        return record(ops.add_constant, (self, constant), name=name)

    def dropout(self, keep: Any, name: str | None = None) -> Tensor:
        """Multiply by a saved dropout mask ``keep`` (already scaled by 1/(1-p))."""
        keep = self._lift(keep, "dropout")
        if keep.requires_grad:
            raise ValueError("Tensor.dropout(keep): the keep mask is a constant and must not require a gradient")
        if keep.shape != self.shape:
            raise ValueError(f"Tensor.dropout(keep): keep has shape {keep.shape}, expected {self.shape}")
        return record(ops.dropout, (self, keep), name=name)

    def astype(self, dtype: DTypeLike, name: str | None = None) -> Tensor:
        """The same values in another float dtype (recorded: gradients flow back)."""
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"Tensor.astype({dtype}): expected a float dtype such as float32 or float64")
        return record(ops.cast, (self,), {"dtype": dtype}, name=name)

    # ---------------------------------------------------------------- reductions

    def _axis(self, axis: Any, what: str) -> Any:
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
    def _keepdims(keepdims: bool, what: str) -> bool:
        if not isinstance(keepdims, (bool, np.bool_)):
            raise TypeError(f"Tensor.{what}(keepdims={keepdims!r}): expected True or False")
        return bool(keepdims)

    def _check_not_empty(self, axis: Any, what: str) -> None:
        if self._reduced_count(axis) == 0:
            raise ValueError(f"Tensor.{what}(axis={axis!r}): nothing to reduce (shape {self.shape} is empty there)")

    def sum(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        axis = self._axis(axis, "sum")
        keepdims = self._keepdims(keepdims, "sum")
        return record(ops.sum_, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def mean(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        axis = self._axis(axis, "mean")
        keepdims = self._keepdims(keepdims, "mean")
        self._check_not_empty(axis, "mean")
        return record(ops.mean, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def max(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        axis = self._axis(axis, "max")
        keepdims = self._keepdims(keepdims, "max")
        self._check_not_empty(axis, "max")
        return record(ops.max_, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def min(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        axis = self._axis(axis, "min")
        keepdims = self._keepdims(keepdims, "min")
        self._check_not_empty(axis, "min")
        return record(ops.min_, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def prod(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        """The product over ``axis``; its gradient is the product of the other entries (exact at zeros)."""
        axis = self._axis(axis, "prod")
        keepdims = self._keepdims(keepdims, "prod")
        return record(ops.prod, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def norm(self, axis: Any = None, keepdims: bool = False, ord: Any = None, name: str | None = None) -> Tensor:
        """The 2-norm ``sqrt(sum(x**2))`` over ``axis`` (all: the Frobenius norm); its gradient at 0 is 0.

        ``ord`` follows numpy where it names the 2-norm: None; 2 for a vector
        (1-D, or one axis); ``'fro'`` for a matrix (2-D, or two axes). numpy's
        other norms (``ord=2`` of a *matrix* is its largest singular value,
        not the Frobenius norm) are refused rather than answered wrongly.
        """
        axis = self._axis(axis, "norm")
        if ord is not None:
            self._check_norm_order(ord, axis)
        keepdims = self._keepdims(keepdims, "norm")
        return record(ops.norm, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def _check_norm_order(self, ord: Any, axis: Any) -> None:  # noqa: A002  (numpy.linalg.norm's name)
        """Refuse an ``ord`` whose numpy meaning is not the 2-norm over ``axis``, changing nothing."""
        count = self.ndim if axis is None else len(axis) if isinstance(axis, tuple) else 1
        if count not in (1, 2):
            raise ValueError(
                f"Tensor.norm(ord={ord!r}): numpy's ord needs a vector or a matrix; this norm runs over "
                f"{count} axes of a tensor of shape {self.shape} (leave ord=None for the 2-norm over them all)"
            )
        kind, expected = ("vector", 2) if count == 1 else ("matrix", "fro")
        if count == 2:
            matches = isinstance(ord, str) and ord == "fro"
        else:
            matches = isinstance(ord, numbers.Real) and not isinstance(ord, bool) and ord == 2
        if not matches:
            raise ValueError(
                f"Tensor.norm(ord={ord!r}): on a {kind} only ord=None or {expected!r} (the 2-norm, "
                f"{'Frobenius' if count == 2 else 'Euclidean'}) is supported"
                + ("; numpy's ord=2 of a matrix is its largest singular value, which is not here" if ord == 2 else "")
            )

    def cumsum(self, axis: Any = None, name: str | None = None) -> Tensor:
        """Running sums along ``axis`` (None: of the flattened tensor, as numpy)."""
        return record(ops.cumsum, (self,), {"axis": self._scan_axis(axis, "cumsum")}, name=name)

    def cumprod(self, axis: Any = None, name: str | None = None) -> Tensor:
        """Running products along ``axis`` (None: of the flattened tensor); exact gradients also at zeros."""
        return record(ops.cumprod, (self,), {"axis": self._scan_axis(axis, "cumprod")}, name=name)

    def _scan_axis(self, axis: Any, what: str) -> int | None:
        if axis is None:
            return None
        if isinstance(axis, tuple) or self.ndim == 0:
            raise ValueError(f"Tensor.{what}(axis={axis!r}): give one integer axis (or None for the flattened tensor)")
        return self._axis(axis, what)

    def softmax(self, axis: Any = -1, name: str | None = None) -> Tensor:
        """Softmax over ``axis`` (one, a tuple, or None for all) as one fused, numerically stable op.

        A 0-d tensor's softmax is 1 (it is normalised over nothing but itself).
        """
        axis = self._normalised_axes(axis, "softmax")
        return record(ops.softmax, (self,), {"axis": axis}, name=name)

    def log_softmax(self, axis: Any = -1, name: str | None = None) -> Tensor:
        """``log(softmax(x))`` over ``axis`` (one, a tuple or None), as one stable op (finite where softmax is 0)."""
        axis = self._normalised_axes(axis, "log_softmax")
        return record(ops.log_softmax, (self,), {"axis": axis}, name=name)

    def logsumexp(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        """``log(sum(exp(x)))`` over ``axis``, stable (the max is taken out before the exp)."""
        axis = self._axis(axis, "logsumexp")
        keepdims = self._keepdims(keepdims, "logsumexp")
        self._check_not_empty(axis, "logsumexp")
        return record(ops.logsumexp, (self,), {"axis": axis, "keepdims": keepdims}, name=name)

    def var(self, axis: Any = None, keepdims: bool = False, ddof: int = 0, name: str | None = None) -> Tensor:
        """The variance ``sum((x - mean(x))²) / (n - ddof)`` over ``axis`` (ddof=0 divides by n, like numpy).

        Not a primitive: it is built from ``mean``, ``sub``, ``mul`` and
        ``mean`` (or ``sum`` and ``scale`` for ``ddof``), so the tape shows its steps.
        """
        axis, keepdims, count = self._spread_arguments(axis, keepdims, ddof, "var")
        centered = self - self.mean(axis, keepdims=True)
        squares = centered * centered
        if ddof == 0:
            return squares.mean(axis, keepdims=keepdims, name=name)
        return squares.sum(axis, keepdims=keepdims).scale(1.0 / (count - ddof), name=name)

    def std(self, axis: Any = None, keepdims: bool = False, ddof: int = 0, name: str | None = None) -> Tensor:
        """The standard deviation ``sqrt(var(x, ddof))`` = ``‖x − mean(x)‖ / sqrt(n − ddof)``.

        Built on the ``norm`` op, so it follows the norm's rule at its kink:
        where all values are equal (zero variance) the gradient is 0, PyTorch's
        choice. Its second derivative there is 0 too (``flat_at_zero``), as
        PyTorch's ``std`` gives; a plain :meth:`norm`'s is NaN, as PyTorch's.
        """
        axis, keepdims, count = self._spread_arguments(axis, keepdims, ddof, "std")
        centered = self - self.mean(axis, keepdims=True)
        spread = record(ops.norm, (centered,), {"axis": axis, "keepdims": keepdims, "flat_at_zero": True})
        return spread.scale(1.0 / math.sqrt(count - ddof), name=name)

    def _spread_arguments(self, axis: Any, keepdims: bool, ddof: int, what: str) -> tuple[Any, bool, int]:
        """var's and std's arguments checked before any op is recorded: ``(axis, keepdims, count)``."""
        axis = self._axis(axis, what)
        keepdims = self._keepdims(keepdims, what)
        self._check_not_empty(axis, what)
        count = self._reduced_count(axis)
        if isinstance(ddof, bool) or not isinstance(ddof, numbers.Real) or ddof < 0:
            raise ValueError(f"Tensor.{what}(ddof={ddof!r}): expected a number >= 0 (1 for the sample variance)")
        if count - ddof <= 0:
            raise ValueError(
                f"Tensor.{what}(ddof={ddof}): {count} value(s) per result, so n - ddof = {count - ddof} <= 0 "
                "(the variance would divide by it)"
            )
        return axis, keepdims, count

    def _reduced_count(self, axis: Any) -> int:
        """How many entries go into each result of a reduction over ``axis``."""
        if axis is None:
            return self.size
        return int(np.prod([self.shape[a] for a in (axis if isinstance(axis, tuple) else (axis,))], dtype=int))

    def _normalised_axes(self, axis: Any, what: str) -> tuple[int, ...] | None:
        """softmax's axes: one, a tuple, or None (all; the only choice for a 0-d tensor), none of them empty."""
        if self.ndim == 0:
            # axis=() normalises over no axis, as on any other shape: the entry alone, here the whole tensor.
            if isinstance(axis, bool) or not (axis is None or axis == () or axis in (0, -1)):
                raise ValueError(f"Tensor.{what}(axis={axis!r}): a 0-d tensor has only axis None (or -1, 0, ())")
            return None
        if isinstance(axis, bool):
            raise ValueError(f"Tensor.{what}(axis={axis!r}): expected an integer, a tuple of integers or None")
        axis = self._axis(axis, what)
        if self._reduced_count(axis) == 0:
            raise ValueError(
                f"Tensor.{what}(axis={axis!r}): the axis is empty (shape {self.shape}); nothing to normalise"
            )
        return axis

    # ---------------------------------------------------------------- shape

    def take(self, indices: Any, axis: Any = 0, name: str | None = None) -> Tensor:
        """The entries at integer ``indices`` along ``axis`` (``numpy.take``): the embedding lookup.

        The result has shape ``shape[:axis] + indices.shape + shape[axis+1:]``.
        Its gradient is a scatter-add: an index used twice receives both
        gradients. ``indices`` are copied (changing your array later changes
        nothing on the tape).
        """
        if self.ndim == 0:
            raise ValueError("Tensor.take(): a 0-d tensor has no axis to take from")
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -self.ndim <= axis < self.ndim:
            raise ValueError(f"Tensor.take(axis={axis!r}): expected an integer axis of a tensor of shape {self.shape}")
        axis = int(axis) % self.ndim
        indices = integer_indices(indices, self.shape[axis], f"Tensor.take(indices) along axis {axis}")
        return record(ops.take, (self,), {"indices": indices, "axis": axis}, name=name)

    def __getitem__(self, index: Any) -> Tensor:
        """Read entries as numpy does, recorded: ``t[3]``, ``t[[0, 2]]``, ``t[:, 0]``, ``t[1:, ..., -1]``, ``t[mask]``.

        An integer or an integer array alone picks along the first axis
        (that is :meth:`take`, the embedding lookup); anything else (slices,
        several axes, ``...``, ``None``, a boolean mask) is the ``index``
        op. Either way the gradient goes back to the entries read, 0
        elsewhere, and an entry read twice gets both gradients. Index arrays
        are copied (changing yours later changes nothing on the tape).
        """
        if picks_along_the_first_axis(index):
            return self.take(index, axis=0)
        key = index_key(index, self.shape)
        return record(ops.index, (self,), {"key": key})

    # -- linear algebra

    def matmul(self, other: Any, name: str | None = None) -> Tensor:
        other = self._lift(other, "@")
        return _matmul(self, other, name)

    def __matmul__(self, other: Any) -> Tensor:
        return _matmul(self, self._lift(other, "@"), None)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _matmul(self._lift(other, "@"), self, None)

    # -- shape

    def reshape(self, *shape: Any, name: str | None = None) -> Tensor:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        for n in shape:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
                raise TypeError(f"Tensor.reshape{tuple(shape)}: sizes must be integers, got {n!r}")
        shape = tuple(int(n) for n in shape)
        known = int(np.prod([n for n in shape if n != -1]))
        free = shape.count(-1)
        fits = (free == 0 and known == self.size) or (free == 1 and known > 0 and self.size % known == 0)
        if free > 1 or not fits or any(n < -1 for n in shape):
            raise ValueError(
                f"Tensor.reshape{shape}: cannot reshape a tensor of shape {self.shape} ({self.size} values)"
            )
        return record(ops.reshape, (self,), {"shape": shape}, name=name)

    def transpose(self, *axes: Any, name: str | None = None) -> Tensor:
        """Permute axes like ``numpy.transpose`` (no axes: reverse them)."""
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        if not axes:
            axes = tuple(range(self.ndim - 1, -1, -1))
        valid = all(isinstance(a, (int, np.integer)) and -self.ndim <= a < self.ndim for a in axes)
        if not valid or sorted(a % self.ndim for a in axes) != list(range(self.ndim)):
            raise ValueError(
                f"Tensor.transpose{tuple(axes)}: not a permutation of the {self.ndim} axes of {self.shape}"
            )
        return record(ops.transpose, (self,), {"axes": tuple(a % self.ndim for a in axes)}, name=name)

    def swapaxes(self, axis1: int, axis2: int, name: str | None = None) -> Tensor:
        axes = list(range(self.ndim))
        try:
            axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
        except (IndexError, TypeError):
            raise ValueError(f"Tensor.swapaxes({axis1}, {axis2}): axes out of range for shape {self.shape}") from None
        return self.transpose(tuple(axes), name=name)

    @property
    def T(self) -> Tensor:
        """The transpose (all axes reversed, as in numpy)."""
        return self.transpose()

    def squeeze(self, axis: Any = None, name: str | None = None) -> Tensor:
        """Drop axes of length 1 (all of them, or the given ones): a ``reshape`` on the tape."""
        if axis is None:
            axes = tuple(i for i, n in enumerate(self.shape) if n == 1)
        else:
            axes = axes_in_range(axis, self.ndim, "squeeze")
            for a in axes:
                if self.shape[a] != 1:
                    raise ValueError(
                        f"Tensor.squeeze(axis={axis!r}): axis {a} has length {self.shape[a]}, only length 1 can go"
                    )
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes), name=name)

    def expand_dims(self, axis: Any, name: str | None = None) -> Tensor:
        """Insert axes of length 1 at ``axis`` (an int or a tuple, positions in the result): a ``reshape``."""
        rank = self.ndim + (len(axis) if isinstance(axis, tuple) else 1)
        axes = axes_in_range(axis, rank, "expand_dims")
        sizes = iter(self.shape)
        return self.reshape(tuple(1 if i in axes else next(sizes) for i in range(rank)), name=name)

    def broadcast_to(self, shape: Any, name: str | None = None) -> Tensor:
        """The tensor repeated along new or length-1 axes to ``shape`` (gradient: summed back)."""
        shape = shape_argument(shape, "broadcast_to")
        try:
            np.broadcast_shapes(self.shape, shape)
            fits = len(shape) >= self.ndim and np.broadcast_shapes(self.shape, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"Tensor.broadcast_to({shape}): a tensor of shape {self.shape} does not broadcast to it")
        return record(ops.broadcast_to, (self,), {"shape": shape}, name=name)

    def flip(self, axis: Any = None, name: str | None = None) -> Tensor:
        """The entries in reverse order along ``axis`` (None: every axis): an ``index`` with step -1."""
        axes = range(self.ndim) if axis is None else axes_in_range(axis, self.ndim, "flip")
        key = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(self.ndim))
        return record(ops.index, (self,), {"key": key}, name=name)

    def repeat(self, repeats: Any, axis: Any = None, name: str | None = None) -> Tensor:
        """Each entry repeated ``repeats`` times along ``axis`` (None: the flattened tensor), as numpy.

        A ``take`` with each index repeated, so an entry's gradient is the sum over its copies.
        """
        if axis is not None and (isinstance(axis, tuple) or self.ndim == 0):
            raise ValueError(f"Tensor.repeat(axis={axis!r}): give one integer axis (or None: the flattened tensor)")
        # Every check before the first op (the flattening reshape): a refused call records nothing.
        length = self.size if axis is None else self.shape[axes_in_range(axis, self.ndim, "repeat")[0]]
        counts = np.asarray(repeats)
        if counts.dtype.kind not in "iu" or counts.ndim > 1 or np.any(counts < 0):
            raise ValueError(f"Tensor.repeat(repeats={repeats!r:.40}): expected a count >= 0 or one per entry")
        if counts.ndim == 1 and counts.size != length:
            raise ValueError(f"Tensor.repeat(repeats=...): {counts.size} counts for an axis of length {length}")
        source = self.reshape(-1) if axis is None else self
        axis = 0 if axis is None else axes_in_range(axis, self.ndim, "repeat")[0]
        indices = np.repeat(np.arange(length), counts)
        return record(ops.take, (source,), {"indices": indices, "axis": axis}, name=name)

    def tile(self, reps: Any, name: str | None = None) -> Tensor:
        """The whole tensor repeated ``reps`` times along each axis (numpy.tile): reshape, broadcast, reshape."""
        reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
        if not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) and r >= 0 for r in reps):
            raise ValueError(f"Tensor.tile(reps={reps!r}): expected counts >= 0")
        rank = max(len(reps), self.ndim)
        reps = (1,) * (rank - len(reps)) + tuple(int(r) for r in reps)
        shape = (1,) * (rank - self.ndim) + self.shape
        # Each axis n becomes (1, n), broadcast to (r, n), then read as one axis of r·n: the tiles in order.
        paired = self.reshape(tuple(size for n in shape for size in (1, n)))
        stretched = paired.broadcast_to(tuple(size for r, n in zip(reps, shape) for size in (r, n)))
        return stretched.reshape(tuple(r * n for r, n in zip(reps, shape)), name=name)


def _power(base: Any, exponent: Any, name: str | None) -> Tensor:
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


def _matmul(a: Any, b: Any, name: str | None) -> Tensor:
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"Tensor @: matmul needs arrays of rank >= 1, got shapes {a.shape} and {b.shape}")
    inner_a = a.shape[-1]
    inner_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if inner_a != inner_b:
        raise ValueError(
            f"Tensor @: shapes {a.shape} and {b.shape} do not match for matmul: "
            f"a's last axis ({inner_a}) must equal b's second-to-last ({inner_b})"
        )
    check_broadcast(a.shape[:-2], b.shape[:-2], f"Tensor @ (batch axes of {a.shape} and {b.shape})")
    return record(ops.matmul, (a, b), name=name)
