"""ArrayMethods: the Tensor methods that only move or combine a wrapped numpy array.

``Plain`` (a float array that records nothing) and ``ScalarArray`` (an object
array of Scalars, each recording its own arithmetic) run the same forward
code as ``Tensor`` — the attention chain, ``linear`` — so they answer the same
methods. What they share is here, written once: arithmetic with numpy's
broadcasting, ``@``, and the shape moves (``reshape``, ``transpose``,
``swapaxes``, ``T``). A subclass says where its numpy array is (``_array``)
and how to wrap a result (``_wrap(array, name)``); its ``data`` is the values
as floats.
"""

import numpy as np

__all__ = ["ArrayMethods"]


def _raw(value):
    return value._array if isinstance(value, ArrayMethods) else value


def _axes(args):
    """``f(2, 3)`` and ``f((2, 3))`` both mean the tuple ``(2, 3)``."""
    return args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


class ArrayMethods:
    """Arithmetic and shape moves on ``self._array``, results wrapped by ``self._wrap(array, name)``.

    A subclass keeps its name in ``_name`` (a slot) and says in ``_on_named``
    what naming a value does (the chain names its steps: ``Q_heads``, …).
    """

    __slots__ = ()

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, name):
        self._name = name
        self._on_named(name)

    # -- facts

    @property
    def shape(self):
        return self._array.shape

    @property
    def ndim(self):
        return self._array.ndim

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self):
        return f"{type(self).__name__}({np.array2string(self.data, precision=4)})"

    # -- arithmetic (numpy broadcasts; for object arrays it calls the Scalars' operators)

    def __add__(self, other):
        return self._wrap(self._array + _raw(other))

    def __radd__(self, other):
        return self._wrap(_raw(other) + self._array)

    def __sub__(self, other):
        return self._wrap(self._array - _raw(other))

    def __rsub__(self, other):
        return self._wrap(_raw(other) - self._array)

    def __mul__(self, other):
        return self._wrap(self._array * _raw(other))

    def __rmul__(self, other):
        return self._wrap(_raw(other) * self._array)

    def __truediv__(self, other):
        return self._wrap(self._array / _raw(other))

    def __neg__(self):
        return self._wrap(-self._array)

    def __matmul__(self, other):
        return self._wrap(np.matmul(self._array, _raw(other)))

    def __rmatmul__(self, other):
        return self._wrap(np.matmul(_raw(other), self._array))

    def matmul(self, other, name=None):
        return self._wrap(np.matmul(self._array, _raw(other)), name)

    # -- shape: pure rearrangements

    def reshape(self, *shape, name=None):
        return self._wrap(self._array.reshape(_axes(shape)), name)

    def transpose(self, *axes, name=None):
        return self._wrap(self._array.transpose(_axes(axes) or None), name)

    def swapaxes(self, axis1, axis2, name=None):
        return self._wrap(self._array.swapaxes(axis1, axis2), name)

    @property
    def T(self):
        return self._wrap(self._array.T)
