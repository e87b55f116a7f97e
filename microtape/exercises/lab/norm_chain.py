"""The normalisation chain two stepped exercises derive: layer norm (over features) and batch norm (over the batch).

Both normalise ``x`` [rows, features] along one axis and scale and shift the
result by ``gamma``, ``beta`` [features]::

    mean = x.mean()   var = ((x − mean)²).mean()   xhat = (x − mean) / sqrt(var + eps)   y = gamma * xhat + beta

layer norm along the features (``axis=-1``: one mean and var per row), batch
norm in train mode along the batch (``axis=0``: one per feature). The
student returns every step of the derivation by name — ``grad_xhat`` →
``grad_var`` → ``grad_mean`` → ``grad_x``, and ``grad_gamma``,
``grad_beta`` — and the tape's answer is read off the recorded forward, node
by node (:func:`record`). The known mistakes are :func:`by_hand` with one
link wrong. :func:`stepped_exercise` declares either exercise from these:
what differs between the two is the axis, the trials and the words.
"""

import functools
from typing import Any

import numpy as np

from ...engine import Tape, gradients
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step
from .core import variant

__all__ = [
    "LAYER_NORM_VISIBLE",
    "LAYER_NORM_HIDDEN",
    "steps",
    "draw",
    "record",
    "tape_gradients",
    "by_hand",
    "mistakes",
    "CHANGES",
    "stepped_exercise",
]


# Layer norm's trials, for both its exercises (by hand and step by step): one dict per trial,
# (N, F), eps, and the spread of x. eps varies (and some
# rows have a small variance, where eps matters), so an answer that ignores its
# eps argument does not pass. The first is not square, so sums over the wrong
# axis show as a shape.
LAYER_NORM_VISIBLE = (
    {"shape": (4, 5), "eps": 1e-5, "spread": 0.5},
    {"shape": (3, 8), "eps": 0.01, "spread": 0.5},
    {"shape": (6, 3), "eps": 0.1, "spread": 0.5},
    {"shape": (2, 6), "eps": 1e-3, "spread": 0.05},
    {"shape": (5, 4), "eps": 0.5, "spread": 1.0},
)
LAYER_NORM_HIDDEN = (
    {"shape": (3, 7), "eps": 0.05, "spread": 0.5},
    {"shape": (5, 2), "eps": 1e-5, "spread": 0.2},
    {"shape": (2, 9), "eps": 0.3, "spread": 1.0},
    {"shape": (4, 4), "eps": 2e-3, "spread": 0.05},
    {"shape": (6, 5), "eps": 1.0, "spread": 2.0},
    {"shape": (1, 6), "eps": 0.02, "spread": 0.3},
    # The large trial, shared by the class: rows of 8 192 features: too many forwards for numeric differentiation.
    {"shape": (16, 8192), "eps": 1e-5, "spread": 1.0, "shared": True},
)


def draw(rng: np.random.Generator, case: dict[str, Any], axis: Any) -> Any:
    """One trial: ``x`` [rows, features] (each slice along ``axis`` shifted by its own offset), ``gamma``,
    ``grad_y``, ``eps`` and ``beta``, for ``case = {"shape", "eps", "spread"}``."""
    rows, features = case["shape"]
    offset_shape = (rows, 1) if axis == -1 else (1, features)
    return {
        "x": rng.standard_normal((rows, features)) * case["spread"] + rng.standard_normal(offset_shape),
        "gamma": 1.0 + 0.5 * rng.standard_normal(features),
        "grad_y": rng.standard_normal((rows, features)),
        "eps": case["eps"],
        "beta": rng.standard_normal(features),
    }


def steps(statistic: Any) -> Any:
    """The six steps, in derivation order; ``statistic`` says the shape of mean and var (as the prompt writes it)."""
    return (
        Step("grad_xhat", "x", node="xhat"),
        Step("grad_var", statistic, after=("grad_xhat",), node="var"),
        Step("grad_mean", statistic, after=("grad_xhat", "grad_var"), node="mean"),
        Step("grad_x", "x", after=("grad_xhat", "grad_var", "grad_mean"), node="x"),
        Step("grad_gamma", "gamma", node="gamma"),
        Step("grad_beta", "gamma", node="beta"),
    )


def record(inputs: dict[str, Any], axis: Any) -> Any:
    """The forward on a new tape, its nodes named as the steps: ``(tape, y)``."""
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    gamma = Tensor(inputs["gamma"], requires_grad=True, name="gamma")
    beta = Tensor(inputs["beta"], requires_grad=True, name="beta")
    with Tape() as tape:
        mean = x.mean(axis=axis, keepdims=True, name="mean")
        centred = x - mean
        var = (centred * centred).mean(axis=axis, keepdims=True, name="var")
        xhat = centred * (var + inputs["eps"]) ** -0.5
        xhat.name = "xhat"  # `*` takes no name=, so the node is named once recorded
        y = xhat * gamma + beta
        y.name = "y"
    return tape, y


def tape_gradients(inputs: dict[str, Any], axis: Any) -> Any:
    """Every step's gradient, in the order of :func:`steps`, by the tape's backward pass from ``grad_y``."""
    tape, y = record(inputs, axis)
    found = gradients(y, inputs["grad_y"], tape=tape)
    return tuple(found[tape.variable(name)] for name in ("xhat", "var", "mean", "x", "gamma", "beta"))


#: The steps each mistake changes: the one it breaks first, then those computed from it.
CHANGES = {
    "gamma_forgotten": ("grad_xhat", "grad_var", "grad_mean", "grad_x"),
    "var_power_wrong": ("grad_var", "grad_x"),  # (grad_mean does not use grad_var: that path adds 0)
    "mean_sign_flipped": ("grad_mean", "grad_x"),
    "mean_term_dropped": ("grad_x",),
    "variance_term_dropped": ("grad_x",),
    "count_minus_one": ("grad_x",),
    "params_summed_over_wrong_axis": ("grad_gamma", "grad_beta"),
    "eps_left_out": ("grad_var", "grad_mean", "grad_x", "grad_gamma"),
}


def by_hand(mistake: Any, x: Any, gamma: Any, grad_y: Any, eps: float, axis: Any) -> Any:
    """The chain by hand with the one thing ``mistake`` names wrong: the steps it changes (CHANGES)."""
    if mistake not in CHANGES:
        raise ValueError(f"by_hand(mistake={mistake!r}): expected one of {', '.join(CHANGES)}")
    count = x.shape[axis] - (1 if mistake == "count_minus_one" else 0)
    eps = 0.0 if mistake == "eps_left_out" else eps
    centred = x - x.mean(axis=axis, keepdims=True)
    var = (centred**2).mean(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_std = 1.0 / np.sqrt(var + eps)
        xhat = centred * inv_std
        grad_xhat = grad_y if mistake == "gamma_forgotten" else grad_y * gamma
        power = inv_std if mistake == "var_power_wrong" else inv_std**3  # d(var+eps)^-½ = −½ (var+eps)^-³ᐟ²
        grad_var = -0.5 * power * (grad_xhat * centred).sum(axis=axis, keepdims=True)
        grad_mean = (grad_xhat * inv_std).sum(axis=axis, keepdims=True)
        grad_mean = grad_mean if mistake == "mean_sign_flipped" else -grad_mean
        # (the path through var adds grad_var * mean(−2 (x − mean)), which is 0: the centred values sum to 0)
        grad_x = grad_xhat * inv_std
        if mistake != "variance_term_dropped":
            grad_x = grad_x + grad_var * 2.0 * centred / count
        if mistake != "mean_term_dropped":
            grad_x = grad_x + grad_mean / count
    summed = -1 if mistake == "params_summed_over_wrong_axis" else 0  # gamma, beta: one per feature, shared by the rows
    every = {
        "grad_xhat": grad_xhat,
        "grad_var": grad_var,
        "grad_mean": grad_mean,
        "grad_x": grad_x,
        "grad_gamma": (grad_y * xhat).sum(axis=summed),
        "grad_beta": grad_y.sum(axis=summed),
    }
    return {name: every[name] for name in CHANGES[mistake]}


# long on purpose: one table of the eight mistakes, read top to bottom
def mistakes(with_mistake: Any, over: Any, count_name: Any) -> Any:
    """The known mistakes, worded for a norm taken ``over`` ("each row's features", "the batch").

    ``count_name`` is how the prompt names the number of values averaged (``F``, ``B``).
    """
    return (
        Mistake(
            "gamma_forgotten",
            "skipped_step",
            "your grad_xhat is grad_y itself: y = gamma * xhat + beta, so dL/dxhat = grad_y * gamma.",
            variant(with_mistake, "gamma_forgotten"),
            step="grad_xhat",
        ),
        Mistake(
            "var_power_wrong",
            "wrong_derivative",
            "your grad_var uses (var + eps)^(-1/2). xhat = (x − mean) (var + eps)^(-1/2), and "
            "d/dvar (var + eps)^(-1/2) = −½ (var + eps)^(-3/2): the power goes down by one.",
            variant(with_mistake, "var_power_wrong"),
            step="grad_var",
        ),
        Mistake(
            "mean_sign_flipped",
            "sign_flipped",
            "your grad_mean has the wrong sign: xhat = (x − mean) / sqrt(var + eps), so d xhat / d mean = "
            "−1 / sqrt(var + eps), and grad_mean = −sum(dL/dxhat / sqrt(var + eps)).",
            variant(with_mistake, "mean_sign_flipped"),
            step="grad_mean",
        ),
        Mistake(
            "mean_term_dropped",
            "missing_mean_terms",
            f"your grad_x leaves out the path through the mean: mean = x.mean() over {over} adds "
            f"dL/dmean / {count_name} to every entry.",
            variant(with_mistake, "mean_term_dropped"),
            step="grad_x",
        ),
        Mistake(
            "variance_term_dropped",
            "missing_variance_term",
            f"your grad_x leaves out the path through the variance: var = mean((x − mean)²) over {over} adds "
            f"dL/dvar * 2 (x − mean) / {count_name}.",
            variant(with_mistake, "variance_term_dropped"),
            step="grad_x",
        ),
        Mistake(
            "count_minus_one",
            "wrong_count",
            f"your grad_x divides by {count_name} − 1. The forward's mean and variance divide by "
            f"{count_name} (not the unbiased {count_name} − 1), so their paths do too.",
            variant(with_mistake, "count_minus_one"),
            step="grad_x",
        ),
        Mistake(
            "params_summed_over_wrong_axis",
            "wrong_axis",
            "your grad_gamma and grad_beta sum over the features (axis=-1). gamma and beta are one per "
            "feature, shared by every row: sum over the rows, axis=0, shape [features].",
            variant(with_mistake, "params_summed_over_wrong_axis"),
            step="grad_gamma",
        ),
        Mistake(
            "eps_left_out",
            "missing_eps",
            "your grad_var (and what follows) uses 1/sqrt(var) without eps. The forward divided by "
            "sqrt(var + eps): use the same number in the backward.",
            variant(with_mistake, "eps_left_out"),
            step="grad_var",
        ),
    )


def stepped_exercise(
    stub: Any, axis: Any, *, title: str, visible: Any, hidden: Any, statistic: Any, over: Any, count_name: Any
) -> Any:
    """The :class:`~microtape.exercises.Exercise` of a norm's stepped backward along ``axis`` (one for the family).

    ``stub`` is the student's function, ``visible`` and ``hidden`` its trials;
    ``statistic`` says the shape of mean and var (:func:`steps`), ``over`` and
    ``count_name`` how the hints name what is averaged (:func:`mistakes`).
    The tape's answer, the recorded forward and the known mistakes are this
    chain's, along ``axis``.
    """

    def with_mistake(mistake: Any, x: Any, gamma: Any, grad_y: Any, eps: float) -> Any:
        return by_hand(mistake, x, gamma, grad_y, eps, axis)

    return Exercise(
        name=stub.__name__,
        stub=stub,
        visible=visible,
        hidden=hidden,
        make_inputs=functools.partial(draw, axis=axis),
        tape_gradients=functools.partial(tape_gradients, axis=axis),
        record=functools.partial(record, axis=axis),
        title=title,
        outputs=steps(statistic),
        mistakes=mistakes(with_mistake, over, count_name),
    )
