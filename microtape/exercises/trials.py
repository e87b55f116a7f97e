"""Drawing the exercises' random inputs: large scores, masks, dropout masks.

This module lets an exercise build trials that catch numerically fragile
answers, not only wrong maths::

    >>> import numpy as np
    >>> from microtape.exercises.trials import LARGE, shift_rows
    >>> s = shift_rows(np.random.default_rng(0), np.zeros((3, 4)), LARGE)
    >>> float(np.abs(s).max())
    1000.0

Why shift rows: a softmax does not change when a constant is added to a
row, so the right answer stays as informative as with small scores — but
``np.exp`` of a score above ~709 is ``inf`` (and below ~−745 every entry of
the row is 0), so an answer that forgot to subtract the row maximum turns
into NaN. Scaling the scores instead would make every row one-hot and hide
most mistakes.
"""

from typing import Any

import numpy as np

from ..nn import masks
from ..ops.attention_links import score_scale

__all__ = ["LARGE", "shift_rows", "shift_keys", "causal", "padding", "attention_mask", "dropout_mask"]

#: The largest row shift of a large-score trial: exp(1000) overflows float64.
LARGE = 1000.0


def _signed_sizes(rng: np.random.Generator, count: int, magnitude: Any) -> Any:
    """``count`` shifts of size 0.6–1.0 × ``magnitude``, alternating in sign, the first exactly +magnitude."""
    sizes = magnitude * rng.uniform(0.6, 1.0, size=count)
    sizes[0] = magnitude
    signs = np.where(np.arange(count) % 2 == 0, 1.0, -1.0)
    return sizes * signs


def shift_rows(rng: np.random.Generator, scores: Any, magnitude: Any) -> Any:
    """``scores`` with each row (last axis) shifted by its own constant of size up to ``magnitude``."""
    rows = int(np.prod(scores.shape[:-1]))
    shifts = _signed_sizes(rng, rows, magnitude).reshape(scores.shape[:-1] + (1,))
    return scores + shifts


def shift_keys(rng: np.random.Generator, q: Any, k: Any, magnitude: Any) -> Any:
    """Keys plus a common vector ``u``, so that each row of ``Q Kᵀ/√d`` shifts by ``q_i·u/√d``.

    ``u`` is chosen so that the largest shift is exactly ``magnitude``: the
    softmax of every row is unchanged in shape, but an unshifted ``exp``
    overflows (or underflows to 0/0) on that row.
    """
    depth = q.shape[-1]
    direction = rng.standard_normal(depth)
    direction /= np.linalg.norm(direction)
    along = q @ direction * score_scale(depth)
    size = magnitude / float(np.max(np.abs(along)))
    return k + size * direction


def causal(q_len: int, value: Any = masks.NEG_INF) -> Any:
    """The causal mask ``[Tq, Tq]`` with ``value`` where a query may not look (``-1e9`` or ``-inf``)."""
    return np.where(masks.causal_mask(q_len) < 0, value, 0.0)


def padding(rng: np.random.Generator, q_len: int, k_len: int, value: Any = masks.NEG_INF) -> Any:
    """A padding mask ``[Tq, Tk]``: query ``i`` may look at its first ``length_i`` keys (at least one).

    The first query may look at all keys but one, so something is always masked.
    """
    lengths = rng.integers(1, k_len + 1, size=q_len)
    lengths[0] = max(1, k_len - 1)
    allowed = np.arange(k_len)[None, :] < lengths[:, None]
    return np.where(allowed, 0.0, value)


def attention_mask(rng: np.random.Generator, kind: Any, q_len: int, k_len: int, value: Any = masks.NEG_INF) -> Any:
    """A ``"causal"`` or ``"padding"`` additive mask."""
    if kind == "causal":
        if q_len != k_len:
            raise ValueError(f"attention_mask(kind='causal'): needs Tq == Tk, got {q_len} and {k_len}")
        return causal(q_len, value)
    if kind == "padding":
        return padding(rng, q_len, k_len, value)
    raise ValueError(f"attention_mask(kind={kind!r}): expected 'causal' or 'padding'")


def dropout_mask(rng: np.random.Generator, shape: Any, p: Any) -> Any:
    """A saved dropout mask: True (kept) with probability ``1 − p``, with at least one kept and one dropped."""
    mask = rng.random(shape) >= p
    mask.flat[0] = False
    mask.flat[-1] = True
    return mask
