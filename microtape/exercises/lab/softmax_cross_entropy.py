"""Exercise: softmax and cross-entropy fused, mean over the batch: the ``p − onehot(y)`` result.

The loss is ``L = −(1/N) Σ_n log softmax(logits_n)[y_n]``. The tape's answer
records it from microtape Tensors (``log_softmax``, a product with the
one-hot labels, a sum) and runs the tape backward.
"""

from typing import Any

import numpy as np

from ... import ops
from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register, trials
from .core import unstable_weights, variant

__all__ = ["softmax_cross_entropy_backward"]


def softmax_cross_entropy_backward(logits, y):
    r"""Gradient of the mean softmax cross-entropy loss with respect to the logits.

    Forward (done for you), for N rows of C class scores:
        p      = softmax(logits)                    row by row, [N, C]
        L      = −(1/N) Σ_n log p[n, y[n]]           one number

    Arguments: ``logits`` [N, C] float64 and ``y`` [N] integer class labels
    (each in 0 … C−1).

    Return ``grad_logits`` = dL/dlogits, shaped like ``logits``.

    The maths: for one row, ``−log p_y = −s_y + log Σ_k exp(s_k)``.
    Differentiate: the log-sum-exp gives the softmax ``p``, the ``−s_y`` gives
    ``−1`` at the label only — a one-hot row. Then remember the mean over the
    N rows. Some rows have very large scores: compute the softmax stably
    (subtract each row's maximum before ``np.exp``).
    """
    raise NotImplementedError("softmax_cross_entropy_backward: return grad_logits")


# One dict per trial: (N, C), the spread of the logits, and whether the rows
# are shifted by up to ±1000 (the softmax is unchanged; an unstabilised exp
# overflows). No trial is square, so a softmax over the wrong axis shows. A
# hidden trial has 6000 rows of 10 classes: 60 000 logits, too many to
# differentiate numerically one at a time within the time limit.
VISIBLE = (
    {"shape": (4, 3)},
    {"shape": (6, 5)},
    {"shape": (3, 7), "spread": 3.0},
    {"shape": (5, 2)},
    {"shape": (2, 4), "large": True},
)
HIDDEN = (
    {"shape": (5, 4)},
    {"shape": (3, 6), "large": True},
    {"shape": (7, 3), "spread": 3.0},
    {"shape": (1, 5)},
    {"shape": (8, 2), "large": True},
    {"shape": (6000, 10), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, classes = case["shape"]
    logits = rng.standard_normal((rows, classes)) * case.get("spread", 1.0)
    if case.get("large"):
        logits = trials.shift_rows(rng, logits, trials.LARGE)
    # Every class appears when there are enough rows, so a forgotten one-hot shows in every column.
    labels = rng.permutation(np.arange(rows) % classes)
    return {"logits": logits, "y": labels}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    logits = Tensor(inputs["logits"], requires_grad=True, name="logits")
    rows, classes = inputs["logits"].shape
    onehot = np.eye(classes)[inputs["y"]]
    with Tape() as tape:
        log_p = logits.log_softmax(-1, name="log_p")
        loss = (log_p * onehot).sum() * (-1.0 / rows)
    tape.backward(loss)
    return (logits.grad,)


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is ``(p − onehot) / N`` with exactly one thing wrong; it
# refuses any other name, so no call of it is the right answer.

_MISTAKES = (
    "mean_missing",
    "mean_over_every_entry",
    "onehot_forgotten",
    "softmax_wrong_axis",
    "log_p_instead_of_p",
    "onehot_minus_p",
    "exp_not_stabilised",
)


def _with_mistake(mistake: Any, logits: Any, y: Any) -> Any:
    if mistake not in _MISTAKES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_MISTAKES)}")
    rows, classes = logits.shape
    if mistake == "softmax_wrong_axis":
        p = ops.softmax.forward(logits, axis=0)
    elif mistake == "exp_not_stabilised":
        p = unstable_weights(logits)
    else:
        p = ops.softmax.forward(logits, axis=-1)
    if mistake == "log_p_instead_of_p":
        p = ops.log_softmax.forward(logits, axis=-1)
    onehot = np.zeros_like(logits)
    if mistake != "onehot_forgotten":
        onehot[np.arange(rows), y] = 1.0
    grad = {"mean_missing": 1.0, "mean_over_every_entry": rows * classes}.get(mistake, rows)
    difference = onehot - p if mistake == "onehot_minus_p" else p - onehot
    return {"grad_logits": difference / grad}


EXERCISE = Exercise(
    name="softmax_cross_entropy_backward",
    stub=softmax_cross_entropy_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Softmax + cross-entropy fused, mean over the batch: grad_logits = (p − onehot(y)) / N",
    outputs=(Output("grad_logits", "logits"),),
    mistakes=(
        Mistake(
            "mean_missing",
            "missing_mean",
            "your grad_logits is p − onehot(y): the loss is the *mean* over the N rows, so each "
            "row's gradient is divided by N: (p − onehot(y)) / N.",
            variant(_with_mistake, "mean_missing"),
        ),
        Mistake(
            "mean_over_every_entry",
            "missing_mean",
            "your grad_logits is divided by N·C. The mean is over the N rows only (one loss per "
            "row), not over all N·C entries: a np.mean of the [N, C] product onehot * log p "
            "divides by C too. Divide by N.",
            variant(_with_mistake, "mean_over_every_entry"),
        ),
        Mistake(
            "onehot_forgotten",
            "skipped_step",
            "your grad_logits is p / N: the −1 at each row's label is missing. The −s_y term of "
            "−log p_y gives −onehot(y): grad_logits = (p − onehot(y)) / N.",
            variant(_with_mistake, "onehot_forgotten"),
        ),
        Mistake(
            "softmax_wrong_axis",
            "wrong_axis",
            "your softmax normalises the columns (axis=0). Each row's classes compete with each "
            "other: softmax over axis=-1 (each row of p sums to 1).",
            variant(_with_mistake, "softmax_wrong_axis"),
        ),
        Mistake(
            "log_p_instead_of_p",
            "wrong_derivative",
            "your grad_logits uses log p where p belongs. The derivative of log Σ exp(s) is the "
            "softmax itself: grad_logits = (p − onehot(y)) / N with p = softmax(logits).",
            variant(_with_mistake, "log_p_instead_of_p"),
        ),
        Mistake(
            "onehot_minus_p",
            "sign_flipped",
            "your grad_logits is (onehot(y) − p) / N: the sign is flipped. The loss is −log p_y, "
            "so raising the right class's score lowers it: (p − onehot(y)) / N.",
            variant(_with_mistake, "onehot_minus_p"),
        ),
        Mistake(
            "exp_not_stabilised",
            "unstable_exp",
            "your softmax overflows on large logits (np.exp of 1000 is inf, and inf / inf is NaN). "
            "Subtract each row's maximum before exp: softmax(s) = softmax(s − max(s)), exactly.",
            variant(_with_mistake, "exp_not_stabilised"),
        ),
    ),
)
register(EXERCISE)
