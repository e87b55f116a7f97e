"""Exercise: causal and padding-masked attention, end to end — the forward and the backward.

The student is given ``Q, K, V``, an additive mask and ``dC`` and returns the
context ``C`` and ``dQ, dK, dV``. The tape's answer comes from the chain the
attention layer records — ``scores``, ``scale``, ``add_constant(mask)``,
``softmax``, ``context`` — on Tensors.
"""

from typing import Any

import numpy as np

from ...check import mistakes as wrong
from ...nn import masks
from ...nn.attention import analytic
from .. import Exercise, Mistake, Output, register, trials
from . import core

__all__ = ["masked_attention"]


def masked_attention(q, k, v, mask, grad_c):
    r"""Masked scaled dot-product attention: the forward *and* the backward.

    Forward (write it):
        S = Q Kᵀ / √d + M        scores plus the additive mask   [Tq, Tk]
        P = softmax(S)           row by row
        C = P V                  context                         [Tq, D]

    Arguments (numpy float64):
        q: [Tq, D]   k: [Tk, D]   v: [Tk, D]   grad_c: dL/dC, [Tq, D]
        (or the same with a leading batch of heads [N, …])
        mask: [Tq, Tk], the same for every head — 0 where query i may look
              at key j, a large negative number (-1e9, or -inf) where it may
              not. A causal mask hides the future (j > i); a padding mask
              hides the keys past each sequence's length.

    Return a tuple ``(context, grad_q, grad_k, grad_v)``.

    Some trials have large scores (rows shifted by up to ±1000): compute the
    softmax so that ``np.exp`` cannot overflow. Then walk the chain back as in
    the attention exercise: what does adding a constant mask do to the
    gradient, and what is dS at a masked position?
    """
    raise NotImplementedError("masked_attention: compute the context and the gradients here")


# One dict per trial: (N or None, Tq, Tk, D), the kind of mask and the value
# that suppresses. Causal masks need Tq == Tk; "large" trials shift each row of
# the scores by up to ±1000 (see trials.shift_keys).
VISIBLE = (
    {"shape": (None, 4, 4, 3), "mask": "causal", "value": masks.NEG_INF},
    {"shape": (None, 3, 5, 2), "mask": "padding", "value": masks.NEG_INF},
    {"shape": (2, 4, 4, 3), "mask": "causal", "value": -np.inf},
    {"shape": (3, 2, 6, 4), "mask": "padding", "value": -np.inf},
    {"shape": (None, 5, 5, 4), "mask": "padding", "value": masks.NEG_INF, "large": True},
)
HIDDEN = (
    {"shape": (None, 5, 5, 2), "mask": "padding", "value": -np.inf},
    {"shape": (2, 3, 3, 4), "mask": "causal", "value": masks.NEG_INF, "large": True},
    {"shape": (None, 6, 4, 3), "mask": "padding", "value": masks.NEG_INF},
    {"shape": (3, 5, 5, 2), "mask": "causal", "value": -np.inf},
    {"shape": (None, 4, 7, 5), "mask": "padding", "value": masks.NEG_INF, "large": True},
    {"shape": (2, 6, 6, 3), "mask": "causal", "value": masks.NEG_INF},
    # The large trial, shared by the class: ~74 000 inputs, each forward O(T²·D): too slow for numeric differentiation.
    {"shape": (2, 192, 192, 32), "mask": "causal", "value": masks.NEG_INF, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    inputs = core.draw_attention(rng, case)
    q_len, k_len = inputs["q"].shape[-2], inputs["k"].shape[-2]
    inputs["mask"] = trials.attention_mask(rng, case["mask"], q_len, k_len, case["value"])
    return inputs


def tape_gradients(inputs: dict[str, Any]) -> Any:
    return core.taped(inputs, mask=inputs["mask"])


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the chain with exactly one thing wrong; it returns only
# the outputs that thing changes and refuses any other name, so no call of it
# is the right answer. (Adding the mask before dividing by √d is not here: with
# -1e9 or -inf it gives the very same weights.)

_ALL = ("context", "grad_q", "grad_k", "grad_v")
_CHANGES = {
    "mask_ignored": _ALL,
    "mask_after_softmax": _ALL,
    "masked_scores_set_to_zero": _ALL,
    "mask_transposed": _ALL,
    "no_rowsum": ("grad_q", "grad_k"),
    "exp_not_stabilised": _ALL,
}


def _weights(mistake: Any, q: Any, k: Any, mask: Any) -> Any:
    """P, computed right — or the way the mistake computes it."""
    allowed = mask == 0
    if mistake == "mask_ignored":
        return core.weights_of(q, k)
    if mistake == "mask_after_softmax":
        return core.weights_of(q, k) * allowed
    if mistake == "masked_scores_set_to_zero":
        scores = q @ np.swapaxes(k, -1, -2) * core.scale_of(q)
        return core.weights_of(q, k, np.where(allowed, 0.0, -scores))  # S + M = 0 where masked
    if mistake == "mask_transposed":
        return core.weights_of(q, k, np.swapaxes(mask, -1, -2))
    if mistake == "exp_not_stabilised":
        return core.unstable_weights(q @ np.swapaxes(k, -1, -2) * core.scale_of(q) + mask)
    return core.weights_of(q, k, mask)


def _with_mistake(mistake: Any, q: Any, k: Any, v: Any, mask: Any, grad_c: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    with np.errstate(over="ignore", invalid="ignore"):
        weights = _weights(mistake, q, k, mask)
    links = {
        "no_rowsum": {"softmax": wrong.softmax_without_rowsum},
        # The zeroed scores are constants: no gradient flows to the masked entries.
        "masked_scores_set_to_zero": {"softmax": lambda dp, w: analytic.softmax_backward(dp, w) * (mask == 0)},
    }.get(mistake)
    every = core.by_hand(q, k, v, grad_c, weights, links=links)
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="masked_attention",
    stub=masked_attention,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Causal and padding-masked attention, end to end: C, dQ, dK, dV",
    outputs=(
        Output("context", "grad_c", aliases=("C",)),
        *core.GRADIENT_OUTPUTS,
    ),
    mistakes=(
        Mistake(
            "mask_ignored",
            "mask_not_applied",
            "your P is softmax(Q Kᵀ / √d) without the mask, so queries look at keys they may not "
            "(the future, or padding). Add the mask to the scaled scores before the softmax.",
            core.variant(_with_mistake, "mask_ignored"),
        ),
        Mistake(
            "mask_after_softmax",
            "mask_after_softmax",
            "your P is the unmasked softmax with the masked weights zeroed afterwards, so its rows no "
            "longer sum to 1. Add the mask *before* the softmax: softmax(S + M) renormalises over "
            "the allowed keys.",
            core.variant(_with_mistake, "mask_after_softmax"),
        ),
        Mistake(
            "masked_scores_set_to_zero",
            "mask_as_zero",
            "your masked scores are set to 0 — but exp(0) = 1, so the masked keys still get weight. "
            "The mask is *added*: S + M, where exp(score − 1e9) is 0.",
            core.variant(_with_mistake, "masked_scores_set_to_zero"),
        ),
        Mistake(
            "mask_transposed",
            "transposed",
            "your mask is transposed: mask[i, j] is about query i (row) and key j (column), so add "
            "it as it is — a transposed causal mask lets each query see the future, not the past.",
            core.variant(_with_mistake, "mask_transposed"),
        ),
        Mistake(
            "no_rowsum",
            "missing_rowsum",
            lambda: (
                "your dS is P ⊙ dP: the softmax backward lost its rowsum term. "
                f"{core.formula('dS')}; the mask, a constant, changes nothing in it."
            ),
            core.variant(_with_mistake, "no_rowsum"),
        ),
        Mistake(
            "exp_not_stabilised",
            "unstable_exp",
            "your softmax overflows on large scores (np.exp of 1000 is inf, and inf / inf is NaN). "
            "Subtract each row's maximum of S + M before exp: the softmax does not change.",
            core.variant(_with_mistake, "exp_not_stabilised"),
        ),
    ),
)
register(EXERCISE)
