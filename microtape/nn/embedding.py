"""Embedding: a table of learned vectors, one row per token id.

This module lets you turn integer token ids into vectors and back-propagate
into the table::

    >>> import numpy as np, microtape as mt
    >>> embed = mt.nn.Embedding(10, 4, seed=0)        # 10 tokens, 4 features each
    >>> y = embed(np.array([[3, 1, 3]]))              # a Tensor [1, 3, 4]: rows 3, 1 and 3 of the table
    >>> y.backward(np.ones((1, 3, 4)))
    >>> embed.weight.grad[3]                          # token 3 was used twice: its row gets both gradients
    array([2., 2., 2., 2.])

The lookup is the ``take`` op (``weight.take(ids, axis=0)``); its gradient is
a *scatter-add* — each use of a token adds its gradient into that token's
row, so a repeated id accumulates (``np.add.at``, never ``grad[ids] += g``,
which would keep only one of them). ``backward(g)`` computes the same by hand
(:func:`microtape.nn.analytic_blocks.embedding_backward`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


import numpy as np

from ..values.tensor import Tensor
from . import analytic_blocks
from .checks import float_dtype, gradient_array, integer_ids, positive_int, seed_value
from .module import Module, add_to_grads

__all__ = ["Embedding"]


class Embedding(Module):
    """A lookup table ``weight [num_embeddings, embedding_dim]``; ``forward(ids)`` returns ``weight[ids]``.

    ``Embedding(num_embeddings, embedding_dim, *, seed=None, dtype=np.float64)``:
    the weights start standard normal (PyTorch's default). ``ids`` is an
    integer array of any shape; the output has shape ``ids.shape + (embedding_dim,)``.
    """

    def __init__(
        self, num_embeddings: int, embedding_dim: int, *, seed: int | None = None, dtype: DTypeLike = np.float64
    ) -> None:
        super().__init__()
        self.num_embeddings = positive_int(num_embeddings, "Embedding(num_embeddings)")
        self.embedding_dim = positive_int(embedding_dim, "Embedding(embedding_dim)")
        self.dtype = float_dtype(dtype, "Embedding(dtype)")
        rng = np.random.default_rng(seed_value(seed, "Embedding(seed)"))
        table = rng.standard_normal((self.num_embeddings, self.embedding_dim)).astype(self.dtype)
        self.weight = Tensor(table, requires_grad=True)
        self._last_ids = None

    def __repr__(self) -> str:
        return f"Embedding({self.num_embeddings}, {self.embedding_dim}, dtype={self.dtype.name})"

    def check_call(self, ids: Any) -> Any:
        """``ids`` as an integer array, each in ``[0, num_embeddings)``; clear errors otherwise."""
        where = "Embedding.forward"
        array = integer_ids(ids, "ids", where, "integers (token ids)")
        if array.size and (array.min() < 0 or array.max() >= self.num_embeddings):
            bad = array[(array < 0) | (array >= self.num_embeddings)].ravel()[0]
            raise IndexError(f"{where}: token id {bad} is out of range; expected 0 <= id < {self.num_embeddings}")
        return np.array(array, dtype=np.intp)

    def forward(self, ids: Any, name: str | None = "embedded") -> Tensor:
        """``weight[ids]`` on the tape: a Tensor ``[*ids.shape, embedding_dim]``."""
        ids = self.check_call(ids)
        with self.scope():
            output = self.weight.take(ids, axis=0, name=name)
        self._last_ids = ids
        return output

    def backward(self, grad_output: Any) -> None:
        """The hand-derived backward of the last forward: *adds* ``grad_output``, scattered, into ``weight.grad``.

        Returns None: integer ids have no gradient.
        """
        if self._last_ids is None:
            raise RuntimeError("Embedding.backward(): call forward() first")
        expected = self._last_ids.shape + (self.embedding_dim,)
        grad_output = gradient_array(grad_output, "grad_output", "Embedding.backward", expected, self.dtype)
        grad_weight = analytic_blocks.embedding_backward(grad_output, self._last_ids, self.num_embeddings)
        add_to_grads([(self.weight, grad_weight)])
        return None

    @classmethod
    def from_torch(cls, module: Any, dtype: Any = np.float64) -> Any:
        """An Embedding with the table of a ``torch.nn.Embedding`` (torch imported there only)."""
        from .transformer_torch import embedding_from_torch

        return embedding_from_torch(cls, module, dtype)

    def to_torch(self) -> Any:
        """An equivalent ``torch.nn.Embedding``."""
        from .transformer_torch import embedding_to_torch

        return embedding_to_torch(self)
