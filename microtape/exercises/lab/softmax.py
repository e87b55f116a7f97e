"""Exercise: the backward pass of softmax (row by row).

The student is given the weights ``p = softmax(s)`` and the incoming gradient
``grad_p`` and returns ``grad_s``. The tape's answer comes from running
``Tensor.softmax`` forward and the tape backward.
"""

from typing import Any

import numpy as np

from ... import ops
from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register

__all__ = ["softmax_backward"]


def softmax_backward(p, grad_p):
    r"""Backward pass of a row-wise softmax.

    Forward (done for you): ``p = softmax(s)`` along the last axis, so for
    every row ``p_j = exp(s_j) / Σ_k exp(s_k)`` and each row of ``p`` sums to 1.

    Arguments (numpy float64 arrays of the same shape: ``[T, T]``, ``[N, T]``
    or with a batch axis in front ``[B, N, T]``):
        p:       the softmax weights (each row sums to 1)
        grad_p:  dL/dp, the gradient arriving from above

    Return ``grad_s`` = dL/ds, the same shape as ``p``.

    The maths: within one row, ``∂p_j/∂s_i = p_j (δ_ij − p_i)``: the Jacobian
    is ``diag(p) − p pᵀ``. Multiply it by ``grad_p`` and simplify — every
    weight in a row depends on *every* score of that row, so the answer has a
    term summed over the row. Use ``axis=-1`` and ``keepdims=True`` so it
    works for any number of leading axes.
    """
    raise NotImplementedError("softmax_backward: write the backward pass of softmax here")


# One dict per trial. The first visible trial is square, like attention
# weights [T, T]: a row sum without keepdims then broadcasts silently. The
# hidden trials use other shapes, and some have peaked rows (scores × 30).
VISIBLE = (
    {"shape": (4, 4)},
    {"shape": (3, 5)},
    {"shape": (2, 3, 4)},
    {"shape": (5, 2)},
    {"shape": (2, 4, 4)},
)
HIDDEN = (
    {"shape": (5, 5)},
    {"shape": (2, 6), "spread": 30.0},
    {"shape": (3, 2, 5)},
    {"shape": (6, 3)},
    {"shape": (2, 3, 3), "spread": 30.0},
    {"shape": (1, 7)},
    # The large trial, shared by the class: rows of 16 384: too many forwards for numeric differentiation.
    {"shape": (6, 16384), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    shape = case["shape"]
    s = rng.standard_normal(shape) * case.get("spread", 1.0)
    p = ops.softmax.forward(s, axis=-1)  # the op's stable softmax
    return {"p": p, "grad_p": rng.standard_normal(shape), "s": s}


def tape_gradients(inputs: dict[str, Any]) -> Any:
    scores = Tensor(inputs["s"], requires_grad=True, name="s")
    with Tape() as tape:
        weights = scores.softmax(-1, name="p")
    tape.backward(weights, inputs["grad_p"])
    return (scores.grad,)


# ---------------------------------------------------------------- known mistakes


#
# Each variant returns the output it gets wrong, by name (as every exercise's
# variants do: the checker takes any other output from the tape).


def _no_rowsum(p: Any, grad_p: Any) -> Any:
    return {"grad_s": p * grad_p}


def _rowsum_wrong_axis(p: Any, grad_p: Any) -> Any:
    return {"grad_s": ops.softmax_backward(grad_p, p, axis=-2)}


def _rowsum_without_keepdims(p: Any, grad_p: Any) -> Any:
    # On a square [T, T] input the row sums, shape [T], broadcast as a *row*:
    # entry (i, j) gets the sum of row j. Elsewhere numpy raises.
    return {"grad_s": ops.softmax_backward(grad_p, p, row_sum=np.sum(grad_p * p, axis=-1))}


def _rowsum_unweighted(p: Any, grad_p: Any) -> Any:
    return {"grad_s": p * (grad_p - np.sum(grad_p, axis=-1, keepdims=True))}


def _rowsum_not_times_p(p: Any, grad_p: Any) -> Any:
    # The bracket left out: p multiplies grad_p only, the row sum is subtracted bare.
    row_sum = np.sum(grad_p * p, axis=-1, keepdims=True)
    return {"grad_s": p * grad_p - row_sum}


EXERCISE = Exercise(
    name="softmax_backward",
    stub=softmax_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Softmax backward: grad_s from p and grad_p",
    outputs=(Output("grad_s", "p"),),
    mistakes=(
        Mistake(
            "no_rowsum",
            "missing_rowsum",
            "your grad_s equals p * grad_p: that is only the diagonal of the Jacobian "
            "diag(p) − p pᵀ. The −p pᵀ part gives a second term: "
            "grad_s = p * (grad_p − rowsum(grad_p * p)).",
            _no_rowsum,
        ),
        Mistake(
            "rowsum_wrong_axis",
            "wrong_axis",
            "your row sum runs down the columns (axis=-2). Softmax normalises each row over "
            "its last axis, so sum with axis=-1, keepdims=True.",
            _rowsum_wrong_axis,
        ),
        Mistake(
            "rowsum_without_keepdims",
            "wrong_axis",
            "your row sum lost its axis (no keepdims=True), so numpy broadcast the sums along "
            "the wrong axis: entry (i, j) subtracted the sum of row j. Use "
            "np.sum(grad_p * p, axis=-1, keepdims=True).",
            _rowsum_without_keepdims,
        ),
        Mistake(
            "rowsum_unweighted",
            "wrong_derivative",
            "your row sum adds grad_p alone. The −p pᵀ part of the Jacobian weights each entry by "
            "its p_j: subtract rowsum(grad_p * p), so grad_s = p * (grad_p − rowsum(grad_p * p)).",
            _rowsum_unweighted,
        ),
        Mistake(
            "rowsum_not_times_p",
            "missing_rowsum",
            "your grad_s subtracts the row sum without multiplying it by p: the Jacobian's −p pᵀ "
            "gives −p_i · rowsum(grad_p * p). Bracket it: p * (grad_p − rowsum(grad_p * p)).",
            _rowsum_not_times_p,
        ),
    ),
)
register(EXERCISE)
