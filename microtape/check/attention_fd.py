"""Finite differences for attention: a third opinion, at a few sampled entries.

This module lets :func:`microtape.check.attention_report` ask the definition
of the derivative itself. For the scalar ``L = sum(g * output)`` (``g`` is the
upstream gradient) and one entry ``θ`` of anything along the chain,

    dL/dθ  ≈  (L(θ + ε) − L(θ − ε)) / 2ε          (central difference, error ~ ε²)

``L`` is recomputed by a plain-numpy forward in float64
(:func:`microtape.nn.analytic.attention_forward`'s steps), independent of the
tape, with the same masks and the same saved dropout mask. Inputs and
parameters are perturbed where they enter; an intermediate (``weights``,
``scaled_scores``, …) is perturbed by *replacing* it and recomputing only
what comes after it — so every row of the report can get a third opinion.
"""

import numpy as np

from ..nn import analytic

__all__ = ["AttentionPoint", "EPS"]

#: The finite-difference step. With float64, ε = 1e-6 balances the ε² error of
#: the central difference against rounding (~1e-16 / ε).
EPS = 1e-6


def _float64(array):
    return None if array is None else np.array(array, dtype=np.float64)


class AttentionPoint:
    """The attention forward frozen at one point, in float64, ready to be nudged.

    Built from ``attn.analytic_cache()``, the layer's total mask and the
    upstream gradient. ``loss(replace)`` recomputes ``L``, with any named
    intermediate replaced by a given array.
    """

    def __init__(self, cache, mask, upstream, intermediates, self_attention):
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

    def loss(self, replace=None):
        """``sum(upstream * output)`` by the numpy forward; ``replace`` maps node names to arrays."""
        replace = replace or {}
        params, inputs = self.params, self.inputs

        def project(role, projection):
            return analytic.linear_forward(inputs[role], params[f"{projection}.weight"], params[f"{projection}.bias"])

        def stage(name, computed):
            return replace.get(name, computed)

        batch = inputs["query"].shape[0]
        q_heads = stage("Q_heads", analytic.split_heads(project("query", "q_proj"), self.num_heads))
        k_heads = stage("K_heads", analytic.split_heads(project("key", "k_proj"), self.num_heads))
        v_heads = stage("V_heads", analytic.split_heads(project("value", "v_proj"), self.num_heads))
        scores = stage("scaled_scores", q_heads @ k_heads.transpose(0, 2, 1) / np.sqrt(q_heads.shape[-1]))
        if self.mask is not None:
            scores = scores + self.mask
        shifted = scores - scores.max(axis=-1, keepdims=True)
        weights = np.exp(shifted)
        weights = stage("weights", weights / weights.sum(axis=-1, keepdims=True))
        used = weights if self.keep is None else stage("dropped_weights", weights * self.keep)
        context = stage("context", used @ v_heads)
        merged = analytic.merge_heads(context, batch)
        output = analytic.linear_forward(merged, params["out_proj.weight"], params["out_proj.bias"])
        return float(np.sum(self.upstream * output))

    def _target(self, kind, name):
        if kind == "param":
            return self.params[name]
        if kind == "input":
            return self.inputs[name]
        return self.intermediates[name]

    def estimate(self, kind, name, index, eps=EPS):
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

    def sample(self, kind, name, count, rng, eps=EPS):
        """``count`` distinct random entries (in index order) and their estimates."""
        shape = self._target(kind, name).shape
        size = int(np.prod(shape))
        chosen = np.sort(rng.choice(size, size=min(count, size), replace=False))
        indices = [tuple(int(i) for i in np.unravel_index(flat, shape)) for flat in chosen]
        return [(index, self.estimate(kind, name, index, eps)) for index in indices]
