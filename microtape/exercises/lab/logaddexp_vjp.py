"""Exercise: derive the VJP of ``logaddexp`` (two inputs, broadcasting), register it, gradcheck it.

``y = log(exp(a) + exp(b))`` is the smooth maximum of two arrays — the
two-input step of ``logsumexp``, and how log-probabilities are added. The
student writes ``vjp(g, ans, a, b) -> (grad_a, grad_b)`` with the signature of
every op in :mod:`microtape.ops`; the checker compares it with the tape's
gradient of the same function *composed* from built-in ops (maximum, sub,
exp, add, log). Two lessons beyond the chain rule: the slopes are a
two-way softmax, ``exp(a − y)`` and ``exp(b − y)`` (stable even at ±1000,
where ``exp(a)`` overflows), and ``b`` may be broadcast against ``a``, so its
gradient must be summed back to ``b``'s shape. Notebook 07 then registers the
student's VJP with ``mt.ops.define`` and runs ``mt.check.gradcheck`` on it.
"""

from typing import Any

import numpy as np

from ...engine import Tape, gradients
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register, trials

__all__ = ["logaddexp_vjp", "logaddexp_forward"]


def logaddexp_forward(a: Any, b: Any) -> Any:
    """``y = log(exp(a) + exp(b))``, entry by entry with numpy's broadcasting (numpy's own, stable)."""
    return np.logaddexp(a, b)


def logaddexp_vjp(g, ans, a, b):
    r"""The VJP of ``y = logaddexp(a, b)`` — as an op of microtape.

    Forward (done for you, ``logaddexp_forward``):
        y = log(exp(a) + exp(b))       a: [N, T], b: [N, T] or [T]  →  y: [N, T]

    Arguments, as every VJP in ``microtape.ops`` receives them:
        g:    dL/dy, the shape of y
        ans:  y itself, the op's output (free to use: the forward computed it)
        a, b: the inputs

    Return one gradient per input, each shaped like its input: ``(grad_a, grad_b)``.

    The maths: ∂y/∂a = exp(a) / (exp(a) + exp(b)) — and the same for b with
    exp(b) on top: together a softmax over the two. Two things to get right:
    some trials have rows of size ±1000, where ``np.exp(a)`` overflows — but
    ``exp(a − y)`` never does (y is at least max(a, b)); and in some trials
    b is one row [T] shared by every row of a, so its gradient collects the
    contributions of all rows (sum over the broadcast axis).
    """
    raise NotImplementedError("logaddexp_vjp: return (grad_a, grad_b) here")


VISIBLE = (
    {"shape": (4, 3)},
    {"shape": (3, 5), "shared_b": True},
    {"shape": (2, 4), "large": True},
    {"shape": (5, 2), "large": True, "shared_b": True},
    {"shape": (6,)},
)
HIDDEN = (
    {"shape": (5, 4)},
    {"shape": (2, 6), "large": True},
    {"shape": (4, 3), "shared_b": True},
    {"shape": (3, 3), "large": True, "shared_b": True},
    {"shape": (7,), "large": True},
    {"shape": (1, 4)},
    # The large trial, shared by the class: ~131 000 inputs: too many forwards for numeric differentiation.
    {"shape": (64, 1024), "shared_b": True, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    a = rng.standard_normal(case["shape"])
    b = rng.standard_normal(case["shape"][-1:] if case.get("shared_b") else case["shape"])
    if case.get("large"):
        a = trials.shift_rows(rng, a, trials.LARGE)
        b = b + trials.LARGE  # rows near +1000 beside rows near -1000: exp overflows either way
    ans = logaddexp_forward(a, b)
    return {"g": rng.standard_normal(ans.shape), "ans": ans, "a": a, "b": b}


def composed_logaddexp(a: Any, b: Any) -> Any:
    """The same function from built-in ops, so the tape differentiates it (the checker's truth)."""
    peak = a.maximum(b, name="peak")
    total = ((a - peak).exp(name="exp_a") + (b - peak).exp(name="exp_b")).log(name="log_total")
    return (total + peak).reshape(peak.shape, name="y")


def tape_gradients(inputs: dict[str, Any]) -> Any:
    a = Tensor(inputs["a"], requires_grad=True, name="a")
    b = Tensor(inputs["b"], requires_grad=True, name="b")
    with Tape() as tape:
        y = composed_logaddexp(a, b)
    found = gradients(y, inputs["g"], tape=tape)
    return found[a], found[b]


# ---------------------------------------------------------------- known mistakes
#
# Each variant returns the outputs it gets wrong, by name (the checker takes
# any other output from the tape).


def _summed_to(grad: Any, like: Any) -> Any:
    """``grad`` summed over the axes along which ``like`` was broadcast."""
    extra = grad.ndim - like.ndim
    return grad.sum(axis=tuple(range(extra))) if extra > 0 else grad


def _not_normalised(g: Any, ans: Any, a: Any, b: Any) -> Any:
    with np.errstate(over="ignore", invalid="ignore"):
        return {"grad_a": g * np.exp(a), "grad_b": _summed_to(g * np.exp(b), b)}  # forgot ÷ (e^a + e^b)


def _swapped(g: Any, ans: Any, a: Any, b: Any) -> Any:
    # Each input given the other's share of the softmax.
    return {"grad_a": g * np.exp(b - ans), "grad_b": _summed_to(g * np.exp(a - ans), b)}


def _b_not_summed(g: Any, ans: Any, a: Any, b: Any) -> Any:
    # Right slope, but b's gradient left with a's shape when b was broadcast: the shared row's
    # gradient is the sum of what every row sends it. (Only the shared-b trials differ.)
    grad_b = g * np.exp(b - ans)
    if grad_b.shape != np.shape(b):
        grad_b = grad_b[0]  # the first row only
    return {"grad_b": grad_b}


def _exp_not_stabilised(g: Any, ans: Any, a: Any, b: Any) -> Any:
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.exp(a) + np.exp(b)
        return {"grad_a": g * np.exp(a) / total, "grad_b": _summed_to(g * np.exp(b) / total, b)}


def _g_forgotten(g: Any, ans: Any, a: Any, b: Any) -> Any:
    return {"grad_a": np.exp(a - ans), "grad_b": _summed_to(np.exp(b - ans), b)}


EXERCISE = Exercise(
    name="logaddexp_vjp",
    stub=logaddexp_vjp,
    is_vjp=True,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Derive and register the VJP of logaddexp (two inputs, one broadcast)",
    outputs=(Output("grad_a", "a", aliases=("da",)), Output("grad_b", "b", aliases=("db",))),
    mistakes=(
        Mistake(
            "not_normalised",
            "skipped_step",
            "your grad_a and grad_b are g · exp(a) and g · exp(b): the derivative of log(e^a + e^b) also "
            "divides by e^a + e^b. ∂y/∂a = exp(a − y) — a softmax over the two inputs.",
            _not_normalised,
        ),
        Mistake(
            "swapped",
            "wrong_derivative",
            "your grad_a and grad_b are swapped: a's share of the softmax is exp(a − y), b's is exp(b − y).",
            _swapped,
        ),
        Mistake(
            "b_not_summed",
            "broadcast_not_summed",
            "your grad_b is wrong where b is one row shared by every row of a: each row sends b a "
            "gradient, and b's gradient is their sum (over the broadcast axis), not one row of it.",
            _b_not_summed,
        ),
        Mistake(
            "exp_not_stabilised",
            "unstable_exp",
            "your grad_a or grad_b overflows on entries near ±1000 (np.exp(1000) is inf, inf / inf is NaN). "
            "Use exp(a − y) and exp(b − y): y, the output you are given, is at least max(a, b).",
            _exp_not_stabilised,
        ),
        Mistake(
            "g_forgotten",
            "skipped_step",
            "your grad_a and grad_b are exp(a − y) and exp(b − y): the local derivatives. A VJP "
            "multiplies them by the incoming g: g * exp(a − y), and g * exp(b − y) summed back to b's shape.",
            _g_forgotten,
        ),
    ),
)
register(EXERCISE)
