"""Exercise (stepped): a two-layer MLP's backward pass by hand, one named step at a time.

``x → Linear(w1, b1) → tanh → Linear(w2, b2) → y``: given dL/dy, the student
returns the gradient at every node — the second layer's weights and bias,
the hidden ``h``, the pre-activation ``z``, then the input and the first
layer's parameters — and each link is judged on its own. The tape's answer
records the forward from microtape Tensors, its nodes named as the steps,
and runs the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step, register
from .core import variant
from .taped_steps import step_gradients

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

    Return a dict with every step of the derivation, from the output back:
        "grad_w2"   dL/dw2                                  [O, H]
        "grad_b2"   dL/db2                                  [O]
        "grad_h"    dL/dh                                   [N, H]
        "grad_z"    dL/dz             (from grad_h)         [N, H]
        "grad_x"    dL/dx             (from grad_z)         [N, D]
        "grad_w1"   dL/dw1            (from grad_z)         [H, D]
        "grad_b1"   dL/db1            (from grad_z)         [H]
    Each step is checked against the tape twice: against the true gradient,
    and against what the tape computes from your own earlier steps. A step
    right from a wrong earlier step is carried (it earns its point): the
    error is named where it was made.

    The maths: walk back one layer at a time. The second layer is the Linear
    exercise with ``h`` as its input: it gives grad_w2, grad_b2 and dL/dh.
    Through the tanh multiply by ``1 − tanh(z)² = 1 − h²`` (elementwise) to get
    dL/dz; then the first layer is the Linear exercise again, with ``x``.
    Every row used the same weights and biases, so their gradients add up over
    the rows; the shapes tell you where the transposes go.
    """
    raise NotImplementedError("mlp_backward: return {'grad_w2': ..., 'grad_b2': ..., ..., 'grad_b1': ...}")


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


#: The steps' nodes, in the order of the steps (the derivation's, from the output back).
NODES = ("w2", "b2", "h", "z", "x", "w1", "b1")


def record(inputs: dict[str, Any]) -> Any:
    """The forward on a new tape, nodes named as the steps: ``(tape, y)``."""
    leaves = {name: Tensor(inputs[name], requires_grad=True, name=name) for name in ("x", "w1", "b1", "w2", "b2")}
    with Tape() as tape:
        z = leaves["x"].matmul(leaves["w1"].T) + leaves["b1"]
        z.name = "z"
        h = z.tanh(name="h")
        y = h.matmul(leaves["w2"].T) + leaves["b2"]
    return tape, y


tape_gradients = step_gradients(record, NODES, "grad_y")


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the backward pass with exactly one link wrong; it
# returns the step that link breaks and the later steps computed from it, and
# refuses any other name, so no call of it is the right answer.

_FIRST_LAYER = ("grad_z", "grad_x", "grad_w1", "grad_b1")
_CHANGES = {
    "tanh_derivative_of_z": _FIRST_LAYER,
    "tanh_derivative_missing": _FIRST_LAYER,
    "second_layer_input_is_z": ("grad_w2",),
    "w2_grad_transposed": ("grad_w2",),
    "w1_grad_transposed": ("grad_w1",),
    "b1_not_summed": ("grad_b1",),
    "b2_not_summed": ("grad_b2",),
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
    every = {
        "grad_z": grad_z,
        "grad_x": grad_z @ w1,
        "grad_w1": x.T @ grad_z if mistake == "w1_grad_transposed" else grad_z.T @ x,
        "grad_b1": grad_z if mistake == "b1_not_summed" else grad_z.sum(axis=0),
        "grad_w2": (
            h.T @ grad_y
            if mistake == "w2_grad_transposed"
            else grad_y.T @ (z if mistake == "second_layer_input_is_z" else h)
        ),
        "grad_b2": grad_y if mistake == "b2_not_summed" else grad_y.sum(axis=0),
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="mlp_backward",
    stub=mlp_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    record=record,
    title="A two-layer MLP by hand, step by step: grad_w2, grad_b2 → grad_h → grad_z → grad_x, grad_w1, grad_b1",
    outputs=(
        Step("grad_w2", "w2", node="w2"),
        Step("grad_b2", "b2", node="b2"),
        Step("grad_h", "the hidden h [N, H]", node="h"),
        Step("grad_z", "the pre-activation z [N, H]", after=("grad_h",), node="z"),
        Step("grad_x", "x", after=("grad_z",), node="x"),
        Step("grad_w1", "w1", after=("grad_z",), node="w1"),
        Step("grad_b1", "b1", after=("grad_z",), node="b1"),
    ),
    mistakes=(
        Mistake(
            "tanh_derivative_of_z",
            "wrong_derivative",
            "your grad_z uses 1 − z² at the tanh. Its derivative is "
            "1 − tanh(z)² = 1 − h²: square h, not the pre-activation z.",
            variant(_with_mistake, "tanh_derivative_of_z"),
            step="grad_z",
        ),
        Mistake(
            "tanh_derivative_missing",
            "skipped_step",
            "your grad_z skips the tanh: dL/dz = dL/dh * (1 − h²), not dL/dh itself.",
            variant(_with_mistake, "tanh_derivative_missing"),
            step="grad_z",
        ),
        Mistake(
            "second_layer_input_is_z",
            "wrong_derivative",
            "your grad_w2 uses the pre-activation z. The second layer's input is h = tanh(z), so grad_w2 = grad_yᵀ h.",
            variant(_with_mistake, "second_layer_input_is_z"),
            step="grad_w2",
        ),
        Mistake(
            "w2_grad_transposed",
            "transposed",
            "your grad_w2 is hᵀ grad_y, shape [H, O]: the transpose. w2 is stored [O, H], so grad_w2 = grad_yᵀ h.",
            variant(_with_mistake, "w2_grad_transposed"),
            step="grad_w2",
        ),
        Mistake(
            "w1_grad_transposed",
            "transposed",
            "your grad_w1 is xᵀ dL/dz, shape [D, H]: the transpose. w1 is stored [H, D], so grad_w1 = (dL/dz)ᵀ x.",
            variant(_with_mistake, "w1_grad_transposed"),
            step="grad_w1",
        ),
        Mistake(
            "b1_not_summed",
            "wrong_axis",
            "your grad_b1 keeps one row per input. The bias is shared by every row, so add the rows up: "
            "dL/dz summed over axis 0.",
            variant(_with_mistake, "b1_not_summed"),
            step="grad_b1",
        ),
        Mistake(
            "b2_not_summed",
            "wrong_axis",
            "your grad_b2 keeps one row per input. The bias is shared by every row, so add the rows up: "
            "grad_y summed over axis 0.",
            variant(_with_mistake, "b2_not_summed"),
            step="grad_b2",
        ),
    ),
)
register(EXERCISE)
