"""Exercise: derive the gradients of a small taped layer and line them up with ``compare``.

The layer is ``h = tanh(x Wᵀ + b)``, recorded by :func:`tanh_layer_tape` with
its nodes named (``x``, ``weight``, ``bias``, ``z``, ``h``). The student
returns a dict ``{node name: gradient}`` — exactly what
:func:`microtape.check.compare` takes — so the same answer can be checked by
the exercise checker and lined up row by row against the tape::

    >>> import numpy as np, microtape as mt
    >>> from microtape.exercises.lab.layer import tanh_layer_tape
    >>> rng = np.random.default_rng(0)
    >>> x, weight, bias = rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    >>> tape, h = tanh_layer_tape(x, weight, bias)
    >>> [node.name for node in tape.nodes][-2:]
    ['z', 'h']
    >>> mine = {"z": np.zeros((2, 4))}           # your hand-derived gradients, by node name
    >>> mt.check.compare(tape, h, mine, grad=np.ones((2, 4))).ok
    False
"""

from typing import Any

import numpy as np

from ...engine import Tape, gradients
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["tanh_layer_backward", "tanh_layer_tape", "NODES"]

#: The named nodes whose gradients the student derives.
NODES = ("z", "x", "weight", "bias")


def tanh_layer_backward(x, weight, bias, grad_h):
    r"""Gradients of a tanh layer, by node name (check them with ``mt.check.compare``).

    Forward (``tanh_layer_tape(x, weight, bias)`` records it, nodes named):
        z = x @ weight.T + bias        node "z"   [N, out]
        h = tanh(z)                    node "h"   [N, out]

    Arguments: ``x`` [N, in], ``weight`` [out, in], ``bias`` [out] and
    ``grad_h`` = dL/dh [N, out].

    Return a dict with the gradient of every named node on the way back:
        {"z": dL/dz, "x": dL/dx, "weight": dL/dweight, "bias": dL/dbias}
    each shaped like its node. That dict is what
    ``mt.check.compare(tape, h, your_dict, grad=grad_h)`` lines up with the
    tape, row by row.

    The maths: tanh'(z) = 1 − tanh(z)², and tanh(z) is h, which you have
    once you recompute the forward. From dL/dz on it is the Linear exercise.
    """
    raise NotImplementedError("tanh_layer_backward: return {'z': ..., 'x': ..., 'weight': ..., 'bias': ...}")


def tanh_layer_tape(x: Any, weight: Any, bias: Any) -> Any:
    """Record ``h = tanh(x Wᵀ + b)`` on a new tape, nodes named; returns ``(tape, h)``."""
    x = Tensor(x, requires_grad=True, name="x")
    weight = Tensor(weight, requires_grad=True, name="weight")
    bias = Tensor(bias, requires_grad=True, name="bias")
    with Tape() as tape:
        z = x.matmul(weight.T, name="x_weight_T") + bias
        z.name = "z"  # `+` takes no name=, so the node is named once recorded
        h = z.tanh(name="h")
    return tape, h


# One dict per trial: (N, in, out), and the spread of x (large: tanh saturates,
# its derivative 1 − h² is near 0). The first is square, so that a transposed
# product still runs and can be recognised.
VISIBLE = (
    {"shape": (3, 3, 3)},
    {"shape": (4, 2, 5)},
    {"shape": (2, 5, 3)},
    {"shape": (5, 4, 4)},
    {"shape": (1, 3, 2), "spread": 3.0},
)
HIDDEN = (
    {"shape": (4, 4, 4)},
    {"shape": (3, 6, 2), "spread": 3.0},
    {"shape": (6, 2, 3)},
    {"shape": (2, 3, 5)},
    {"shape": (5, 5, 1)},
    {"shape": (1, 4, 6), "spread": 0.3},
    # The large trial, shared by the class: ~205 000 inputs: too many forwards for numeric differentiation.
    {"shape": (1024, 128, 64), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, fan_in, fan_out = case["shape"]
    return {
        "x": rng.standard_normal((rows, fan_in)) * case.get("spread", 1.0),
        "weight": rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in),
        "bias": rng.standard_normal(fan_out),
        "grad_h": rng.standard_normal((rows, fan_out)),
    }


def tape_gradients(inputs: dict[str, Any]) -> Any:
    tape, h = tanh_layer_tape(inputs["x"], inputs["weight"], inputs["bias"])
    taped = gradients(h, inputs["grad_h"], tape=tape)
    return tuple(taped[tape.variable(name)] for name in NODES)


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the chain with exactly one link wrong; it returns only
# the gradients that link changes and refuses any other name, so no call of
# it is the right answer.

_CHANGES = {
    "derivative_of_z": NODES,
    "derivative_missing": NODES,
    "weight_grad_transposed": ("weight",),
    "bias_not_summed": ("bias",),
    "derivative_not_squared": NODES,
    "input_grad_with_weight_transposed": ("x",),
}


def _with_mistake(mistake: Any, x: Any, weight: Any, bias: Any, grad_h: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    z = x @ weight.T + bias
    if mistake == "derivative_of_z":
        grad_z = grad_h * (1.0 - z**2)
    elif mistake == "derivative_missing":
        grad_z = grad_h
    elif mistake == "derivative_not_squared":
        grad_z = grad_h * (1.0 - np.tanh(z))
    else:
        grad_z = grad_h * (1.0 - np.tanh(z) ** 2)
    every = {
        "z": grad_z,
        "x": grad_z @ (weight.T if mistake == "input_grad_with_weight_transposed" else weight),
        "weight": x.T @ grad_z if mistake == "weight_grad_transposed" else grad_z.T @ x,
        "bias": grad_z if mistake == "bias_not_summed" else grad_z.sum(axis=0),
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="tanh_layer_backward",
    stub=tanh_layer_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="A tanh layer's gradients by node name, lined up with mt.check.compare",
    outputs=(
        Output("z", "grad_h", aliases=("your dL/dz", "z gradient"), name_in_hints=False),
        Output("x", "x", aliases=("x gradient",), name_in_hints=False),
        Output("weight", "weight", aliases=("weight gradient",), name_in_hints=False),
        Output("bias", "bias", aliases=("bias gradient",), name_in_hints=False),
    ),
    mistakes=(
        Mistake(
            "derivative_of_z",
            "wrong_derivative",
            "your dL/dz uses 1 − z². The derivative of tanh is 1 − tanh(z)² = 1 − h²: square h, not z. "
            "Everything after z (x, weight, bias) inherits the error.",
            variant(_with_mistake, "derivative_of_z"),
        ),
        Mistake(
            "derivative_missing",
            "skipped_step",
            "your dL/dz is grad_h itself: the tanh's derivative is missing. dL/dz = grad_h ⊙ (1 − h²), "
            "and x, weight and bias take their gradients from it.",
            variant(_with_mistake, "derivative_missing"),
        ),
        Mistake(
            "weight_grad_transposed",
            "transposed",
            "your weight gradient is xᵀ dz, the transpose of the answer. The weight is stored "
            "[out, in], so it is dzᵀ x (shape [out, in]).",
            variant(_with_mistake, "weight_grad_transposed"),
        ),
        Mistake(
            "bias_not_summed",
            "wrong_axis",
            "your bias gradient is dL/dz itself, one row per input. The bias is shared by every row, "
            "so add the rows up: dz.sum(axis=0), shape [out].",
            variant(_with_mistake, "bias_not_summed"),
        ),
        Mistake(
            "derivative_not_squared",
            "wrong_derivative",
            "your dL/dz uses 1 − h as tanh's derivative: it is 1 − h² (h = tanh(z)). "
            "Everything after z (x, weight, bias) inherits the error.",
            variant(_with_mistake, "derivative_not_squared"),
        ),
        Mistake(
            "input_grad_with_weight_transposed",
            "transposed",
            "your x gradient is dz @ weight.T. The forward multiplied by weight.T, so the backward "
            "multiplies by its transpose, the weight itself: dz @ weight (shape [N, in]).",
            variant(_with_mistake, "input_grad_with_weight_transposed"),
        ),
    ),
)
register(EXERCISE)
