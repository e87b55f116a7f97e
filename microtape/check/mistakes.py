"""Deliberate mistakes in attention's backward — for teaching, and to test the checker.

This module lets a teacher show what a wrong derivative looks like in the
step-by-step report::

    >>> import numpy as np, microtape as mt
    >>> attn = mt.nn.MultiHeadAttention(8, 2, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((1, 4, 8))
    >>> report = mt.check.attention_report(attn, x, mistakes={"forgot_scale"})
    >>> report.first_failure
    'dQ'

Each entry of :data:`MISTAKES` is a mistake students really make, written as
a small wrong variant of the hand-derived chain in
:mod:`microtape.nn.analytic` (whose correct code is never touched). A checker
is only worth trusting if it catches them, and at the right place: every
mistake names the ``row`` where the report must first disagree. Rows before
it agree; rows after it inherit the error.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..nn import analytic

__all__ = ["Mistake", "MISTAKES", "ALIASES", "mistaken_attention_backward"]


@dataclass(frozen=True)
class Mistake:
    """A wrong formula, where it first shows, and why it is wrong."""

    name: str
    row: str  # the label of the report row that first disagrees
    wrong: tuple  # ((row label, wrong formula, its LaTeX), ...): the lines the mistake changes
    why: str
    needs: str | None = None  # "dropout", "mask", "square" (Tq == Tk) or None

    def formula_for(self, label):
        """``(text, latex)`` of the wrong formula used for row ``label``, or None."""
        for row, text, latex in self.wrong:
            if row == label:
                return text, latex
        return None

    @property
    def summary(self):
        """The wrong formulas, as one line of text."""
        return ";  ".join(text for _, text, _ in self.wrong)


MISTAKES = {
    mistake.name: mistake
    for mistake in (
        Mistake(
            "forgot_scale",
            row="dQ",
            wrong=(
                ("dQ", "dQ = dS K  (1/sqrt(d) forgotten)", r"dQ = dS\, K"),
                ("dK", "dK = dS^T Q  (1/sqrt(d) forgotten)", r"dK = dS^{\top} Q"),
            ),
            why="S = Q K^T / sqrt(d): the scale is part of the forward, so the gradients of Q and K "
            "are scaled by 1/sqrt(d) too.",
        ),
        Mistake(
            "forgot_rowsum",
            row="dS",
            wrong=(("dS", "dS = P * dP  (rowsum term forgotten)", r"dS = P \odot dP"),),
            why="softmax couples a row: raising one score lowers every other weight of that row. "
            "The - rowsum(dP * P) term is that coupling (the -p p^T part of the Jacobian).",
        ),
        Mistake(
            "K_not_transposed",
            row="dK",
            wrong=(("dK", "dK = dS Q / sqrt(d)  (dS where dS^T is needed)", r"dK = \frac{dS\, Q}{\sqrt d}"),),
            why="K enters the scores transposed (S = Q K^T), so its gradient needs the transpose: "
            "dK = dS^T Q / sqrt(d). With Tq == Tk the shapes still fit: only the numbers catch it.",
            needs="square",
        ),
        Mistake(
            "dropout_mask_not_applied",
            row="dP",
            wrong=(("dP", "dP = dP~  (dropout mask forgotten)", r"dP = d\tilde P"),),
            why="P~ = P * keep / (1-p): the gradient goes back through the same mask, so a dropped "
            "weight gets no gradient and a kept one is scaled by 1/(1-p).",
            needs="dropout",
        ),
        Mistake(
            "causal_mask_leaked",
            row="dS",
            wrong=(
                (
                    "dS",
                    "dS = P' * (dP - rowsum(dP * P')),  P' = softmax(Q K^T / sqrt(d)): mask forgotten",
                    r"dS = P' \odot (dP - \mathrm{rowsum}(dP \odot P')),\ "
                    r"P' = \mathrm{softmax}(QK^{\top}/\sqrt d)",
                ),
            ),
            why="the softmax backward must use the masked weights P: where P is 0 (a masked key) dS must be "
            "exactly 0. Recomputing the weights without the mask leaks gradient into masked positions.",
            needs="mask",
        ),
    )
}

#: Other names a mistake is known by.
ALIASES = {"transposed_operand": "K_not_transposed"}


def _softmax_rows(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=-1, keepdims=True)


def mistaken_attention_backward(grad_output, cache, self_attention=False, mistakes=()):
    """:func:`microtape.nn.analytic.attention_backward` with ``mistakes`` made on purpose.

    Same arguments and the same returned dict; each name in ``mistakes`` (keys
    of :data:`MISTAKES`) swaps one correct line for the wrong one. With no
    mistakes it computes exactly what the correct chain computes.
    """
    unknown = set(mistakes) - set(MISTAKES)
    if unknown:
        raise ValueError(f"unknown mistakes {sorted(unknown)}; known: {', '.join(MISTAKES)}")
    q_heads, k_heads, v_heads = cache["Q_heads"], cache["K_heads"], cache["V_heads"]
    weights, keep = cache["weights"], cache["keep"]
    scale = 1.0 / math.sqrt(q_heads.shape[-1])  # a Python float: keeps float32 float32

    # Output projection, then undo the head merge (no mistakes here).
    grads = analytic.output_projection_backward(grad_output, cache)
    grad_context = grads["context"]

    # C = P~ V.
    used = weights if keep is None else weights * keep
    grad_used = grad_context @ v_heads.transpose(0, 2, 1)
    grads["V_heads"] = used.transpose(0, 2, 1) @ grad_context
    if keep is None:
        grad_weights = grad_used
    else:
        grads["dropped_weights"] = grad_used
        if "dropout_mask_not_applied" in mistakes:
            grad_weights = grad_used  # WRONG: should be grad_used * keep
        else:
            grad_weights = grad_used * keep
    grads["weights"] = grad_weights

    # Softmax.
    softmax_weights = weights
    if "causal_mask_leaked" in mistakes:
        # WRONG: the weights recomputed from the scores without the mask.
        softmax_weights = _softmax_rows(q_heads @ k_heads.transpose(0, 2, 1) * scale)
    if "forgot_rowsum" in mistakes:
        grad_scores = softmax_weights * grad_weights  # WRONG: the rowsum term is missing
    else:
        rowsum = (grad_weights * softmax_weights).sum(axis=-1, keepdims=True)
        grad_scores = softmax_weights * (grad_weights - rowsum)
    for name in ("scaled_scores", "causal_scores", "masked_scores"):
        grads[name] = grad_scores

    # S = Q K^T / sqrt(d).
    back_scale = 1.0 if "forgot_scale" in mistakes else scale  # WRONG when 1.0
    grads["scores"] = grad_scores * back_scale
    grads["Q_heads"] = grad_scores @ k_heads * back_scale
    if "K_not_transposed" in mistakes:
        grads["K_heads"] = grad_scores @ q_heads * back_scale  # WRONG: needs grad_scores^T
    else:
        grads["K_heads"] = grad_scores.transpose(0, 2, 1) @ q_heads * back_scale

    # Undo the head split, then the three input projections (no mistakes here).
    return analytic.input_projections_backward(grads, cache, self_attention)
