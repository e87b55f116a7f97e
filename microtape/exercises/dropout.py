"""Exercise: the backward pass of (inverted) dropout with a saved mask.

The tape's answer comes from ``Tensor.dropout(keep)`` — the op the attention
layer records on its weights — and the tape backward.
"""

from ..tape import Tape
from ..tensor import Tensor
from .registry import Exercise, Mistake, Output, register

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


# (shape, p) per trial.
CASES = [((4, 5), 0.25), ((2, 3, 4), 0.5), ((6,), 0.1), ((3, 3), 0.4), ((2, 2, 5), 0.3)]


def make_inputs(rng, trial):
    shape, drop = CASES[trial % len(CASES)]
    mask = rng.random(shape) >= drop
    mask.flat[0] = False  # at least one dropped entry and one kept entry
    mask.flat[-1] = True
    return {
        "grad_y": rng.standard_normal(shape),
        "mask": mask,
        "p": drop,
        "x": rng.standard_normal(shape),
    }


def tape_gradients(inputs):
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    keep = inputs["mask"] / (1.0 - inputs["p"])
    with Tape() as tape:
        y = x.dropout(keep, name="y")
    tape.backward(y, inputs["grad_y"])
    return (x.grad,)


# ---------------------------------------------------------------- known mistakes


def _scale_missing(grad_y, mask, p):
    return grad_y * mask


def _mask_not_applied(grad_y, mask, p):
    return grad_y / (1.0 - p)


def _scale_inverted(grad_y, mask, p):
    return grad_y * mask * (1.0 - p)


def _scaled_by_p(grad_y, mask, p):
    return grad_y * mask / p


register(
    Exercise(
        name="dropout_backward",
        title="Dropout backward: grad_x from the saved mask",
        stub=dropout_backward,
        make_inputs=make_inputs,
        tape_gradients=tape_gradients,
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
        ),
    )
)
