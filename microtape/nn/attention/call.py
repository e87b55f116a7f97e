"""Checking one attention call before anything changes: the inputs, the sizes, the masks.

This module lets ``MultiHeadAttention`` (and its scalar trace, and ``microtape
check``) refuse a bad call with a message that names the argument — from the
shapes alone, before a ``[Tq, Tk]`` array is built or a byte of the layer
changes::

    call = check_call(attn, x, mask=mask)     # an AttentionCall, or a clear error
    call.batch, call.q_len, call.k_len, call.total_mask

The order matters: types and shapes of query/key/value first, then the memory
guard (a quadratic size is refused from ``B·H·Tq·Tk`` alone), and only then
the masks — which are ``[Tq, Tk]`` arrays, so scanning them (or building the
causal one) comes after the guard.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import masks
from ..checks import input_array

__all__ = ["AttentionCall", "check_call", "check_inputs", "check_memory", "score_bytes", "tiled_bytes",
           "require_score_memory"]  # fmt: skip


@dataclass(frozen=True)
class AttentionCall:
    """One forward's arguments, checked: what the forward and the scalar trace need."""

    self_attention: bool
    given: tuple  # (query, key, value) as passed (Tensors keep their connection)
    arrays: tuple  # the same as numpy arrays of the layer's dtype
    batch: int
    q_len: int
    k_len: int
    causal_mask: np.ndarray | None = None  # [Tq, Tk]
    user_mask: np.ndarray | None = None  # [Tq, Tk]
    total_mask: np.ndarray | None = None  # their sum


def _input_array(layer: Any, value: Any, argument: str) -> Any:
    data = input_array(value, argument, "MultiHeadAttention.forward", layer.dtype, finite=False)
    if data.ndim != 3:
        raise ValueError(f"MultiHeadAttention.forward: {argument} must be rank 3 [B, T, E], got shape {data.shape}")
    if data.shape[-1] != layer.embed:
        raise ValueError(
            f"MultiHeadAttention.forward: {argument} has shape {data.shape}; its last axis must be embed={layer.embed}"
        )
    if 0 in data.shape:
        raise ValueError(f"MultiHeadAttention.forward: {argument} has shape {data.shape}; no axis may be empty")
    return input_array(data, argument, "MultiHeadAttention.forward", layer.dtype)  # now the finite check


def check_inputs(layer: Any, query: Any, key: Any, value: Any) -> "AttentionCall":
    """Types, shapes and values of query/key/value; an :class:`AttentionCall` without its masks yet."""
    if (key is None) != (value is None):
        raise ValueError("MultiHeadAttention.forward: give both key and value, or neither (self-attention)")
    self_attention = key is None or (query is key and key is value)
    if key is None:
        key = value = query
    q_data = _input_array(layer, query, "query")
    k_data = q_data if key is query else _input_array(layer, key, "key")
    v_data = k_data if value is key else _input_array(layer, value, "value")
    if k_data.shape[:2] != v_data.shape[:2]:
        raise ValueError(f"MultiHeadAttention.forward: key {k_data.shape} and value {v_data.shape} must share B and Tk")
    if q_data.shape[0] != k_data.shape[0]:
        raise ValueError(
            f"MultiHeadAttention.forward: query has batch {q_data.shape[0]} but key/value have "
            f"{k_data.shape[0]}; B must match"
        )
    batch, q_len, k_len = q_data.shape[0], q_data.shape[1], k_data.shape[1]
    if layer.causal and q_len != k_len:
        raise ValueError(f"MultiHeadAttention.forward: causal attention needs Tq == Tk, got Tq={q_len}, Tk={k_len}")
    return AttentionCall(self_attention, (query, key, value), (q_data, k_data, v_data), batch, q_len, k_len)


def score_bytes(layer: Any, batch: int, q_len: int, k_len: int) -> Any:
    """Bytes of the score-sized arrays one forward + backward keeps (an upper bound)."""
    values = batch * layer.num_heads * q_len * k_len
    # scores, scaled_scores, weights (+ causal/masked scores, + dropout's
    # keep and dropped weights), a gradient for each, and the masks.
    copies = 3 + layer.causal + 1 + (2 if layer.training and layer.dropout > 0 else 0)
    return 2 * copies * values * np.dtype(layer.dtype).itemsize


def tiled_bytes(layer: Any, batch: int, q_len: int, k_len: int) -> Any:
    """Bytes the tiled core keeps and works in (an upper bound): ``O(B·H·T·D)`` plus one tile.

    Q, K, V heads and their gradients, O and dO, the row statistics L and
    D, and one tile's scores, weights, their gradients and dropout mask.
    """
    heads, depth, block = batch * layer.num_heads, layer.head_dim, layer.block_size or 1
    per_head = heads * depth * (2 * (q_len + 2 * k_len) + 2 * q_len) + 2 * heads * q_len
    tile = 5 * heads * min(block, q_len) * min(block, k_len)
    return (per_head + tile) * np.dtype(layer.dtype).itemsize


def check_memory(layer: Any, batch: int, q_len: int, k_len: int) -> None:
    if layer.block_size is not None:
        _check_tiled_memory(layer, batch, q_len, k_len)
        return
    needed = score_bytes(layer, batch, q_len, k_len)
    if needed > layer.max_score_bytes:
        values = batch * layer.num_heads * q_len * k_len
        raise MemoryError(
            f"MultiHeadAttention.forward: refused — the scores hold B·H·Tq·Tk = {batch}·{layer.num_heads}·"
            f"{q_len}·{k_len} = {values:,} values, and the tape keeps several such arrays and their "
            f"gradients: about {needed:,} bytes ({needed / 2**30:.2f} GiB), over the limit of "
            f"{layer.max_score_bytes:,} bytes. Use shorter sequences or a smaller batch, or raise "
            "attn.max_score_bytes, or use the tiled kernel (block_size=64), whose memory is linear in T."
        )


def _check_tiled_memory(layer: Any, batch: int, q_len: int, k_len: int) -> None:
    needed = tiled_bytes(layer, batch, q_len, k_len)
    if needed > layer.max_score_bytes:
        raise MemoryError(
            f"MultiHeadAttention.forward: refused — the tiled core keeps O(B·H·T·D) values (Q, K, V heads, "
            f"O and their gradients for B·H = {batch}·{layer.num_heads}, Tq = {q_len}, Tk = {k_len}, "
            f"D = {layer.head_dim}) plus one {layer.block_size}×{layer.block_size} tile per head: about "
            f"{needed:,} bytes ({needed / 2**30:.2f} GiB), over the limit of {layer.max_score_bytes:,} bytes. "
            "Use shorter sequences or a smaller batch, or raise attn.max_score_bytes."
        )


def require_score_memory(layer: Any, what: str, copies: Any) -> None:
    """Refuse to materialise ``copies`` score-sized arrays of the last (tiled) forward over the limit."""
    last = layer._last
    values = last.batch * layer.num_heads * last.nodes["Q_heads"].shape[1] * last.nodes["K_heads"].shape[1]
    needed = copies * values * np.dtype(layer.dtype).itemsize
    if needed > layer.max_score_bytes:
        raise MemoryError(
            f"MultiHeadAttention.{what}: refused — the tiled forward kept no score-sized array, and "
            f"recomputing this one needs {copies} of B·H·Tq·Tk = {values:,} values ({needed:,} bytes), over "
            f"the limit of {layer.max_score_bytes:,} bytes (attn.max_score_bytes)."
        )


def _check_mask(layer: Any, mask: Any, q_len: int, k_len: int, argument: str, where: str) -> Any:
    if mask is None:
        return None
    if np.asarray(getattr(mask, "data", mask)).dtype == np.bool_:
        raise TypeError(
            f"{where}: {argument} is boolean, but masks here are additive floats "
            "(0 = may attend, a large negative number such as -1e9 = suppressed). Convert it with "
            "microtape.nn.masks.from_bool(allowed) (True = may attend)."
        )
    shape = np.shape(getattr(mask, "data", mask))
    if shape != (q_len, k_len):
        raise ValueError(f"{where}: {argument} has shape {shape}; expected [Tq, Tk] = {[q_len, k_len]}")
    mask = input_array(mask, argument, where, layer.dtype, finite=False)
    if np.isnan(mask).any() or (mask == np.inf).any():
        raise ValueError(f"{where}: {argument} contains NaN or +inf; use 0 to allow and -1e9 or -inf to suppress")
    return mask


def _check_rows(suppressed: Any, argument: str, where: str) -> None:
    """Refuse a mask (``suppressed``: booleans ``[Tq, Tk]``, causal part included) that hides a whole row."""
    blocked = np.all(suppressed, axis=-1)
    if np.any(blocked):
        row = int(np.flatnonzero(blocked)[0])
        raise ValueError(
            f"{where}: query row {row} has no valid key — every entry of {argument} row "
            f"{row} (causal mask included) is <= {masks.SUPPRESSED_BELOW:g}. Its softmax would be meaningless; "
            "leave at least one key allowed in every row."
        )


def _with_masks(layer: Any, call: Any, mask: Any, argument: str, where: str) -> "AttentionCall":
    """The call with its masks checked and added up (after the memory guard: they are [Tq, Tk])."""
    user_mask = _check_mask(layer, mask, call.q_len, call.k_len, argument, where)
    if layer.block_size is not None:
        # The tiled kernel never builds a [Tq, Tk] causal mask (its tiles make their own); the
        # diagonal is always allowed, so only a user mask can hide a row.
        if user_mask is not None:
            hidden = masks.suppressed(user_mask)
            _check_rows(hidden | np.triu(np.ones(hidden.shape, bool), 1) if layer.causal else hidden, argument, where)
        return AttentionCall(**{**call.__dict__, "user_mask": user_mask})
    causal = masks.causal_mask(call.q_len, layer.dtype) if layer.causal else None
    parts = [part for part in (causal, user_mask) if part is not None]
    total = None if not parts else parts[0] if len(parts) == 1 else parts[0] + parts[1]
    if total is not None:
        _check_rows(masks.suppressed(total), argument, where)
    return AttentionCall(**{**call.__dict__, "causal_mask": causal, "user_mask": user_mask, "total_mask": total})


def check_call(
    layer: Any,
    query: Any,
    key: Any = None,
    value: Any = None,
    mask: Any = None,
    *,
    mask_name: str = "mask",
    where: str = "MultiHeadAttention.forward",
) -> Any:
    """Check a forward's arguments exactly as :meth:`forward` does, changing nothing.

    ``mask_name`` and ``where`` name the mask in errors as the caller calls it
    (a decoder layer's ``tgt_mask`` and ``memory_mask``).
    """
    call = check_inputs(layer, query, key, value)
    check_memory(layer, call.batch, call.q_len, call.k_len)
    return _with_masks(layer, call, mask, mask_name, where)
