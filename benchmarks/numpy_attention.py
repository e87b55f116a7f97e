"""Multi-head self-attention, forward and backward, by hand in plain numpy.

The reference the tape is measured against. It is written independently of
microtape (it imports nothing but numpy) and the way one would write it by
hand: the forward keeps only what the backward reads (the input, the three
head-split projections, the softmax weights and the merged context), and the
few in-place updates are the obvious ones (a softmax normalised in place,
``dS`` computed in the buffer it was born in). No fused kernels, no tiling.

The math, with ``x`` of shape ``[B, T, E]``, ``H`` heads of ``D = E / H``::

    Q, K, V = x Wqᵀ + bq,  x Wkᵀ + bk,  x Wvᵀ + bv        then split to [B·H, T, D]
    S = Q Kᵀ / √D,   P = softmax(S),   C = P V,   y = merge(C) Woᵀ + bo

    dP = dC Vᵀ,  dV = Pᵀ dC,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),
    dQ = dS K / √D,  dK = dSᵀ Q / √D,  dx = dQ' Wq + dK' Wk + dV' Wv
"""

import math

import numpy as np

NAMES = ("q", "k", "v", "o")


def init_params(embed, dtype=np.float64, seed=0):
    """``{"Wq": [E, E], "bq": [E], ...}`` drawn uniformly from ±1/√E."""
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(embed)
    params = {}
    for name in NAMES:
        params["W" + name] = rng.uniform(-bound, bound, (embed, embed)).astype(dtype)
        params["b" + name] = rng.uniform(-bound, bound, embed).astype(dtype)
    return params


def _split(t, heads):
    batch, length, embed = t.shape
    return t.reshape(batch, length, heads, embed // heads).transpose(0, 2, 1, 3).reshape(batch * heads, length, -1)


def _merge(t, batch):
    heads_total, length, depth = t.shape
    heads = heads_total // batch
    return t.reshape(batch, heads, length, depth).transpose(0, 2, 1, 3).reshape(batch, length, heads * depth)


def project(x, params, heads):
    """The three input projections, split into heads: ``q, k, v`` ``[B·H, T, D]``."""
    return tuple(_split(x @ params["W" + name].T + params["b" + name], heads) for name in "qkv")


def forward(x, params, heads, causal=False):
    """Self-attention of ``x`` ``[B, T, E]``; returns ``(y, saved)``. ``causal``: key j > query i hidden."""
    batch, length, embed = x.shape
    scale = 1.0 / math.sqrt(embed // heads)  # a Python float: float32 stays float32
    q, k, v = project(x, params, heads)
    scores = q @ k.transpose(0, 2, 1)
    scores *= scale
    if causal:
        np.copyto(scores, -np.inf, where=np.triu(np.ones((length, length), dtype=bool), 1))
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores, out=scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    merged = _merge(weights @ v, batch)
    y = merged @ params["Wo"].T + params["bo"]
    return y, (x, q, k, v, weights, merged)


def _linear_backward(grad_y, x, weight):
    rows_g = grad_y.reshape(-1, grad_y.shape[-1])
    rows_x = x.reshape(-1, x.shape[-1])
    return grad_y @ weight, rows_g.T @ rows_x, rows_g.sum(axis=0)


def backward(grad_y, saved, params, heads, rowdot="multiply"):
    """Gradients of ``sum(grad_y * y)``: returns ``(dx, {"Wq": dWq, "bq": dbq, ...})``.

    ``rowdot="einsum"`` computes softmax's ``rowsum(dP ⊙ P)`` with an einsum
    (no ``dP ⊙ P`` temporary) — the one kernel choice microtape's softmax VJP
    makes differently from the textbook line, measured separately so the
    comparison shows what it is worth.
    """
    x, q, k, v, weights, merged = saved
    scale = 1.0 / math.sqrt(q.shape[-1])
    grads = {}
    grad_merged, grads["Wo"], grads["bo"] = _linear_backward(grad_y, merged, params["Wo"])
    grad_context = _split(grad_merged, heads)
    grad_v = weights.transpose(0, 2, 1) @ grad_context
    grad_weights = grad_context @ v.transpose(0, 2, 1)
    if rowdot == "einsum":
        row_sums = np.einsum("bij,bij->bi", grad_weights, weights)[..., None]
    else:
        row_sums = (grad_weights * weights).sum(axis=-1, keepdims=True)
    grad_scores = grad_weights  # dS is born in dP's buffer: dP is not read again
    grad_scores -= row_sums
    grad_scores *= weights
    grad_q = (grad_scores @ k) * scale
    grad_k = (grad_scores.transpose(0, 2, 1) @ q) * scale
    return projections_backward((grad_q, grad_k, grad_v), x, params, grads), grads


def projections_backward(grad_heads, x, params, grads):
    """``dx`` from the heads' gradients ``(dq, dk, dv)``; adds ``dWq, dbq, …`` into ``grads``."""
    grad_x = 0
    for name, grad in zip("qkv", grad_heads, strict=True):
        grad_x_part, grads["W" + name], grads["b" + name] = _linear_backward(
            _merge(grad, x.shape[0]), x, params["W" + name]
        )
        grad_x = grad_x + grad_x_part
    return grad_x


class Layer:
    """The reference as a layer object: ``Layer(params, heads)``, then ``forward(x)`` and ``backward(g)``.

    The forward's cache is replaced only when the next forward has finished
    (a layer keeps its last forward for its backward and its getters), and
    ``backward`` adds the parameter gradients into ``self.grads`` in place,
    as a layer without ``zero_grad`` between steps does. Returns ``dx``.
    """

    def __init__(self, params, heads, causal=False, rowdot="multiply"):
        self.params, self.heads, self.causal, self.rowdot = params, heads, causal, rowdot
        self.grads = {name: np.zeros_like(value) for name, value in params.items()}
        self._saved = None

    def forward(self, x):
        y, self._saved = forward(x, self.params, self.heads, self.causal)
        return y

    def backward(self, grad_y):
        grad_x, grads = backward(grad_y, self._saved, self.params, self.heads, self.rowdot)
        for name, grad in grads.items():
            self.grads[name] += grad
        return grad_x
