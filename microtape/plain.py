"""Plain: a numpy array with Tensor's methods that records nothing.

This module lets code written once against Tensor's methods run on plain
numpy — the third way to run it, beside :class:`~microtape.Tensor` (one tape
row per array op) and :class:`~microtape.scalar_array.ScalarArray` (one tape
row per scalar op)::

    >>> import numpy as np
    >>> from microtape.plain import Plain
    >>> x = Plain(np.array([[1.0, 2.0]]))
    >>> (x @ x.T).softmax(-1, name="weights").data
    array([[1.]])

The attention forward (:func:`microtape.nn.attention_chain`) is written once;
the finite-difference checker runs it on ``Plain`` arrays in float64. Every
method takes ``name=`` like Tensor's, and :meth:`Plain.replacing` swaps a
named intermediate for a given array while the forward runs — so a
finite difference can nudge ``weights`` and recompute only what follows.
"""

import contextvars
from contextlib import contextmanager

import numpy as np

from . import ops

__all__ = ["Plain"]

_replacements: contextvars.ContextVar[dict | None] = contextvars.ContextVar("microtape_plain_replacing", default=None)


class Plain:
    """A numpy array (``.data``) with the Tensor methods the layers' forward code uses."""

    __slots__ = ("data", "_name")
    __array_priority__ = 100

    def __init__(self, data, name=None):
        self.data = np.asarray(getattr(data, "data", data))
        self.name = name

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, name):
        # Naming a value is where a replacement takes over (see `replacing`).
        self._name = name
        replacing = _replacements.get()
        replacement = replacing.get(name) if replacing and name is not None else None
        if replacement is not None:
            self.data = np.asarray(replacement)

    @staticmethod
    @contextmanager
    def replacing(replacements):
        """While active, a Plain result named like a key of ``replacements`` *is* that array."""
        token = _replacements.set(dict(replacements))
        try:
            yield
        finally:
            _replacements.reset(token)

    # -- facts

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def dtype(self):
        return self.data.dtype

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self):
        return f"Plain({np.array2string(self.data, precision=4)})"

    # -- arithmetic

    def __add__(self, other):
        return _result(self.data + _data(other))

    def __radd__(self, other):
        return _result(_data(other) + self.data)

    def __sub__(self, other):
        return _result(self.data - _data(other))

    def __rsub__(self, other):
        return _result(_data(other) - self.data)

    def __mul__(self, other):
        return _result(self.data * _data(other))

    def __rmul__(self, other):
        return _result(_data(other) * self.data)

    def __truediv__(self, other):
        return _result(self.data / _data(other))

    def __neg__(self):
        return _result(-self.data)

    def __matmul__(self, other):
        return _result(self.data @ _data(other))

    def __rmatmul__(self, other):
        return _result(_data(other) @ self.data)

    def matmul(self, other, name=None):
        return _result(self.data @ _data(other), name)

    def exp(self, name=None):
        return _result(np.exp(self.data), name)

    def tanh(self, name=None):
        return _result(np.tanh(self.data), name)

    def relu(self, name=None):
        return _result(np.maximum(self.data, 0), name)

    def gelu(self, name=None):
        return _result(ops.gelu.forward(self.data), name)

    def sqrt(self, name=None):
        return _result(np.sqrt(self.data), name)

    def scale(self, factor, name=None):
        return _result(self.data * factor, name)

    def add_constant(self, constant, name=None):
        return _result(self.data + _data(constant), name)

    def dropout(self, keep, name=None):
        return _result(self.data * _data(keep), name)

    def astype(self, dtype, name=None):
        return _result(self.data.astype(dtype), name)

    # -- reductions

    def sum(self, axis=None, keepdims=False, name=None):
        return _result(np.sum(self.data, axis=axis, keepdims=keepdims), name)

    def mean(self, axis=None, keepdims=False, name=None):
        return _result(np.mean(self.data, axis=axis, keepdims=keepdims), name)

    def max(self, axis=None, keepdims=False, name=None):
        return _result(np.max(self.data, axis=axis, keepdims=keepdims), name)

    def softmax(self, axis=-1, name=None):
        # The very forward the tape's softmax op runs: one definition.
        return _result(ops.softmax.forward(self.data, axis=axis), name)

    # -- shape

    def reshape(self, *shape, name=None):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return _result(self.data.reshape(shape), name)

    def transpose(self, *axes, name=None):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return _result(self.data.transpose(axes or None), name)

    def swapaxes(self, axis1, axis2, name=None):
        return _result(self.data.swapaxes(axis1, axis2), name)

    @property
    def T(self):
        return _result(self.data.T)


def _data(value):
    return value.data if isinstance(value, Plain) else value


def _result(array, name=None):
    """Wrap a result; a named one may be swapped for its replacement (see :meth:`Plain.replacing`)."""
    return Plain(array, name)
