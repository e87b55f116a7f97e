"""Finite differences for any checked layer: a third opinion on every row of a layer report.

This module lets :func:`microtape.check.layer_report` ask the definition of
the derivative about a LayerNorm, a feed-forward block or a whole Transformer
layer. For ``L = sum(g * output)`` and one entry ``θ`` of a parameter, an
input or a named step,

    dL/dθ  ≈  (L(θ + ε) − L(θ − ε)) / 2ε

where ``L`` is recomputed by the layer's own forward run on plain float64
numpy (``layer.forward_plain``: no tape, no VJP, the same masks and dropout
masks). A named step (``residual1``, ``hidden``, ``self_attn.weights``, …) is
nudged by *replacing* it while that forward runs, so only what follows it is
recomputed — exactly as :mod:`microtape.check.attention_fd` does for one
attention layer, whose sampling it reuses.
"""

from typing import Any

import numpy as np

from .attention_fd import EPS, AttentionPoint

__all__ = ["LayerPoint", "EPS"]


class LayerPoint(AttentionPoint):
    """A checked layer's last forward frozen at one point, in float64, ready to be nudged."""

    def __init__(self, layer: Any, upstream: Any, names: Any) -> None:
        self.layer = layer
        self.params = {name: np.array(tensor.data, dtype=np.float64) for name, tensor in layer.named_parameters()}
        self.inputs = {role: np.array(value, dtype=np.float64) for role, value in layer.last_inputs.items()}
        self.upstream = np.array(upstream, dtype=np.float64)
        steps = [name for name in names if name not in self.params and name not in self.inputs]
        self.intermediates = {name: np.array(layer.step_value(name), dtype=np.float64) for name in steps}

    def kind(self, name: str) -> Any:
        """``"param"``, ``"input"`` or ``"node"``: how entry ``name`` is nudged."""
        if name in self.params:
            return "param"
        return "input" if name in self.inputs else "node"

    def loss(self, replace: Any = None) -> Any:
        """``sum(upstream * output)`` by the layer's plain forward; ``replace`` maps step names to arrays."""
        return float(np.sum(self.upstream * self.layer.forward_plain(self.inputs, self.params, replace)))
