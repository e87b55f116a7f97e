"""Exercise (stretch): the backward pass of layer normalisation.

The tape's answer comes from layer norm built out of primitives — ``mean``,
``sub``, ``mul``, ``pow`` — on Tensors, and the tape backward: a chain of
about ten equations whose gradients the student folds into one formula.
"""

import numpy as np

from ..tape import Tape
from ..tensor import Tensor
from .registry import Exercise, Mistake, Output, register

__all__ = ["layernorm_backward", "EPS"]

EPS = 1e-5


def layernorm_backward(x, gamma, grad_y, eps):
    r"""Backward pass of layer normalisation (a stretch exercise).

    Forward (done for you), over the last axis of each row (F features):
        mu    = mean(x)                      per row
        var   = mean((x − mu)²)              per row (divide by F, not F − 1)
        xhat  = (x − mu) / sqrt(var + eps)
        y     = gamma * xhat + beta          gamma, beta: [F], shared by all rows

    Arguments: ``x`` [N, F], ``gamma`` [F], ``grad_y`` = dL/dy [N, F] and
    ``eps`` (a small float, 1e-5).

    Return a tuple ``(grad_x, grad_gamma, grad_beta)`` shaped like ``x``,
    ``gamma`` and ``beta`` [F].

    The maths: ``grad_gamma`` and ``grad_beta`` are like a bias: add up over
    the rows. For ``grad_x`` write ``g = grad_y * gamma`` (that is dL/dxhat),
    then follow x along its three paths into xhat: directly, through ``mu``
    and through ``var`` — both statistics depend on *every* entry of the row.
    Simplified, the answer fits in one line with two row means and ``xhat``.
    """
    raise NotImplementedError("layernorm_backward: write the backward pass of layer norm here")


# (N, F) per trial. The first is not square, so sums over the wrong axis show as a shape.
SHAPES = [(4, 5), (3, 8), (6, 3), (2, 6), (5, 4)]


def make_inputs(rng, trial):
    rows, features = SHAPES[trial % len(SHAPES)]
    return {
        "x": rng.standard_normal((rows, features)) * 0.5 + rng.standard_normal((rows, 1)),
        "gamma": 1.0 + 0.5 * rng.standard_normal(features),
        "grad_y": rng.standard_normal((rows, features)),
        "eps": EPS,
        "beta": rng.standard_normal(features),
    }


def tape_gradients(inputs):
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


def _parts(x, gamma, grad_y, eps):
    centred = x - x.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    xhat = centred * inv_std
    return xhat, inv_std, grad_y * gamma


def _param_grads(x, gamma, grad_y, eps):
    xhat, _, _ = _parts(x, gamma, grad_y, eps)
    return (grad_y * xhat).sum(axis=0), grad_y.sum(axis=0)


def _statistics_constant(x, gamma, grad_y, eps):
    _, inv_std, g = _parts(x, gamma, grad_y, eps)
    return (g * inv_std, *_param_grads(x, gamma, grad_y, eps))


def _variance_constant(x, gamma, grad_y, eps):
    _, inv_std, g = _parts(x, gamma, grad_y, eps)
    return ((g - g.mean(axis=-1, keepdims=True)) * inv_std, *_param_grads(x, gamma, grad_y, eps))


def _gamma_forgotten(x, gamma, grad_y, eps):
    xhat, inv_std, _ = _parts(x, gamma, grad_y, eps)
    g = grad_y
    grad_x = (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True)) * inv_std
    return (grad_x, *_param_grads(x, gamma, grad_y, eps))


def _params_summed_over_wrong_axis(x, gamma, grad_y, eps):
    xhat, inv_std, g = _parts(x, gamma, grad_y, eps)
    grad_x = (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True)) * inv_std
    return grad_x, (grad_y * xhat).sum(axis=-1), grad_y.sum(axis=-1)


def _eps_left_out(x, gamma, grad_y, eps):
    return _right(x, gamma, grad_y, 0.0)


def _right(x, gamma, grad_y, eps):
    xhat, inv_std, g = _parts(x, gamma, grad_y, eps)
    grad_x = (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True)) * inv_std
    return (grad_x, *_param_grads(x, gamma, grad_y, eps))


register(
    Exercise(
        name="layernorm_backward",
        title="Layer norm backward (stretch): grad_x, grad_gamma, grad_beta",
        stub=layernorm_backward,
        make_inputs=make_inputs,
        tape_gradients=tape_gradients,
        outputs=(Output("grad_x", "x"), Output("grad_gamma", "gamma"), Output("grad_beta", "beta")),
        stretch=True,
        mistakes=(
            Mistake(
                "statistics_constant",
                "missing_mean_terms",
                "your grad_x is grad_y * gamma / sqrt(var + eps): it treats mu and var as constants. "
                "Both depend on every x in the row; their paths add the terms "
                "− mean(g) − xhat * mean(g * xhat) (with g = grad_y * gamma).",
                _statistics_constant,
            ),
            Mistake(
                "variance_constant",
                "missing_variance_term",
                "your grad_x has the mean's term but not the variance's: var depends on x too, "
                "which adds − xhat * mean(g * xhat) inside the bracket.",
                _variance_constant,
            ),
            Mistake(
                "gamma_forgotten",
                "skipped_step",
                "your grad_x skips gamma: the gradient reaching xhat is g = grad_y * gamma, not grad_y.",
                _gamma_forgotten,
            ),
            Mistake(
                "params_summed_over_wrong_axis",
                "wrong_axis",
                "your grad_gamma and grad_beta sum over the features (axis=-1). gamma and beta are "
                "shared by every row, so sum over the rows: axis=0, shape [F].",
                _params_summed_over_wrong_axis,
            ),
            Mistake(
                "eps_left_out",
                "missing_eps",
                "your grad_x uses 1/sqrt(var) without eps. The forward divided by sqrt(var + eps); "
                "use the same number in the backward.",
                _eps_left_out,
            ),
        ),
    )
)
