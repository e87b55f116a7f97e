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

import numbers

import numpy as np

from . import ops
from .tape import Node, record
from .tensor_elementwise import ElementwiseMethods, check_broadcast
from .tensor_reductions import ReductionMethods
from .tensor_shape import ShapeMethods

__all__ = ["Tensor"]


def _as_float_array(data, what):
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


class Tensor(ElementwiseMethods, ReductionMethods, ShapeMethods, Node):
    """An array on the tape. ``requires_grad=True`` marks it as something to differentiate.

    Its methods come in families, each in a module of its own: entry by entry
    (:mod:`~microtape.tensor_elementwise`), reductions
    (:mod:`~microtape.tensor_reductions`) and shape
    (:mod:`~microtape.tensor_shape`); this class adds construction, the
    operators and comparisons.
    """

    __slots__ = ()
    _output_data = staticmethod(np.asarray)
    # Make numpy defer to Tensor's reflected operators (ndarray + Tensor -> Tensor.__radd__).
    __array_priority__ = 100

    def __init__(self, data, requires_grad=False, name=None):
        if isinstance(data, Tensor):
            data = data.data
        if isinstance(data, Node):
            raise TypeError(f"Tensor(data): expected an array, got {type(data).__name__}")
        if not isinstance(requires_grad, bool):
            raise TypeError(f"Tensor(requires_grad=...): expected True or False, got {requires_grad!r}")
        self._init_leaf(_as_float_array(data, "Tensor(data)"), requires_grad, name)

    @classmethod
    def zeros(cls, shape, dtype=np.float64, requires_grad=False, name=None):
        """A tensor of zeros of the given shape."""
        return cls(np.zeros(shape, dtype=dtype), requires_grad, name)

    @classmethod
    def full(cls, shape, value, dtype=np.float64, requires_grad=False, name=None):
        """A tensor of the given shape filled with ``value``."""
        return cls(np.full(shape, value, dtype=dtype), requires_grad, name)

    @classmethod
    def _constant(cls, value, like):
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
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self.data.size

    def __len__(self):
        return len(self.data)

    def __array__(self, dtype=None, copy=None):
        if self.data.__class__ is not np.ndarray:
            np.asarray(self.data)  # a value a lean tape did not keep: raises, saying how to keep it
        if dtype is not None and dtype != self.data.dtype:
            return self.data.astype(dtype)
        return self.data.copy() if copy else self.data

    # -- numpy's functions on a Tensor (np.exp(t), np.sum(t, axis=1)): recorded, or refused by name

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from . import numpy_protocol  # (imported here: it builds on the functions built on Tensor)

        return numpy_protocol.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from . import numpy_protocol

        return numpy_protocol.array_function(func, args, kwargs)

    def item(self):
        return self.data.item()

    def numpy(self):
        return self.data

    def __repr__(self):
        label = f", name={self.name!r}" if self.name else ""
        grad = ", requires_grad=True" if self.requires_grad and self.is_leaf else ""
        made_by = f", op={self.op.name}" if self.op is not None else ""
        if self.data.__class__ is not np.ndarray:  # dropped by a lean tape
            return f"Tensor({self.data!r}, shape={self.shape}{label}{made_by})"
        body = np.array2string(self.data, precision=4, separator=", ", threshold=20, prefix="Tensor(")
        return f"Tensor({body}{label}{grad}{made_by})"

    # -- elementwise arithmetic

    def _lift(self, other, opname):
        if isinstance(other, Tensor):
            return other
        if isinstance(other, Node) or not isinstance(other, (numbers.Real, np.ndarray, list, tuple)):
            raise TypeError(
                f"Tensor {opname}: cannot combine a Tensor with {type(other).__name__}; "
                "expected a Tensor, numpy array or number"
            )
        return Tensor._constant(other, self)

    def _binary(self, op, other, opname, reflected=False):
        other = self._lift(other, opname)
        inputs = (other, self) if reflected else (self, other)
        check_broadcast(inputs[0].shape, inputs[1].shape, f"Tensor {opname}")
        return record(op, inputs)

    # -- comparisons: elementwise, not recorded

    __hash__ = Node.__hash__

    def _compare(self, other, compare):
        if isinstance(other, Node) and not isinstance(other, Tensor):
            return NotImplemented
        right = other.data if isinstance(other, Tensor) else other
        return compare(self.data, right)

    def __eq__(self, other):
        return self._compare(other, np.equal)

    def __ne__(self, other):
        return self._compare(other, np.not_equal)

    def __lt__(self, other):
        return self._compare(other, np.less)

    def __le__(self, other):
        return self._compare(other, np.less_equal)

    def __gt__(self, other):
        return self._compare(other, np.greater)

    def __ge__(self, other):
        return self._compare(other, np.greater_equal)

    def __add__(self, other):
        return self._binary(ops.add, other, "+")

    def __radd__(self, other):
        return self._binary(ops.add, other, "+", reflected=True)

    def __sub__(self, other):
        return self._binary(ops.sub, other, "-")

    def __rsub__(self, other):
        return self._binary(ops.sub, other, "-", reflected=True)

    def __mul__(self, other):
        return self._binary(ops.mul, other, "*")

    def __rmul__(self, other):
        return self._binary(ops.mul, other, "*", reflected=True)

    def __truediv__(self, other):
        return self._binary(ops.div, other, "/")

    def __rtruediv__(self, other):
        return self._binary(ops.div, other, "/", reflected=True)

    def __neg__(self):
        return record(ops.neg, (self,))

    def neg(self, name=None):
        return record(ops.neg, (self,), None, name)

    def __pos__(self):
        # +x is x itself (as PyTorch's positive()): nothing to record, the gradient is the same.
        return self
