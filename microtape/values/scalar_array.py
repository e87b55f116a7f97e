"""ScalarArray: an array of Scalars that behaves like a Tensor.

This module lets you run tensor code at *scalar granularity*: every multiply,
add and exp inside a matrix product or a softmax becomes its own equation on
the tape, as in micrograd. It is the bridge from the micrograd-sized lesson
to the real layer::

    >>> import numpy as np
    >>> from microtape.values.scalar_array import ScalarArray
    >>> x = ScalarArray.leaves(np.array([[1.0, 2.0]]), name="x")
    >>> y = (x @ x.T).sum()          # 2 multiplies and 1 add, each a Scalar op
    >>> y.backward()
    >>> x.grad
    array([[2., 4.]])

How: a numpy array of ``dtype=object`` holding ``Scalar``s already knows how
to broadcast, transpose, reshape and matmul — it calls the Scalars' own ``*``
and ``+``. This class adds the few Tensor methods numpy's object arrays lack
(``exp``, ``softmax``, ``scale``, ``add_constant``, ``dropout``), so code
written against Tensor's methods runs unchanged on either. Reshapes and
transposes move Scalars around without computing anything, so they leave no
trace: the scalar graph shows only arithmetic.

Names work as on Tensors, one per entry: ``x.matmul(w, name="scores")`` calls
its Scalars ``scores[0,1,2]`` (their position), and so does setting
``array.name = "Q"``; a Scalar that already has a name keeps it (so after a
reshape the entries keep the name of the array that computed them).
"""

from typing import Any

import numpy as np

from .. import ops
from .array_methods import ArrayMethods
from .scalar import Scalar

__all__ = ["ScalarArray"]


class ScalarArray(ArrayMethods):
    """A numpy object array of :class:`~microtape.Scalar` with Tensor's methods."""

    __slots__ = ("items", "_name")

    def __init__(self, items: Any, name: str | None = None) -> None:
        self.items = np.asarray(items, dtype=object)
        self._name = None
        self.name = name

    def _on_named(self, name: str | None) -> None:
        """Naming the array names each entry that has no name yet by its position: ``name[i,j]``."""
        if name:
            for index in np.ndindex(self.items.shape):
                scalar = self.items[index]
                if isinstance(scalar, Scalar) and scalar.name is None and scalar.op is not None:
                    scalar.name = f"{name}[{','.join(map(str, index))}]"

    @classmethod
    def leaves(cls, array: Any, name: str | None = None) -> Any:
        """One differentiable Scalar per entry, named ``name[i,j]``."""
        array = np.asarray(array, dtype=np.float64)
        items = np.empty(array.shape, dtype=object)
        for index in np.ndindex(array.shape):
            label = f"{name}[{','.join(map(str, index))}]" if name else None
            items[index] = Scalar(float(array[index]), name=label)
        return cls(items)

    # -- facts (ArrayMethods adds shape, ndim, arithmetic, @ and the shape moves)

    @property
    def _array(self) -> Any:
        return self.items

    def _wrap(self, items: Any, name: str | None = None) -> "ScalarArray":
        return ScalarArray(items, name)

    @property
    def data(self) -> Any:
        """The values as a float64 numpy array."""
        return _values(self.items, "data")

    @property
    def grad(self) -> Any:
        """The gradients as a float64 numpy array (0 where none arrived)."""
        return _values(self.items, "grad")

    def exp(self, name: str | None = None) -> "ScalarArray":
        return ScalarArray(_exp(self.items), name)

    def scale(self, factor: Any, name: str | None = None) -> "ScalarArray":
        return ScalarArray(self.items * float(factor), name)

    def add_constant(self, constant: Any, name: str | None = None) -> "ScalarArray":
        # Adding plain floats: the Scalars treat them as constants.
        return ScalarArray(self.items + np.asarray(constant, dtype=np.float64).astype(object), name)

    def dropout(self, keep: Any, name: str | None = None) -> "ScalarArray":
        return ScalarArray(self.items * np.asarray(keep, dtype=np.float64).astype(object), name)

    def sum(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
        total = np.sum(self.items, axis=axis, keepdims=keepdims)
        if isinstance(total, Scalar):
            if name and total.name is None and total.op is not None:
                total.name = name
            return total
        return ScalarArray(total, name)

    def max(self, axis: Any = None, keepdims: bool = False, name: str | None = None) -> "ScalarArray":
        # Picks the largest Scalar itself (no new op): the gradient then flows
        # through whichever entry won, which is what max's VJP says too.
        return ScalarArray(np.max(self.items, axis=axis, keepdims=keepdims))

    def softmax(self, axis: Any = -1, name: str | None = None) -> "ScalarArray":
        """The op's stable softmax (shift by the max, exp, normalise), run on the Scalars: each step recorded."""
        # On an object array numpy calls each Scalar's own -, exp and /: the one forward, traced scalar by scalar.
        return ScalarArray(ops.softmax.forward(self.items, axis=axis), name)

    def backward(self, grad: Any = None) -> None:
        """Backpropagate ``sum(grad * self)`` (``grad`` defaults to ones)."""
        grad = np.ones(self.shape) if grad is None else np.asarray(grad, dtype=np.float64)
        if grad.shape != self.shape:
            raise ValueError(f"ScalarArray.backward(grad): grad has shape {grad.shape}, expected {self.shape}")
        total = np.sum(self.items * grad.astype(object))
        total.backward()


_exp = np.frompyfunc(lambda s: s.exp(), 1, 1)


def _values(items: Any, field: Any) -> Any:
    out = np.zeros(items.shape)
    for index in np.ndindex(items.shape):
        value = getattr(items[index], field)
        out[index] = 0.0 if value is None else value
    return out
