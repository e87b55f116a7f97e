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
a *link* of the hand-derived chain swapped for a wrong one: the correct chain
in :mod:`microtape.nn.attention.analytic` runs unchanged around it
(``attention_backward(..., links=mistake.links(cache))``). A checker is only
worth trusting if it catches them, and at the right place: every mistake
names the ``row`` where the report must first disagree. Rows before it
agree; rows that depend on it inherit the error.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ops import attention_links as attention_links
from ..values.plain import Plain

__all__ = [
    "Mistake",
    "MISTAKES",
    "ALIASES",
    "mistake_links",
    "softmax_without_rowsum",
    "scores_without_scale",
    "scores_with_k_not_transposed",
    "dropout_not_applied",
    "softmax_of",
]


@dataclass(frozen=True)
class Mistake:
    """A wrong formula, where it first shows, why it is wrong, and the wrong link that computes it."""

    name: str
    row: str  # the label of the report row that first disagrees
    wrong: tuple  # ((row label, wrong formula, its LaTeX), ...): the lines the mistake changes
    why: str
    links: Callable  # cache -> {link name: wrong link function} (see microtape.ops.attention_links.LINKS)
    needs: str | None = None  # "dropout", "mask", "square" (Tq == Tk) or None

    def formula_for(self, label: str) -> Any:
        """``(text, latex)`` of the wrong formula used for row ``label``, or None."""
        for row, text, latex in self.wrong:
            if row == label:
                return text, latex
        return None

    @property
    def summary(self) -> Any:
        """The wrong formulas, as one line of text."""
        return ";  ".join(text for _, text, _ in self.wrong)


# ---------------------------------------------------------------- the wrong links
#
# Each has the signature of the link of microtape.ops.attention_links.LINKS it replaces
# (the exercises' known mistakes use them too).


def softmax_without_rowsum(grad_weights: Any, weights: Any) -> Any:
    """WRONG: dS = P ⊙ dP — only the diagonal of softmax's Jacobian."""
    return weights * grad_weights


def scores_without_scale(grad_scores: Any, q: Any, k: Any, scale: Any) -> Any:
    """WRONG: dQ = dS K, dK = dSᵀ Q — the 1/√d of the forward is forgotten."""
    return attention_links.scores_backward(grad_scores, q, k, 1.0)


def scores_with_k_not_transposed(grad_scores: Any, q: Any, k: Any, scale: Any) -> Any:
    """WRONG: dK = dS Q / √d — dS where dSᵀ belongs."""
    grad_q, _ = attention_links.scores_backward(grad_scores, q, k, scale)
    return grad_q, grad_scores @ q * scale


def dropout_not_applied(grad_dropped: Any, keep: Any) -> Any:
    """WRONG: dP = dP̃ — the saved mask is not applied on the way back."""
    return grad_dropped


def softmax_of(weights: Any) -> Any:
    """WRONG (when ``weights`` are not the forward's P): the softmax backward with other weights."""
    return lambda grad_weights, _: attention_links.softmax_backward(grad_weights, weights)


def _causal_mask_leaked(cache: Any) -> Any:
    # The weights recomputed from the scores *without* the mask: masked keys get gradient.
    q_heads, k_heads = Plain(cache["Q_heads"]), Plain(cache["K_heads"])
    unmasked = (q_heads @ k_heads.swapaxes(-1, -2)).scale(q_heads.shape[-1] ** -0.5).softmax(-1).data
    return {"softmax": softmax_of(unmasked)}


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
            links=lambda cache: {"scores": scores_without_scale},
        ),
        Mistake(
            "forgot_rowsum",
            row="dS",
            wrong=(("dS", "dS = P * dP  (rowsum term forgotten)", r"dS = P \odot dP"),),
            why="softmax couples a row: raising one score lowers every other weight of that row. "
            "The - rowsum(dP * P) term is that coupling (the -p p^T part of the Jacobian).",
            links=lambda cache: {"softmax": softmax_without_rowsum},
        ),
        Mistake(
            "K_not_transposed",
            row="dK",
            wrong=(("dK", "dK = dS Q / sqrt(d)  (dS where dS^T is needed)", r"dK = \frac{dS\, Q}{\sqrt d}"),),
            why="K enters the scores transposed (S = Q K^T), so its gradient needs the transpose: "
            "dK = dS^T Q / sqrt(d). With Tq == Tk the shapes still fit: only the numbers catch it.",
            links=lambda cache: {"scores": scores_with_k_not_transposed},
            needs="square",
        ),
        Mistake(
            "dropout_mask_not_applied",
            row="dP",
            wrong=(("dP", "dP = dP~  (dropout mask forgotten)", r"dP = d\tilde P"),),
            why="P~ = P * keep, with keep = 1/(1-p) where kept and 0 where dropped: the gradient goes back "
            "through the same mask, so a dropped weight gets no gradient and a kept one is scaled by 1/(1-p).",
            links=lambda cache: {"dropout": dropout_not_applied},
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
            links=_causal_mask_leaked,
            needs="mask",
        ),
    )
}

#: Other names a mistake is known by.
ALIASES = {"transposed_operand": "K_not_transposed"}


def mistake_links(names: Any, cache: Any) -> Any:
    """The wrong links of the mistakes ``names`` together (keys of :data:`MISTAKES`)."""
    unknown = set(names) - set(MISTAKES)
    if unknown:
        raise ValueError(f"unknown mistakes {sorted(unknown)}; known: {', '.join(MISTAKES)}")
    links = {}
    for name in names:
        links.update(MISTAKES[name].links(cache))
    return links
