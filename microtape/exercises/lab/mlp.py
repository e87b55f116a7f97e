"""Exercise: a two-layer MLP's backward pass by hand.

``x → Linear(w1, b1) → tanh → Linear(w2, b2) → y``: given dL/dy, the student
returns every weight, bias and input gradient. The tape's answer records the
forward from microtape Tensors and runs the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["mlp_backward"]


def mlp_backward(x, w1, b1, w2, grad_y):
    r"""Backward pass of a two-layer perceptron (PyTorch's Linear convention).

    Forward (recompute what you need):
        z = x @ w1.T + b1        [N, H]   the hidden pre-activation
        h = tanh(z)              [N, H]
        y = h @ w2.T + b2        [N, O]

    Arguments: ``x`` [N, D], ``w1`` [H, D], ``b1`` [H], ``w2`` [O, H] and
    ``grad_y`` = dL/dy [N, O]. (``b2`` [O] is added to every row; its value
    does not enter any gradient, so you are not given it.)

    Return a tuple ``(grad_x, grad_w1, grad_b1, grad_w2, grad_b2)`` shaped like
    ``x``, ``w1``, ``b1``, ``w2`` and ``b2``.

    The maths: walk back one layer at a time. The second layer is the Linear
    exercise with ``h`` as its input: it gives grad_w2, grad_b2 and dL/dh.
    Through the tanh multiply by ``1 − tanh(z)² = 1 − h²`` (elementwise) to get
    dL/dz; then the first layer is the Linear exercise again, with ``x``.
    Every row used the same weights and biases, so their gradients add up over
    the rows; the shapes tell you where the transposes go.
    """
    raise NotImplementedError("mlp_backward: return grad_x, grad_w1, grad_b1, grad_w2, grad_b2")


# One dict per trial: (N, D, H, O) and the spread of x (large: tanh saturates).
# No trial is square, so a transposed product either fails or shows by its
# values. A hidden trial has 6000 rows: some 48 000 inputs, far too many to
# differentiate numerically one at a time within the time limit.
VISIBLE = (
    {"shape": (4, 3, 5, 2)},
    {"shape": (6, 2, 4, 3)},
    {"shape": (3, 5, 3, 4), "spread": 2.0},
    {"shape": (5, 4, 6, 1)},
    {"shape": (2, 3, 2, 5), "spread": 0.3},
)
HIDDEN = (
    {"shape": (5, 3, 4, 2)},
    {"shape": (3, 6, 5, 3), "spread": 2.0},
    {"shape": (7, 2, 3, 4)},
    {"shape": (1, 4, 7, 2)},
    {"shape": (4, 5, 2, 6), "spread": 0.5},
    {"shape": (6000, 8, 16, 4), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, fan_in, hidden, fan_out = case["shape"]
    return {
        "x": rng.standard_normal((rows, fan_in)) * case.get("spread", 1.0),
        "w1": rng.standard_normal((hidden, fan_in)) / np.sqrt(fan_in),
        "b1": rng.standard_normal(hidden),
        "w2": rng.standard_normal((fan_out, hidden)) / np.sqrt(hidden),
        "b2": rng.standard_normal(fan_out),
        "grad_y": rng.standard_normal((rows, fan_out)),
    }


def tape_gradients(inputs: dict[str, Any]) -> Any:
    leaves = {name: Tensor(inputs[name], requires_grad=True, name=name) for name in ("x", "w1", "b1", "w2", "b2")}
    with Tape() as tape:
        z = leaves["x"].matmul(leaves["w1"].T) + leaves["b1"]
        h = z.tanh(name="h")
        y = h.matmul(leaves["w2"].T) + leaves["b2"]
    tape.backward(y, inputs["grad_y"])
    return tuple(leaves[name].grad for name in ("x", "w1", "b1", "w2", "b2"))


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the backward pass with exactly one link wrong; it
# returns only the gradients that link changes and refuses any other name.

_FIRST_LAYER = ("grad_x", "grad_w1", "grad_b1")
_CHANGES = {
    "tanh_derivative_of_z": _FIRST_LAYER,
    "tanh_derivative_missing": _FIRST_LAYER,
    "second_layer_input_is_z": ("grad_w2",),
    "w2_grad_transposed": ("grad_w2",),
    "w1_grad_transposed": ("grad_w1",),
    "biases_not_summed": ("grad_b1", "grad_b2"),
}


def _with_mistake(mistake: Any, x: Any, w1: Any, b1: Any, w2: Any, grad_y: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    z = x @ w1.T + b1
    h = np.tanh(z)
    grad_h = grad_y @ w2
    if mistake == "tanh_derivative_of_z":
        grad_z = grad_h * (1.0 - z**2)
    elif mistake == "tanh_derivative_missing":
        grad_z = grad_h
    else:
        grad_z = grad_h * (1.0 - h**2)
    summed = mistake != "biases_not_summed"
    every = {
        "grad_x": grad_z @ w1,
        "grad_w1": x.T @ grad_z if mistake == "w1_grad_transposed" else grad_z.T @ x,
        "grad_b1": grad_z.sum(axis=0) if summed else grad_z,
        "grad_w2": (
            h.T @ grad_y
            if mistake == "w2_grad_transposed"
            else grad_y.T @ (z if mistake == "second_layer_input_is_z" else h)
        ),
        "grad_b2": grad_y.sum(axis=0) if summed else grad_y,
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="mlp_backward",
    stub=mlp_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="A two-layer MLP by hand: grad_x, grad_w1, grad_b1, grad_w2, grad_b2",
    outputs=(
        Output("grad_x", "x"),
        Output("grad_w1", "w1"),
        Output("grad_b1", "b1"),
        Output("grad_w2", "w2"),
        Output("grad_b2", "b2"),
    ),
    mistakes=(
        Mistake(
            "tanh_derivative_of_z",
            "wrong_derivative",
            "your grad_x, grad_w1 and grad_b1 use 1 − z² at the tanh. Its derivative is "
            "1 − tanh(z)² = 1 − h²: square h, not the pre-activation z.",
            variant(_with_mistake, "tanh_derivative_of_z"),
        ),
        Mistake(
            "tanh_derivative_missing",
            "skipped_step",
            "your grad_x, grad_w1 and grad_b1 skip the tanh: dL/dz = dL/dh * (1 − h²), not dL/dh itself.",
            variant(_with_mistake, "tanh_derivative_missing"),
        ),
        Mistake(
            "second_layer_input_is_z",
            "wrong_derivative",
            "your grad_w2 uses the pre-activation z. The second layer's input is h = tanh(z), so grad_w2 = grad_yᵀ h.",
            variant(_with_mistake, "second_layer_input_is_z"),
        ),
        Mistake(
            "w2_grad_transposed",
            "transposed",
            "your grad_w2 is hᵀ grad_y, shape [H, O]: the transpose. w2 is stored [O, H], so grad_w2 = grad_yᵀ h.",
            variant(_with_mistake, "w2_grad_transposed"),
        ),
        Mistake(
            "w1_grad_transposed",
            "transposed",
            "your grad_w1 is xᵀ dL/dz, shape [D, H]: the transpose. w1 is stored [H, D], so grad_w1 = (dL/dz)ᵀ x.",
            variant(_with_mistake, "w1_grad_transposed"),
        ),
        Mistake(
            "biases_not_summed",
            "wrong_axis",
            "your grad_b1 and grad_b2 keep one row per input. Each bias is shared by every row, "
            "so add the rows up: sum over axis 0.",
            variant(_with_mistake, "biases_not_summed"),
        ),
    ),
)
register(EXERCISE)
