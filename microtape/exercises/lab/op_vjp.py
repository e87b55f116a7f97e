"""Exercise: write an op's VJP, register it with ``mt.ops.define``, see it drawn and gradchecked.

The op is ``logsumexp`` along the last axis (the log of a softmax's
denominator, the heart of ``log_softmax`` and cross-entropy). The student
writes its VJP with the signature every op in :mod:`microtape.ops` uses,
``vjp(g, ans, x) -> (grad_x,)``; the checker compares it with the tape's
gradient of the same function *composed* from built-in ops (max, sub, exp,
sum, log, add). Notebook 07 then registers the student's VJP as an op,
draws it in a graph and runs ``mt.check.gradcheck`` on it — the
minitorch-style exercise that touches the engine.
"""

from typing import Any

import numpy as np

from ... import ops
from ...engine import Tape, gradients
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register, trials

__all__ = ["logsumexp_vjp", "logsumexp_forward"]


def logsumexp_forward(x: Any) -> Any:
    """``y = log Σ_j exp(x_j)`` along the last axis, stable (shifted by the row max)."""
    peak = np.max(x, axis=-1, keepdims=True)
    return np.log(np.sum(np.exp(x - peak), axis=-1)) + peak[..., 0]


def logsumexp_vjp(g, ans, x):
    r"""The VJP of ``y = logsumexp(x)`` along the last axis — as an op of microtape.

    Forward (done for you, ``logsumexp_forward``):
        y_i = log Σ_j exp(x_ij)        x: [..., T]  →  y: [...]   (the last axis summed away)

    Arguments, as every VJP in ``microtape.ops`` receives them:
        g:    dL/dy, the shape of y (one number per row)
        ans:  y itself, the op's output (free to use: the forward computed it)
        x:    the input, [..., T]

    Return a tuple with one gradient per input: ``(grad_x,)``, shaped like x.

    The maths: ∂y_i/∂x_ij = exp(x_ij) / Σ_k exp(x_ik) — a softmax. Two
    things to get right: g has one entry per row, so give it its axis back
    (``g[..., None]``) before it meets the [..., T] softmax; and some trials
    have rows of size ±1000, where ``np.exp(x)`` overflows — but
    ``exp(x − y)`` never does (y is the row's log-sum-exp, at least its max).
    """
    raise NotImplementedError("logsumexp_vjp: return (grad_x,) here")


VISIBLE = (
    {"shape": (4, 4)},
    {"shape": (3, 5)},
    {"shape": (2, 3, 4)},
    {"shape": (5, 2), "large": True},
    {"shape": (6,)},
)
HIDDEN = (
    {"shape": (5, 5)},
    {"shape": (2, 6), "large": True},
    {"shape": (3, 2, 5)},
    {"shape": (7,), "large": True},
    {"shape": (2, 4, 4)},
    {"shape": (1, 3)},
    # The large trial, shared by the class: rows of 16 384: too many forwards for numeric differentiation.
    {"shape": (6, 16384), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    x = rng.standard_normal(case["shape"])
    if case.get("large"):
        x = trials.shift_rows(rng, x, trials.LARGE)
    ans = logsumexp_forward(x)
    return {"g": rng.standard_normal(ans.shape), "ans": ans, "x": x}


def composed_logsumexp(x: Any) -> Any:
    """The same function from built-in ops, so the tape differentiates it (the checker's truth)."""
    peak = x.max(axis=-1, keepdims=True, name="peak")
    total = (x - peak).exp(name="exps").sum(axis=-1, keepdims=True, name="total")
    return (total.log(name="log_total") + peak).sum(axis=-1, name="y")  # the sum drops the size-1 axis


def tape_gradients(inputs: dict[str, Any]) -> Any:
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    with Tape() as tape:
        y = composed_logsumexp(x)
    return (gradients(y, inputs["g"], tape=tape)[x],)


# ---------------------------------------------------------------- known mistakes
#
# Each variant returns the output it gets wrong, by name (the checker takes
# any other output from the tape).


def _softmax(x: Any, axis: Any = -1) -> Any:
    return ops.softmax.forward(x, axis=axis)  # the op's stable softmax, written once


def _not_normalised(g: Any, ans: Any, x: Any) -> Any:
    with np.errstate(over="ignore", invalid="ignore"):
        return {"grad_x": g[..., None] * np.exp(x)}  # forgot to divide by Σ exp = exp(y)


def _g_not_expanded(g: Any, ans: Any, x: Any) -> Any:
    # g [N] against the softmax [N, T]: numpy lines g up with the *last* axis.
    return {"grad_x": g * _softmax(x)}


def _softmax_wrong_axis(g: Any, ans: Any, x: Any) -> Any:
    return {"grad_x": g[..., None] * _softmax(x, axis=0)}


def _exp_not_stabilised(g: Any, ans: Any, x: Any) -> Any:
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return {"grad_x": g[..., None] * e / np.sum(e, axis=-1, keepdims=True)}


def _g_forgotten(g: Any, ans: Any, x: Any) -> Any:
    return {"grad_x": _softmax(x)}


EXERCISE = Exercise(
    name="logsumexp_vjp",
    stub=logsumexp_vjp,
    is_vjp=True,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="An op's VJP: logsumexp, registered with mt.ops.define and gradchecked",
    outputs=(Output("grad_x", "x", aliases=("dx",)),),
    mistakes=(
        Mistake(
            "not_normalised",
            "skipped_step",
            "your grad_x is g · exp(x): the derivative of log(Σ exp) also divides by Σ exp. "
            "∂y/∂x_j = exp(x_j) / Σ_k exp(x_k) = exp(x_j − y) — a softmax.",
            _not_normalised,
        ),
        Mistake(
            "g_not_expanded",
            "wrong_axis",
            "your g lost its row axis: g has one entry per row ([N]), the softmax is [N, T], and "
            "numpy broadcast g along the last axis. Use g[..., None].",
            _g_not_expanded,
        ),
        Mistake(
            "softmax_wrong_axis",
            "wrong_axis",
            "your softmax normalises down the columns (axis=0). y sums over the last axis, so "
            "normalise each row: axis=-1.",
            _softmax_wrong_axis,
        ),
        Mistake(
            "exp_not_stabilised",
            "unstable_exp",
            "your softmax overflows on rows of size ±1000 (np.exp(1000) is inf, inf / inf is NaN). "
            "Use exp(x − y[..., None]) — y, the output you are given, is at least the row max.",
            _exp_not_stabilised,
        ),
        Mistake(
            "g_forgotten",
            "skipped_step",
            "your grad_x is the softmax alone: that is ∂y/∂x, the local derivative. A VJP multiplies "
            "it by the incoming g: g[..., None] * exp(x − y[..., None]).",
            _g_forgotten,
        ),
    ),
)
register(EXERCISE)
