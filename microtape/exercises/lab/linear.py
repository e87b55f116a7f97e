"""Exercise: the backward pass of a Linear layer ``y = x Wᵀ + b``.

The student returns the three gradients (input, weight, bias). The tape's
answer comes from ``x.matmul(W.T) + b`` on Tensors and the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register

__all__ = ["linear_backward"]


def linear_backward(x, weight, grad_y):
    r"""Backward pass of a fully connected layer.

    Forward (done for you): ``y = x @ weight.T + bias``, PyTorch's convention:
        x:       [N, in]     N rows, each an input vector
        weight:  [out, in]
        bias:    [out]       (added to every row; you don't need its value)
        y:       [N, out]

    Arguments: ``x``, ``weight`` and ``grad_y`` = dL/dy of shape [N, out].

    Return a tuple ``(grad_x, grad_weight, grad_bias)`` with the shapes of
    ``x`` [N, in], ``weight`` [out, in] and ``bias`` [out].

    The maths: ``y_nj = Σ_i x_ni W_ji + b_j``. Differentiate one entry, then
    write the sums as matrix products. Every row ``n`` used the *same* weight
    and bias, so their gradients add up over the rows. Check each shape
    against the list above: the shapes tell you where the transposes go.
    """
    raise NotImplementedError("linear_backward: write the backward pass of Linear here")


# One dict per trial: (N, in, out). The first has in == out, so that even a
# transposed product runs and can be recognised by its values; the others are
# not square. The hidden trials use other sizes.
VISIBLE = (
    {"shape": (4, 3, 3)},
    {"shape": (5, 3, 4)},
    {"shape": (6, 2, 3)},
    {"shape": (2, 5, 2)},
    {"shape": (3, 4, 6)},
)
HIDDEN = (
    {"shape": (3, 4, 4)},
    {"shape": (7, 2, 5)},
    {"shape": (1, 3, 2)},
    {"shape": (4, 6, 3)},
    {"shape": (5, 5, 1)},
    {"shape": (2, 7, 7), "scale": 10.0},
    # The large trial, shared by the class: ~205 000 inputs: too many forwards for numeric differentiation.
    {"shape": (1024, 128, 64), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, fan_in, fan_out = case["shape"]
    scale = case.get("scale", 1.0)
    return {
        "x": rng.standard_normal((rows, fan_in)) * scale,
        "weight": rng.standard_normal((fan_out, fan_in)),
        "grad_y": rng.standard_normal((rows, fan_out)),
        "bias": rng.standard_normal(fan_out),
    }


def tape_gradients(inputs: dict[str, Any]) -> Any:
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    weight = Tensor(inputs["weight"], requires_grad=True, name="weight")
    bias = Tensor(inputs["bias"], requires_grad=True, name="bias")
    with Tape() as tape:
        y = x.matmul(weight.T) + bias
    tape.backward(y, inputs["grad_y"])
    return x.grad, weight.grad, bias.grad


# ---------------------------------------------------------------- known mistakes
#
# Each variant returns only the outputs its mistake gets wrong, by name: the
# checker takes the others from the tape. So no variant, and no mix of them,
# is the answer (the package must not hold it).


def _weight_grad_transposed(x: Any, weight: Any, grad_y: Any) -> Any:
    return {"grad_weight": x.T @ grad_y}


def _input_grad_with_weight_transposed(x: Any, weight: Any, grad_y: Any) -> Any:
    return {"grad_x": grad_y @ weight.T}  # only runs when in == out (numpy raises otherwise)


def _bias_summed_over_wrong_axis(x: Any, weight: Any, grad_y: Any) -> Any:
    return {"grad_bias": grad_y.sum(axis=1)}


def _bias_not_summed(x: Any, weight: Any, grad_y: Any) -> Any:
    return {"grad_bias": grad_y}


def _weight_grad_one_row(x: Any, weight: Any, grad_y: Any) -> Any:
    # The outer product of the first row only: forgot that every row contributes.
    return {"grad_weight": np.outer(grad_y[0], x[0])}


EXERCISE = Exercise(
    name="linear_backward",
    stub=linear_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Linear backward: grad_x, grad_weight, grad_bias of y = x Wᵀ + b",
    outputs=(Output("grad_x", "x"), Output("grad_weight", "weight"), Output("grad_bias", "bias")),
    mistakes=(
        Mistake(
            "weight_grad_transposed",
            "transposed",
            "your grad_weight is xᵀ grad_y, the transpose of the answer. The weight is stored "
            "[out, in], so grad_weight = grad_yᵀ x (shape [out, in]).",
            _weight_grad_transposed,
        ),
        Mistake(
            "input_grad_with_weight_transposed",
            "transposed",
            "your grad_x is grad_y Wᵀ. The forward multiplies by Wᵀ, so the backward "
            "multiplies by (Wᵀ)ᵀ = W: grad_x = grad_y @ weight.",
            _input_grad_with_weight_transposed,
        ),
        Mistake(
            "bias_summed_over_wrong_axis",
            "wrong_axis",
            "your grad_bias sums over the features (axis=1). The bias is shared by every row, "
            "so its gradient sums over the rows: grad_y.sum(axis=0).",
            _bias_summed_over_wrong_axis,
        ),
        Mistake(
            "bias_not_summed",
            "wrong_axis",
            "your grad_bias is grad_y itself, one row per input. The bias is shared by every "
            "row, so add the rows up: grad_y.sum(axis=0), shape [out].",
            _bias_not_summed,
        ),
        Mistake(
            "weight_grad_one_row",
            "skipped_step",
            "your grad_weight uses only the first row. Every row used the same weight, so "
            "each row's outer product grad_y[n] x[n]ᵀ adds up: grad_yᵀ x.",
            _weight_grad_one_row,
        ),
    ),
)
register(EXERCISE)
