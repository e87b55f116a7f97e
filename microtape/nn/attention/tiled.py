"""Tiled (flash) attention: the attention core in blocks, never holding a score matrix.

This module lets attention run the way FlashAttention-2 runs it — queries
and keys in blocks, the softmax computed *online* — and records the whole
core as one tape row::

    >>> import numpy as np, microtape as mt
    >>> attn = mt.nn.MultiHeadAttention(8, 2, causal=True, block_size=2, seed=0)
    >>> y = attn(np.random.default_rng(0).standard_normal((1, 5, 8)))
    >>> attn.tape.find("context").op.name
    'tiled_attention'

The standard chain (:mod:`microtape.nn.attention.chain`) builds the scores
``S = Q Kᵀ/√d + M`` for all ``B·H·Tq·Tk`` pairs, then ``P = softmax(S)``, then
``C = P V``, and its tape keeps all of them. Here one tile ``S_ij`` (query
block ``i``, key block ``j``) exists at a time.

Forward (the online softmax), for each query block, over its key blocks in order::

    m_new = max(m, rowmax(S_ij))             running row max (starts at -inf)
    α     = exp(m − m_new)                    how much the old terms must shrink
    P̂     = exp(S_ij − m_new)
    l     = α · l + rowsum(P̂)                 running sum of exponentials
    acc   = α · acc + (P̂ ⊙ keep_ij) V_j      running unnormalised output
    then  O_i = acc / l   and   L_i = m + log l     (the row's log-sum-exp)

Why it is exact: after any prefix of the keys, ``l = Σ exp(S_j − m)`` and
``acc = Σ exp(S_j − m) keep_j V_j`` with ``m`` the prefix's max. A new max
multiplies every term by ``exp(m − m_new) = α``, so rescaling the two sums is
the same as recomputing them; at the end ``acc / l = Σ softmax(S)_j keep_j V_j``.
Only ``O`` and ``L`` are saved: ``O(B·H·T·D)`` memory, plus one tile.

Backward, given ``dO`` — ``P`` is *recomputed* per tile from ``Q``, ``K`` and ``L``::

    D     = rowsum(dO ⊙ O)                    (= rowsum(dP ⊙ P), without P)
    P     = exp(S_ij − L_i)
    dV_j += (P ⊙ keep)ᵀ dO_i,    dP = (dO_i V_jᵀ) ⊙ keep,    dS = P ⊙ (dP − D_i)
    dQ_i += dS K_j / √d,         dK_j += dSᵀ Q_i / √d

With ``causal=True`` the tiles entirely above the diagonal are *skipped*
(never computed): every key there is later than every query. Masks are the
standard chain's: additive ``[Tq, Tk]`` floats, applied per tile, and a
causal ``-1e9`` inside the tiles that cross the diagonal. Dropout uses the
counter-based :class:`~microtape.nn.dropout_mask.DropoutMask`, regenerated
per tile in both passes — the same mask the standard chain builds whole.

The steps are generators (:func:`online_softmax`, :func:`backward_steps`)
that the forward and backward run to the end and that
:func:`microtape.check.tiled_report` walks one tile at a time; their update
rules are links (:data:`LINKS`) a teaching mistake can swap, as in
:mod:`microtape.nn.attention.analytic`. The kernel on plain arrays lives in
:mod:`microtape.ops.tiled_attention`, with the op itself (registered when
microtape is imported; its names are reachable from here too): this module
calls it on Tensors and Plain arrays and reads a recorded row back.
"""

from typing import Any

import numpy as np

# The kernel itself is an op (ops/ sits below nn/): its pieces stay reachable here
# (tiled.TileSchedule, tiled.score_tile, …) for the pictures, the tiled report and the exercises.
from ...ops.tiled_attention import (  # noqa: F401  (re-exported: see above)
    LINKS,
    TILED_ATTENTION,
    BackwardStep,
    OnlineState,
    Tile,
    TileSchedule,
    backward_steps,
    online_softmax,
    schedule_of,
    score_tile,
    tiled_backward,
    tiled_forward,
)
from ...values.plain import Plain
from ...values.tensor import Tensor

# This module's own names; the kernel's are listed in ops/tiled_attention.py's __all__.
__all__ = ["tiled_attention", "tiled_core", "recomputed_weights", "recomputed_keep"]


# ---------------------------------------------------------------- the op


def tiled_attention(
    q_heads: Any,
    k_heads: Any,
    v_heads: Any,
    block_size: Any,
    causal: bool = False,
    mask: Any = None,
    dropout: Any = None,
    name: str = "context",
) -> Any:
    """The tiled attention core of ``[N, Tq, D]`` queries over ``[N, Tk, D]`` keys and values.

    On Tensors it records one ``tiled_attention`` row (its parameters: the
    block size, ``causal``, the additive ``mask [Tq, Tk]`` and the
    :class:`~microtape.nn.dropout_mask.DropoutMask`, when given); on
    :class:`~microtape.values.plain.Plain` arrays it only computes. Returns the
    context ``[N, Tq, D]``.
    """
    params = {"block_size": block_size, "causal": bool(causal)}
    if mask is not None:
        params["mask"] = mask
    if dropout is not None:
        params["dropout"] = dropout
    if isinstance(q_heads, Tensor):
        return TILED_ATTENTION(q_heads, k_heads, v_heads, name=name, **params)
    if isinstance(q_heads, Plain):
        return Plain(TILED_ATTENTION.forward(q_heads.data, k_heads.data, v_heads.data, **params), name)
    raise TypeError(
        f"tiled_attention: runs on Tensors and Plain arrays, got {type(q_heads).__name__} "
        "(the scalar trace runs the standard chain: it is the same function)"
    )


def tiled_core(block_size: Any, causal: bool = False, dropout: Any = None) -> Any:
    """A core for :func:`~microtape.nn.attention.chain.attention_chain`: the tiled kernel instead of the chain.

    The tiled kernel makes its causal mask and its dropout mask tile by tile,
    so it takes ``causal`` and ``dropout`` here and only the user's additive
    ``mask`` per call.
    """

    def core(
        q_heads: Any, k_heads: Any, v_heads: Any, causal_mask: Any = None, mask: Any = None, keep: Any = None
    ) -> Any:
        if causal_mask is not None or keep is not None:
            raise ValueError("tiled_core: give causal= and dropout= to tiled_core(), not whole masks per call")
        mask = mask.data if isinstance(mask, (Tensor, Plain)) else mask
        return tiled_attention(q_heads, k_heads, v_heads, block_size, causal, mask, dropout)

    return core


# ---------------------------------------------------------------- reading a recorded row back


def _recorded(node: Any) -> Any:
    """``(q, k, v, schedule, mask, dropout)`` of a recorded ``tiled_attention`` node."""
    if node.op is not TILED_ATTENTION:
        raise ValueError(f"expected a node recorded by tiled_attention, got {node!r}")
    q, k, v = (x.data for x in node.inputs)
    params = node.params
    schedule = schedule_of(q, k, v, params["block_size"], params.get("causal", False), params.get("mask"))
    return q, k, v, schedule, params.get("mask"), params.get("dropout")


def recomputed_weights(node: Any) -> Any:
    """``P = exp(S − L)`` ``[N, Tq, Tk]`` of a recorded tiled row: recomputed on request from Q, K and L."""
    q, k, v, schedule, mask, dropout = _recorded(node)
    whole = Tile(0, 0, slice(0, schedule.q_len), slice(0, schedule.k_len))
    weights = score_tile(q, k, whole, mask, schedule.causal)
    weights -= node.residuals[..., None]
    return np.exp(weights, out=weights)


def recomputed_keep(node: Any) -> Any:
    """The dropout mask ``[N, Tq, Tk]`` of a recorded tiled row (None without dropout), regenerated."""
    q, k, v, schedule, mask, dropout = _recorded(node)
    if dropout is None:
        return None
    return dropout.keep(q.shape[0], slice(0, schedule.q_len), slice(0, schedule.k_len), node.data.dtype)
