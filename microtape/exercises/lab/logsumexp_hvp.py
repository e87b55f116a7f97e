"""Exercise: second order — the Hessian-vector product of logsumexp.

The student returns ``H v`` for ``f(x) = Σ_rows logsumexp(x_row)``. The tape's
answer comes from ``mt.hvp`` (the gradient recorded on the tape and
differentiated again), never from a formula.
"""

from typing import Any

import numpy as np

from ... import ops
from ...transforms.higher_order import hvp
from .. import Exercise, Mistake, Output, register, trials

__all__ = ["logsumexp_hvp"]


def logsumexp_hvp(x, v):
    r"""Second order: the Hessian of logsumexp times a vector.

    The function: ``f(x) = Σ_n logsumexp(x[n])``, each row's
    ``log Σ_j exp(x[n, j])``, added over the rows (one row when ``x`` is 1-D).

    Arguments (numpy float64 arrays of the same shape, ``[T]`` or ``[N, T]``):
        x:  the point (some rows are shifted by up to ±1000: a bare ``np.exp`` overflows)
        v:  the direction

    Return ``hv`` = H v, the Hessian of ``f`` at ``x`` times ``v``, shaped like ``x``.

    The maths: the gradient of one row's logsumexp is ``p = softmax(x[n])``.
    Differentiate it again: the Hessian of one row is ``diag(p) − p pᵀ`` (the
    softmax Jacobian), and rows do not interact (the Hessian is block
    diagonal). Multiply by ``v`` without building the matrix: one product
    and one row sum.
    """
    raise NotImplementedError("logsumexp_hvp: write the Hessian-vector product of logsumexp here")


# One dict per trial. The first visible trial is square; "large" shifts each
# row by up to ±1000; the last hidden trial is large (90 000 entries).
VISIBLE = (
    {"shape": (4, 4)},
    {"shape": (6,)},
    {"shape": (3, 5)},
    {"shape": (5, 3), "large": True},
)
HIDDEN = (
    {"shape": (5, 5)},
    {"shape": (2, 7), "large": True},
    {"shape": (8,)},
    {"shape": (6, 3)},
    {"shape": (300, 300), "large": True, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    x = rng.standard_normal(case["shape"])
    if case.get("large"):
        x = trials.shift_rows(rng, x, trials.LARGE)
    return {"x": x, "v": rng.standard_normal(case["shape"])}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    return (hvp(lambda x: x.logsumexp(axis=-1).sum(), inputs["x"], inputs["v"]),)


# ---------------------------------------------------------------- known mistakes


def _weights(x: Any) -> Any:
    return ops.softmax.forward(x, axis=-1)  # the op's stable softmax: the gradient of logsumexp


def _diagonal_only(x: Any, v: Any) -> Any:
    return {"hv": _weights(x) * v}


def _outer_only(x: Any, v: Any) -> Any:
    p = _weights(x)
    return {"hv": -p * np.sum(p * v, axis=-1, keepdims=True)}


def _outer_sign_flipped(x: Any, v: Any) -> Any:
    p = _weights(x)
    return {"hv": p * (v + np.sum(p * v, axis=-1, keepdims=True))}


def _rows_mixed(x: Any, v: Any) -> Any:
    p = _weights(x)
    return {"hv": ops.softmax_backward(v, p, row_sum=np.sum(p * v))}  # one sum over every row


def _gradient_not_hessian(x: Any, v: Any) -> Any:
    return {"hv": _weights(x)}


def _unstable_exp(x: Any, v: Any) -> Any:
    with np.errstate(all="ignore"):
        e = np.exp(x)
        p = e / np.sum(e, axis=-1, keepdims=True)
    return {"hv": ops.softmax_backward(v, p)}


EXERCISE = Exercise(
    name="logsumexp_hvp",
    stub=logsumexp_hvp,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Logsumexp Hessian-vector product (second order): hv = H v",
    outputs=(Output("hv", "x"),),
    mistakes=(
        Mistake(
            "diagonal_only",
            "missing_rowsum",
            "your hv is p * v: only the diagonal of the Hessian diag(p) − p pᵀ. The −p pᵀ part adds "
            "− p * rowsum(p * v).",
            _diagonal_only,
        ),
        Mistake(
            "outer_only",
            "skipped_step",
            "your hv is − p * rowsum(p * v): only the −p pᵀ part of the Hessian. Add the diagonal: "
            "hv = p * v − p * rowsum(p * v).",
            _outer_only,
        ),
        Mistake(
            "outer_sign_flipped",
            "wrong_derivative",
            "your hv adds p * rowsum(p * v). The Hessian is diag(p) − p pᵀ (the derivative of p_i "
            "by x_j is p_i (δ_ij − p_j)): subtract it.",
            _outer_sign_flipped,
        ),
        Mistake(
            "rows_mixed",
            "wrong_axis",
            "your hv sums p * v over the whole array. Each row is its own logsumexp (the Hessian is "
            "block diagonal): rowsum with axis=-1, keepdims=True.",
            _rows_mixed,
        ),
        Mistake(
            "gradient_not_hessian",
            "skipped_step",
            "your hv is softmax(x): that is the gradient of f, the first derivative. Differentiate "
            "once more and multiply by v: (diag(p) − p pᵀ) v.",
            _gradient_not_hessian,
        ),
        Mistake(
            "unstable_exp",
            "unstable_exp",
            "your hv turns into NaN or inf on rows with large entries: np.exp(x) overflows. Subtract "
            "each row's maximum first (or use exp(x − logsumexp(x))).",
            _unstable_exp,
        ),
    ),
)
register(EXERCISE)
