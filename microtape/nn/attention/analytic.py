"""The hand-derived backward of multi-head attention, in plain numpy.

This module lets you compute attention's gradients from the formulas alone,
with no tape: it composes the hand-derived links by hand (never through the
tape's interpreter), so it stays an *independent* check of what the tape
computes. The core's steps — their links, formulas and order — are the
derivation table's (:mod:`microtape.nn.attention.derivation`); softmax's own derivative
is the op registry's (written once, beside its forward). ``MultiHeadAttention.backward(g,
method="analytic")`` runs it, and ``microtape.check`` compares it with the
taped gradients, intermediate by intermediate. (The forward is written once,
in :mod:`microtape.nn.attention.chain`; the values this backward needs —
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
                           (Linear's own: :func:`microtape.nn.linear.linear_backward`)
    context  C = P̃ V:      dP̃ = dC Vᵀ,   dV = P̃ᵀ dC
    dropout  P̃ = P ⊙ keep: dP  = dP̃ ⊙ keep
    softmax  P = softmax(S): dS = P ⊙ (dP − rowsum(dP ⊙ P))   (M is constant: dS passes through it)
    scores   S = Q Kᵀ/√d:   dQ = dS K / √d,   dK = dSᵀ Q / √d

The links are plain functions in :data:`LINKS` (defined with the table, in
:mod:`microtape.nn.attention.derivation`). :func:`attention_core_backward` takes
``links=`` to swap one for a variant — that is how the teaching
mistakes and the exercises' known mistakes reuse this chain instead of
copying it.
"""

from typing import Any

# The core's links live with the table; they stay reachable here (analytic.softmax_backward, …).
from ...ops.attention_links import (  # noqa: F401  (the core's links, reachable here: analytic.softmax_backward, …)
    LINKS,
    context_backward,
    dropout_backward,
    merge_heads,
    score_scale,
    scores_backward,
    softmax_backward,
    split_heads,
)
from ..linear import linear_backward
from . import derivation

__all__ = ["CHAIN", "PROJECTIONS", "attention_core_backward", "attention_backward"]

PROJECTIONS = tuple(projection.module for projection in derivation.PROJECTIONS[1:]) + ("out_proj",)


def _chain() -> Any:
    """The core's rows with every step present: ``(label, tape name, formula, LaTeX)``, in backward order."""
    rows = derivation.gradient_rows(derivation.ATTENTION, {"keep": True})
    return [row[:4] for row in rows]


#: The named steps of the backward chain (read off the derivation table, dropout included).
CHAIN = _chain()


# ---------------------------------------------------------------- the chains


def attention_core_backward(
    grad_context: Any, q_heads: Any, k_heads: Any, v_heads: Any, weights: Any, keep: Any = None, links: Any = None
) -> Any:
    """The scaled dot-product core, link by link: ``{name: gradient}`` from ``dC``.

    Walks the steps of the derivation table (:data:`microtape.nn.attention.derivation.ATTENTION`)
    backwards. Keys are the tape's node names: ``"dropped_weights"`` (dP̃,
    with dropout only), ``"weights"`` (dP), ``"V_heads"`` (dV),
    ``"scaled_scores"`` (dS, also under the masked steps' names),
    ``"scores"`` (the gradient before the ``1/√d`` scale), ``"Q_heads"`` (dQ)
    and ``"K_heads"`` (dK). ``links`` maps link names of :data:`LINKS` to
    replacements (for teaching mistakes).
    """
    values = {"Q_heads": q_heads, "K_heads": k_heads, "V_heads": v_heads, "weights": weights}
    if keep is not None:
        values["dropped_weights"] = weights * keep
    constants = {"scale": score_scale(q_heads.shape[-1]), "keep": keep}
    grads = derivation.run_backward(derivation.ATTENTION, grad_context, values, constants, links)
    grads.pop("context", None)
    return grads


def attention_backward(grad_output: Any, cache: Any, self_attention: bool = False, links: Any = None) -> Any:
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
