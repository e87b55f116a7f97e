"""Exercise: the backward pass of scaled dot-product attention (one head or a batch of heads).

The student is given ``Q, K, V`` and ``dC`` and returns ``dQ, dK, dV``. The
tape's answer comes from the same chain ``MultiHeadAttention`` records —
``scores``, ``scale``, ``softmax``, ``context`` — on Tensors.
"""

import math

import numpy as np

from .. import ops
from ..tape import Tape
from ..tensor import Tensor
from .registry import Exercise, Mistake, Output, register

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

    The chain, one link at a time (each is a rule you have seen):
        C = P V      →  dP = ?,  dV = ?          (matmul: which side is transposed?)
        P = softmax  →  dS = ?                   (the softmax exercise)
        S = Q Kᵀ/√d  →  dQ = ?,  dK = ?          (matmul again, and the constant 1/√d)
    """
    raise NotImplementedError("attention_backward: write the backward pass of attention here")


# (N or None for one head, Tq, Tk, D) per trial. The first is one square head,
# so transposed products still run and can be recognised by their values.
SHAPES = [(None, 4, 4, 4), (None, 3, 5, 2), (2, 4, 4, 3), (3, 2, 3, 4), (None, 5, 5, 8)]


def make_inputs(rng, trial):
    batch, q_len, k_len, depth = SHAPES[trial % len(SHAPES)]
    lead = () if batch is None else (batch,)
    return {
        "q": rng.standard_normal(lead + (q_len, depth)),
        "k": rng.standard_normal(lead + (k_len, depth)),
        "v": rng.standard_normal(lead + (k_len, depth)),
        "grad_c": rng.standard_normal(lead + (q_len, depth)),
    }


def tape_gradients(inputs):
    q = Tensor(inputs["q"], requires_grad=True, name="Q")
    k = Tensor(inputs["k"], requires_grad=True, name="K")
    v = Tensor(inputs["v"], requires_grad=True, name="V")
    depth = q.shape[-1]
    with Tape() as tape:
        scores = q.matmul(k.swapaxes(-1, -2), name="scores")
        scaled = scores.scale(1.0 / math.sqrt(depth), name="scaled_scores")
        weights = scaled.softmax(-1, name="weights")
        context = weights.matmul(v, name="context")
    tape.backward(context, inputs["grad_c"])
    return q.grad, k.grad, v.grad


# ---------------------------------------------------------------- known mistakes
#
# Each variant is the right derivation with one thing changed. ``_chain`` takes
# the changes as switches, so every variant reads as "the chain, but ...".


def _t(x):
    return np.swapaxes(x, -1, -2)


def _chain(
    q,
    k,
    v,
    grad_c,
    *,
    forward_scale=True,
    backward_scale=True,
    rowsum=True,
    rowsum_axis=-1,
    transpose_p=True,
    transpose_ds=True,
    through_softmax=True,
):
    scale = 1.0 / math.sqrt(q.shape[-1])
    weights = ops.softmax.forward(q @ _t(k) * (scale if forward_scale else 1.0), axis=-1)
    grad_weights = grad_c @ _t(v)
    grad_v = (_t(weights) if transpose_p else weights) @ grad_c
    if not through_softmax:
        grad_scores = grad_weights
    elif rowsum:
        grad_scores = weights * (grad_weights - np.sum(grad_weights * weights, axis=rowsum_axis, keepdims=True))
    else:
        grad_scores = weights * grad_weights
    back = scale if (backward_scale and forward_scale) else 1.0
    grad_q = grad_scores @ k * back
    grad_k = (_t(grad_scores) if transpose_ds else grad_scores) @ q * back
    return grad_q, grad_k, grad_v


def _no_backward_scale(q, k, v, grad_c):
    return _chain(q, k, v, grad_c, backward_scale=False)


def _no_scale_anywhere(q, k, v, grad_c):
    return _chain(q, k, v, grad_c, forward_scale=False)


def _no_rowsum(q, k, v, grad_c):
    return _chain(q, k, v, grad_c, rowsum=False)


def _rowsum_wrong_axis(q, k, v, grad_c):
    return _chain(q, k, v, grad_c, rowsum_axis=-2)


def _grad_v_not_transposed(q, k, v, grad_c):
    return _chain(q, k, v, grad_c, transpose_p=False)


def _grad_k_not_transposed(q, k, v, grad_c):
    return _chain(q, k, v, grad_c, transpose_ds=False)


def _softmax_skipped(q, k, v, grad_c):
    return _chain(q, k, v, grad_c, through_softmax=False)


register(
    Exercise(
        name="attention_backward",
        title="Scaled dot-product attention backward: dQ, dK, dV",
        stub=attention_backward,
        make_inputs=make_inputs,
        tape_gradients=tape_gradients,
        outputs=(Output("grad_q", "q"), Output("grad_k", "k"), Output("grad_v", "v")),
        mistakes=(
            Mistake(
                "no_backward_scale",
                "missing_scale",
                "your dQ and dK miss the factor 1/√d. The forward scaled the scores, S = Q Kᵀ / √d, "
                "so the chain rule scales their gradients too: dQ = dS K / √d, dK = dSᵀ Q / √d.",
                _no_backward_scale,
            ),
            Mistake(
                "no_scale_anywhere",
                "missing_scale",
                "your answer is the gradient of attention *without* the 1/√d: recompute "
                "P = softmax(Q Kᵀ / √d) in the forward, and divide dQ and dK by √d in the backward.",
                _no_scale_anywhere,
            ),
            Mistake(
                "no_rowsum",
                "missing_rowsum",
                "your dS is P ⊙ dP: the softmax backward lost its rowsum term. "
                "dS = P ⊙ (dP − rowsum(dP ⊙ P)), with the sum over each row (axis=-1, keepdims=True).",
                _no_rowsum,
            ),
            Mistake(
                "rowsum_wrong_axis",
                "wrong_axis",
                "your softmax backward sums down the columns (axis=-2). Each row of P is one "
                "softmax over the keys, so rowsum(dP ⊙ P) runs over axis=-1.",
                _rowsum_wrong_axis,
            ),
            Mistake(
                "grad_v_not_transposed",
                "transposed",
                "your dV is P dC. C = P V is a matmul with V on the right, so dV = Pᵀ dC (shape [Tk, D], like V).",
                _grad_v_not_transposed,
            ),
            Mistake(
                "grad_k_not_transposed",
                "transposed",
                "your dK is dS Q / √d. K enters the scores transposed (S = Q Kᵀ / √d), so "
                "dK = dSᵀ Q / √d (shape [Tk, D], like K).",
                _grad_k_not_transposed,
            ),
            Mistake(
                "softmax_skipped",
                "skipped_step",
                "your dQ and dK use dP where dS belongs: the gradient went straight from P to S "
                "without passing through the softmax. Apply the softmax backward first: "
                "dS = P ⊙ (dP − rowsum(dP ⊙ P)).",
                _softmax_skipped,
            ),
        ),
    )
)
