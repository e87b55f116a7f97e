"""Sinusoidal positional encoding: telling attention *where* each token is.

This module lets you add position information to token vectors::

    >>> import microtape as mt
    >>> table = mt.nn.sinusoidal_positions(6, 4)      # [6, 4]: one row per position
    >>> positions = mt.nn.PositionalEncoding(4)
    >>> # y = positions(x) adds table[:T] to x [B, T, 4] (a constant: it has no gradient)

Attention by itself sees a *set* of tokens: shuffle the inputs and every
output shuffles the same way. The encoding of "Attention Is All You Need"
gives position ``p`` the vector

    PE[p, 2i]   = sin(p / 10000^(2i/E))
    PE[p, 2i+1] = cos(p / 10000^(2i/E))

— pairs of sines and cosines of geometrically spaced frequencies, so that
the encoding of ``p + k`` is a fixed rotation of the encoding of ``p`` (a
linear map attention can learn to use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


import numpy as np

from ..values.tensor import Tensor
from .checks import float_dtype, input_array, positive_int
from .module import Module

__all__ = ["sinusoidal_positions", "PositionalEncoding"]


def sinusoidal_positions(length: int, dim: int, dtype: DTypeLike = np.float64) -> np.ndarray:
    """The table ``[length, dim]`` of sinusoidal position encodings (see the module doc)."""
    length = positive_int(length, "sinusoidal_positions(length)")
    dim = positive_int(dim, "sinusoidal_positions(dim)")
    positions = np.arange(length)[:, None]
    frequencies = 10000.0 ** (-np.arange(0, dim, 2) / dim)  # one per (sin, cos) pair
    angles = positions * frequencies
    table = np.zeros((length, dim))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : dim // 2])
    return table.astype(float_dtype(dtype, "sinusoidal_positions(dtype)"))


class PositionalEncoding(Module):
    """Adds ``sinusoidal_positions(T, dim)`` to an input ``[B, T, dim]`` (no parameters).

    ``PositionalEncoding(dim, max_len=512, *, dtype=np.float64)``; the table is
    computed once for ``max_len`` positions and added as a constant
    (``add_constant``: it receives no gradient).
    """

    def __init__(self, dim: int, max_len: int = 512, *, dtype: DTypeLike = np.float64) -> None:
        super().__init__()
        self.dim = positive_int(dim, "PositionalEncoding(dim)")
        self.max_len = positive_int(max_len, "PositionalEncoding(max_len)")
        self.dtype = float_dtype(dtype, "PositionalEncoding(dtype)")
        self._table = sinusoidal_positions(self.max_len, self.dim, self.dtype)

    def __repr__(self) -> str:
        return f"PositionalEncoding({self.dim}, max_len={self.max_len})"

    @property
    def table(self) -> Any:
        """The ``[max_len, dim]`` encodings (read-only)."""
        view = self._table.view()
        view.flags.writeable = False
        return view

    def forward(self, x: Any, name: str | None = "with_positions") -> Tensor:
        """``x + table[:T]`` for ``x`` of shape ``[B, T, dim]`` (a Tensor stays on the tape)."""
        data = x.data if isinstance(x, Tensor) else input_array(x, "x", "PositionalEncoding.forward", self.dtype)
        if data.ndim != 3 or data.shape[-1] != self.dim:
            raise ValueError(f"PositionalEncoding.forward: x has shape {data.shape}; expected [B, T, {self.dim}]")
        length = data.shape[1]
        if length > self.max_len:
            raise ValueError(
                f"PositionalEncoding.forward: x has {length} positions but the table has max_len={self.max_len}"
            )
        node = x if isinstance(x, Tensor) else Tensor(data)
        # In the input's dtype: a float64 table would promote float32 activations.
        positions = Tensor(self._table[:length].astype(data.dtype, copy=False), name="positions")
        with self.scope():
            return node.add_constant(positions, name=name)
