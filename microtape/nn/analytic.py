"""The hand-derived backward of multi-head attention, in plain numpy.

This module lets you compute attention's gradients from the formulas alone,
with no tape: it imports nothing but numpy, so it stays an *independent*
check of what the tape computes. ``MultiHeadAttention.backward(g,
method="analytic")`` runs it, and ``microtape.check`` compares it with the
taped gradients, intermediate by intermediate. (The forward is written once,
in :mod:`microtape.nn.attention_chain`; the values this backward needs —
``Q_heads``, ``weights``, … — are read off the layer's last forward.)

Notation (one head, one batch entry; the code does all ``B·H`` at once):

    Q, K, V   = x_q W_qᵀ + b_q,  x_k W_kᵀ + b_k,  x_v W_vᵀ + b_v   (then split into heads)
    S         = Q Kᵀ / √d + M          (M: the additive masks, constants)
    P         = softmax(S)             (row by row)
    P̃         = P ⊙ keep               (dropout; keep = 1/(1-p) where kept, 0 where dropped)
    C         = P̃ V                    (P̃ = P without dropout)
    y         = merge(C) W_oᵀ + b_o

Backward, given dy (written ``dX`` for the gradient of the loss w.r.t. ``X``),
one *link* per step of the forward:

    Linear y = x Wᵀ + b:   dx = dy W,   dW = dyᵀ x (summed over rows),   db = Σ_rows dy
    context  C = P̃ V:      dP̃ = dC Vᵀ,   dV = P̃ᵀ dC
    dropout  P̃ = P ⊙ keep: dP  = dP̃ ⊙ keep
    softmax  P = softmax(S): dS = P ⊙ (dP − rowsum(dP ⊙ P))   (M is constant: dS passes through it)
    scores   S = Q Kᵀ/√d:   dQ = dS K / √d,   dK = dSᵀ Q / √d

The links are plain functions in :data:`LINKS`. :func:`attention_core_backward`
takes ``links=`` to swap one for a variant — that is how the teaching
mistakes and the exercises' known mistakes reuse this chain instead of
copying it.
"""

import math

import numpy as np

__all__ = [
    "CHAIN",
    "PROJECTIONS",
    "LINKS",
    "linear_backward",
    "split_heads",
    "merge_heads",
    "context_backward",
    "dropout_backward",
    "softmax_backward",
    "scores_backward",
    "attention_core_backward",
    "attention_backward",
]

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")

#: The named steps of the backward chain, in backward order: (label used in
#: reports, name of the tape node whose gradient it is, formula, LaTeX).
#: Projection parameters are reported per projection (see ``microtape.check.report``).
CHAIN = [
    ("dC", "context", "dC = split_heads(dy W_o)", r"dC = \mathrm{split}(dy\, W_o)"),
    ("dP_dropped", "dropped_weights", "dP~ = dC V^T", r"d\tilde P = dC\, V^{\top}"),
    ("dP", "weights", "dP = dC V^T", r"dP = dC\, V^{\top}"),
    ("dV", "V_heads", "dV = P^T dC", r"dV = P^{\top} dC"),
    (
        "dS",
        "scaled_scores",
        "dS = P * (dP - rowsum(dP * P))",
        r"dS = P \odot (dP - \mathrm{rowsum}(dP \odot P))",
    ),
    ("dQ", "Q_heads", "dQ = dS K / sqrt(d)", r"dQ = \frac{dS\, K}{\sqrt d}"),
    ("dK", "K_heads", "dK = dS^T Q / sqrt(d)", r"dK = \frac{dS^{\top} Q}{\sqrt d}"),
]


# ---------------------------------------------------------------- shapes (no arithmetic)


def split_heads(x, num_heads):
    """``[B, T, E]`` to ``[B·H, T, D]``: head ``h`` takes features ``h·D .. (h+1)·D``.

    Uses only ``reshape`` and ``transpose``, so it runs on numpy arrays,
    Tensors and ScalarArrays alike (the taped forward calls it too).
    """
    batch, length, embed = x.shape
    depth = embed // num_heads
    # [B, T, E] -> [B, T, H, D] -> [B, H, T, D] -> [B·H, T, D]
    return x.reshape(batch, length, num_heads, depth).transpose(0, 2, 1, 3).reshape(batch * num_heads, length, depth)


def merge_heads(x, batch):
    """``[B·H, T, D]`` back to ``[B, T, E]`` (the inverse of :func:`split_heads`)."""
    heads_total, length, depth = x.shape
    num_heads = heads_total // batch
    # [B·H, T, D] -> [B, H, T, D] -> [B, T, H, D] -> [B, T, E]
    return x.reshape(batch, num_heads, length, depth).transpose(0, 2, 1, 3).reshape(batch, length, num_heads * depth)


def _t(x):
    """Transpose the last two axes (a batch of matrices stays a batch)."""
    return np.swapaxes(x, -1, -2)


# ---------------------------------------------------------------- the links


def linear_backward(grad_y, x, weight):
    """Gradients of ``y = x Wᵀ + b``: returns ``(dx, dW, db)``.

    Every row of ``x`` used the same ``W`` and ``b``, so their gradients sum
    over all rows (all leading axes, flattened).
    """
    rows_x = x.reshape(-1, x.shape[-1])
    rows_g = grad_y.reshape(-1, grad_y.shape[-1])
    grad_x = grad_y @ weight
    grad_weight = rows_g.T @ rows_x
    grad_bias = rows_g.sum(axis=0)
    return grad_x, grad_weight, grad_bias


def context_backward(grad_context, used_weights, v_heads):
    """``C = P̃ V``: returns ``(dP̃, dV) = (dC Vᵀ, P̃ᵀ dC)``."""
    return grad_context @ _t(v_heads), _t(used_weights) @ grad_context


def dropout_backward(grad_dropped, keep):
    """``P̃ = P ⊙ keep``: returns ``dP = dP̃ ⊙ keep`` (the same saved mask)."""
    return grad_dropped * keep


def softmax_backward(grad_weights, weights):
    """``P = softmax(S)`` row by row: returns ``dS = P ⊙ (dP − rowsum(dP ⊙ P))``.

    The rowsum term is the coupling inside a row: raising one score lowers
    every other weight of that row (the ``−p pᵀ`` part of the Jacobian).
    """
    return weights * (grad_weights - (grad_weights * weights).sum(axis=-1, keepdims=True))


def scores_backward(grad_scores, q_heads, k_heads, scale):
    """``S = Q Kᵀ · scale``: returns ``(dQ, dK) = (dS K · scale, dSᵀ Q · scale)``."""
    return grad_scores @ k_heads * scale, _t(grad_scores) @ q_heads * scale


#: The links by name; ``attention_core_backward(..., links={"softmax": other})`` swaps one.
LINKS = {
    "context": context_backward,
    "dropout": dropout_backward,
    "softmax": softmax_backward,
    "scores": scores_backward,
}


# ---------------------------------------------------------------- the chains


def attention_core_backward(grad_context, q_heads, k_heads, v_heads, weights, keep=None, links=None):
    """The scaled dot-product core, link by link: ``{name: gradient}`` from ``dC``.

    Keys are the tape's node names: ``"dropped_weights"`` (dP̃, with dropout
    only), ``"weights"`` (dP), ``"V_heads"`` (dV), ``"scaled_scores"`` (dS,
    also under the masked steps' names), ``"scores"`` (the gradient before the
    ``1/√d`` scale), ``"Q_heads"`` (dQ) and ``"K_heads"`` (dK). ``links`` maps
    link names of :data:`LINKS` to replacements (for teaching mistakes).
    """
    link = {**LINKS, **(links or {})}
    scale = 1.0 / math.sqrt(q_heads.shape[-1])  # a Python float: keeps float32 float32
    grads = {}
    used = weights if keep is None else weights * keep
    grad_used, grads["V_heads"] = link["context"](grad_context, used, v_heads)
    if keep is None:
        grad_weights = grad_used
    else:
        grads["dropped_weights"] = grad_used
        grad_weights = link["dropout"](grad_used, keep)
    grads["weights"] = grad_weights
    grad_scores = link["softmax"](grad_weights, weights)
    # The masks are added constants: the gradient passes through them unchanged.
    for name in ("scaled_scores", "causal_scores", "masked_scores"):
        grads[name] = grad_scores
    grads["scores"] = grad_scores * scale
    grads["Q_heads"], grads["K_heads"] = link["scores"](grad_scores, q_heads, k_heads, scale)
    return grads


def attention_backward(grad_output, cache, self_attention=False, links=None):
    """Every gradient of the layer by the hand-derived formulas.

    ``cache`` holds the forward's values (``MultiHeadAttention.analytic_cache()``):
    the inputs ``"query"``, ``"key"``, ``"value"``, ``"Q_heads"``,
    ``"K_heads"``, ``"V_heads"``, ``"weights"``, ``"merged"``, ``"keep"``,
    ``"params"`` (``"q_proj.weight"`` → array, …) and ``"num_heads"``.
    Returns a dict keyed by the tape's node names (``"context"`` is dC,
    ``"weights"`` is dP, ``"scaled_scores"`` is dS, ``"Q_heads"`` is dQ, …),
    parameter names (``"q_proj.weight"``) and input names (``"query"``,
    ``"key"``, ``"value"``, and ``"x"`` = their sum for self-attention).
    """
    params, batch = cache["params"], cache["query"].shape[0]
    grads = {"output": grad_output}

    # y = merge(C) W_oᵀ + b_o, then undo the head merge.
    grad_merged, grads["out_proj.weight"], grads["out_proj.bias"] = linear_backward(
        grad_output, cache["merged"], params["out_proj.weight"]
    )
    grads["merged"] = grad_merged
    grads["context"] = split_heads(grad_merged, cache["num_heads"])

    grads.update(
        attention_core_backward(
            grads["context"],
            cache["Q_heads"],
            cache["K_heads"],
            cache["V_heads"],
            cache["weights"],
            cache["keep"],
            links,
        )
    )

    # Undo the head split of dQ, dK, dV, then the three input projections.
    for role, projection, letter in (("query", "q_proj", "Q"), ("key", "k_proj", "K"), ("value", "v_proj", "V")):
        grads[letter] = merge_heads(grads[f"{letter}_heads"], batch)
        grads[role], grads[f"{projection}.weight"], grads[f"{projection}.bias"] = linear_backward(
            grads[letter], cache[role], params[f"{projection}.weight"]
        )
    if self_attention:
        grads["x"] = grads["query"] + grads["key"] + grads["value"]
    return grads
