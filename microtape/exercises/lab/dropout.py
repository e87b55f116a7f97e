"""Exercise: the backward pass of (inverted) dropout with a saved mask.

The tape's answer comes from ``Tensor.dropout(keep)`` — the op the attention
layer records on its weights — and the tape backward.
"""

from typing import Any

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register, trials

__all__ = ["dropout_backward"]


def dropout_backward(grad_y, mask, p):
    r"""Backward pass of inverted dropout.

    Forward (done for you, in training mode):
        mask = random booleans, True with probability 1 − p   (saved for backward)
        y    = x * mask / (1 − p)

    Dividing by ``1 − p`` keeps the expected value of ``y`` equal to ``x``, so
    nothing needs to change at evaluation time ("inverted" dropout).

    Arguments:
        grad_y:  dL/dy, a float64 array
        mask:    the saved boolean mask, the shape of ``grad_y``
        p:       the drop probability, a float with 0 <= p < 1

    Return ``grad_x`` = dL/dx, the shape of ``grad_y``.

    The maths: for a fixed mask, ``y`` is ``x`` times a constant, entry by
    entry. (This is why the mask must be *saved*: the backward must use the
    same mask as the forward, not a fresh random one.)
    """
    raise NotImplementedError("dropout_backward: write the backward pass of dropout here")


# One dict per trial: the shape and the drop probability p. Both vary, so an
# answer with p written in does not pass; the hidden trials use other p.
VISIBLE = (
    {"shape": (4, 5), "p": 0.25},
    {"shape": (2, 3, 4), "p": 0.5},
    {"shape": (6,), "p": 0.1},
    {"shape": (3, 3), "p": 0.4},
    {"shape": (2, 2, 5), "p": 0.3},
)
HIDDEN = (
    {"shape": (5, 3), "p": 0.2},
    {"shape": (3, 2, 2), "p": 0.6},
    {"shape": (7,), "p": 0.05},
    {"shape": (4, 4), "p": 0.35},
    {"shape": (2, 3, 3), "p": 0.75},
    {"shape": (6, 2), "p": 0.15},
    # The large trial, shared by the class: 65 536 entries: too many forwards for numeric differentiation.
    {"shape": (256, 256), "p": 0.3, "shared": True},
)


def make_inputs(rng: Any, case: dict[str, Any]) -> Any:
    shape, drop = case["shape"], case["p"]
    return {
        "grad_y": rng.standard_normal(shape),
        "mask": trials.dropout_mask(rng, shape, drop),
        "p": drop,
        "x": rng.standard_normal(shape),
    }


def tape_gradients(inputs: dict[str, Any]) -> Any:
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    keep = inputs["mask"] / (1.0 - inputs["p"])
    with Tape() as tape:
        y = x.dropout(keep, name="y")
    tape.backward(y, inputs["grad_y"])
    return (x.grad,)


# ---------------------------------------------------------------- known mistakes


#
# Each variant returns the output it gets wrong, by name.


def _scale_missing(grad_y: Any, mask: Any, p: Any) -> Any:
    return {"grad_x": grad_y * mask}


def _mask_not_applied(grad_y: Any, mask: Any, p: Any) -> Any:
    return {"grad_x": grad_y / (1.0 - p)}


def _scale_inverted(grad_y: Any, mask: Any, p: Any) -> Any:
    return {"grad_x": grad_y * mask * (1.0 - p)}


def _scaled_by_p(grad_y: Any, mask: Any, p: Any) -> Any:
    return {"grad_x": grad_y * mask / p}


def _mask_inverted(grad_y: Any, mask: Any, p: Any) -> Any:
    return {"grad_x": grad_y * ~mask / (1.0 - p)}


EXERCISE = Exercise(
    name="dropout_backward",
    stub=dropout_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Dropout backward: grad_x from the saved mask",
    outputs=(Output("grad_x", "grad_y"),),
    mistakes=(
        Mistake(
            "scale_missing",
            "dropout_scale_missing",
            "your grad_x is grad_y * mask: the 1/(1 − p) is missing. The forward multiplied the "
            "kept entries by 1/(1 − p), so the backward does too: grad_y * mask / (1 − p).",
            _scale_missing,
        ),
        Mistake(
            "mask_not_applied",
            "mask_not_applied",
            "your grad_x is grad_y / (1 − p) everywhere. A dropped entry did not reach y at all, "
            "so its gradient is 0: multiply by the saved mask.",
            _mask_not_applied,
        ),
        Mistake(
            "scale_inverted",
            "dropout_scale_inverted",
            "your grad_x multiplies by (1 − p). Inverted dropout *divides* the kept entries by "
            "(1 − p) (to keep the expected value), so the backward divides too.",
            _scale_inverted,
        ),
        Mistake(
            "scaled_by_p",
            "dropout_scale_inverted",
            "your grad_x divides by p. p is the probability of *dropping*; the kept entries "
            "are divided by the probability of keeping, 1 − p.",
            _scaled_by_p,
        ),
        Mistake(
            "mask_inverted",
            "mask_not_applied",
            "your grad_x flows to the *dropped* entries: the mask is True where an entry was kept. "
            "Multiply by mask itself (not ~mask or 1 − mask): grad_y * mask / (1 − p).",
            _mask_inverted,
        ),
    ),
)
register(EXERCISE)
