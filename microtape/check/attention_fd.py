"""Finite differences for attention: a third opinion, at a few sampled entries.

This module lets :func:`microtape.check.attention_report` ask the definition
of the derivative itself. For the scalar ``L = sum(g * output)`` (``g`` is the
upstream gradient) and one entry ``θ`` of anything along the chain,

    dL/dθ  ≈  (L(θ + ε) − L(θ − ε)) / 2ε          (central difference, error ~ ε²)

``L`` is recomputed by the layer's own forward — the one
:func:`~microtape.nn.attention.chain.attention_chain`, run on
:class:`~microtape.values.plain.Plain` float64 arrays, so nothing is recorded and no
VJP is involved — with the same masks and the same saved dropout mask.
Inputs and parameters are perturbed where they enter; an intermediate
(``weights``, ``scaled_scores``, …) is perturbed by *replacing* it
(:meth:`Plain.replacing`): everything after it is recomputed from the
nudged value.
"""

from typing import Any

import numpy as np

from ..nn.attention.chain import attention_chain
from ..values.plain import Plain

__all__ = ["AttentionPoint", "EPS"]

#: The finite-difference step. With float64, ε = 1e-6 balances the ε² error of
#: the central difference against rounding (~1e-16 / ε).
EPS = 1e-6


def _float64(array: Any) -> Any:
    return None if array is None else np.array(array, dtype=np.float64)


class AttentionPoint:
    """The attention forward frozen at one point, in float64, ready to be nudged.

    Built from ``attn.analytic_cache()``, the layer's total mask and the
    upstream gradient. ``loss(replace)`` recomputes ``L``, with any named intermediate
    replaced by a given array.
    """

    def __init__(self, cache: Any, mask: Any, upstream: Any, intermediates: Any, self_attention: Any) -> None:
        self.params = {name: _float64(value) for name, value in cache["params"].items()}
        if self_attention:
            # One array for all three roles: nudging x nudges query, key and value.
            x = _float64(cache["query"])
            self.inputs = {"query": x, "key": x, "value": x, "x": x}
        else:
            self.inputs = {role: _float64(cache[role]) for role in ("query", "key", "value")}
        self.mask = _float64(mask)
        self.keep = _float64(cache["keep"])
        self.num_heads = cache["num_heads"]
        self.upstream = _float64(upstream)
        self.intermediates = {name: _float64(value) for name, value in intermediates.items()}

    def loss(self, replace: Any = None) -> Any:
        """``sum(upstream * output)`` by the layer's forward; ``replace`` maps step names to arrays."""
        params = {name: Plain(value) for name, value in self.params.items()}
        query, key, value = (Plain(self.inputs[role]) for role in ("query", "key", "value"))
        with Plain.replacing(replace or {}):
            output = attention_chain(query, key, value, params, self.num_heads, mask=self.mask, keep=self.keep)
        return float(np.sum(self.upstream * output.data))

    def _target(self, kind: Any, name: str) -> Any:
        if kind == "param":
            return self.params[name]
        if kind == "input":
            return self.inputs[name]
        return self.intermediates[name]

    def estimate(self, kind: Any, name: str, index: Any, eps: float = EPS) -> Any:
        """The central difference of ``L`` in entry ``index`` of a param, input or node."""
        if kind == "node":
            base = self.intermediates[name]
            plus, minus = base.copy(), base.copy()
            plus[index] += eps
            minus[index] -= eps
            return (self.loss({name: plus}) - self.loss({name: minus})) / (2 * eps)
        array = self._target(kind, name)
        saved = array[index]
        try:
            array[index] = saved + eps
            up = self.loss()
            array[index] = saved - eps
            down = self.loss()
        finally:
            array[index] = saved
        return (up - down) / (2 * eps)

    def sample(self, kind: Any, name: str, count: int, rng: np.random.Generator, eps: float = EPS) -> Any:
        """``count`` distinct random entries (in index order) and their estimates."""
        shape = self._target(kind, name).shape
        size = int(np.prod(shape))
        chosen = np.sort(rng.choice(size, size=min(count, size), replace=False))
        indices = [tuple(int(i) for i in np.unravel_index(flat, shape)) for flat in chosen]
        return [(index, self.estimate(kind, name, index, eps)) for index in indices]
