"""Exercise: the backward pass of binary cross-entropy with logits (the logistic loss), mean.

``L = mean(−y log σ(z) − (1 − y) log(1 − σ(z)))``, which is
``mean(softplus(z) − y z)``. The tape's answer records that second, stable
form from microtape Tensors (``softplus(z) = logaddexp(z, 0)``) and runs the
tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["logistic_loss_backward"]


def logistic_loss_backward(logits, y):
    r"""Gradient of the mean binary cross-entropy with logits (PyTorch's BCEWithLogitsLoss).

    Forward (done for you), one logit per example:
        sigma = 1 / (1 + exp(−logits))                    the predicted probability
        L     = mean(−y log sigma − (1 − y) log(1 − sigma))

    Arguments: ``logits`` [N] float64, and ``y`` [N] float64 labels, each 0.0 or 1.0.

    Return ``grad_logits`` = dL/dlogits, shaped like ``logits``.

    The maths: ``log σ(z) = −log(1 + e^{−z})`` and ``log(1 − σ(z)) = −z − log(1 + e^{−z})``,
    so one term is ``log(1 + e^{z}) − y z``. Its derivative is short: you
    need ``σ'(z) = σ(z)(1 − σ(z))`` and no division. Then the mean over N.
    Some logits are large (±800): compute σ without overflow — e.g.
    ``np.exp(-np.logaddexp(0, -z))``, or ``1 / (1 + np.exp(-z))`` where it is
    safe — and never as ``exp(z) / (1 + exp(z))``.
    """
    raise NotImplementedError("logistic_loss_backward: return grad_logits")


# One dict per trial: N, the spread of the logits, and whether some logits
# are pushed to ±800 (σ is 0 or 1 there; exp(z) / (1 + exp(z)) is NaN). A
# hidden trial has 50 000 logits: numeric differentiation, one at a time,
# cannot finish within the time limit.
VISIBLE = (
    {"n": 4},
    {"n": 7, "spread": 3.0},
    {"n": 5},
    {"n": 3, "large": True},
    {"n": 9, "spread": 0.5},
)
HIDDEN = (
    {"n": 6},
    {"n": 2, "spread": 3.0},
    {"n": 8, "large": True},
    {"n": 11},
    {"n": 5, "large": True},
    {"n": 50000, "shared": True},
)

#: How far the "large" trials push some logits.
LARGE_LOGIT = 800.0


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    n = case["n"]
    logits = rng.standard_normal(n) * case.get("spread", 1.0)
    if case.get("large"):
        logits[: max(2, n // 2)] += LARGE_LOGIT * np.resize([1.0, -1.0], max(2, n // 2))
    # Both labels in every trial (the first two differ), so forgetting y shows.
    labels = rng.integers(0, 2, size=n).astype(np.float64)
    labels[:2] = [1.0, 0.0]
    return {"logits": logits, "y": labels}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    logits = Tensor(inputs["logits"], requires_grad=True, name="logits")
    with Tape() as tape:
        softplus = logits.logaddexp(0.0, name="softplus")  # log(1 + e^z), stable
        loss = (softplus - logits * inputs["y"]).mean(name="L")
    tape.backward(loss)
    return (logits.grad,)


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is ``(σ(z) − y) / N`` with exactly one thing wrong; it
# refuses any other name, so no call of it is the right answer.

_MISTAKES = (
    "mean_missing",
    "y_minus_sigma",
    "sigmoid_derivative_extra",
    "labels_forgotten",
    "sigmoid_forgotten",
    "sigmoid_overflows",
)


def _stable_sigmoid(z: Any) -> Any:
    return np.exp(-np.logaddexp(0.0, -z))


def _with_mistake(mistake: Any, logits: Any, y: Any) -> Any:
    if mistake not in _MISTAKES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_MISTAKES)}")
    n = logits.shape[0]
    if mistake == "sigmoid_overflows":
        with np.errstate(over="ignore", invalid="ignore"):
            sigma = np.exp(logits) / (1.0 + np.exp(logits))
    elif mistake == "sigmoid_forgotten":
        sigma = logits
    else:
        sigma = _stable_sigmoid(logits)
    labels = 0.0 if mistake == "labels_forgotten" else y
    grad = labels - sigma if mistake == "y_minus_sigma" else sigma - labels
    if mistake == "sigmoid_derivative_extra":
        grad = grad * sigma * (1.0 - sigma)
    return {"grad_logits": grad if mistake == "mean_missing" else grad / n}


EXERCISE = Exercise(
    name="logistic_loss_backward",
    stub=logistic_loss_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Logistic loss (binary cross-entropy with logits, mean) backward: grad_logits = (σ(z) − y) / N",
    outputs=(Output("grad_logits", "logits"),),
    mistakes=(
        Mistake(
            "mean_missing",
            "missing_mean",
            "your grad_logits is σ(z) − y: the loss is the mean over the N examples, so divide by N: (σ(z) − y) / N.",
            variant(_with_mistake, "mean_missing"),
        ),
        Mistake(
            "y_minus_sigma",
            "sign_flipped",
            "your grad_logits is (y − σ(z)) / N: the sign is flipped. Raising the logit of a "
            "positive example (y = 1) lowers the loss, so the gradient is (σ(z) − y) / N.",
            variant(_with_mistake, "y_minus_sigma"),
        ),
        Mistake(
            "sigmoid_derivative_extra",
            "wrong_derivative",
            "your grad_logits has an extra factor σ(z)(1 − σ(z)). With the cross-entropy it "
            "cancels: dL/dσ = (σ − y) / (σ(1 − σ)), times σ' = σ(1 − σ), is just σ − y "
            "(that extra factor belongs to the squared error on σ, not here).",
            variant(_with_mistake, "sigmoid_derivative_extra"),
        ),
        Mistake(
            "labels_forgotten",
            "skipped_step",
            "your grad_logits is σ(z) / N: the labels are missing. The −y z term gives −y: "
            "grad_logits = (σ(z) − y) / N.",
            variant(_with_mistake, "labels_forgotten"),
        ),
        Mistake(
            "sigmoid_forgotten",
            "skipped_step",
            "your grad_logits is (z − y) / N, the logits minus the labels: the sigmoid is "
            "missing. Compare the probability with the label: (σ(z) − y) / N.",
            variant(_with_mistake, "sigmoid_forgotten"),
        ),
        Mistake(
            "sigmoid_overflows",
            "unstable_exp",
            "your σ(z) is NaN for large logits: exp(800) is inf and inf / inf is NaN. Use a form "
            "that cannot overflow, e.g. σ(z) = exp(−logaddexp(0, −z)).",
            variant(_with_mistake, "sigmoid_overflows"),
        ),
    ),
)
register(EXERCISE)
