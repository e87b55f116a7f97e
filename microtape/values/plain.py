"""Plain: a numpy array with Tensor's methods that records nothing.

This module lets code written once against Tensor's methods run on plain
numpy — the third way to run it, beside :class:`~microtape.Tensor` (one tape
row per array op) and :class:`~microtape.values.scalar_array.ScalarArray` (one tape
row per scalar op)::

    >>> import numpy as np
    >>> from microtape.values.plain import Plain
    >>> x = Plain(np.array([[1.0, 2.0]]))
    >>> (x @ x.T).softmax(-1, name="weights").data
    array([[1.]])

The attention forward (:func:`microtape.nn.attention.chain`) is written once;
the finite-difference checker runs it on ``Plain`` arrays in float64. Every
method takes ``name=`` like Tensor's, and :meth:`Plain.replacing` swaps a
named intermediate for a given array while the forward runs — so a
finite difference can nudge ``weights`` and recompute only what follows.
"""

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .. import ops
from .array_methods import ArrayMethods

__all__ = ["Plain"]

_replacements: contextvars.ContextVar[dict | None] = contextvars.ContextVar("microtape_plain_replacing", default=None)


class Plain(ArrayMethods):
    """A numpy array (``.data``) with the Tensor methods the layers' forward code uses."""

    __slots__ = ("data", "_name")
    __array_priority__ = 100

    def __init__(self, data: Any, name: str | None = None) -> None:
        self.data = np.asarray(getattr(data, "data", data))
        self.name = name

    def _on_named(self, name: str | None) -> None:
        # Naming a value is where a replacement takes over (see `replacing`).
        replacing = _replacements.get()
        replacement = replacing.get(name) if replacing and name is not None else None
        if replacement is not None:
            self.data = np.asarray(replacement)

    @staticmethod
    @contextmanager
    def replacing(replacements: Any) -> Iterator[Any]:
        """While active, a Plain result named like a key of ``replacements`` *is* that array."""
        token = _replacements.set(dict(replacements))
        try:
            yield
        finally:
            _replacements.reset(token)

    # What ArrayMethods (arithmetic, @, the shape moves) works on and makes.

    @property
    def _array(self) -> Any:
        return self.data

    def _wrap(self, array: Any, name: str | None = None) -> "Plain":
        return Plain(array, name)

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    # -- elementwise

    def exp(self, name: str | None = None) -> "Plain":
        return Plain(np.exp(self.data), name)

    def tanh(self, name: str | None = None) -> "Plain":
        return Plain(np.tanh(self.data), name)

    def relu(self, name: str | None = None) -> "Plain":
        return Plain(np.maximum(self.data, 0), name)

    def gelu(self, name: str | None = None) -> "Plain":
        return Plain(ops.gelu.forward(self.data), name)

    def sqrt(self, name: str | None = None) -> "Plain":
        return Plain(np.sqrt(self.data), name)

    def scale(self, factor: Any, name: str | None = None) -> "Plain":
        return Plain(self.data * factor, name)

    def add_constant(self, constant: Any, name: str | None = None) -> "Plain":
        return Plain(self.data + _data(constant), name)

    def dropout(self, keep: Any, name: str | None = None) -> "Plain":
        return Plain(self.data * _data(keep), name)

    def astype(self, dtype: Any, name: str | None = None) -> "Plain":
        return Plain(self.data.astype(dtype), name)

    # -- products

    # The very forward the tape's matmul op runs: it folds a batch of rows
    # into one 2-D product (``[B·T, n] @ [n, m]``), whose BLAS summation order
    # differs from numpy's batched ``@`` in the last bit. Finite differences
    # and ``forward_plain`` must compute what the tape computed, bit for bit.
    def __matmul__(self, other: Any) -> "Plain":
        return Plain(ops.matmul.forward(self.data, _data(other)))

    def __rmatmul__(self, other: Any) -> "Plain":
        return Plain(ops.matmul.forward(_data(other), self.data))

    def matmul(self, other: Any, name: str | None = None) -> "Plain":
        return Plain(ops.matmul.forward(self.data, _data(other)), name)

    # -- reductions

    def sum(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> "Plain":
        return Plain(np.sum(self.data, axis=axis, keepdims=keepdims), name)

    def mean(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> "Plain":
        return Plain(np.mean(self.data, axis=axis, keepdims=keepdims), name)

    def max(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> "Plain":
        return Plain(np.max(self.data, axis=axis, keepdims=keepdims), name)

    def softmax(self, axis: Any = -1, name: str | None = None) -> "Plain":
        # The very forward the tape's softmax op runs: one definition.
        return Plain(ops.softmax.forward(self.data, axis=axis), name)


def _data(value: Any) -> Any:
    return value.data if isinstance(value, Plain) else value
