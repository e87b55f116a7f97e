"""Exercise (stepped): attention's backward pass, each step of the derivation checked on its own.

The stepped sibling of ``attention_backward`` (whose name and return stay as
they were): the student returns the derivation's intermediate gradients by
their names in the derivation table (:mod:`microtape.nn.attention.derivation`)
— ``grad_weights`` (dP) → ``grad_scaled_scores`` (dS) → ``grad_q``, ``grad_k``, and
``grad_v`` — and the checker names the first wrong step. The tape's answer
reads each step's gradient off the very forward ``MultiHeadAttention``
records (:func:`record`), node by node.
"""

from typing import Any

import numpy as np

from ...engine import Tape, gradients
from ...nn.attention.chain import attention_core
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step, register
from . import attention, core

__all__ = ["attention_backward_steps"]


def attention_backward_steps(q, k, v, grad_c):
    r"""Backward pass of scaled dot-product attention, one named step at a time.

    Forward (recompute it yourself: you need P):
        S = Q Kᵀ / √d            scaled_scores   [Tq, Tk]
        P = softmax(S)           weights         [Tq, Tk]  (row by row)
        C = P V                  context         [Tq, D]

    Arguments (numpy float64): q [Tq, D], k [Tk, D], v [Tk, D] and
    grad_c = dL/dC [Tq, D], or the same with a leading batch of heads
    [N, Tq, D] (use ``swapaxes(-1, -2)``, not ``.T``). ``d`` is q's last axis.
    Some trials have large scores: stabilise the softmax.

    Return a dict with every step of the derivation, in this order (each
    ``grad_`` + the name of its node, as the derivation table names it):
        "grad_weights"         dP = dL/dP   (from grad_c)               [Tq, Tk]
        "grad_scaled_scores"   dS = dL/dS   (from grad_weights)         [Tq, Tk]
        "grad_q"               dQ           (from grad_scaled_scores)   like q
        "grad_k"               dK           (from grad_scaled_scores)   like k
        "grad_v"               dV           (from grad_c)               like v
    Each step is checked link by link: against the tape, and against what the
    tape computes from your own earlier steps. A wrong step is named; a step
    computed right from a wrong one is *carried* and earns its point.
    """
    raise NotImplementedError("attention_backward_steps: return {'grad_weights': ..., ..., 'grad_v': ...}")


VISIBLE = attention.VISIBLE
HIDDEN = attention.HIDDEN

#: The tape nodes of the steps, in the order of the steps: the derivation table's names, and the
#: student's arguments (each step is ``grad_`` + its node's name, in the prompt, the feedback and the picture).
NODES = ("weights", "scaled_scores", "q", "k", "v")


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    return core.draw_attention(rng, case)


def record(inputs: dict[str, Any]) -> Any:
    """The attention core on a new tape, nodes named as the derivation table names them: ``(tape, context)``."""
    q = Tensor(inputs["q"], requires_grad=True, name="q")
    k = Tensor(inputs["k"], requires_grad=True, name="k")
    v = Tensor(inputs["v"], requires_grad=True, name="v")
    with Tape() as tape:
        context = attention_core(q, k, v)
    return tape, context


def tape_gradients(inputs: dict[str, Any]) -> Any:
    tape, context = record(inputs)
    found = gradients(context, inputs["grad_c"], tape=tape)
    return tuple(found[tape.variable(name)] for name in NODES)


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the chain by hand with exactly one link wrong; it returns
# the step the mistake breaks and the later steps computed from it, and refuses
# any other name, so no call of it is the right answer.

_CHANGES = {
    "weights_grad_not_transposed": ("grad_weights", "grad_scaled_scores", "grad_q", "grad_k"),
    "no_rowsum": ("grad_scaled_scores", "grad_q", "grad_k"),
    "rowsum_sign_flipped": ("grad_scaled_scores", "grad_q", "grad_k"),
    "forward_without_scale": ("grad_scaled_scores", "grad_q", "grad_k", "grad_v"),
    "no_backward_scale": ("grad_q", "grad_k"),
    "grad_k_from_weights": ("grad_k",),
    "grad_v_not_transposed": ("grad_v",),
}


def _with_mistake(mistake: Any, q: Any, k: Any, v: Any, grad_c: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    scale = core.scale_of(q)

    def t(a: Any) -> Any:
        return np.swapaxes(a, -1, -2)

    # weights_of computes softmax(Q Kᵀ / √d): q / scale makes that Q Kᵀ, the scale forgotten.
    p = core.weights_of(q / scale if mistake == "forward_without_scale" else q, k)
    grad_p = grad_c @ v if mistake == "weights_grad_not_transposed" else grad_c @ t(v)
    row_sum = np.sum(grad_p * p, axis=-1, keepdims=True)
    if mistake == "no_rowsum":
        grad_s = p * grad_p
    elif mistake == "rowsum_sign_flipped":
        grad_s = p * (grad_p + row_sum)
    else:
        grad_s = p * (grad_p - row_sum)
    backward_scale = 1.0 if mistake == "no_backward_scale" else scale
    from_k = grad_p if mistake == "grad_k_from_weights" else grad_s
    every = {
        "grad_weights": grad_p,
        "grad_scaled_scores": grad_s,
        "grad_q": grad_s @ k * backward_scale,
        "grad_k": t(from_k) @ q * backward_scale,
        "grad_v": p @ grad_c if mistake == "grad_v_not_transposed" else t(p) @ grad_c,
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="attention_backward_steps",
    stub=attention_backward_steps,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    record=record,
    title="Attention backward, step by step: grad_weights → grad_scaled_scores → grad_q, grad_k; grad_v",
    outputs=(
        Step("grad_weights", "the weights P [Tq, Tk]", node="weights"),
        Step("grad_scaled_scores", "the scaled scores S [Tq, Tk]", after=("grad_weights",), node="scaled_scores"),
        Step("grad_q", "q", after=("grad_scaled_scores",), node="q"),
        Step("grad_k", "k", after=("grad_scaled_scores",), node="k"),
        Step("grad_v", "v", node="v"),
    ),
    mistakes=(
        Mistake(
            "weights_grad_not_transposed",
            "transposed",
            "your grad_weights is dC V. C = P V has V on the right, so dP = dC Vᵀ (shape [Tq, Tk]).",
            core.variant(_with_mistake, "weights_grad_not_transposed"),
            step="grad_weights",
        ),
        Mistake(
            "no_rowsum",
            "missing_rowsum",
            lambda: (
                "your grad_scaled_scores is P ⊙ dP: the softmax backward lost its rowsum term. "
                f"{core.formula('dS')}, with the sum over each row (axis=-1, keepdims=True)."
            ),
            core.variant(_with_mistake, "no_rowsum"),
            step="grad_scaled_scores",
        ),
        Mistake(
            "rowsum_sign_flipped",
            "sign_flipped",
            lambda: (
                "your grad_scaled_scores adds the rowsum term: a sign error in dS. "
                f"{core.formula('dS')} — the row sum is subtracted."
            ),
            core.variant(_with_mistake, "rowsum_sign_flipped"),
            step="grad_scaled_scores",
        ),
        Mistake(
            "forward_without_scale",
            "missing_scale",
            "your P is softmax(Q Kᵀ), without the 1/√d, so grad_scaled_scores and grad_v, which use P, are off: "
            "recompute the forward as in the prompt, P = softmax(Q Kᵀ / √d).",
            core.variant(_with_mistake, "forward_without_scale"),
            step="grad_scaled_scores",
        ),
        Mistake(
            "no_backward_scale",
            "missing_scale",
            lambda: (
                "your grad_q and grad_k miss the factor 1/√d: S = Q Kᵀ / √d, so the chain rule scales "
                f"their gradients too: {core.formula('dQ')}, {core.formula('dK')}."
            ),
            core.variant(_with_mistake, "no_backward_scale"),
            step="grad_q",
        ),
        Mistake(
            "grad_k_from_weights",
            "wrong_source",
            "your grad_k is built from dP (the gradient of the weights) where dS belongs: K enters through "
            "the scores, S = Q Kᵀ / √d, so dK = dSᵀ Q / √d, after the softmax backward.",
            core.variant(_with_mistake, "grad_k_from_weights"),
            step="grad_k",
        ),
        Mistake(
            "grad_v_not_transposed",
            "transposed",
            "your grad_v is P dC. C = P V is a matmul with V on the right, so dV = Pᵀ dC (shape [Tk, D], like V).",
            core.variant(_with_mistake, "grad_v_not_transposed"),
            step="grad_v",
        ),
    ),
)
register(EXERCISE)
