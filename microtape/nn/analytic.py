"""The hand-derived forward and backward of multi-head attention, in plain numpy.

This module lets you compute attention's gradients from the formulas alone,
with no tape: it imports nothing but numpy, so it stays an *independent*
check of what the tape computes. ``MultiHeadAttention.backward(g,
method="analytic")`` runs it, and ``microtape.check`` compares it with the
taped gradients, intermediate by intermediate.

Notation (one head, one batch entry; the code does all ``B·H`` at once):

    Q, K, V   = x_q W_qᵀ + b_q,  x_k W_kᵀ + b_k,  x_v W_vᵀ + b_v   (then split into heads)
    S         = Q Kᵀ / √d + M          (M: the additive masks, constants)
    P         = softmax(S)             (row by row)
    P̃         = P ⊙ keep               (dropout; keep = mask / (1-p); P̃ = P without dropout)
    C         = P̃ V
    y         = merge(C) W_oᵀ + b_o

Backward, given dy (written ``dX`` for the gradient of the loss w.r.t. ``X``):

    Linear y = x Wᵀ + b:   dx = dy W,   dW = dyᵀ x (summed over rows),   db = Σ_rows dy
    dP̃ = dC Vᵀ,   dV = P̃ᵀ dC
    dP  = dP̃ ⊙ keep
    dS  = P ⊙ (dP − rowsum(dP ⊙ P))        (softmax's VJP; M is constant so it passes dS on)
    dQ  = dS K / √d,   dK = dSᵀ Q / √d
"""

import math

import numpy as np

__all__ = [
    "CHAIN",
    "linear_forward",
    "linear_backward",
    "split_heads",
    "merge_heads",
    "attention_forward",
    "attention_backward",
    "output_projection_backward",
    "input_projections_backward",
]

#: The named steps of the backward chain, in backward order: (label used in
#: reports, name of the tape node whose gradient it is, formula, LaTeX).
#: Projection parameters are added per projection (see ``parameter_steps``).
CHAIN = [
    ("dC", "context", "dC = split_heads(dy W_o)", r"dC = \mathrm{split}(dy\, W_o)"),
    ("dP_dropped", "dropped_weights", "dP~ = dC V^T", r"d\tilde P = dC\, V^{\top}"),
    ("dP", "weights", "dP = dC V^T  (times keep/(1-p) with dropout)", r"dP = dC\, V^{\top}"),
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

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def linear_forward(x, weight, bias=None):
    """``y = x Wᵀ + b`` for ``x`` of any leading shape ``[..., in]``."""
    y = x @ weight.T
    return y if bias is None else y + bias


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


def split_heads(x, num_heads):
    """``[B, T, E]`` to ``[B·H, T, D]``: head ``h`` takes features ``h·D .. (h+1)·D``."""
    batch, length, embed = x.shape
    depth = embed // num_heads
    return x.reshape(batch, length, num_heads, depth).transpose(0, 2, 1, 3).reshape(batch * num_heads, length, depth)


def merge_heads(x, batch):
    """``[B·H, T, D]`` back to ``[B, T, E]`` (the inverse of :func:`split_heads`)."""
    heads_total, length, depth = x.shape
    num_heads = heads_total // batch
    return x.reshape(batch, num_heads, length, depth).transpose(0, 2, 1, 3).reshape(batch, length, num_heads * depth)


def attention_forward(query, key, value, params, num_heads, mask=None, keep=None):
    """The forward pass in numpy; returns ``(output, cache)`` for the backward.

    ``params`` maps ``"q_proj.weight"``, ``"q_proj.bias"``, … to arrays;
    ``mask`` is the total additive mask ``[Tq, Tk]`` (or None); ``keep`` the
    dropout mask already scaled by ``1/(1-p)`` (or None).
    """
    batch = query.shape[0]
    depth = query.shape[-1] // num_heads
    q = linear_forward(query, params["q_proj.weight"], params["q_proj.bias"])
    k = linear_forward(key, params["k_proj.weight"], params["k_proj.bias"])
    v = linear_forward(value, params["v_proj.weight"], params["v_proj.bias"])
    q_heads, k_heads, v_heads = (split_heads(t, num_heads) for t in (q, k, v))
    scores = q_heads @ k_heads.transpose(0, 2, 1) / math.sqrt(depth)
    if mask is not None:
        scores = scores + mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    used = weights if keep is None else weights * keep
    context = used @ v_heads
    merged = merge_heads(context, batch)
    output = linear_forward(merged, params["out_proj.weight"], params["out_proj.bias"])
    cache = {
        "query": query,
        "key": key,
        "value": value,
        "Q_heads": q_heads,
        "K_heads": k_heads,
        "V_heads": v_heads,
        "weights": weights,
        "keep": keep,
        "merged": merged,
        "params": params,
        "num_heads": num_heads,
    }
    return output, cache


def output_projection_backward(grad_output, cache):
    """The first links of the backward: the output projection, then undo the head merge.

    Starts the dict of named gradients (``"output"``, ``"out_proj.weight"``,
    ``"out_proj.bias"``, ``"merged"``, ``"context"`` = dC) and returns it.
    """
    grads = {"output": grad_output}
    grad_merged, grads["out_proj.weight"], grads["out_proj.bias"] = linear_backward(
        grad_output, cache["merged"], cache["params"]["out_proj.weight"]
    )
    grads["merged"] = grad_merged
    grads["context"] = split_heads(grad_merged, cache["num_heads"])
    return grads


def input_projections_backward(grads, cache, self_attention=False):
    """The last links: undo the head split of dQ, dK, dV, then the three input projections.

    Adds ``"Q"``, ``"K"``, ``"V"``, the projections' parameter gradients and the
    input gradients (``"query"``, ``"key"``, ``"value"``, and ``"x"`` = their
    sum for self-attention) to ``grads``; returns it.
    """
    batch = cache["query"].shape[0]
    for role, projection, heads_name, letter in (
        ("query", "q_proj", "Q_heads", "Q"),
        ("key", "k_proj", "K_heads", "K"),
        ("value", "v_proj", "V_heads", "V"),
    ):
        grad_projected = merge_heads(grads[heads_name], batch)
        grads[letter] = grad_projected
        grads[role], grads[f"{projection}.weight"], grads[f"{projection}.bias"] = linear_backward(
            grad_projected, cache[role], cache["params"][f"{projection}.weight"]
        )
    if self_attention:
        grads["x"] = grads["query"] + grads["key"] + grads["value"]
    return grads


def attention_backward(grad_output, cache, self_attention=False):
    """Every gradient of the chain by the hand-derived formulas.

    Returns a dict keyed by the tape's node names (``"context"`` is dC,
    ``"weights"`` is dP, ``"scaled_scores"`` is dS, ``"Q_heads"`` is dQ, …),
    parameter names (``"q_proj.weight"``) and input names (``"query"``,
    ``"key"``, ``"value"``, and ``"x"`` = their sum for self-attention).
    """
    q_heads, k_heads, v_heads = cache["Q_heads"], cache["K_heads"], cache["V_heads"]
    weights, keep = cache["weights"], cache["keep"]
    scale = 1.0 / math.sqrt(q_heads.shape[-1])  # a Python float: keeps float32 float32
    grads = output_projection_backward(grad_output, cache)
    grad_context = grads["context"]

    # C = P̃ V.
    used = weights if keep is None else weights * keep
    grad_used = grad_context @ v_heads.transpose(0, 2, 1)
    grads["V_heads"] = used.transpose(0, 2, 1) @ grad_context
    if keep is None:
        grad_weights = grad_used
    else:
        grads["dropped_weights"] = grad_used
        grad_weights = grad_used * keep
    grads["weights"] = grad_weights

    # Softmax: dS = P ⊙ (dP − rowsum(dP ⊙ P)). The masks are constants: dS passes through.
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(axis=-1, keepdims=True))
    for name in ("scaled_scores", "causal_scores", "masked_scores"):
        grads[name] = grad_scores
    grads["scores"] = grad_scores * scale

    # S = Q Kᵀ / √d.
    grads["Q_heads"] = grad_scores @ k_heads * scale
    grads["K_heads"] = grad_scores.transpose(0, 2, 1) @ q_heads * scale

    return input_projections_backward(grads, cache, self_attention)
