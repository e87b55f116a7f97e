"""Exercise (stepped): softmax and cross-entropy, mean over the batch, to the ``(p − onehot(y)) / N`` result.

The loss is ``L = −(1/N) Σ_n log softmax(logits_n)[y_n]``, walked back in
three links: the mean of the picked labels (``grad_log_p``), the log
(``grad_p``), the softmax (``grad_logits``). The tape's answer records it
from microtape Tensors (``softmax``, ``log``, a product with the one-hot
labels, a sum), nodes named as the steps.
"""

from typing import Any

import numpy as np

from ... import ops
from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step, register, trials
from .core import unstable_weights, variant
from .taped_steps import step_gradients

__all__ = ["softmax_cross_entropy_backward"]


def softmax_cross_entropy_backward(logits, y):
    r"""Gradient of the mean softmax cross-entropy loss with respect to the logits.

    Forward (done for you), for N rows of C class scores:
        p      = softmax(logits)                    row by row, [N, C]
        log_p  = log(p)                             [N, C]
        L      = −(1/N) Σ_n log_p[n, y[n]]           one number

    Arguments: ``logits`` [N, C] float64 and ``y`` [N] integer class labels
    (each in 0 … C−1).

    Return a dict with every step of the derivation, from the loss back:
        "grad_log_p"    dL/dlog_p                           [N, C]
        "grad_p"        dL/dp          (from grad_log_p)    [N, C]
        "grad_logits"   dL/dlogits     (from grad_p)        [N, C]
    Each step is checked against the tape twice: against the true gradient,
    and against what the tape computes from your own earlier steps. A step
    right from a wrong earlier step is carried (it earns its point).

    The maths: L reads one entry of each row of ``log_p`` (a one-hot pick),
    with a minus, and takes the mean over the N rows. The log's derivative is
    1/p. The softmax's VJP, row by row, is ``p ⊙ (g − Σ_k g_k p_k)`` — here it
    gives the famous ``(p − onehot(y)) / N``. Some rows have very large
    scores: compute the softmax stably (subtract each row's maximum before
    ``np.exp``).
    """
    raise NotImplementedError(
        "softmax_cross_entropy_backward: return {'grad_log_p': ..., 'grad_p': ..., 'grad_logits': ...}"
    )


# One dict per trial: (N, C), the spread of the logits, and whether the rows
# are shifted by up to ±1000 (the softmax is unchanged; an unstabilised exp
# overflows). No trial is square, so a softmax over the wrong axis shows. The
# large hidden trial has 256 rows of 1024 classes: numeric differentiation
# needs a forward per class even when it perturbs every row at once; a
# derivation (a loop over the rows included) does not.
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
    {"shape": (256, 1024), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, classes = case["shape"]
    logits = rng.standard_normal((rows, classes)) * case.get("spread", 1.0)
    if case.get("large"):
        logits = trials.shift_rows(rng, logits, trials.LARGE)
    # Every class appears when there are enough rows, so a forgotten one-hot shows in every column.
    labels = rng.permutation(np.arange(rows) % classes)
    return {"logits": logits, "y": labels}


#: The steps' nodes, in the order of the steps.
NODES = ("log_p", "p", "logits")


def record(inputs: dict[str, Any]) -> Any:
    """The loss on a new tape, nodes named as the steps: ``(tape, loss)``."""
    logits = Tensor(inputs["logits"], requires_grad=True, name="logits")
    classes = inputs["logits"].shape[1]
    onehot = np.eye(classes)[inputs["y"]]
    with Tape() as tape:
        p = logits.softmax(-1, name="p")
        log_p = p.log(name="log_p")
        loss = (log_p * onehot).sum() * (-1.0 / len(onehot))
    return tape, loss


tape_gradients = step_gradients(record, NODES)


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the chain with exactly one link wrong; it returns the
# step that link breaks and the later steps computed from it, and refuses any
# other name, so no call of it is the right answer.

_EVERY = ("grad_log_p", "grad_p", "grad_logits")
_LAST = ("grad_logits",)
_CHANGES = {
    "mean_missing": _EVERY,
    "mean_over_every_entry": _EVERY,
    "minus_forgotten": _EVERY,
    "log_derivative_times_p": _EVERY[1:],
    "rowsum_missing": _LAST,
    "onehot_forgotten": _LAST,
    "softmax_wrong_axis": _EVERY[1:],
    "log_p_instead_of_p": _LAST,
    "exp_not_stabilised": _EVERY[1:],
}


def _with_mistake(mistake: Any, logits: Any, y: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    rows, classes = logits.shape
    if mistake == "softmax_wrong_axis":
        p = ops.softmax.forward(logits, axis=0)
    elif mistake == "exp_not_stabilised":
        p = unstable_weights(logits)
    elif mistake == "log_p_instead_of_p":
        p = ops.log_softmax.forward(logits, axis=-1)
    else:
        p = ops.softmax.forward(logits, axis=-1)
    onehot = np.zeros_like(logits)
    onehot[np.arange(rows), y] = 1.0
    count = {"mean_missing": 1.0, "mean_over_every_entry": rows * classes}.get(mistake, rows)
    grad_log_p = (1.0 if mistake == "minus_forgotten" else -1.0) * onehot / count
    # the log's input: the wrong p when the softmax itself is wrong, else the right one
    log_input = p if mistake in ("softmax_wrong_axis", "exp_not_stabilised") else ops.softmax.forward(logits, axis=-1)
    grad_p = grad_log_p * log_input if mistake == "log_derivative_times_p" else grad_log_p / log_input
    if mistake == "onehot_forgotten":
        grad_logits = p / count
    elif mistake == "rowsum_missing":
        grad_logits = p * grad_p
    else:
        grad_logits = ops.softmax_backward(grad_p, p, axis=1)
    every = {"grad_log_p": grad_log_p, "grad_p": grad_p, "grad_logits": grad_logits}
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="softmax_cross_entropy_backward",
    stub=softmax_cross_entropy_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    record=record,
    title="Softmax + cross-entropy, step by step: grad_log_p → grad_p → grad_logits = (p − onehot(y)) / N",
    outputs=(
        Step("grad_log_p", "logits", node="log_p"),
        Step("grad_p", "logits", after=("grad_log_p",), node="p"),
        Step("grad_logits", "logits", after=("grad_p",), node="logits"),
    ),
    mistakes=(
        Mistake(
            "mean_missing",
            "missing_mean",
            "your grad_log_p is −1 at each label: the loss is the *mean* over the N rows, so each row's "
            "pick has the weight 1/N: −1/N at each label.",
            variant(_with_mistake, "mean_missing"),
            step="grad_log_p",
        ),
        Mistake(
            "mean_over_every_entry",
            "missing_mean",
            "your grad_log_p is −1/(N·C) at each label. The mean is over the N rows only (one loss per "
            "row), not over all N·C entries: a np.mean of the [N, C] product onehot * log p "
            "divides by C too. Divide by N.",
            variant(_with_mistake, "mean_over_every_entry"),
            step="grad_log_p",
        ),
        Mistake(
            "onehot_forgotten",
            "skipped_step",
            "your grad_logits is p / N: the −1 at each row's label is missing. The softmax's VJP is "
            "p ⊙ (g − Σ_k g_k p_k) with g the gradient arriving at p: the g term gives the −1 at the label.",
            variant(_with_mistake, "onehot_forgotten"),
            step="grad_logits",
        ),
        Mistake(
            "softmax_wrong_axis",
            "wrong_axis",
            "your softmax normalises the columns (axis=0). Each row's classes compete with each "
            "other: softmax over axis=-1 (each row of p sums to 1).",
            variant(_with_mistake, "softmax_wrong_axis"),
            step="grad_p",
        ),
        Mistake(
            "log_p_instead_of_p",
            "wrong_derivative",
            "your grad_logits uses log p where p belongs. The derivative of log Σ exp(s) is the "
            "softmax itself: grad_logits = (p − onehot(y)) / N with p = softmax(logits).",
            variant(_with_mistake, "log_p_instead_of_p"),
            step="grad_logits",
        ),
        Mistake(
            "minus_forgotten",
            "sign_flipped",
            "your grad_log_p is +onehot(y) / N: the sign is flipped. The loss is −log p_y, so its gradient "
            "at each row's label is −1/N.",
            variant(_with_mistake, "minus_forgotten"),
            step="grad_log_p",
        ),
        Mistake(
            "log_derivative_times_p",
            "wrong_derivative",
            "your grad_p multiplies by p. The derivative of log p is 1/p: divide the gradient arriving at log_p by p.",
            variant(_with_mistake, "log_derivative_times_p"),
            step="grad_p",
        ),
        Mistake(
            "rowsum_missing",
            "missing_rowsum",
            "your grad_logits is p ⊙ g only. Every p of a row depends on every logit of the row (they share "
            "the denominator): the softmax's VJP is p ⊙ (g − Σ_k g_k p_k).",
            variant(_with_mistake, "rowsum_missing"),
            step="grad_logits",
        ),
        Mistake(
            "exp_not_stabilised",
            "unstable_exp",
            "your softmax overflows on large logits (np.exp of 1000 is inf, and inf / inf is NaN). "
            "Subtract each row's maximum before exp: softmax(s) = softmax(s − max(s)), exactly.",
            variant(_with_mistake, "exp_not_stabilised"),
            step="grad_p",
        ),
    ),
)
register(EXERCISE)
