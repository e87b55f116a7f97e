"""Exercise: the backward pass of a masked softmax, ``P = softmax(S + M)``.

The mask ``M`` is additive, as in :mod:`microtape.nn.masks`: 0 allows a key,
a large negative number (``-1e9``, or ``-inf``) suppresses it. The tape's
answer comes from ``Tensor.add_constant(mask).softmax()`` and the tape
backward.
"""

import numpy as np

from .. import ops
from ..nn import masks
from ..tape import Tape
from ..tensor import Tensor
from .registry import Exercise, Mistake, Output, register

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

    Think first: the mask is a constant, so what does adding it do to the
    gradient? And what should the gradient be at a masked position — does
    the loss change if you nudge a score nobody looks at?
    """
    raise NotImplementedError("masked_softmax_backward: write the backward pass of the masked softmax here")


def _padding_mask(rng, q_len, k_len, value):
    """Each query may look at the first ``length`` keys (at least one)."""
    lengths = rng.integers(1, k_len + 1, size=q_len)
    lengths[0] = max(1, k_len - 1)  # at least one key masked somewhere
    allowed = np.arange(k_len)[None, :] < lengths[:, None]
    return np.where(allowed, 0.0, value)


# (N or None, Tq, Tk, kind of mask, suppressing value) per trial.
SHAPES = [
    (None, 4, 4, "causal", masks.NEG_INF),
    (None, 3, 5, "padding", masks.NEG_INF),
    (2, 4, 4, "causal", -np.inf),
    (3, 2, 6, "padding", -np.inf),
    (None, 5, 5, "padding", masks.NEG_INF),
]


def make_inputs(rng, trial):
    batch, q_len, k_len, kind, value = SHAPES[trial % len(SHAPES)]
    lead = () if batch is None else (batch,)
    if kind == "causal":
        mask = np.where(masks.causal_mask(q_len) < 0, value, 0.0)
    else:
        mask = _padding_mask(rng, q_len, k_len, value)
    return {
        "s": rng.standard_normal(lead + (q_len, k_len)),
        "mask": mask,
        "grad_p": rng.standard_normal(lead + (q_len, k_len)),
    }


def tape_gradients(inputs):
    scores = Tensor(inputs["s"], requires_grad=True, name="s")
    with Tape() as tape:
        weights = scores.add_constant(inputs["mask"], name="masked_scores").softmax(-1, name="p")
    tape.backward(weights, inputs["grad_p"])
    return (scores.grad,)


# ---------------------------------------------------------------- known mistakes


def _softmax_backward(weights, grad_p):
    return weights * (grad_p - np.sum(grad_p * weights, axis=-1, keepdims=True))


def _mask_ignored(s, mask, grad_p):
    return _softmax_backward(ops.softmax.forward(s, axis=-1), grad_p)


def _mask_after_softmax(s, mask, grad_p):
    # Zero the masked weights of the *unmasked* softmax: rows no longer sum to 1.
    weights = ops.softmax.forward(s, axis=-1) * (mask == 0)
    return _softmax_backward(weights, grad_p)


def _no_rowsum(s, mask, grad_p):
    return ops.softmax.forward(s + mask, axis=-1) * grad_p


register(
    Exercise(
        name="masked_softmax_backward",
        title="Masked softmax backward: grad_s of softmax(s + mask)",
        stub=masked_softmax_backward,
        make_inputs=make_inputs,
        tape_gradients=tape_gradients,
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
                "no_rowsum",
                "missing_rowsum",
                "your grad_s is P ⊙ grad_p: the softmax backward lost its rowsum term. "
                "grad_s = P ⊙ (grad_p − rowsum(grad_p ⊙ P)).",
                _no_rowsum,
            ),
        ),
    )
)
