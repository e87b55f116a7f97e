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

from typing import TYPE_CHECKING, Any

import numpy as np

__all__ = ["ArrayMethods"]


def _raw(value: Any) -> Any:
    return value._array if isinstance(value, ArrayMethods) else value


def _axes(args: Any) -> Any:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the tuple ``(2, 3)``."""
    return args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


class ArrayMethods:
    """Arithmetic and shape moves on ``self._array``, results wrapped by ``self._wrap(array, name)``.

    A subclass keeps its name in ``_name`` (a slot) and says in ``_on_named``
    what naming a value does (the chain names its steps: ``Q_heads``, …).
    """

    __slots__ = ()

    if TYPE_CHECKING:  # what each subclass defines (slots and hooks)
        _name: str | None

        @property
        def _array(self) -> Any: ...
        def _wrap(self, array: Any, name: str | None = None) -> Any: ...
        def _on_named(self, name: str | None) -> None: ...

    @property
    def name(self) -> str | None:
        return self._name

    @name.setter
    def name(self, name: str | None) -> None:
        self._name = name  # type: ignore[misc]  # a slot of each subclass
        self._on_named(name)

    # -- facts

    @property
    def shape(self) -> Any:
        return self._array.shape

    @property
    def ndim(self) -> Any:
        return self._array.ndim

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self.data if dtype is None else self.data.astype(dtype)  # type: ignore[attr-defined]  # each subclass: a slot (Plain) or a property (ScalarArray)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({np.array2string(self.data, precision=4)})"  # type: ignore[attr-defined]  # as above

    # -- arithmetic (numpy broadcasts; for object arrays it calls the Scalars' operators)

    def __add__(self, other: Any) -> Any:
        return self._wrap(self._array + _raw(other))

    def __radd__(self, other: Any) -> Any:
        return self._wrap(_raw(other) + self._array)

    def __sub__(self, other: Any) -> Any:
        return self._wrap(self._array - _raw(other))

    def __rsub__(self, other: Any) -> Any:
        return self._wrap(_raw(other) - self._array)

    def __mul__(self, other: Any) -> Any:
        return self._wrap(self._array * _raw(other))

    def __rmul__(self, other: Any) -> Any:
        return self._wrap(_raw(other) * self._array)

    def __truediv__(self, other: Any) -> Any:
        return self._wrap(self._array / _raw(other))

    def __neg__(self) -> Any:
        return self._wrap(-self._array)

    def __matmul__(self, other: Any) -> Any:
        return self._wrap(np.matmul(self._array, _raw(other)))

    def __rmatmul__(self, other: Any) -> Any:
        return self._wrap(np.matmul(_raw(other), self._array))

    def matmul(self, other: Any, name: str | None = None) -> Any:
        return self._wrap(np.matmul(self._array, _raw(other)), name)

    # -- shape: pure rearrangements

    def reshape(self, *shape: Any, name: str | None = None) -> Any:
        return self._wrap(self._array.reshape(_axes(shape)), name)

    def transpose(self, *axes: Any, name: str | None = None) -> Any:
        return self._wrap(self._array.transpose(_axes(axes) or None), name)

    def swapaxes(self, axis1: Any, axis2: Any, name: str | None = None) -> Any:
        return self._wrap(self._array.swapaxes(axis1, axis2), name)

    @property
    def T(self) -> Any:
        return self._wrap(self._array.T)
