"""The attention core the exercises ask about, from the one chain: the tape's answer and the known mistakes.

Three exercises (``attention_backward``, ``masked_attention``,
``attention_dropout_backward``) differentiate the same core::

    S = Q Kᵀ / √d + M,   P = softmax(S),   P̃ = P ⊙ keep,   C = P̃ V

Their truth is :func:`microtape.nn.attention_chain.attention_core` — the very
forward ``MultiHeadAttention`` records — run on Tensors and differentiated by
the tape. Their known mistakes are the hand-derived chain,
:func:`microtape.nn.analytic.attention_core_backward`, with one link swapped
(``links=``) or fed the wrong weights: never a copy of either.
"""

import math

import numpy as np

from ..nn import analytic
from ..nn.attention_chain import attention_core
from ..plain import Plain
from ..tape import Tape, gradients
from ..tensor import Tensor

__all__ = ["taped", "weights_of", "unstable_weights", "by_hand", "scale_of"]


def scale_of(q):
    """The ``1/√d`` of scaled dot-product attention, ``d`` the last axis of ``q``."""
    return 1.0 / math.sqrt(q.shape[-1])


def taped(inputs, mask=None, keep=None):
    """``(context, dQ, dK, dV)`` by the tape, for ``inputs`` holding ``q, k, v, grad_c``."""
    q = Tensor(inputs["q"], requires_grad=True, name="Q")
    k = Tensor(inputs["k"], requires_grad=True, name="K")
    v = Tensor(inputs["v"], requires_grad=True, name="V")
    with Tape() as tape:
        context = attention_core(q, k, v, mask=mask, keep=keep)
    found = gradients(context, inputs["grad_c"], tape=tape)
    return context.data, found[q], found[k], found[v]


def weights_of(q, k, mask=None):
    """``P = softmax(Q Kᵀ/√d + M)`` by the one forward, run on plain numpy."""
    record = {}
    attention_core(Plain(q), Plain(k), Plain(k), mask=mask, record=record)
    return record["weights"].data


def unstable_weights(scores):
    """The softmax *without* subtracting the row max (a known mistake): overflows above ~709."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(scores)
        return e / np.sum(e, axis=-1, keepdims=True)


def by_hand(q, k, v, grad_c, weights, keep=None, links=None):
    """``{"context", "grad_q", "grad_k", "grad_v"}`` by the hand-derived chain from ``weights``.

    ``links`` swaps links of :data:`microtape.nn.analytic.LINKS` (a known mistake).
    """
    with np.errstate(invalid="ignore"):  # a mistake's NaN is the checker's to report
        grads = analytic.attention_core_backward(grad_c, q, k, v, weights, keep, links)
        used = weights if keep is None else weights * keep
    return {"context": used @ v, "grad_q": grads["Q_heads"], "grad_k": grads["K_heads"], "grad_v": grads["V_heads"]}
