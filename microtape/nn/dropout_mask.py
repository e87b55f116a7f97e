"""Counter-based dropout: the keep mask as a pure function of (seed, call, position).

This module lets two different computations of attention — the standard
chain, which builds the whole ``[B·H, Tq, Tk]`` mask at once, and the tiled
kernel, which needs one tile of it at a time, forward and again in backward —
drop *exactly the same* weights::

    >>> import numpy as np
    >>> from microtape.nn.dropout_mask import DropoutMask
    >>> mask = DropoutMask(p=0.5, key=7, call=0)
    >>> whole = mask.keep(2, slice(0, 4), slice(0, 6), np.float64)      # [2, 4, 6]
    >>> tile = mask.keep(2, slice(2, 4), slice(3, 6), np.float64)       # rows 2:4, keys 3:6
    >>> bool(np.array_equal(whole[:, 2:4, 3:6], tile))
    True

A random generator hands out numbers *in order*, so the part of a mask you
get depends on what was drawn before it. Here every entry is computed from
its own coordinates instead (as FlashAttention regenerates its dropout mask
in the backward pass): ``u = hash(key, call, n, i, j)`` is a uniform number
in [0, 1), and the entry is kept when ``u >= p``. ``key`` comes from the
layer's seed, ``call`` counts the layer's forwards that used dropout, ``n``
is the head (``b·H + h``), ``i`` the query and ``j`` the key position. Kept
entries hold ``1/(1-p)`` ("inverted" dropout), dropped ones 0.

The hash is SplitMix64's finaliser, applied three times: once per forward
(``key``, ``call``), once per row (``n``, ``i``) and once per entry (``j``).
It is a bijection of 64-bit integers that flips about half the output bits
for any changed input bit — good enough for dropout, and pure numpy.
(numpy's Philox generator is counter-based too, but it hands out a stream:
one tile would need an ``advance`` per row, so the hash is written here.)
"""

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DropoutMask"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: spreads consecutive counters apart
_ROW_STRIDE = np.uint64(2**32)  # rows of head n are counters n·2^32 + i (sequences up to 2^32)


def _mix(z: Any) -> Any:
    """SplitMix64's finaliser on an array of uint64 (arithmetic wraps modulo 2^64)."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class DropoutMask:
    """The dropout mask of one forward: drop probability ``p``, the layer's ``key``, the ``call`` number."""

    p: float
    key: int
    call: int

    def __repr__(self) -> str:
        return f"DropoutMask(p={self.p:g}, call={self.call})"

    def _stream(self) -> Any:
        """One 64-bit number per forward, from the key and the call number."""
        key = np.array([self.key % 2**64], dtype=np.uint64)
        call = np.array([self.call], dtype=np.uint64)
        return _mix(_mix(key) + call * _GOLDEN)

    def keep(self, heads: int, rows: Any, cols: Any, dtype: Any) -> Any:
        """The mask for heads ``0..heads-1``, query ``rows`` and key ``cols`` (slices): ``[heads, rows, cols]``.

        Entries are ``1/(1-p)`` where kept and 0 where dropped, in ``dtype``.
        Any part of the mask equals the same part of the whole mask.
        """
        n = np.arange(heads, dtype=np.uint64)[:, None, None]
        i = np.arange(rows.start, rows.stop, dtype=np.uint64)[None, :, None]
        j = np.arange(cols.start, cols.stop, dtype=np.uint64)[None, None, :]
        row = _mix(self._stream() + (n * _ROW_STRIDE + i) * _GOLDEN)  # [heads, rows, 1]
        bits = _mix(row + (j + np.uint64(1)) * _GOLDEN)  # [heads, rows, cols]
        # u = (bits >> 11) / 2^53 is uniform in [0, 1); u >= p  <=>  bits >> 11 >= ceil(p · 2^53).
        kept = (bits >> np.uint64(11)) >= np.uint64(math.ceil(self.p * 2.0**53))
        scale = 1.0 / (1.0 - self.p)
        return np.where(kept, scale, 0.0).astype(dtype, copy=False)
