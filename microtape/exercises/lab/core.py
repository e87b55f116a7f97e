"""The attention core the exercises ask about, from the one chain: the tape's answer and the known mistakes.

Three exercises (``attention_backward``, ``masked_attention``,
``attention_dropout_backward``) differentiate the same core::

    S = Q Kᵀ / √d + M,   P = softmax(S),   P̃ = P ⊙ keep,   C = P̃ V

Their truth is :func:`microtape.nn.attention.chain.attention_core` — the very
forward ``MultiHeadAttention`` records — run on Tensors and differentiated by
the tape. Their known mistakes are the hand-derived chain,
:func:`microtape.nn.attention.analytic.attention_core_backward`, with one link swapped
(``links=``) or fed the wrong weights: never a copy of either.
"""

from typing import Any

import numpy as np

from ...engine import Tape, gradients
from ...nn.attention import analytic, derivation
from ...nn.attention.chain import attention_core
from ...ops.attention_links import score_scale
from ...values.plain import Plain
from ...values.tensor import Tensor
from .. import Mistake, Output, trials

#: What the attention exercises return: dQ, dK, dV, shaped like q, k, v.
GRADIENT_OUTPUTS = (
    Output("grad_q", "q", aliases=("dQ",)),
    Output("grad_k", "k", aliases=("dK",)),
    Output("grad_v", "v", aliases=("dV",)),
)

__all__ = [
    "draw_attention",
    "taped",
    "weights_of",
    "unstable_weights",
    "global_max_weights",
    "by_hand",
    "scale_of",
    "variant",
    "GRADIENT_OUTPUTS",
]


def draw_attention(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    """One trial's ``q, k, v, grad_c`` for ``case["shape"] = (N or None, Tq, Tk, D)``.

    ``case["large"]`` shifts the keys so that each row of scores moves by up to
    ±1000 (see :func:`microtape.exercises.trials.shift_keys`): the softmax is
    unchanged, an unstabilised ``exp`` overflows.
    """
    batch, q_len, k_len, depth = case["shape"]
    lead = () if batch is None else (batch,)
    q = rng.standard_normal(lead + (q_len, depth))
    k = rng.standard_normal(lead + (k_len, depth))
    if case.get("large"):
        k = trials.shift_keys(rng, q, k, trials.LARGE)
    return {
        "q": q,
        "k": k,
        "v": rng.standard_normal(lead + (k_len, depth)),
        "grad_c": rng.standard_normal(lead + (q_len, depth)),
    }


def scale_of(q: Any) -> Any:
    """The ``1/√d`` of scaled dot-product attention, ``d`` the last axis of ``q`` (the one score_scale)."""
    return score_scale(q.shape[-1])


#: Plain text to the symbols hints and prompts write (``P ⊙ dP``, ``dSᵀ``, ``√d``, ``P̃``).
_UNICODE = ((" * ", " ⊙ "), (" - ", " − "), ("sqrt(d)", "√d"), ("^T", "ᵀ"), ("P~", "P̃"))


def unicode_formula(formula: Any) -> Any:
    """A table formula as the exercises' hints write it: ``dS = P ⊙ (dP − rowsum(dP ⊙ P))``."""
    for plain, symbol in _UNICODE:
        formula = formula.replace(plain, symbol)
    return " ".join(formula.split())


def formula(label: str, dropout: bool = False) -> Any:
    """The formula of the derivation table's row ``label`` (``"dS"``), as hints write it (read at each call)."""
    text = derivation.formula_of(derivation.ATTENTION, label, {"keep": True if dropout else None})
    if text is None:
        raise KeyError(f"formula({label!r}): no row of the attention derivation has that label")
    return unicode_formula(text)


def taped(inputs: dict[str, Any], mask: Any = None, keep: Any = None) -> Any:
    """``(context, dQ, dK, dV)`` by the tape, for ``inputs`` holding ``q, k, v, grad_c``."""
    q = Tensor(inputs["q"], requires_grad=True, name="Q")
    k = Tensor(inputs["k"], requires_grad=True, name="K")
    v = Tensor(inputs["v"], requires_grad=True, name="V")
    with Tape() as tape:
        context = attention_core(q, k, v, mask=mask, keep=keep)
    found = gradients(context, inputs["grad_c"], tape=tape)  # type: ignore[arg-type]  # Tensors in, a Tensor out
    return context.data, found[q], found[k], found[v]


def weights_of(q: Any, k: Any, mask: Any = None) -> Any:
    """``P = softmax(Q Kᵀ/√d + M)`` by the one forward, run on plain numpy."""
    record: dict[Any, Any] = {}
    attention_core(Plain(q), Plain(k), Plain(k), mask=mask, record=record)
    return record["weights"].data


def unstable_weights(scores: Any) -> Any:
    """The softmax *without* subtracting the row max (a known mistake): overflows above ~709."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(scores)
        return e / np.sum(e, axis=-1, keepdims=True)


def global_max_weights(scores: Any) -> Any:
    """The softmax shifted by the *global* maximum (a known mistake): rows far below it underflow to 0/0."""
    with np.errstate(under="ignore", invalid="ignore"):
        e = np.exp(scores - np.max(scores))
        return e / np.sum(e, axis=-1, keepdims=True)


def by_hand(q: Any, k: Any, v: Any, grad_c: Any, weights: Any, keep: Any = None, links: Any = None) -> Any:
    """``{"context", "grad_q", "grad_k", "grad_v"}`` by the hand-derived chain from ``weights``.

    ``links`` swaps links of :data:`microtape.nn.attention.analytic.LINKS` (a known mistake).
    """
    with np.errstate(invalid="ignore"):  # a mistake's NaN is the checker's to report
        grads = analytic.attention_core_backward(grad_c, q, k, v, weights, keep, links)
        used = weights if keep is None else weights * keep
    return {"context": used @ v, "grad_q": grads["Q_heads"], "grad_k": grads["K_heads"], "grad_v": grads["V_heads"]}


def variant(with_mistake: Any, mistake: Any) -> Any:
    """The known mistake ``mistake`` as a function of the exercise's own arguments (as the registry lists it).

    ``with_mistake(mistake, *args)`` is the exercise's chain with that one
    thing wrong; it refuses any other name, so no variant is the right answer.
    """

    def run(*args: Any) -> Any:
        return with_mistake(mistake, *args)

    run.__name__ = run.__qualname__ = f"_{mistake}"
    return run


def unstable_exp_mistake(with_mistake: Any) -> Mistake:
    """The mistake every attention exercise can make: a softmax whose exp overflows on the large-score trials."""
    return Mistake(
        "exp_not_stabilised",
        "unstable_exp",
        "your softmax overflows on large scores (np.exp of 1000 is inf, and inf / inf is NaN). "
        "Subtract each row's maximum before exp: softmax(s) = softmax(s − max(s)), exactly.",
        variant(with_mistake, "exp_not_stabilised"),
    )
