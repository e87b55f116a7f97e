"""Exercise: the backward pass of a masked softmax, ``P = softmax(S + M)``.

The mask ``M`` is additive, as in :mod:`microtape.nn.masks`: 0 allows a key,
a large negative number (``-1e9``, or ``-inf``) suppresses it. The tape's
answer comes from ``Tensor.add_constant(mask).softmax()`` and the tape
backward.
"""

from typing import Any

import numpy as np

from ... import ops
from ...engine import Tape
from ...nn import masks
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register, trials

__all__ = ["masked_softmax_backward"]


def masked_softmax_backward(s, mask, grad_p):
    r"""Backward pass of a masked softmax.

    Forward (recompute it yourself):
        P = softmax(S + M)      row by row, along the last axis

    Arguments (numpy float64):
        s:       the scores, [Tq, Tk] or [N, Tq, Tk]
        mask:    the additive mask [Tq, Tk]: 0 where a query may look at a
                 key, a large negative number (-1e9, or -inf) where it may
                 not. It is the same for every entry of the batch.
        grad_p:  dL/dP, the shape of ``s``

    Return ``grad_s`` = dL/dS, the shape of ``s``.

    Some trials have large scores (each row shifted by up to ±1000): compute
    the softmax so that ``np.exp`` cannot overflow.

    Think first: the mask is a constant, so what does adding it do to the
    gradient? And what should the gradient be at a masked position — does
    the loss change if you nudge a score nobody looks at?
    """
    raise NotImplementedError("masked_softmax_backward: write the backward pass of the masked softmax here")


# One dict per trial: (N or None, Tq, Tk), the kind of mask and the value that
# suppresses. "large" trials shift each row of the scores by up to ±1000: the
# softmax is unchanged, an unstabilised exp overflows.
VISIBLE = (
    {"shape": (None, 4, 4), "mask": "causal", "value": masks.NEG_INF},
    {"shape": (None, 3, 5), "mask": "padding", "value": masks.NEG_INF},
    {"shape": (2, 4, 4), "mask": "causal", "value": -np.inf},
    {"shape": (3, 2, 6), "mask": "padding", "value": -np.inf},
    {"shape": (None, 5, 5), "mask": "padding", "value": masks.NEG_INF, "large": True},
)
HIDDEN = (
    {"shape": (None, 5, 5), "mask": "causal", "value": -np.inf},
    {"shape": (2, 3, 4), "mask": "padding", "value": masks.NEG_INF, "large": True},
    {"shape": (None, 6, 3), "mask": "padding", "value": -np.inf},
    {"shape": (3, 3, 3), "mask": "causal", "value": masks.NEG_INF, "large": True},
    {"shape": (None, 2, 7), "mask": "padding", "value": masks.NEG_INF},
    {"shape": (2, 6, 6), "mask": "causal", "value": masks.NEG_INF},
    # The large trial, shared by the class: rows of 4 096 keys: too many forwards for numeric differentiation.
    {"shape": (2, 16, 4096), "mask": "padding", "value": masks.NEG_INF, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    batch, q_len, k_len = case["shape"]
    lead = () if batch is None else (batch,)
    mask = trials.attention_mask(rng, case["mask"], q_len, k_len, case["value"])
    s = rng.standard_normal(lead + (q_len, k_len))
    if case.get("large"):
        s = trials.shift_rows(rng, s, trials.LARGE)
    return {"s": s, "mask": mask, "grad_p": rng.standard_normal(lead + (q_len, k_len))}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    scores = Tensor(inputs["s"], requires_grad=True, name="s")
    with Tape() as tape:
        weights = scores.add_constant(inputs["mask"], name="masked_scores").softmax(-1, name="p")
    tape.backward(weights, inputs["grad_p"])
    return (scores.grad,)


# ---------------------------------------------------------------- known mistakes
#
# Each variant returns the output it gets wrong, by name. They share the
# forward (``_weights``) but each spells out its own softmax backward: the
# package holds no right one to call.


def _allowed(mask: np.ndarray) -> np.ndarray:
    return mask == 0


def _mask_ignored(s: Any, mask: Any, grad_p: Any) -> Any:
    weights = ops.softmax.forward(s, axis=-1)
    return {"grad_s": ops.softmax_backward(grad_p, weights)}


def _mask_after_softmax(s: Any, mask: Any, grad_p: Any) -> Any:
    # Zero the masked weights of the *unmasked* softmax: rows no longer sum to 1.
    weights = ops.softmax.forward(s, axis=-1) * _allowed(mask)
    return {"grad_s": ops.softmax_backward(grad_p, weights)}


def _masked_scores_set_to_zero(s: Any, mask: Any, grad_p: Any) -> Any:
    # exp(0) = 1 is not 0: the masked keys still get weight.
    weights = ops.softmax.forward(np.where(_allowed(mask), s, 0.0), axis=-1)
    grad = ops.softmax_backward(grad_p, weights)
    return {"grad_s": grad * _allowed(mask)}


def _no_rowsum(s: Any, mask: Any, grad_p: Any) -> Any:
    return {"grad_s": ops.softmax.forward(s + mask, axis=-1) * grad_p}


def _exp_not_stabilised(s: Any, mask: Any, grad_p: Any) -> Any:
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(s + mask)  # no max subtracted: overflows above ~709
        weights = e / np.sum(e, axis=-1, keepdims=True)
        return {"grad_s": ops.softmax_backward(grad_p, weights)}


EXERCISE = Exercise(
    name="masked_softmax_backward",
    stub=masked_softmax_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Masked softmax backward: grad_s of softmax(s + mask)",
    outputs=(Output("grad_s", "s"),),
    mistakes=(
        Mistake(
            "mask_ignored",
            "mask_not_applied",
            "your grad_s is the gradient of softmax(s), without the mask: recompute "
            "P = softmax(s + mask). Masked weights are then exactly 0, and so is their gradient.",
            _mask_ignored,
        ),
        Mistake(
            "mask_after_softmax",
            "mask_after_softmax",
            "your P is softmax(s) with the masked entries zeroed afterwards, so its rows no "
            "longer sum to 1. Add the mask *before* the softmax: P = softmax(s + mask) "
            "renormalises over the allowed keys.",
            _mask_after_softmax,
        ),
        Mistake(
            "masked_scores_set_to_zero",
            "mask_as_zero",
            "your P is the softmax of the scores with the masked ones set to 0 — but exp(0) = 1, so "
            "the masked keys still get weight. The mask is *added*: P = softmax(s + mask), and "
            "exp(s − 1e9) is 0.",
            _masked_scores_set_to_zero,
        ),
        Mistake(
            "no_rowsum",
            "missing_rowsum",
            "your grad_s is P ⊙ grad_p: the softmax backward lost its rowsum term. "
            "grad_s = P ⊙ (grad_p − rowsum(grad_p ⊙ P)).",
            _no_rowsum,
        ),
        Mistake(
            "exp_not_stabilised",
            "unstable_exp",
            "your softmax overflows on large scores (np.exp of 1000 is inf, and inf / inf is NaN). "
            "Subtract each row's maximum before exp: softmax(s) = softmax(s − max(s)), exactly "
            "(with a -inf mask, take the maximum of s + mask).",
            _exp_not_stabilised,
        ),
    ),
)
register(EXERCISE)
