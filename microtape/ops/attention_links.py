"""Attention's links: the hand-derived backward of each step of the core, and the head split and merge.

This module lets the derivation table (:mod:`microtape.nn.attention.derivation`), the
hand-derived chain (:mod:`microtape.nn.attention.analytic`), the tiled kernel and the
teaching mistakes share one function per link::

    dP_dropped, dV = context_backward(dC, P_dropped, V)   # C = P̃ V
    dP = dropout_backward(dP_dropped, keep)                # P̃ = P ⊙ keep
    dS = softmax_backward(dP, P)                           # P = softmax(S): the op's VJP
    dQ, dK = scores_backward(dS, Q, K, score_scale(d))     # S = Q Kᵀ / √d

Swapping one (``links={"softmax": wrong}``) is how a mistake is shown
without copying the chain. Softmax's derivative itself is the op registry's
(:func:`microtape.ops.softmax_backward`), written once beside its forward.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.protocols import Value
from . import nn as nn_ops  # (looked up when called: a lesson may swap softmax_backward)

__all__ = [
    "LINKS",
    "score_scale",
    "split_heads",
    "merge_heads",
    "context_backward",
    "dropout_backward",
    "softmax_backward",
    "scores_backward",
]


#: The value the library adds to suppress a score (what the C++ original uses; microtape.nn.masks's too).
NEG_INF = -1e9


def score_scale(depth: int) -> float:
    """``1/√d``: the scores' scale, so the softmax does not saturate as the head depth ``d`` grows.

    A Python float, so a float32 computation stays float32.
    """
    return 1.0 / math.sqrt(depth)


# ---------------------------------------------------------------- shapes (no arithmetic)


def split_heads(x: Value, num_heads: int) -> Value:
    """``[B, T, E]`` to ``[B·H, T, D]``: head ``h`` takes features ``h·D .. (h+1)·D``.

    Uses only ``reshape`` and ``transpose``, so it runs on numpy arrays,
    Tensors and ScalarArrays alike (the taped forward calls it too).
    """
    batch, length, embed = x.shape
    depth = embed // num_heads
    # [B, T, E] -> [B, T, H, D] -> [B, H, T, D] -> [B·H, T, D]
    return x.reshape(batch, length, num_heads, depth).transpose(0, 2, 1, 3).reshape(batch * num_heads, length, depth)


def merge_heads(x: Value, batch: int) -> Value:
    """``[B·H, T, D]`` back to ``[B, T, E]`` (the inverse of :func:`split_heads`)."""
    heads_total, length, depth = x.shape
    num_heads = heads_total // batch
    # [B·H, T, D] -> [B, H, T, D] -> [B, T, H, D] -> [B, T, E]
    return x.reshape(batch, num_heads, length, depth).transpose(0, 2, 1, 3).reshape(batch, length, num_heads * depth)


def _t(x: Value) -> Value:
    """Transpose the last two axes (a batch of matrices stays a batch)."""
    return np.swapaxes(x, -1, -2)


# ---------------------------------------------------------------- the links (one per step's backward)


def context_backward(grad_context: Value, used_weights: Value, v_heads: Value) -> tuple[Value, Value]:
    """``C = P̃ V``: returns ``(dP̃, dV) = (dC Vᵀ, P̃ᵀ dC)``."""
    return grad_context @ _t(v_heads), _t(used_weights) @ grad_context


def dropout_backward(grad_dropped: Value, keep: Value) -> Value:
    """``P̃ = P ⊙ keep``: returns ``dP = dP̃ ⊙ keep`` (the same saved mask)."""
    return grad_dropped * keep


def softmax_backward(grad_weights: Value, weights: Value) -> Value:
    """``P = softmax(S)`` row by row: returns ``dS = P ⊙ (dP − rowsum(dP ⊙ P))`` (the op's VJP).

    The rowsum term is the coupling inside a row: raising one score lowers
    every other weight of that row (the ``−p pᵀ`` part of the Jacobian).
    """
    return nn_ops.softmax_backward(grad_weights, weights)


def scores_backward(grad_scores: Value, q_heads: Value, k_heads: Value, scale: float) -> tuple[Value, Value]:
    """``S = Q Kᵀ · scale``: returns ``(dQ, dK) = (dS K · scale, dSᵀ Q · scale)``."""
    return grad_scores @ k_heads * scale, _t(grad_scores) @ q_heads * scale


#: The links by name; ``links={"softmax": other}`` swaps one (teaching mistakes, exercises).
LINKS = {
    "context": context_backward,
    "dropout": dropout_backward,
    "softmax": softmax_backward,
    "scores": scores_backward,
}
