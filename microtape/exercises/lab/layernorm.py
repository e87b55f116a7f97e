"""Exercise (stretch): the backward pass of layer normalisation.

The tape's answer comes from layer norm built out of primitives — ``mean``,
``sub``, ``mul``, ``pow`` — on Tensors, and the tape backward: a chain of
about ten equations whose gradients the student folds into one formula.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from . import norm_chain
from .core import variant

__all__ = ["layernorm_backward"]


def layernorm_backward(x, gamma, grad_y, eps):
    r"""Backward pass of layer normalisation (a stretch exercise).

    Forward (done for you), over the last axis of each row (F features):
        mu    = mean(x)                      per row
        var   = mean((x − mu)²)              per row (divide by F, not F − 1)
        xhat  = (x − mu) / sqrt(var + eps)
        y     = gamma * xhat + beta          gamma, beta: [F], shared by all rows

    Arguments: ``x`` [N, F], ``gamma`` [F], ``grad_y`` = dL/dy [N, F] and
    ``eps`` (a small positive float; it changes from trial to trial).

    Return a tuple ``(grad_x, grad_gamma, grad_beta)`` shaped like ``x``,
    ``gamma`` and ``beta`` [F].

    The maths: ``grad_gamma`` and ``grad_beta`` are like a bias: add up over
    the rows. For ``grad_x`` write ``g = grad_y * gamma`` (that is dL/dxhat),
    then follow x along its three paths into xhat: directly, through ``mu``
    and through ``var`` — both statistics depend on *every* entry of the row.
    Simplified, the answer fits in one line with two row means and ``xhat``.
    """
    raise NotImplementedError("layernorm_backward: write the backward pass of layer norm here")


# The trials (shared with the stepped exercise): see norm_chain.LAYER_NORM_VISIBLE.
VISIBLE, HIDDEN = norm_chain.LAYER_NORM_VISIBLE, norm_chain.LAYER_NORM_HIDDEN


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    return norm_chain.draw(rng, case, -1)


def tape_gradients(inputs: dict[str, Any]) -> Any:
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    gamma = Tensor(inputs["gamma"], requires_grad=True, name="gamma")
    beta = Tensor(inputs["beta"], requires_grad=True, name="beta")
    with Tape() as tape:
        mu = x.mean(axis=-1, keepdims=True, name="mu")
        centred = x - mu
        var = (centred * centred).mean(axis=-1, keepdims=True, name="var")
        inv_std = (var + inputs["eps"]) ** -0.5
        xhat = centred * inv_std
        y = xhat * gamma + beta
    tape.backward(y, inputs["grad_y"])
    return x.grad, gamma.grad, beta.grad


# ---------------------------------------------------------------- known mistakes
#
# Each variant is the chain with exactly one thing wrong: ``_with_mistake``
# takes its name and returns only the outputs it gets wrong (the checker takes
# the others from the tape). It refuses any other name, so no call of it is the
# right answer.

#: The outputs each mistake changes.
_CHANGES = {
    "statistics_constant": ("grad_x",),
    "variance_constant": ("grad_x",),
    "gamma_forgotten": ("grad_x",),
    "params_summed_over_wrong_axis": ("grad_gamma", "grad_beta"),
    "eps_left_out": ("grad_x", "grad_gamma"),
    "eps_ignored": ("grad_x", "grad_gamma"),
}

#: The eps an answer that ignores its argument typically writes in.
_USUAL_EPS = 1e-5


def _with_mistake(mistake: Any, x: Any, gamma: Any, grad_y: Any, eps: float) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    eps = {"eps_left_out": 0.0, "eps_ignored": _USUAL_EPS}.get(mistake, eps)
    centred = x - x.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    xhat = centred * inv_std
    g = grad_y if mistake == "gamma_forgotten" else grad_y * gamma
    bracket = g
    if mistake != "statistics_constant":
        bracket = bracket - g.mean(axis=-1, keepdims=True)
        if mistake != "variance_constant":
            bracket = bracket - xhat * (g * xhat).mean(axis=-1, keepdims=True)
    axis = -1 if mistake == "params_summed_over_wrong_axis" else 0
    every = {
        "grad_x": bracket * inv_std,
        "grad_gamma": (grad_y * xhat).sum(axis=axis),
        "grad_beta": grad_y.sum(axis=axis),
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="layernorm_backward",
    stub=layernorm_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Layer norm backward (stretch): grad_x, grad_gamma, grad_beta",
    outputs=(Output("grad_x", "x"), Output("grad_gamma", "gamma"), Output("grad_beta", "beta")),
    mistakes=(
        Mistake(
            "statistics_constant",
            "missing_mean_terms",
            "your grad_x is grad_y * gamma / sqrt(var + eps): it treats mu and var as constants. "
            "Both depend on every x in the row; their paths add the terms "
            "− mean(g) − xhat * mean(g * xhat) (with g = grad_y * gamma).",
            variant(_with_mistake, "statistics_constant"),
        ),
        Mistake(
            "variance_constant",
            "missing_variance_term",
            "your grad_x has the mean's term but not the variance's: var depends on x too, "
            "which adds − xhat * mean(g * xhat) inside the bracket.",
            variant(_with_mistake, "variance_constant"),
        ),
        Mistake(
            "gamma_forgotten",
            "skipped_step",
            "your grad_x skips gamma: the gradient reaching xhat is g = grad_y * gamma, not grad_y.",
            variant(_with_mistake, "gamma_forgotten"),
        ),
        Mistake(
            "params_summed_over_wrong_axis",
            "wrong_axis",
            "your grad_gamma and grad_beta sum over the features (axis=-1). gamma and beta are "
            "shared by every row, so sum over the rows: axis=0, shape [F].",
            variant(_with_mistake, "params_summed_over_wrong_axis"),
        ),
        Mistake(
            "eps_left_out",
            "missing_eps",
            "your grad_x and grad_gamma use 1/sqrt(var) without eps. The forward divided by "
            "sqrt(var + eps); use the same number in the backward.",
            variant(_with_mistake, "eps_left_out"),
        ),
        Mistake(
            "eps_ignored",
            "ignored_argument",
            "your grad_x and grad_gamma use eps = 1e-5 whatever eps you are given: use the "
            "argument eps (it changes from trial to trial).",
            variant(_with_mistake, "eps_ignored"),
        ),
    ),
    stretch=True,
)
register(EXERCISE)
