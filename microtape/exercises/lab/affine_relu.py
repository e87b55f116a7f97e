"""Exercise: the backward pass of affine + ReLU, CS231n's ``affine_relu_backward``.

CS231n's convention: ``out = relu(x @ w + b)`` with ``w`` stored [D, M]
(not PyTorch's [M, D]). The tape's answer records the forward from microtape
Tensors and runs the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["affine_relu_backward"]


def affine_relu_backward(x, w, b, grad_out):
    r"""Backward pass of an affine layer followed by a ReLU (CS231n's convention).

    Forward (recompute what you need):
        z   = x @ w + b          [N, M]     x: [N, D], w: [D, M], b: [M]
        out = max(0, z)          [N, M]

    Arguments: ``x``, ``w``, ``b`` and ``grad_out`` = dL/dout [N, M].

    Return a tuple ``(grad_x, grad_w, grad_b)`` shaped like ``x``, ``w`` and ``b``.

    The maths: the ReLU passes the gradient where its input was positive and
    blocks it elsewhere: dL/dz = grad_out * (z > 0). Look at the sign of the
    *forward* value z, not of the gradient. Then the affine layer:
    ``z_nm = Σ_d x_nd w_dm + b_m``; note that ``w`` is stored [D, M] here, so
    the transposes sit on other operands than in PyTorch's Linear. The bias
    is shared by every row: its gradient adds up over the rows.
    """
    raise NotImplementedError("affine_relu_backward: return grad_x, grad_w, grad_b")


# One dict per trial: (N, D, M). None is square, so a transposed w shows by its
# shape. A hidden trial has 10 000 rows (some 100 000 inputs: numeric
# differentiation of the forward, one input at a time, cannot finish in time).
VISIBLE = (
    {"shape": (4, 3, 5)},
    {"shape": (6, 5, 2)},
    {"shape": (3, 2, 4)},
    {"shape": (5, 4, 3)},
    {"shape": (2, 6, 7)},
)
HIDDEN = (
    {"shape": (5, 3, 4)},
    {"shape": (7, 4, 2)},
    {"shape": (2, 5, 6)},
    {"shape": (1, 3, 8)},
    {"shape": (6, 2, 3)},
    {"shape": (10000, 10, 12), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, fan_in, fan_out = case["shape"]
    return {
        "x": rng.standard_normal((rows, fan_in)),
        "w": rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in),
        "b": 0.5 * rng.standard_normal(fan_out),
        "grad_out": rng.standard_normal((rows, fan_out)),
    }


def tape_gradients(inputs: dict[str, Any]) -> Any:
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    w = Tensor(inputs["w"], requires_grad=True, name="w")
    b = Tensor(inputs["b"], requires_grad=True, name="b")
    with Tape() as tape:
        out = (x.matmul(w) + b).relu(name="out")
    tape.backward(out, inputs["grad_out"])
    return x.grad, w.grad, b.grad


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the backward pass with exactly one thing wrong; it
# returns only the gradients that changes and refuses any other name.

_EVERY = ("grad_x", "grad_w", "grad_b")
_CHANGES = {
    "relu_mask_missing": _EVERY,
    "relu_mask_from_the_gradient": _EVERY,
    "relu_mask_inverted": _EVERY,
    "w_grad_transposed": ("grad_w",),
    "bias_not_summed": ("grad_b",),
    "bias_summed_over_wrong_axis": ("grad_b",),
}


def _with_mistake(mistake: Any, x: Any, w: Any, b: Any, grad_out: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    z = x @ w + b
    passes = {
        "relu_mask_missing": np.ones_like(z, dtype=bool),
        "relu_mask_from_the_gradient": grad_out > 0,
        "relu_mask_inverted": z < 0,
    }.get(mistake, z > 0)
    grad_z = grad_out * passes
    every = {
        "grad_x": grad_z @ w.T,
        "grad_w": grad_z.T @ x if mistake == "w_grad_transposed" else x.T @ grad_z,
        "grad_b": {"bias_not_summed": grad_z, "bias_summed_over_wrong_axis": grad_z.sum(axis=1)}.get(
            mistake, grad_z.sum(axis=0)
        ),
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="affine_relu_backward",
    stub=affine_relu_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Affine + ReLU backward (CS231n): grad_x, grad_w, grad_b",
    outputs=(Output("grad_x", "x"), Output("grad_w", "w"), Output("grad_b", "b")),
    mistakes=(
        Mistake(
            "relu_mask_missing",
            "skipped_step",
            "your gradients pass straight through the ReLU. It blocks the gradient where its "
            "input was not positive: dL/dz = grad_out * (z > 0), with z = x @ w + b; grad_x, "
            "grad_w and grad_b all come from dL/dz.",
            variant(_with_mistake, "relu_mask_missing"),
        ),
        Mistake(
            "relu_mask_from_the_gradient",
            "wrong_derivative",
            "your ReLU mask is grad_out > 0. Whether the gradient passes depends on the forward "
            "value: dL/dz = grad_out * (z > 0), with z = x @ w + b (grad_x, grad_w, grad_b follow).",
            variant(_with_mistake, "relu_mask_from_the_gradient"),
        ),
        Mistake(
            "relu_mask_inverted",
            "wrong_derivative",
            "your ReLU mask is z < 0, the wrong way round: the ReLU passes the gradient where "
            "z > 0 (there it is the identity) and blocks it where z < 0 (there it is constant 0). "
            "grad_x, grad_w and grad_b follow from it.",
            variant(_with_mistake, "relu_mask_inverted"),
        ),
        Mistake(
            "w_grad_transposed",
            "transposed",
            "your grad_w is (dL/dz)ᵀ x, shape [M, D]: PyTorch's layout. Here w is stored [D, M] "
            "(z = x @ w + b), so grad_w = xᵀ dL/dz.",
            variant(_with_mistake, "w_grad_transposed"),
        ),
        Mistake(
            "bias_not_summed",
            "wrong_axis",
            "your grad_b keeps one row per input. The bias is shared by every row, so add the "
            "rows up: dL/dz summed over axis 0, shape [M].",
            variant(_with_mistake, "bias_not_summed"),
        ),
        Mistake(
            "bias_summed_over_wrong_axis",
            "wrong_axis",
            "your grad_b sums over the features (axis=1), giving one number per input row. The "
            "bias is shared by the rows: sum dL/dz over axis 0, shape [M].",
            variant(_with_mistake, "bias_summed_over_wrong_axis"),
        ),
    ),
)
register(EXERCISE)
