"""Attention masks: additive float arrays ``[Tq, Tk]``.

This module lets you build the masks ``MultiHeadAttention.forward`` takes::

    >>> from microtape.nn.masks import causal_mask, from_bool
    >>> causal_mask(3)
    array([[ 0.e+00, -1.e+09, -1.e+09],
           [ 0.e+00,  0.e+00, -1.e+09],
           [ 0.e+00,  0.e+00,  0.e+00]])

The convention (the layer's contract, written out on the site's attention-contract page): a mask is *added* to the
scaled scores before the softmax. ``0`` allows a query to look at a key; a
large negative number (``-1e9``, or ``-inf``) suppresses it, because
``exp(-1e9)`` is exactly 0 in floating point. A boolean array is *not* a
mask here — turn one into a mask with :func:`from_bool`.
"""

from typing import Any

import numpy as np

from ..ops.attention_links import NEG_INF

__all__ = ["NEG_INF", "SUPPRESSED_BELOW", "causal_mask", "from_bool", "padding_allowed", "suppressed"]

#: Mask entries at or below this count as "suppressed" when we look for rows
#: with no valid key. (-100 would already zero a softmax weight in practice,
#: but we only call values this large "suppression"; smaller ones are biases.)
SUPPRESSED_BELOW = -1e4


def causal_mask(T: Any, dtype: Any = np.float64) -> Any:
    """The causal mask ``[T, T]``: query ``i`` may look at keys ``0..i`` only."""
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T <= 0:
        raise ValueError(f"causal_mask(T={T!r}): expected a positive integer length")
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    return np.where(future, NEG_INF, 0.0).astype(dtype)


def from_bool(allowed: Any, dtype: Any = np.float64) -> Any:
    """Turn a boolean array (``True`` = may attend) into an additive mask.

    Careful: PyTorch's ``nn.MultiheadAttention`` uses the *opposite* boolean
    convention (``True`` = masked out). For a PyTorch-style boolean mask ``m``,
    call ``from_bool(~m)``.
    """
    allowed = np.asarray(allowed)
    if allowed.dtype != np.bool_:
        raise TypeError(f"from_bool(allowed): expected a boolean array, got dtype {allowed.dtype}")
    return np.where(allowed, 0.0, NEG_INF).astype(dtype)


def padding_allowed(lengths: np.ndarray, T: int) -> np.ndarray:
    """``[B, T]`` booleans: ``True`` for the first ``lengths[b]`` positions of sequence ``b``.

    A per-sequence padding mask does not fit the layer's single ``[Tq, Tk]``
    mask; use it to build one mask per sequence (``from_bool(allowed[b][None, :]
    .repeat(Tq, 0))``) and run those sequences one at a time.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or np.any(lengths < 1) or np.any(lengths > T):
        raise ValueError(f"padding_allowed(lengths={lengths.tolist()!r}, T={T}): expected integers in 1..{T}")
    return np.arange(T)[None, :] < lengths[:, None]


def suppressed(mask: Any) -> np.ndarray:
    """Booleans: where the additive mask suppresses (``<= SUPPRESSED_BELOW``)."""
    return np.asarray(mask) <= SUPPRESSED_BELOW
