"""Exercise: forward mode — the Jacobian-vector product (JVP) of softmax.

The student pushes a tangent ``ds`` through ``p = softmax(s)`` and returns
``dp = J ds``. The tape's answer comes from ``mt.jvp`` (forward mode on the
recorded ``softmax``), never from a formula.
"""

from typing import Any

import numpy as np

from ... import ops
from ...transforms.forward_mode import jvp
from .. import Exercise, Mistake, Output, register, trials

__all__ = ["softmax_jvp"]


def softmax_jvp(s, ds):
    r"""Forward mode: the JVP of a row-wise softmax.

    Forward (part of your job): ``p = softmax(s)`` along the last axis,
    ``p_j = exp(s_j) / Σ_k exp(s_k)`` in each row.

    Arguments (numpy float64 arrays of the same shape, ``[N, T]`` or with a
    batch axis in front ``[B, N, T]``):
        s:   the scores (some rows are shifted by up to ±1000: a bare
             ``np.exp`` overflows — subtract each row's maximum first)
        ds:  the tangent: the direction in which ``s`` moves

    Return ``dp`` = J ds, the first-order change of ``p`` when ``s`` moves by
    ``ds`` (``p(s + ε ds) ≈ p + ε dp``), shaped like ``s``.

    The maths: in a row ``∂p_j/∂s_i = p_j (δ_ij − p_i)``. Forward mode
    multiplies the Jacobian by the tangent *on the right*: ``dp_j = Σ_i
    ∂p_j/∂s_i ds_i``. Simplify; which row sum appears? (The Jacobian is
    symmetric, so the answer looks like the backward pass — but here the
    vector comes from below, not from above.)
    """
    raise NotImplementedError("softmax_jvp: write the forward-mode derivative of softmax here")


# One dict per trial. The first visible trial is square (a row sum without
# keepdims broadcasts silently there); "large" shifts each row by up to ±1000;
# the last hidden trial is large (90 000 entries).
VISIBLE = (
    {"shape": (4, 4)},
    {"shape": (3, 5)},
    {"shape": (2, 3, 4)},
    {"shape": (5, 3), "large": True},
)
HIDDEN = (
    {"shape": (5, 5)},
    {"shape": (2, 6), "large": True},
    {"shape": (3, 2, 5)},
    {"shape": (6, 3)},
    {"shape": (300, 300), "large": True, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    s = rng.standard_normal(case["shape"])
    if case.get("large"):
        s = trials.shift_rows(rng, s, trials.LARGE)
    return {"s": s, "ds": rng.standard_normal(case["shape"])}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    _, tangent = jvp(lambda scores: scores.softmax(-1, name="p"), (inputs["s"],), (inputs["ds"],))
    return (tangent,)


# ---------------------------------------------------------------- known mistakes
#
# Each variant returns only what its mistake gets wrong: the dp of the chain
# with that one thing wrong (no variant is the answer).


def _weights(s: Any) -> Any:
    return ops.softmax.forward(s, axis=-1)  # the op's stable softmax


def _no_rowsum(s: Any, ds: Any) -> Any:
    return {"dp": _weights(s) * ds}


def _rowsum_wrong_axis(s: Any, ds: Any) -> Any:
    p = _weights(s)
    return {"dp": ops.softmax_backward(ds, p, axis=-2)}


def _rowsum_without_keepdims(s: Any, ds: Any) -> Any:
    p = _weights(s)
    return {"dp": ops.softmax_backward(ds, p, row_sum=np.sum(p * ds, axis=-1))}  # only runs on square inputs


def _rowsum_unweighted(s: Any, ds: Any) -> Any:
    p = _weights(s)
    return {"dp": p * (ds - np.sum(ds, axis=-1, keepdims=True))}


def _log_softmax_tangent(s: Any, ds: Any) -> Any:
    p = _weights(s)
    row_sum = np.sum(p * ds, axis=-1, keepdims=True)
    return {"dp": ds - row_sum}  # the tangent of log p, not of p


def _unstable_exp(s: Any, ds: Any) -> Any:
    with np.errstate(all="ignore"):
        e = np.exp(s)
        p = e / np.sum(e, axis=-1, keepdims=True)
    return {"dp": ops.softmax_backward(ds, p)}


EXERCISE = Exercise(
    name="softmax_jvp",
    stub=softmax_jvp,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Softmax JVP (forward mode): dp = J ds",
    outputs=(Output("dp", "s"),),
    mistakes=(
        Mistake(
            "no_rowsum",
            "missing_rowsum",
            "your dp is p * ds: only the diagonal of the Jacobian diag(p) − p pᵀ. The −p pᵀ part "
            "adds a row sum: dp = p * (ds − rowsum(p * ds)).",
            _no_rowsum,
        ),
        Mistake(
            "rowsum_wrong_axis",
            "wrong_axis",
            "your row sum runs down the columns (axis=-2). Each row is its own softmax: sum over "
            "axis=-1 with keepdims=True.",
            _rowsum_wrong_axis,
        ),
        Mistake(
            "rowsum_without_keepdims",
            "missing_keepdims",
            "your row sum lost its axis (no keepdims=True), so on a square input numpy broadcast it "
            "along the wrong axis. Use np.sum(p * ds, axis=-1, keepdims=True).",
            _rowsum_without_keepdims,
        ),
        Mistake(
            "rowsum_unweighted",
            "wrong_derivative",
            "your dp subtracts rowsum(ds), not rowsum(p * ds): the Jacobian's −p pᵀ weights each "
            "tangent entry by its p_i. dp = p * (ds − rowsum(p * ds)).",
            _rowsum_unweighted,
        ),
        Mistake(
            "log_softmax_tangent",
            "skipped_step",
            "your dp is ds − rowsum(p * ds): that is the tangent of log softmax. Softmax's is p times it: "
            "dp = p * (ds − rowsum(p * ds)).",
            _log_softmax_tangent,
        ),
        Mistake(
            "unstable_exp",
            "unstable_exp",
            "your dp turns into NaN or inf on rows with large scores: np.exp(s) overflows. Subtract "
            "each row's maximum before the exp (the softmax does not change).",
            _unstable_exp,
        ),
    ),
)
register(EXERCISE)
