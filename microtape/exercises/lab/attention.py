"""Exercise: the backward pass of scaled dot-product attention (one head or a batch of heads).

The student is given ``Q, K, V`` and ``dC`` and returns ``dQ, dK, dV``. The
tape's answer comes from the same chain ``MultiHeadAttention`` records —
``scores``, ``scale``, ``softmax``, ``context`` — on Tensors.
"""

from typing import Any

import numpy as np

from ... import ops
from ...check import mistakes as wrong
from ...nn.attention import analytic
from .. import Exercise, Mistake, register
from . import core

__all__ = ["attention_backward"]


def attention_backward(q, k, v, grad_c):
    r"""Backward pass of scaled dot-product attention.

    Forward (recompute it yourself: you need P):
        S = Q Kᵀ / √d            scores        [Tq, Tk]
        P = softmax(S)           row by row    [Tq, Tk]
        C = P V                  context       [Tq, D]

    Arguments (numpy float64):
        q: [Tq, D]   k: [Tk, D]   v: [Tk, D]   grad_c: dL/dC, [Tq, D]
    or the same with a leading batch of heads: [N, Tq, D], … Write it so it
    works for both: use ``x.swapaxes(-1, -2)`` rather than ``x.T`` and
    ``axis=-1`` for row sums. ``d`` is the last axis of ``q``.

    Return a tuple ``(grad_q, grad_k, grad_v)`` shaped like ``q, k, v``.

    Some trials have large scores (each row of S shifted by up to ±1000):
    compute the softmax so that ``np.exp`` cannot overflow.

    The chain, one link at a time (each is a rule you have seen):
        C = P V      →  dP = ?,  dV = ?          (matmul: which side is transposed?)
        P = softmax  →  dS = ?                   (the softmax exercise)
        S = Q Kᵀ/√d  →  dQ = ?,  dK = ?          (matmul again, and the constant 1/√d)
    """
    raise NotImplementedError("attention_backward: write the backward pass of attention here")


# One dict per trial: (N or None for one head, Tq, Tk, D). The first is one
# square head, so transposed products still run and can be recognised by their
# values. "large" trials shift each row of the scores by up to ±1000 (see
# trials.shift_keys): the softmax is unchanged, an unstabilised exp overflows.
VISIBLE = (
    {"shape": (None, 4, 4, 4)},
    {"shape": (None, 3, 5, 2)},
    {"shape": (2, 4, 4, 3)},
    {"shape": (3, 2, 3, 4)},
    {"shape": (None, 5, 5, 8), "large": True},
)
HIDDEN = (
    {"shape": (None, 5, 5, 3)},
    {"shape": (2, 3, 6, 4), "large": True},
    {"shape": (None, 4, 2, 5)},
    {"shape": (4, 3, 3, 2)},
    {"shape": (None, 6, 6, 4), "large": True},
    {"shape": (2, 2, 5, 3)},
    # The large trial, shared by the class: ~57 000 inputs, O(Tq·Tk·D) forwards: too slow to differentiate numerically.
    {"shape": (2, 192, 256, 32), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    return core.draw_attention(rng, case)


def tape_gradients(inputs: dict[str, Any]) -> Any:
    return core.taped(inputs)[1:]


# ---------------------------------------------------------------- known mistakes
#
# Each variant is the one hand-derived chain (core.by_hand) with exactly one
# thing wrong — a link swapped, or the weights computed wrongly — and returns
# only the outputs that thing changes (the checker takes the others from the
# tape). ``_with_mistake`` refuses any other name, so no call of it is the
# right answer.

#: The outputs each mistake changes.
_CHANGES = {
    "no_backward_scale": ("grad_q", "grad_k"),
    "no_forward_scale": ("grad_q", "grad_k", "grad_v"),
    "no_scale_anywhere": ("grad_q", "grad_k", "grad_v"),
    "no_rowsum": ("grad_q", "grad_k"),
    "rowsum_wrong_axis": ("grad_q", "grad_k"),
    "grad_v_not_transposed": ("grad_v",),
    "grad_k_not_transposed": ("grad_k",),
    "softmax_skipped": ("grad_q", "grad_k"),
    "exp_not_stabilised": ("grad_q", "grad_k", "grad_v"),
    "global_max": ("grad_q", "grad_k", "grad_v"),
    "rowsum_without_keepdims": ("grad_q", "grad_k"),
    "scale_one_over_d": ("grad_q", "grad_k", "grad_v"),
}

#: The link each mistake swaps (see microtape.nn.attention.analytic.LINKS).
_LINKS = {
    "no_backward_scale": {"scores": wrong.scores_without_scale},
    "no_scale_anywhere": {"scores": wrong.scores_without_scale},
    "no_rowsum": {"softmax": wrong.softmax_without_rowsum},
    "rowsum_wrong_axis": {"softmax": lambda dp, p: ops.softmax_backward(dp, p, axis=-2)},
    "grad_v_not_transposed": {"context": lambda dc, p, v: (analytic.context_backward(dc, p, v)[0], p @ dc)},
    "grad_k_not_transposed": {"scores": wrong.scores_with_k_not_transposed},
    "softmax_skipped": {"softmax": lambda dp, p: dp},
    # On a square [T, T] trial the row sums, shape [T], broadcast as a row; elsewhere numpy raises.
    "rowsum_without_keepdims": {"softmax": lambda dp, p: ops.softmax_backward(dp, p, row_sum=np.sum(dp * p, axis=-1))},
    "scale_one_over_d": {"scores": lambda ds, q, k, scale: analytic.scores_backward(ds, q, k, scale * scale)},
}


def _with_mistake(mistake: Any, q: Any, k: Any, v: Any, grad_c: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    if mistake in ("no_forward_scale", "no_scale_anywhere"):
        weights = core.weights_of(q / core.scale_of(q), k)  # Q √d Kᵀ / √d = Q Kᵀ: the scale forgotten
    elif mistake == "exp_not_stabilised":
        weights = core.unstable_weights(q @ np.swapaxes(k, -1, -2) * core.scale_of(q))
    elif mistake == "global_max":
        weights = core.global_max_weights(q @ np.swapaxes(k, -1, -2) * core.scale_of(q))
    elif mistake == "scale_one_over_d":
        weights = core.weights_of(q * core.scale_of(q), k)  # (Q/√d) Kᵀ / √d = Q Kᵀ / d
    else:
        weights = core.weights_of(q, k)
    every = core.by_hand(q, k, v, grad_c, weights, links=_LINKS.get(mistake))
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="attention_backward",
    stub=attention_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Scaled dot-product attention backward: dQ, dK, dV",
    outputs=core.GRADIENT_OUTPUTS,
    mistakes=(
        Mistake(
            "no_backward_scale",
            "missing_scale",
            lambda: (
                "your dQ and dK miss the factor 1/√d. The forward scaled the scores, S = Q Kᵀ / √d, "
                f"so the chain rule scales their gradients too: {core.formula('dQ')}, {core.formula('dK')}."
            ),
            core.variant(_with_mistake, "no_backward_scale"),
        ),
        Mistake(
            "no_forward_scale",
            "missing_scale",
            "your P is softmax(Q Kᵀ), without the 1/√d: recompute the forward as in the prompt, "
            "P = softmax(Q Kᵀ / √d). The backward's 1/√d you already have.",
            core.variant(_with_mistake, "no_forward_scale"),
        ),
        Mistake(
            "no_scale_anywhere",
            "missing_scale",
            "your answer is the gradient of attention *without* the 1/√d: recompute "
            "P = softmax(Q Kᵀ / √d) in the forward, and divide dQ and dK by √d in the backward.",
            core.variant(_with_mistake, "no_scale_anywhere"),
        ),
        Mistake(
            "no_rowsum",
            "missing_rowsum",
            lambda: (
                "your dS is P ⊙ dP: the softmax backward lost its rowsum term. "
                f"{core.formula('dS')}, with the sum over each row (axis=-1, keepdims=True)."
            ),
            core.variant(_with_mistake, "no_rowsum"),
        ),
        Mistake(
            "rowsum_wrong_axis",
            "wrong_axis",
            "your softmax backward sums down the columns (axis=-2). Each row of P is one "
            "softmax over the keys, so rowsum(dP ⊙ P) runs over axis=-1.",
            core.variant(_with_mistake, "rowsum_wrong_axis"),
        ),
        Mistake(
            "grad_v_not_transposed",
            "transposed",
            "your dV is P dC. C = P V is a matmul with V on the right, so dV = Pᵀ dC (shape [Tk, D], like V).",
            core.variant(_with_mistake, "grad_v_not_transposed"),
        ),
        Mistake(
            "grad_k_not_transposed",
            "transposed",
            "your dK is dS Q / √d. K enters the scores transposed (S = Q Kᵀ / √d), so "
            "dK = dSᵀ Q / √d (shape [Tk, D], like K).",
            core.variant(_with_mistake, "grad_k_not_transposed"),
        ),
        Mistake(
            "softmax_skipped",
            "skipped_step",
            lambda: (
                "your dQ and dK use dP where dS belongs: the gradient went straight from P to S "
                f"without passing through the softmax. Apply the softmax backward first: {core.formula('dS')}."
            ),
            core.variant(_with_mistake, "softmax_skipped"),
        ),
        core.unstable_exp_mistake(_with_mistake),
        Mistake(
            "global_max",
            "global_max",
            "your softmax subtracts the largest score of the whole array, not each row's own: on a row "
            "far below it every exp underflows to 0, and 0 / 0 is NaN. Subtract s.max(axis=-1, keepdims=True).",
            core.variant(_with_mistake, "global_max"),
        ),
        Mistake(
            "rowsum_without_keepdims",
            "missing_keepdims",
            "your rowsum(dP ⊙ P) lost its axis (no keepdims=True), so numpy broadcast the row sums along "
            "the wrong axis: entry (i, j) subtracted the sum of row j. Use np.sum(dP * P, axis=-1, keepdims=True).",
            core.variant(_with_mistake, "rowsum_without_keepdims"),
        ),
        Mistake(
            "scale_one_over_d",
            "wrong_scale",
            "you scaled by 1/d; scaled dot-product attention divides by √d: P = softmax(Q Kᵀ / √d) in the "
            "forward, and dQ = dS K / √d, dK = dSᵀ Q / √d in the backward.",
            core.variant(_with_mistake, "scale_one_over_d"),
        ),
    ),
)
register(EXERCISE)
