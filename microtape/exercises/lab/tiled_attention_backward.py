"""Exercise: the tiled (flash) attention backward, recomputing the weights from the saved row statistic.

The tape's answer: the ``tiled_attention`` op (:mod:`microtape.ops.tiled_attention`)
recorded on Tensors and the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...nn.attention.tiled import tiled_attention
from ...ops import tiled_attention as kernel
from ...values.tensor import Tensor
from .. import Exercise, Mistake, register
from .core import GRADIENT_OUTPUTS, scale_of, variant

__all__ = ["tiled_attention_backward"]


def tiled_attention_backward(q, k, v, o, lse, grad_o):
    r"""The backward pass of flash attention, from what its forward saved.

    Forward (done for you, tile by tile with an online softmax):
        S = Q Kᵀ / √d,   P = softmax(S) (row-wise),   O = P V
        q: [N, Tq, D]   k, v: [N, Tk, D]   o: [N, Tq, D]   (N heads)
    It stored ``O`` and, for each row, ``L = m + log ℓ`` (the row's max m plus
    the log of its sum ℓ of exp(S − m)): ``lse [N, Tq]`` — not P, which is
    Tq × Tk.

    Arguments: ``q``, ``k``, ``v``, ``o``, ``lse`` and ``grad_o`` = dL/dO [N, Tq, D].

    Return a tuple ``(grad_q, grad_k, grad_v)`` shaped like ``q``, ``k``, ``v``.

    The maths: recompute the weights from the saved statistic,
    ``P = exp(S − L)`` (L is each row's log-sum-exp: no max, no row sum
    needed — and no overflow: S − L ≤ 0). Then the attention backward, with
    the softmax's row sum taken from O instead of P:
    ``D = rowsum(dO ⊙ O)`` equals ``rowsum(dP ⊙ P)``, so ``dS = P ⊙ (dP − D)``.
    A flash kernel does this tile by tile; you may use whole matrices.
    """
    raise NotImplementedError("tiled_attention_backward: write the flash attention backward here")


# One dict per trial: (N, Tq, Tk, D) and the kernel's block size. The first
# trial of each set is square (Tq = Tk), where a missing transpose still runs.
# No trial shifts the scores by ±1000 as attention_backward's do: the tiled
# kernel and a whole-matrix answer then round differently (~1e-10, past the
# float64 bar). The last hidden trial is large (~100 000 inputs: numeric
# differentiation cannot finish within the time limit).
VISIBLE = (
    {"shape": (1, 4, 4, 3), "block": 2},
    {"shape": (2, 3, 5, 2), "block": 2},
    {"shape": (1, 5, 3, 4), "block": 3},
    {"shape": (2, 4, 6, 3), "block": 4},
)
HIDDEN = (
    {"shape": (2, 5, 5, 2), "block": 2},
    {"shape": (1, 6, 4, 3), "block": 3},
    {"shape": (3, 3, 7, 2), "block": 4},
    {"shape": (1, 7, 7, 5), "block": 5},
    {"shape": (4, 256, 256, 32), "block": 64, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    heads, q_len, k_len, depth = case["shape"]
    q = rng.standard_normal((heads, q_len, depth))
    k = rng.standard_normal((heads, k_len, depth))
    v = rng.standard_normal((heads, k_len, depth))
    schedule = kernel.schedule_of(q, k, v, case["block"])
    o, lse = kernel.tiled_forward(q, k, v, schedule)
    return {"q": q, "k": k, "v": v, "o": o, "lse": lse, "grad_o": rng.standard_normal(o.shape), "block": case["block"]}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    q, k, v = (Tensor(inputs[name], requires_grad=True, name=name) for name in ("q", "k", "v"))
    with Tape() as tape:
        out = tiled_attention(q, k, v, inputs["block"])
    tape.backward(out, inputs["grad_o"])
    return q.grad, k.grad, v.grad


# ---------------------------------------------------------------- known mistakes

#: The outputs each mistake changes.
_CHANGES = {
    "lse_not_subtracted": ("grad_q", "grad_k", "grad_v"),
    "grad_v_not_transposed": ("grad_v",),
    "no_scale_in_recompute": ("grad_q", "grad_k", "grad_v"),
    "delta_without_o": ("grad_q", "grad_k"),
    "delta_missing": ("grad_q", "grad_k"),
    "no_scale_in_backward": ("grad_q", "grad_k"),
    "grad_k_from_grad_weights": ("grad_k",),
}


def _t(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def _with_mistake(mistake: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, grad_o: Any) -> Any:
    """The outputs ``mistake`` changes, by the whole-matrix chain with that one thing wrong."""
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    scale = scale_of(q)
    scores = q @ _t(k) * (1.0 if mistake == "no_scale_in_recompute" else scale)
    with np.errstate(all="ignore"):
        if mistake == "lse_not_subtracted":
            weights = np.exp(scores)
        else:
            weights = np.exp(scores - lse[..., None])
        grad_weights = grad_o @ _t(v)
        row_delta = {
            "delta_without_o": grad_o.sum(axis=-1),
            "delta_missing": np.zeros(lse.shape),
        }.get(mistake, np.sum(grad_o * o, axis=-1))
        grad_scores = weights * (grad_weights - row_delta[..., None])
        back = 1.0 if mistake == "no_scale_in_backward" else scale
        into_k = grad_weights if mistake == "grad_k_from_grad_weights" else grad_scores
        into_v = weights if mistake == "grad_v_not_transposed" else _t(weights)
        every = {"grad_q": grad_scores @ k * back, "grad_k": _t(into_k) @ q * back, "grad_v": into_v @ grad_o}
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="tiled_attention_backward",
    stub=tiled_attention_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Tiled (flash) attention backward: dQ, dK, dV from Q, K, V, O and the row log-sum-exp L",
    outputs=GRADIENT_OUTPUTS,
    mistakes=(
        Mistake(
            "lse_not_subtracted",
            "skipped_step",
            "your gradients recompute the weights as exp(S): the saved L is there to normalise them. "
            "P = exp(S − L), each row minus its own L.",
            variant(_with_mistake, "lse_not_subtracted"),
        ),
        Mistake(
            "grad_v_not_transposed",
            "transposed",
            "your dV is P dO. The forward multiplied P by V (O = P V), so dV = Pᵀ dO, shape [N, Tk, D].",
            variant(_with_mistake, "grad_v_not_transposed"),
        ),
        Mistake(
            "no_scale_in_recompute",
            "missing_scale",
            "your gradients recompute S as Q Kᵀ without 1/√d, so P is not the forward's weights. "
            "S = Q Kᵀ / √d, as in the forward that saved L.",
            variant(_with_mistake, "no_scale_in_recompute"),
        ),
        Mistake(
            "delta_without_o",
            "missing_rowsum",
            "your dQ and dK use D = rowsum(dO). The softmax's row sum is rowsum(dP ⊙ P), which equals "
            "rowsum(dO ⊙ O): multiply by O before summing.",
            variant(_with_mistake, "delta_without_o"),
        ),
        Mistake(
            "delta_missing",
            "missing_rowsum",
            "your dQ and dK use dS = P ⊙ dP: the softmax's row-sum term is missing. "
            "dS = P ⊙ (dP − D) with D = rowsum(dO ⊙ O).",
            variant(_with_mistake, "delta_missing"),
        ),
        Mistake(
            "no_scale_in_backward",
            "missing_scale",
            "your dQ and dK miss the 1/√d: S = Q Kᵀ / √d, so dQ = dS K / √d and dK = dSᵀ Q / √d.",
            variant(_with_mistake, "no_scale_in_backward"),
        ),
        Mistake(
            "grad_k_from_grad_weights",
            "skipped_step",
            "your dK is built from dP, not dS: K entered through the scores S, so dK = dSᵀ Q / √d "
            "with dS = P ⊙ (dP − D).",
            variant(_with_mistake, "grad_k_from_grad_weights"),
        ),
    ),
)
register(EXERCISE)
