"""The tiled attention kernel on plain arrays: the tiles, the online softmax, and its backward.

What :mod:`microtape.nn.attention.tiled` records as one tape row is computed here, on
numpy arrays: a :class:`TileSchedule` of query and key blocks, the online
softmax (:func:`online_softmax`, the forward's steps; :func:`tiled_forward`
runs them to the end) and the backward that recomputes each tile's weights
from ``Q``, ``K`` and the row log-sum-exp ``L`` (:func:`backward_steps`,
:func:`tiled_backward`). The update rules are links (:data:`LINKS`) that a
teaching mistake can swap. The math is in :mod:`microtape.nn.attention.tiled`'s docstring.
"""

from __future__ import annotations

import numbers
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..engine.protocols import Value
from . import attention_links
from . import nn as nn_ops
from .attention_links import NEG_INF, score_scale
from .core import Grads, primitive

__all__ = [
    "Tile",
    "TileSchedule",
    "OnlineState",
    "BackwardStep",
    "LINKS",
    "score_tile",
    "schedule_of",
    "online_softmax",
    "tiled_forward",
    "backward_steps",
    "tiled_backward",
]


# ---------------------------------------------------------------- the tiles


class Tile(NamedTuple):
    """One block of the score matrix: query block ``q_block`` (``rows``) against key block ``k_block`` (``cols``)."""

    q_block: int
    k_block: int
    rows: slice
    cols: slice


@dataclass(frozen=True)
class TileSchedule:
    """Which tiles of a ``q_len × k_len`` score matrix are computed, and in what order.

    Blocks are ``block_size`` long (the last one shorter when it does not
    divide the length). With ``causal``, a tile whose first key comes after
    its last query is skipped.
    """

    q_len: int
    k_len: int
    block_size: int
    causal: bool = False

    def _blocks(self, length: int) -> list[slice]:
        size = self.block_size
        return [slice(start, min(start + size, length)) for start in range(0, length, size)]

    @property
    def query_blocks(self) -> list[slice]:
        return self._blocks(self.q_len)

    @property
    def key_blocks(self) -> list[slice]:
        return self._blocks(self.k_len)

    def is_skipped(self, tile: Tile) -> bool:
        """True for a causal tile entirely above the diagonal (every key j > every query i)."""
        return self.causal and tile.cols.start >= tile.rows.stop

    def all_tiles(self) -> list[Tile]:
        """Every tile, computed or skipped, query block by query block."""
        keys = self.key_blocks
        return [Tile(a, b, rows, cols) for a, rows in enumerate(self.query_blocks) for b, cols in enumerate(keys)]

    def row(self, q_block: int) -> list[Tile]:
        """The computed tiles of one query block, in key order (what the online softmax walks)."""
        rows = self.query_blocks[q_block]
        tiles = (Tile(q_block, b, rows, cols) for b, cols in enumerate(self.key_blocks))
        return [tile for tile in tiles if not self.is_skipped(tile)]

    def forward_order(self) -> list[Tile]:
        """The computed tiles in the forward's order: query block by query block, keys in order."""
        return [tile for a in range(len(self.query_blocks)) for tile in self.row(a)]

    def backward_order(self) -> list[Tile]:
        """The computed tiles in the backward's order: key block by key block (FlashAttention-2's loop)."""
        return sorted(self.forward_order(), key=lambda tile: (tile.k_block, tile.q_block))

    def skipped(self) -> list[Tile]:
        """The tiles skipped by causality."""
        return [tile for tile in self.all_tiles() if self.is_skipped(tile)]

    def __str__(self) -> str:
        total = len(self.query_blocks) * len(self.key_blocks)
        skipped = len(self.skipped())
        text = f"{self.q_len}×{self.k_len} scores in tiles of {self.block_size}: {total - skipped} of {total} computed"
        return text + (f", {skipped} skipped (causal)" if self.causal else "")


def schedule_of(
    q: Value, k: Value, v: Value, block_size: int, causal: bool = False, mask: Value | None = None
) -> TileSchedule:
    """The :class:`TileSchedule` for ``q [N, Tq, D]``, ``k [N, Tk, D]``, ``v [N, Tk, Dv]``; clear errors otherwise."""
    where = "tiled_attention"
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or block_size <= 0:
        raise ValueError(f"{where}(block_size={block_size!r}): expected a positive integer")
    shapes = {"Q": np.shape(q), "K": np.shape(k), "V": np.shape(v)}
    for name, shape in shapes.items():
        if len(shape) != 3 or 0 in shape:
            raise ValueError(f"{where}: {name} has shape {shape}; expected a non-empty [N, T, D] (N = B·H heads)")
    (n, q_len, depth), (nk, k_len, depth_k), (nv, v_len, _) = shapes.values()
    if not n == nk == nv or k_len != v_len or depth != depth_k:
        raise ValueError(
            f"{where}: Q {shapes['Q']}, K {shapes['K']} and V {shapes['V']} must share N, K and V must share Tk, "
            "and Q and K must share D"
        )
    if mask is not None and np.shape(mask) != (q_len, k_len):
        raise ValueError(f"{where}: mask has shape {np.shape(mask)}; expected [Tq, Tk] = {[q_len, k_len]}")
    return TileSchedule(q_len, k_len, int(block_size), bool(causal))


def score_tile(q: Value, k: Value, tile: Tile, mask: Value | None = None, causal: bool = False) -> Value:
    """``S = Q_i K_jᵀ / √d`` (+ the causal mask) (+ ``mask``) for one tile: ``[N, rows, cols]``.

    The operations and their order are the standard chain's (scale, then
    causal, then mask), so a tile equals the same block of the chain's
    masked scores to rounding.
    """
    scores = q[:, tile.rows] @ np.swapaxes(k[:, tile.cols], -1, -2)
    scores *= score_scale(q.shape[-1])  # a Python float: float32 stays float32
    if causal and tile.cols.stop - 1 > tile.rows.start:  # the tile reaches above the diagonal
        i = np.arange(tile.rows.start, tile.rows.stop)[:, None]
        j = np.arange(tile.cols.start, tile.cols.stop)[None, :]
        scores += np.where(j > i, NEG_INF, 0.0).astype(scores.dtype)
    if mask is not None:
        scores += mask[tile.rows, tile.cols]
    return scores


# ---------------------------------------------------------------- the update rules (links)


def add_to_sum(l: Value, alpha: Value, weights: Value) -> Value:
    """``l = α · l + rowsum(P̂)``: shrink the old sum to the new max, add this tile's terms."""
    return alpha * l + weights.sum(axis=-1)


def add_to_accumulator(acc: Value, alpha: Value, used: Value, v_tile: Value) -> Value:
    """``acc = α · acc + (P̂ ⊙ keep) V_j``: the same rescaling for the unnormalised output."""
    return alpha[..., None] * acc + used @ v_tile


def logsumexp(m: Value, l: Value) -> Value:
    """``L = m + log l``: the row's log-sum-exp, all the backward needs of the softmax."""
    return m + np.log(l)


def delta(grad_out: Value, out: Value) -> Value:
    """``D = rowsum(dO ⊙ O)``: equals ``rowsum(dP ⊙ P)`` (``O = P̃ V``), with no score-sized array."""
    return np.einsum("...d,...d->...", grad_out, out)


def softmax_backward_with_delta(grad_weights: Value, weights: Value, row_delta: Value) -> Value:
    """``dS = P ⊙ (dP − D)``: softmax's backward (the op's) with the rowsum replaced by ``D``."""
    return nn_ops.softmax_backward(grad_weights, weights, row_sum=row_delta[..., None])


#: The update rules by name; ``links={"accumulate": wrong}`` swaps one (teaching mistakes).
LINKS = {
    "sum": add_to_sum,
    "accumulate": add_to_accumulator,
    "logsumexp": logsumexp,
    "delta": delta,
    "softmax": softmax_backward_with_delta,
}


# ---------------------------------------------------------------- forward


class OnlineState(NamedTuple):
    """The online softmax of one query block after the key block of ``tile``."""

    tile: Tile
    m: np.ndarray  # [N, rows]: running row max
    l: np.ndarray  # [N, rows]: running sum of exp(S − m)
    acc: np.ndarray  # [N, rows, D]: running unnormalised output Σ exp(S − m) keep V


def online_softmax(
    q: Value,
    k: Value,
    v: Value,
    schedule: Any,
    q_block: int,
    mask: Value | None = None,
    dropout: Any = None,
    links: Any = None,
) -> Iterator[OnlineState]:
    """Walk one query block's key blocks in order; yield an :class:`OnlineState` after each.

    Every state holds new arrays (nothing is changed in place), so a walker
    may keep them.
    """
    link = {**LINKS, **(links or {})}
    rows = schedule.query_blocks[q_block]
    heads, count = q.shape[0], rows.stop - rows.start
    dtype = np.result_type(q, k, v)
    m = np.full((heads, count), -np.inf, dtype=dtype)
    l = np.zeros((heads, count), dtype=dtype)
    acc = np.zeros((heads, count, v.shape[-1]), dtype=dtype)
    for tile in schedule.row(q_block):
        weights = score_tile(q, k, tile, mask, schedule.causal)
        m_new = np.maximum(m, weights.max(axis=-1))
        # A row whose keys so far are all -inf has m = -inf; subtracting 0 instead keeps its
        # terms exp(-inf) = 0 (and -inf - -inf would be NaN).
        shift = np.where(np.isneginf(m_new), 0.0, m_new).astype(dtype, copy=False)
        weights -= shift[..., None]
        np.exp(weights, out=weights)  # P̂ = exp(S − m_new), in the scores' buffer
        alpha = np.exp(m - shift)  # 0 for a row that had no finite score yet
        l = link["sum"](l, alpha, weights)
        used = weights if dropout is None else weights * dropout.keep(heads, tile.rows, tile.cols, dtype)
        acc = link["accumulate"](acc, alpha, used, v[:, tile.cols])
        m = m_new
        yield OnlineState(tile, m, l, acc)


def tiled_forward(
    q: Value, k: Value, v: Value, schedule: Any, mask: Value | None = None, dropout: Any = None, links: Any = None
) -> Value:
    """``O [N, Tq, D]`` and ``L [N, Tq]`` by the online softmax, one query block at a time.

    The tape keeps ``O`` as the op's output and ``L`` in the node's residuals
    slot (what the backward needs saved from the forward).
    """
    link = {**LINKS, **(links or {})}
    heads, q_len, depth = q.shape[0], q.shape[1], v.shape[-1]
    dtype = np.result_type(q, k, v)
    # O is laid out in memory as Q is (``empty_like`` keeps the order of Q's strides): when Q is
    # the head-split view of a [B=1, T, E] projection, merging O's heads back is a view, not a copy.
    out = np.empty_like(q, dtype=dtype, shape=(heads, q_len, depth))
    lse = np.empty((heads, q_len), dtype=dtype)
    for q_block, rows in enumerate(schedule.query_blocks):
        # Walk every key block; the last state holds the whole row (key block 0 is never skipped).
        (state,) = deque(online_softmax(q, k, v, schedule, q_block, mask, dropout, links), maxlen=1)
        out[:, rows] = state.acc / state.l[..., None]
        lse[:, rows] = link["logsumexp"](state.m, state.l)
    return out, lse


# ---------------------------------------------------------------- backward


class BackwardStep(NamedTuple):
    """What one tile adds to the gradients: ``dQ[:, rows]``, ``dK[:, cols]``, ``dV[:, cols]``."""

    tile: Tile
    grad_q: np.ndarray  # [N, rows, D]
    grad_k: np.ndarray  # [N, cols, D]
    grad_v: np.ndarray  # [N, cols, Dv]


def backward_steps(
    grad_out: Value,
    q: Value,
    k: Value,
    v: Value,
    lse: Value,
    row_delta: Value,
    schedule: Any,
    mask: Value | None = None,
    dropout: Any = None,
    links: Any = None,
) -> Iterator[BackwardStep]:
    """Walk the tiles in the backward's order; yield each tile's :class:`BackwardStep`.

    ``lse`` is the forward's ``L``, ``row_delta`` is ``D = rowsum(dO ⊙ O)``.
    The per-tile formulas are the hand-derived chain's links
    (:mod:`microtape.ops.attention_links`) on one tile, with ``D`` for the rowsum.
    """
    link = {**LINKS, **(links or {})}
    heads, scale, dtype = q.shape[0], score_scale(q.shape[-1]), np.result_type(q, k, v)
    for tile in schedule.backward_order():
        weights = score_tile(q, k, tile, mask, schedule.causal)
        weights -= lse[:, tile.rows, None]
        np.exp(weights, out=weights)  # P = exp(S − L): the softmax, recomputed without a row pass
        grad_rows = grad_out[:, tile.rows]
        keep = None if dropout is None else dropout.keep(heads, tile.rows, tile.cols, dtype)
        used = weights if keep is None else weights * keep
        grad_used, grad_v = attention_links.context_backward(grad_rows, used, v[:, tile.cols])
        grad_weights = grad_used if keep is None else attention_links.dropout_backward(grad_used, keep)
        grad_scores = link["softmax"](grad_weights, weights, row_delta[:, tile.rows])
        grad_q, grad_k = attention_links.scores_backward(grad_scores, q[:, tile.rows], k[:, tile.cols], scale)
        yield BackwardStep(tile, grad_q, grad_k, grad_v)


def tiled_backward(
    grad_out: Value,
    out: Value,
    q: Value,
    k: Value,
    v: Value,
    schedule: Any,
    mask: Value | None = None,
    dropout: Any = None,
    links: Any = None,
    lse: Value = None,
) -> tuple[Value, Value, Value]:
    """``(dQ, dK, dV)``: the tiles' contributions added block by block.

    ``lse`` is the forward's saved ``L``; without it the forward runs again to find it.
    """
    link = {**LINKS, **(links or {})}
    lse = tiled_forward(q, k, v, schedule, mask, dropout)[1] if lse is None else lse
    row_delta = link["delta"](grad_out, out)
    grad_q, grad_k, grad_v = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for step in backward_steps(grad_out, q, k, v, lse, row_delta, schedule, mask, dropout, links):
        grad_q[:, step.tile.rows] += step.grad_q
        grad_k[:, step.tile.cols] += step.grad_k
        grad_v[:, step.tile.cols] += step.grad_v
    return grad_q, grad_k, grad_v


# ---------------------------------------------------------------- the op


def _forward_saving(
    q: Value, k: Value, v: Value, block_size: int, causal: bool = False, mask: Value | None = None, dropout: Any = None
) -> tuple[Value, Value]:
    """``(O, L)``: the output, and the log-sum-exp the backward needs (the node's residuals)."""
    return tiled_forward(q, k, v, schedule_of(q, k, v, block_size, causal, mask), mask, dropout)


def _forward(
    q: Value, k: Value, v: Value, block_size: int, causal: bool = False, mask: Value | None = None, dropout: Any = None
) -> Value:
    return _forward_saving(q, k, v, block_size, causal, mask, dropout)[0]


def _vjp(
    g: Value,
    ans: Value,
    q: Value,
    k: Value,
    v: Value,
    block_size: int,
    causal: bool = False,
    mask: Value | None = None,
    dropout: Any = None,
    residuals: Value = None,
) -> Grads:
    schedule = schedule_of(q, k, v, block_size, causal, mask)
    return tiled_backward(g, ans, q, k, v, schedule, mask, dropout, lse=residuals)


def _jvp(
    tangents: Sequence[Value | None],
    ans: Value,
    q: Value,
    k: Value,
    v: Value,
    block_size: int,
    causal: bool = False,
    mask: Value | None = None,
    dropout: Any = None,
) -> Value:
    """Forward mode, on the whole score matrix (a tangent of the kernel, untiled: ``O(Tq·Tk)`` memory).

    ``dS = (dQ Kᵀ + Q dKᵀ)/√d``, ``dP = P ⊙ (dS − rowsum(P ⊙ dS))``,
    ``dO = (dP ⊙ keep) V + (P ⊙ keep) dV``.
    """
    tq, tk, tv = (np.zeros_like(x) if t is None else t for t, x in zip(tangents, (q, k, v)))
    schedule = schedule_of(q, k, v, block_size, causal, mask)
    whole = Tile(0, 0, slice(0, schedule.q_len), slice(0, schedule.k_len))
    weights = nn_ops.softmax.forward(score_tile(q, k, whole, mask, schedule.causal), axis=-1)
    grad_scores = (tq @ np.swapaxes(k, -1, -2) + q @ np.swapaxes(tk, -1, -2)) * score_scale(q.shape[-1])
    grad_weights = nn_ops.softmax_backward(grad_scores, weights)  # softmax's Jacobian is symmetric: JVP = VJP
    if dropout is not None:
        keep = dropout.keep(q.shape[0], whole.rows, whole.cols, np.result_type(q, k, v))
        weights, grad_weights = weights * keep, grad_weights * keep
    return grad_weights @ v + weights @ tv


def _scratch(
    shapes: Sequence[Any],
    itemsize: int,
    block_size: int,
    causal: bool = False,
    mask: Value | None = None,
    dropout: Any = None,
) -> tuple[int, int]:
    """What a forward and a backward allocate besides O, L and the gradients: block-sized tiles.

    Forward, per tile: the scores tile (exponentiated in place) and its
    update of the accumulator (``α·acc`` and ``P̂ V_j``, each ``[N, rows, D]``).
    Backward, per tile: ``P``, ``dP``, ``dP − D`` and ``dS`` (four tiles, one
    more for the softmax's product), the three tile gradients and a
    temporary of their sum, and ``D = rowsum(dO ⊙ O)`` for every row. A
    dropout keep-mask is one more tile. (Counted against ``tracemalloc`` in
    tests/viz/test_memory.py.)
    """
    _, q, k, v = shapes
    heads, rows, cols = q[0], min(block_size, q[1]), min(block_size, k[1])
    tile, strip = heads * rows * cols, heads * max(rows, cols) * max(q[-1], v[-1])
    forward = 2 * tile + 3 * strip
    vjp = 5 * tile + 4 * strip + heads * q[1]
    if dropout is not None:
        forward, vjp = forward + tile, vjp + tile
    return forward * itemsize, vjp * itemsize


def _label(params: dict[str, Any]) -> str:
    text = f"tiles of {params.get('block_size', '?')}"
    return text + (", causal: tiles above the diagonal skipped" if params.get("causal") else "")


#: The whole attention core as one primitive: ``O = softmax(Q Kᵀ/√d + M) ⊙ keep · V``, tiled.
TILED_ATTENTION = primitive(
    "tiled_attention",
    _forward,
    _vjp,
    [
        "sum over key tiles of dS {K}_j / sqrt(d), dS = P * (({g} {V}_j^T) * keep - D)",
        "sum over query tiles of dS^T {Q}_i / sqrt(d)",
        "sum over query tiles of (P * keep)^T {g}_i",
    ],
    [
        r"\bar Q_i = \sum_j dS_{ij} K_j / \sqrt d",
        r"\bar K_j = \sum_i dS_{ij}^{\top} Q_i / \sqrt d",
        r"\bar V_j = \sum_i (P_{ij} \odot \mathrm{keep})^{\top} \bar O_i",
    ],
    inputs=("Q", "K", "V"),
    output="O",
    # (No semicolons in the note: pictures split the formula into its per-input parts at them.)
    note="per tile P = exp(S - L) from the saved L = m + log l, and D = rowsum(g * O)",
    example_params={"block_size": 2},
    label=_label,
    forward_saving=_forward_saving,
    jvp=_jvp,
    # Its backward is a numpy kernel, not a program of ops: it cannot be recorded.
    higher_order=False,
    reads=("Q", "K", "V", "O"),
    scratch=_scratch,
)
