"""Exercise: the backward pass of the mean squared error.

``L = mean((pred − target)²)`` over every entry. The student returns the
gradient with respect to both arguments. The tape's answer records the loss
from microtape Tensors and runs the tape backward.
"""

from typing import Any

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["mse_backward"]


def mse_backward(pred, target):
    r"""Gradients of the mean squared error with respect to the prediction and the target.

    Forward (done for you):
        L = mean((pred − target)²)      the mean over *every* entry: N·K of them

    Arguments: ``pred`` and ``target``, float64 arrays of the same shape [N, K].

    Return a tuple ``(grad_pred, grad_target)``, both shaped like ``pred``.

    The maths: write ``L = (1/M) Σ_i (pred_i − target_i)²`` with M the number
    of entries. Each entry appears in one term only; the square's derivative
    brings down a 2, and the inner ``pred − target`` has derivative +1 with
    respect to ``pred`` and −1 with respect to ``target``.
    """
    raise NotImplementedError("mse_backward: return grad_pred, grad_target")


# One dict per trial: (N, K). K > 1 everywhere, so a mean over the rows only
# differs from the mean over every entry. A hidden trial has 16 000 × 8 entries:
# 256 000 inputs, far too many to differentiate numerically one at a time
# within the time limit.
VISIBLE = (
    {"shape": (4, 3)},
    {"shape": (6, 2)},
    {"shape": (3, 5)},
    {"shape": (2, 7)},
    {"shape": (5, 4)},
)
HIDDEN = (
    {"shape": (5, 3)},
    {"shape": (1, 6)},
    {"shape": (7, 2)},
    {"shape": (3, 4)},
    {"shape": (8, 5)},
    {"shape": (16000, 8), "shared": True},
)


def make_inputs(rng: Any, case: dict[str, Any]) -> Any:
    return {"pred": rng.standard_normal(case["shape"]), "target": rng.standard_normal(case["shape"])}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    pred = Tensor(inputs["pred"], requires_grad=True, name="pred")
    target = Tensor(inputs["target"], requires_grad=True, name="target")
    with Tape() as tape:
        error = pred - target
        loss = (error * error).mean(name="L")
    tape.backward(loss)
    return pred.grad, target.grad


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is ``±2 (pred − target) / M`` with exactly one thing wrong;
# it returns only the gradients that changes and refuses any other name.

_BOTH = ("grad_pred", "grad_target")
_CHANGES = {
    "factor_two_missing": _BOTH,
    "mean_missing": _BOTH,
    "mean_over_rows_only": _BOTH,
    "target_sign_not_flipped": ("grad_target",),
    "difference_reversed": _BOTH,
    "square_not_differentiated": _BOTH,
}


def _with_mistake(mistake: Any, pred: Any, target: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    error = pred - target
    count = {"mean_missing": 1, "mean_over_rows_only": pred.shape[0]}.get(mistake, pred.size)
    if mistake == "factor_two_missing":
        grad_pred = error / count
    elif mistake == "square_not_differentiated":
        grad_pred = error**2 / count
    elif mistake == "difference_reversed":
        grad_pred = 2.0 * (target - pred) / count
    else:
        grad_pred = 2.0 * error / count
    grad_target = grad_pred if mistake == "target_sign_not_flipped" else -grad_pred
    every = {"grad_pred": grad_pred, "grad_target": grad_target}
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="mse_backward",
    stub=mse_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Mean squared error backward: grad_pred and grad_target",
    outputs=(Output("grad_pred", "pred"), Output("grad_target", "target")),
    mistakes=(
        Mistake(
            "factor_two_missing",
            "wrong_derivative",
            "your grad_pred and grad_target are half the answer: the derivative of u² is 2u. "
            "grad_pred = 2 (pred − target) / M and grad_target = −grad_pred.",
            variant(_with_mistake, "factor_two_missing"),
        ),
        Mistake(
            "mean_missing",
            "missing_mean",
            "your grad_pred and grad_target miss the mean's 1/M: the loss averages over all M "
            "entries, so divide by M = pred.size.",
            variant(_with_mistake, "mean_missing"),
        ),
        Mistake(
            "mean_over_rows_only",
            "missing_mean",
            "your grad_pred and grad_target divide by the number of rows N. The mean runs over "
            "every entry, M = N·K of them: divide by pred.size.",
            variant(_with_mistake, "mean_over_rows_only"),
        ),
        Mistake(
            "target_sign_not_flipped",
            "sign_flipped",
            "your grad_target has the wrong sign: ∂(pred − target)/∂target = −1, so "
            "grad_target = −2 (pred − target) / M.",
            variant(_with_mistake, "target_sign_not_flipped"),
        ),
        Mistake(
            "difference_reversed",
            "sign_flipped",
            "your grad_pred and grad_target have their signs swapped: 2 (target − pred) / M is "
            "the gradient for the target, not for the prediction. grad_pred = 2 (pred − target) / M.",
            variant(_with_mistake, "difference_reversed"),
        ),
        Mistake(
            "square_not_differentiated",
            "wrong_derivative",
            "your grad_pred and grad_target hold (pred − target)² / M, the loss's own terms. "
            "Differentiate the square: d(u²)/du = 2u, so grad_pred = 2 (pred − target) / M.",
            variant(_with_mistake, "square_not_differentiated"),
        ),
    ),
)
register(EXERCISE)
