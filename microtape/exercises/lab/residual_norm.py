"""Exercise: a residual + LayerNorm block, ``y = LayerNorm(x + f(x))`` with ``f`` a Linear layer.

The input reaches the sum by two paths — the identity (the skip connection)
and the Linear layer — so its gradient is the sum of both. The tape's answer
records the block from microtape Tensors (the layer norm out of ``mean``,
``sub``, ``mul``, ``pow``, as in the layer norm exercise) and runs the tape
backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["residual_norm_backward"]


def residual_norm_backward(x, w, b, gamma, grad_y, eps):
    r"""Backward pass of a post-norm residual block: y = LayerNorm(x + x @ w.T + b).

    Forward (recompute what you need), F features per row:
        h    = x @ w.T + b                       f(x), a Linear layer: w [F, F], b [F]
        r    = x + h                             the residual sum
        mu   = mean(r), var = mean((r − mu)²)    per row, over the last axis
        rhat = (r − mu) / sqrt(var + eps)
        y    = gamma * rhat + beta               gamma, beta [F]

    Arguments: ``x`` [N, F], ``w`` [F, F], ``b`` [F], ``gamma`` [F],
    ``grad_y`` = dL/dy [N, F] and ``eps`` (a small positive float; it
    changes from trial to trial).

    Return a tuple ``(grad_x, grad_w, grad_b, grad_gamma, grad_beta)`` shaped
    like ``x``, ``w``, ``b``, ``gamma`` and ``beta``.

    The maths: first the layer norm's backward (the layer norm exercise) gives
    dL/dr, and grad_gamma, grad_beta. Then the sum ``r = x + h`` copies dL/dr
    to both of its inputs. ``x`` reaches ``r`` by *two* paths — directly, and
    through the Linear layer — and its gradient is the sum of the two.
    """
    raise NotImplementedError("residual_norm_backward: return grad_x, grad_w, grad_b, grad_gamma, grad_beta")


# One dict per trial: (N, F), eps. w is square (the block keeps the width),
# so a transposed w still runs and shows by its values. A hidden trial has
# 10 000 rows of 16: 160 000 inputs, too many to differentiate numerically one
# at a time within the time limit.
VISIBLE = (
    {"shape": (4, 5), "eps": 1e-5},
    {"shape": (3, 8), "eps": 0.01},
    {"shape": (6, 3), "eps": 0.1},
    {"shape": (2, 6), "eps": 1e-3},
    {"shape": (5, 4), "eps": 0.5},
)
HIDDEN = (
    {"shape": (3, 7), "eps": 0.05},
    {"shape": (5, 2), "eps": 1e-5},
    {"shape": (2, 9), "eps": 0.3},
    {"shape": (4, 4), "eps": 2e-3},
    {"shape": (6, 5), "eps": 1.0},
    {"shape": (10000, 16), "eps": 1e-5, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    rows, features = case["shape"]
    return {
        "x": rng.standard_normal((rows, features)),
        "w": rng.standard_normal((features, features)) / np.sqrt(features),
        "b": 0.5 * rng.standard_normal(features),
        "gamma": 1.0 + 0.5 * rng.standard_normal(features),
        "grad_y": rng.standard_normal((rows, features)),
        "eps": case["eps"],
        "beta": rng.standard_normal(features),
    }


def tape_gradients(inputs: dict[str, Any]) -> Any:
    leaves = {name: Tensor(inputs[name], requires_grad=True, name=name) for name in ("x", "w", "b", "gamma", "beta")}
    x = leaves["x"]
    with Tape() as tape:
        h = x.matmul(leaves["w"].T) + leaves["b"]
        r = x + h
        mu = r.mean(axis=-1, keepdims=True, name="mu")
        centred = r - mu
        var = (centred * centred).mean(axis=-1, keepdims=True, name="var")
        rhat = centred * (var + inputs["eps"]) ** -0.5
        y = rhat * leaves["gamma"] + leaves["beta"]
    tape.backward(y, inputs["grad_y"])
    return tuple(leaves[name].grad for name in ("x", "w", "b", "gamma", "beta"))


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the block's backward with exactly one thing wrong; it
# returns only the gradients that changes and refuses any other name.

_THROUGH_THE_NORM = ("grad_x", "grad_w", "grad_b")
_CHANGES = {
    "identity_path_forgotten": ("grad_x",),
    "linear_path_forgotten": ("grad_x",),
    "x_grad_with_w_transposed": ("grad_x",),
    "w_grad_transposed": ("grad_w",),
    "norm_statistics_constant": _THROUGH_THE_NORM,
    "gamma_forgotten": _THROUGH_THE_NORM,
    "gamma_grad_from_r": ("grad_gamma",),
}


def _with_mistake(mistake: Any, x: Any, w: Any, b: Any, gamma: Any, grad_y: Any, eps: float) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    r = x + x @ w.T + b
    centred = r - r.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    rhat = centred * inv_std
    g = grad_y if mistake == "gamma_forgotten" else grad_y * gamma
    if mistake == "norm_statistics_constant":
        grad_r = g * inv_std
    else:
        grad_r = inv_std * (g - g.mean(axis=-1, keepdims=True) - rhat * (g * rhat).mean(axis=-1, keepdims=True))
    through_linear = grad_r @ (w.T if mistake == "x_grad_with_w_transposed" else w)
    every = {
        "grad_x": {"identity_path_forgotten": through_linear, "linear_path_forgotten": grad_r}.get(
            mistake, grad_r + through_linear
        ),
        "grad_w": x.T @ grad_r if mistake == "w_grad_transposed" else grad_r.T @ x,
        "grad_b": grad_r.sum(axis=0),
        "grad_gamma": (grad_y * (r if mistake == "gamma_grad_from_r" else rhat)).sum(axis=0),
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="residual_norm_backward",
    stub=residual_norm_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="A residual + LayerNorm block: grad_x through both paths, and the parameters' gradients",
    outputs=(
        Output("grad_x", "x"),
        Output("grad_w", "w"),
        Output("grad_b", "b"),
        Output("grad_gamma", "gamma"),
        Output("grad_beta", "beta"),
    ),
    mistakes=(
        Mistake(
            "identity_path_forgotten",
            "missing_path",
            "your grad_x is dL/dr @ w: only the path through the Linear layer. The skip "
            "connection r = x + f(x) passes dL/dr to x unchanged as well: grad_x = dL/dr + dL/dr @ w.",
            variant(_with_mistake, "identity_path_forgotten"),
        ),
        Mistake(
            "linear_path_forgotten",
            "missing_path",
            "your grad_x is dL/dr: only the skip connection. x also feeds the Linear layer "
            "f(x) = x @ w.T + b, which adds dL/dr @ w: grad_x = dL/dr + dL/dr @ w.",
            variant(_with_mistake, "linear_path_forgotten"),
        ),
        Mistake(
            "x_grad_with_w_transposed",
            "transposed",
            "your grad_x goes back through the Linear layer with w.T. The forward multiplies by "
            "w.T, so the backward multiplies by w: grad_x = dL/dr + dL/dr @ w.",
            variant(_with_mistake, "x_grad_with_w_transposed"),
        ),
        Mistake(
            "w_grad_transposed",
            "transposed",
            "your grad_w is xᵀ dL/dr, the transpose. w is stored [out, in] (h = x @ w.T + b), so grad_w = (dL/dr)ᵀ x.",
            variant(_with_mistake, "w_grad_transposed"),
        ),
        Mistake(
            "norm_statistics_constant",
            "missing_mean_terms",
            "your grad_x, grad_w and grad_b treat the layer norm's mean and variance as constants "
            "(dL/dr = g / sqrt(var + eps), with g = grad_y * gamma). Both depend on every entry of "
            "the row: dL/dr = (g − mean(g) − rhat * mean(g * rhat)) / sqrt(var + eps).",
            variant(_with_mistake, "norm_statistics_constant"),
        ),
        Mistake(
            "gamma_forgotten",
            "skipped_step",
            "your grad_x, grad_w and grad_b skip gamma: the gradient reaching rhat is grad_y * gamma, not grad_y.",
            variant(_with_mistake, "gamma_forgotten"),
        ),
        Mistake(
            "gamma_grad_from_r",
            "wrong_derivative",
            "your grad_gamma multiplies grad_y by the residual sum r. gamma scales the "
            "*normalised* rhat: grad_gamma = sum over rows of grad_y * rhat.",
            variant(_with_mistake, "gamma_grad_from_r"),
        ),
    ),
)
register(EXERCISE)
