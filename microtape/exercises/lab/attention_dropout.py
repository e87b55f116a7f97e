"""Exercise: the backward pass of attention with dropout on the weights.

The student is given ``Q, K, V``, the saved dropout mask, ``p`` and ``dC``
and returns ``dQ, dK, dV``. The tape's answer comes from the chain the
attention layer records in training mode — ``softmax``, then
``dropout(keep)`` on the weights, then ``context`` — on Tensors.
"""

from typing import Any

import numpy as np

from ...check import mistakes as wrong
from ...nn.attention import analytic
from .. import Exercise, Mistake, register, trials
from . import core

__all__ = ["attention_dropout_backward"]


def attention_dropout_backward(q, k, v, mask, p, grad_c):
    r"""Backward pass of scaled dot-product attention with dropout on the weights.

    Forward (recompute it yourself: you need P and P̃):
        S    = Q Kᵀ / √d                  scores                 [Tq, Tk]
        P    = softmax(S)                 row by row
        keep = mask / (1 − p)             the saved dropout mask, scaled (inverted dropout)
        P̃    = P ⊙ keep                   the dropped weights
        C    = P̃ V                        context                [Tq, D]

    Arguments (numpy float64, or with a leading batch of heads [N, …]):
        q: [Tq, D]   k: [Tk, D]   v: [Tk, D]   grad_c: dL/dC, [Tq, D]
        mask: booleans [Tq, Tk], True where a weight was kept
        p:    the drop probability (it changes from trial to trial)

    Return a tuple ``(grad_q, grad_k, grad_v)`` shaped like ``q, k, v``.

    The chain, one link at a time:
        C = P̃ V        →  dP̃ = ?,  dV = ?     (which weights did V meet?)
        P̃ = P ⊙ keep   →  dP = ?              (the dropout exercise)
        P = softmax(S) →  dS = ?              (with P, not P̃)
        S = Q Kᵀ/√d    →  dQ = ?,  dK = ?

    Some trials have large scores (rows shifted by up to ±1000): compute the
    softmax so that ``np.exp`` cannot overflow.
    """
    raise NotImplementedError("attention_dropout_backward: write the backward pass here")


# One dict per trial: (N or None, Tq, Tk, D) and p. The first is one square
# head, so transposed products run and can be recognised; p varies, so an
# answer with p written in does not pass.
VISIBLE = (
    {"shape": (None, 4, 4, 3), "p": 0.25},
    {"shape": (None, 3, 5, 2), "p": 0.5},
    {"shape": (2, 4, 4, 3), "p": 0.1},
    {"shape": (3, 2, 3, 4), "p": 0.4},
    {"shape": (None, 5, 5, 4), "p": 0.3, "large": True},
)
HIDDEN = (
    {"shape": (None, 5, 5, 2), "p": 0.2},
    {"shape": (2, 3, 6, 3), "p": 0.6, "large": True},
    {"shape": (None, 6, 3, 4), "p": 0.15},
    {"shape": (4, 3, 3, 2), "p": 0.35},
    {"shape": (None, 4, 4, 5), "p": 0.05, "large": True},
    {"shape": (2, 2, 5, 3), "p": 0.45},
    # The large trial, shared by the class: ~57 000 inputs, O(Tq·Tk·D) forwards: too slow to differentiate numerically.
    {"shape": (2, 192, 256, 32), "p": 0.2, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    inputs = core.draw_attention(rng, case)
    lead, (q_len, k_len) = inputs["q"].shape[:-2], (inputs["q"].shape[-2], inputs["k"].shape[-2])
    inputs["mask"] = trials.dropout_mask(rng, lead + (q_len, k_len), case["p"])
    inputs["p"] = case["p"]
    return inputs


def tape_gradients(inputs: dict[str, Any]) -> Any:
    return core.taped(inputs, keep=inputs["mask"] / (1.0 - inputs["p"]))[1:]


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the chain with exactly one link wrong; it returns only
# the outputs that link changes and refuses any other name, so no call of it
# is the right answer.

_CHANGES = {
    "grad_v_without_dropout": ("grad_v",),
    "grad_p_without_dropout": ("grad_q", "grad_k"),
    "dropout_scale_missing": ("grad_q", "grad_k", "grad_v"),
    "rowsum_with_dropped_weights": ("grad_q", "grad_k"),
    "dropout_after_softmax_backward": ("grad_q", "grad_k"),
    "exp_not_stabilised": ("grad_q", "grad_k", "grad_v"),
}


def _with_mistake(mistake: Any, q: Any, k: Any, v: Any, mask: Any, p: Any, grad_c: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    if mistake == "exp_not_stabilised":
        weights = core.unstable_weights(q @ np.swapaxes(k, -1, -2) * core.scale_of(q))
    else:
        weights = core.weights_of(q, k)
    keep = mask * 1.0 if mistake == "dropout_scale_missing" else mask / (1.0 - p)
    links = {
        # dV = Pᵀ dC: the weights before dropout.
        "grad_v_without_dropout": {"context": lambda dc, used, v: (dc @ np.swapaxes(v, -1, -2), _t(weights) @ dc)},
        "grad_p_without_dropout": {"dropout": wrong.dropout_not_applied},
        # The softmax backward with P̃ where P belongs.
        "rowsum_with_dropped_weights": {"softmax": wrong.softmax_of(weights * keep)},
        # keep applied after the softmax backward instead of before it.
        "dropout_after_softmax_backward": {
            "dropout": wrong.dropout_not_applied,
            "softmax": lambda dp, w: analytic.softmax_backward(dp, w) * keep,
        },
    }.get(mistake)
    every = core.by_hand(q, k, v, grad_c, weights, keep, links)
    return {name: every[name] for name in _CHANGES[mistake]}


def _t(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


EXERCISE = Exercise(
    name="attention_dropout_backward",
    stub=attention_dropout_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Attention with dropout backward: dV = P̃ᵀ dC, dP = (dC Vᵀ) ⊙ keep",
    outputs=core.GRADIENT_OUTPUTS,
    mistakes=(
        Mistake(
            "grad_v_without_dropout",
            "dropout_misplaced",
            "your dV is Pᵀ dC, with the weights before dropout. V met the dropped weights, C = P̃ V, so dV = P̃ᵀ dC.",
            core.variant(_with_mistake, "grad_v_without_dropout"),
        ),
        Mistake(
            "grad_p_without_dropout",
            "dropout_misplaced",
            "your dP is dC Vᵀ: that is dP̃, the gradient of the *dropped* weights. Dropout multiplied "
            "P by keep, so dP = (dC Vᵀ) ⊙ keep before the softmax backward.",
            core.variant(_with_mistake, "grad_p_without_dropout"),
        ),
        Mistake(
            "dropout_scale_missing",
            "dropout_scale_missing",
            "your keep is the mask without 1/(1 − p). Inverted dropout scales the kept weights: "
            "keep = mask / (1 − p), in P̃ (and so in dV) and in dP = (dC Vᵀ) ⊙ keep.",
            core.variant(_with_mistake, "dropout_scale_missing"),
        ),
        Mistake(
            "rowsum_with_dropped_weights",
            "dropout_misplaced",
            lambda: (
                "your softmax backward uses P̃ where P belongs. The softmax produced P (dropout came "
                f"after it), so {core.formula('dS', dropout=True)} with the undropped P."
            ),
            core.variant(_with_mistake, "rowsum_with_dropped_weights"),
        ),
        Mistake(
            "dropout_after_softmax_backward",
            "dropout_misplaced",
            "your keep multiplies dS, after the softmax backward. Undo the steps in reverse order: "
            "dropout came after the softmax, so its backward comes before it: dP = dP̃ ⊙ keep, then dS.",
            core.variant(_with_mistake, "dropout_after_softmax_backward"),
        ),
        core.unstable_exp_mistake(_with_mistake),
    ),
)
register(EXERCISE)
