"""Exercise (stepped): the backward pass of affine + ReLU, CS231n's ``affine_relu_backward``, step by step.

The student returns the gradient at the pre-activation ``z`` (the ReLU's
gate), then the affine layer's three, each judged link by link.

CS231n's convention: ``out = relu(x @ w + b)`` with ``w`` stored [D, M]
(not PyTorch's [M, D]). The tape's answer records the forward from microtape
Tensors and runs the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step, register
from .core import variant
from .taped_steps import step_gradients

__all__ = ["affine_relu_backward"]


def affine_relu_backward(x, w, b, grad_out):
    r"""Backward pass of an affine layer followed by a ReLU (CS231n's convention).

    Forward (recompute what you need):
        z   = x @ w + b          [N, M]     x: [N, D], w: [D, M], b: [M]
        out = max(0, z)          [N, M]

    Arguments: ``x``, ``w``, ``b`` and ``grad_out`` = dL/dout [N, M].

    Return a dict with every step of the derivation, from the output back:
        "grad_z"   dL/dz                        [N, M]
        "grad_x"   dL/dx   (from grad_z)        [N, D]
        "grad_w"   dL/dw   (from grad_z)        [D, M]
        "grad_b"   dL/db   (from grad_z)        [M]
    Each step is checked against the tape twice: against the true gradient,
    and against what the tape computes from your own grad_z. A step right
    from a wrong grad_z is carried (it earns its point).

    The maths: the ReLU passes the gradient where its input was positive and
    blocks it elsewhere: dL/dz = grad_out * (z > 0). Look at the sign of the
    *forward* value z, not of the gradient. Then the affine layer:
    ``z_nm = Σ_d x_nd w_dm + b_m``; note that ``w`` is stored [D, M] here, so
    the transposes sit on other operands than in PyTorch's Linear. The bias
    is shared by every row: its gradient adds up over the rows.
    """
    raise NotImplementedError("affine_relu_backward: return {'grad_z': ..., 'grad_x': ..., ..., 'grad_b': ...}")


# One dict per trial: (N, D, M). None is square, so a transposed w shows by its
# shape. The large hidden trial is wide (384 features, 256 rows): numeric
# differentiation needs a forward per input column even when it perturbs
# every row at once, while a derivation — even one looping over the rows —
# costs a few products (the grader's "too slow for a derivation" limit).
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
    {"shape": (256, 384, 64), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, fan_in, fan_out = case["shape"]
    return {
        "x": rng.standard_normal((rows, fan_in)),
        "w": rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in),
        "b": 0.5 * rng.standard_normal(fan_out),
        "grad_out": rng.standard_normal((rows, fan_out)),
    }


#: The steps' nodes, in the order of the steps.
NODES = ("z", "x", "w", "b")


def record(inputs: dict[str, Any]) -> Any:
    """The forward on a new tape, the pre-activation named ``z``: ``(tape, out)``."""
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    w = Tensor(inputs["w"], requires_grad=True, name="w")
    b = Tensor(inputs["b"], requires_grad=True, name="b")
    with Tape() as tape:
        z = x.matmul(w) + b
        z.name = "z"
        out = z.relu(name="out")
    return tape, out


tape_gradients = step_gradients(record, NODES, "grad_out")


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the backward pass with exactly one link wrong; it
# returns the step that link breaks and the later steps computed from it, and
# refuses any other name.

_EVERY = ("grad_z", "grad_x", "grad_w", "grad_b")
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
        "grad_z": grad_z,
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
    record=record,
    title="Affine + ReLU backward (CS231n), step by step: grad_z → grad_x, grad_w, grad_b",
    outputs=(
        Step("grad_z", "the pre-activation z [N, M]", node="z"),
        Step("grad_x", "x", after=("grad_z",), node="x"),
        Step("grad_w", "w", after=("grad_z",), node="w"),
        Step("grad_b", "b", after=("grad_z",), node="b"),
    ),
    mistakes=(
        Mistake(
            "relu_mask_missing",
            "skipped_step",
            "your grad_z passes straight through the ReLU. It blocks the gradient where its "
            "input was not positive: grad_z = grad_out * (z > 0), with z = x @ w + b.",
            variant(_with_mistake, "relu_mask_missing"),
            step="grad_z",
        ),
        Mistake(
            "relu_mask_from_the_gradient",
            "wrong_derivative",
            "your ReLU mask is grad_out > 0. Whether the gradient passes depends on the forward "
            "value: grad_z = grad_out * (z > 0), with z = x @ w + b.",
            variant(_with_mistake, "relu_mask_from_the_gradient"),
            step="grad_z",
        ),
        Mistake(
            "relu_mask_inverted",
            "wrong_derivative",
            "your ReLU mask is z < 0, the wrong way round: the ReLU passes the gradient where "
            "z > 0 (there it is the identity) and blocks it where z < 0 (there it is constant 0).",
            variant(_with_mistake, "relu_mask_inverted"),
            step="grad_z",
        ),
        Mistake(
            "w_grad_transposed",
            "transposed",
            "your grad_w is (dL/dz)ᵀ x, shape [M, D]: PyTorch's layout. Here w is stored [D, M] "
            "(z = x @ w + b), so grad_w = xᵀ dL/dz.",
            variant(_with_mistake, "w_grad_transposed"),
            step="grad_w",
        ),
        Mistake(
            "bias_not_summed",
            "wrong_axis",
            "your grad_b keeps one row per input. The bias is shared by every row, so add the "
            "rows up: dL/dz summed over axis 0, shape [M].",
            variant(_with_mistake, "bias_not_summed"),
            step="grad_b",
        ),
        Mistake(
            "bias_summed_over_wrong_axis",
            "wrong_axis",
            "your grad_b sums over the features (axis=1), giving one number per input row. The "
            "bias is shared by the rows: sum dL/dz over axis 0, shape [M].",
            variant(_with_mistake, "bias_summed_over_wrong_axis"),
            step="grad_b",
        ),
    ),
)
register(EXERCISE)
