"""Deliberate mistakes in the backward of LayerNorm, the feed-forward block and the residual connections.

This module lets a teacher show what a wrong derivative of a Transformer
block looks like in its layer report, sublayer by sublayer::

    >>> import numpy as np, microtape as mt
    >>> layer = mt.nn.TransformerEncoderLayer(8, 2, 16, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((1, 4, 8))
    >>> report = mt.check.layer_report(layer, x, mistakes={"norm1.layernorm_forgot_mean"})
    >>> report.first_failure
    'd_residual1'

Like :mod:`microtape.check.mistakes` (attention's, which layer reports accept
too), each entry of :data:`LAYER_MISTAKES` is a *link* of the hand-derived
chain swapped for a wrong one — the correct chain of
:mod:`microtape.nn.analytic_blocks` runs unchanged around it. A mistake
applies to every place of its ``part`` in a layer (``"layernorm_forgot_mean"``:
every LayerNorm) or to one place, named before a dot
(``"norm1.layernorm_forgot_mean"``, ``"self_attn.forgot_scale"``).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..nn import analytic_blocks

__all__ = ["LayerMistake", "LAYER_MISTAKES"]


@dataclass(frozen=True)
class LayerMistake:
    """A wrong link of a layer's backward: where it applies, what it computes, why it is wrong."""

    name: str
    part: str  # the kind of place it applies to: "layernorm", "feedforward" or "residual"
    link: str  # the link it replaces (a key of microtape.nn.analytic_blocks.LINKS)
    wrong: str  # the wrong formula, as text
    latex: str
    why: str
    function: Callable  # the wrong link itself
    needs: str | None = None  # "dropout" when it changes nothing without dropout


def _layernorm_without_mean(grad_y: Any, normalized: Any, std: Any, weight: Any) -> Any:
    # WRONG: the path through the row mean is forgotten (no − mean(ĝ) term).
    axes = tuple(range(-weight.ndim, 0))
    grad_x, grad_weight, grad_bias = analytic_blocks.layernorm_backward(grad_y, normalized, std, weight)
    grad_normalized = grad_y * weight
    return grad_x + np.mean(grad_normalized, axis=axes, keepdims=True) / std, grad_weight, grad_bias


def _layernorm_without_variance(grad_y: Any, normalized: Any, std: Any, weight: Any) -> Any:
    # WRONG: the path through the variance is forgotten (no − x̂ mean(ĝ x̂) term).
    axes = tuple(range(-weight.ndim, 0))
    grad_x, grad_weight, grad_bias = analytic_blocks.layernorm_backward(grad_y, normalized, std, weight)
    grad_normalized = grad_y * weight
    variance_path = normalized * np.mean(grad_normalized * normalized, axis=axes, keepdims=True)
    return grad_x + variance_path / std, grad_weight, grad_bias


def _activation_not_differentiated(grad_hidden: Any, pre_activation: Any, activation: Any) -> Any:
    # WRONG: d pre_activation = d hidden — as if the activation were the identity.
    return grad_hidden


def _dropout_not_applied(grad_dropped: Any, keep: Any) -> Any:
    # WRONG: the saved mask is not applied on the way back.
    return grad_dropped


def _skip_forgotten(grad_skip: Any, grad_branch: Any) -> Any:
    # WRONG: only the sublayer's path reaches the block's input; the skip path is dropped.
    return grad_branch


LAYER_MISTAKES = {
    mistake.name: mistake
    for mistake in (
        LayerMistake(
            "layernorm_forgot_mean",
            part="layernorm",
            link="layernorm",
            wrong="dx = (g - xhat * mean(g * xhat)) / std  (the mean's path forgotten)",
            latex=r"dx = (g - \hat x\,\overline{g \hat x}) / \sigma",
            why="every entry of a row moves the row's mean, and the mean is subtracted from every entry: "
            "that path gives the - mean(g) term.",
            function=_layernorm_without_mean,
        ),
        LayerMistake(
            "layernorm_forgot_variance",
            part="layernorm",
            link="layernorm",
            wrong="dx = (g - mean(g)) / std  (the variance's path forgotten)",
            latex=r"dx = (g - \overline{g}) / \sigma",
            why="std depends on every entry of the row too: that path gives the - xhat * mean(g * xhat) term.",
            function=_layernorm_without_variance,
        ),
        LayerMistake(
            "activation_not_differentiated",
            part="feedforward",
            link="activation",
            wrong="d_pre_activation = d_hidden  (the activation's slope forgotten)",
            latex=r"d z = d a",
            why="hidden = act(pre_activation): the chain rule multiplies by act'(pre_activation) "
            "([pre > 0] for relu), so a switched-off unit passes no gradient.",
            function=_activation_not_differentiated,
        ),
        LayerMistake(
            "ff_dropout_not_applied",
            part="feedforward",
            link="dropout",
            wrong="d_hidden = d_hidden~  (the dropout mask forgotten)",
            latex=r"d a = d\tilde a",
            why="hidden~ = hidden * keep: a dropped unit gets no gradient, a kept one is scaled by 1/(1-p).",
            function=_dropout_not_applied,
            needs="dropout",
        ),
        LayerMistake(
            "residual_skip_forgotten",
            part="residual",
            link="residual",
            wrong="d_input = what the sublayer sends back  (the skip path forgotten)",
            latex=r"dh = dh_{\mathrm{sublayer}}",
            why="r = h + sublayer(h) uses h twice: its gradient is the sum of both uses, d_r itself (the skip) "
            "plus what the sublayer sends back.",
            function=_skip_forgotten,
        ),
        LayerMistake(
            "residual_dropout_not_applied",
            part="residual",
            link="dropout",
            wrong="d_sublayer = d_sublayer~  (the residual dropout mask forgotten)",
            latex=r"d s = d\tilde s",
            why="the sublayer's output is dropped out before the sum: its gradient goes back through the same mask.",
            function=_dropout_not_applied,
            needs="dropout",
        ),
    )
}
