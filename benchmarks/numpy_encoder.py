"""A post-norm Transformer encoder layer, forward and backward, by hand in plain numpy.

The reference the tape's encoder layer is measured against. It imports
nothing but numpy and the hand-written attention of
:mod:`benchmarks.numpy_attention` (whose forward keeps only what its backward
reads), and adds what a block adds, written the way one would by hand::

    a  = attention(x)                     r1 = x + a          h = LN1(r1)
    z  = h W1ᵀ + b1,  u = relu(z),  f = u W2ᵀ + b2            r2 = h + f          y = LN2(r2)

    LN(r) = γ ⊙ x̂ + β,  x̂ = (r − mean r) / σ,  σ = sqrt(var r + eps)      (per row)
    dr = (ĝ − mean ĝ − x̂ ⊙ mean(ĝ ⊙ x̂)) / σ,  ĝ = dy ⊙ γ

(relu only; no dropout; layer-norm eps 1e-5 as PyTorch's default.)
"""

import numpy as np

from . import numpy_attention
from .numpy_attention import _linear_backward

EPS = 1e-5


def init_params(embed, ff_dim, dtype=np.float64, seed=0):
    """Attention's ``Wq, bq, …`` plus ``W1 [ff, E], b1, W2 [E, ff], b2`` (±1/√in) and γ, β of both norms."""
    params = numpy_attention.init_params(embed, dtype, seed)
    rng = np.random.default_rng(seed + 1)
    for name, fan_in, fan_out in (("1", embed, ff_dim), ("2", ff_dim, embed)):
        bound = 1.0 / np.sqrt(fan_in)
        params["W" + name] = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(dtype)
        params["b" + name] = rng.uniform(-bound, bound, fan_out).astype(dtype)
    for norm in ("n1", "n2"):
        params["g" + norm] = (1.0 + 0.1 * rng.standard_normal(embed)).astype(dtype)
        params["be" + norm] = (0.1 * rng.standard_normal(embed)).astype(dtype)
    return params


def _layernorm(r, gamma, beta):
    centered = r - r.mean(axis=-1, keepdims=True)
    std = np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + EPS)
    normalized = centered / std
    return normalized * gamma + beta, (normalized, std)


def _layernorm_backward(grad_y, saved, gamma):
    normalized, std = saved
    rows_g = grad_y.reshape(-1, grad_y.shape[-1])
    grad_gamma = (rows_g * normalized.reshape(rows_g.shape)).sum(axis=0)
    grad_beta = rows_g.sum(axis=0)
    g = grad_y * gamma
    grad_r = g - g.mean(axis=-1, keepdims=True) - normalized * (g * normalized).mean(axis=-1, keepdims=True)
    grad_r /= std
    return grad_r, grad_gamma, grad_beta


def forward(x, params, heads):
    """The layer on ``x`` ``[B, T, E]``; returns ``(y, saved)``."""
    a, saved_attention = numpy_attention.forward(x, params, heads)
    h, saved_n1 = _layernorm(x + a, params["gn1"], params["ben1"])
    z = h @ params["W1"].T + params["b1"]
    u = np.maximum(z, 0)
    f = u @ params["W2"].T + params["b2"]
    y, saved_n2 = _layernorm(h + f, params["gn2"], params["ben2"])
    return y, (saved_attention, saved_n1, h, z, u, saved_n2)


def backward(grad_y, saved, params, heads):
    """Gradients of ``sum(grad_y * y)``: returns ``(dx, {name: gradient})``."""
    saved_attention, saved_n1, h, z, u, saved_n2 = saved
    grads = {}
    grad_r2, grads["gn2"], grads["ben2"] = _layernorm_backward(grad_y, saved_n2, params["gn2"])
    grad_u, grads["W2"], grads["b2"] = _linear_backward(grad_r2, u, params["W2"])
    grad_z = grad_u * (z > 0)
    grad_h, grads["W1"], grads["b1"] = _linear_backward(grad_z, h, params["W1"])
    grad_h += grad_r2  # the residual: the skip's share
    grad_r1, grads["gn1"], grads["ben1"] = _layernorm_backward(grad_h, saved_n1, params["gn1"])
    grad_x, attention_grads = numpy_attention.backward(grad_r1, saved_attention, params, heads)
    grads.update(attention_grads)
    return grad_x + grad_r1, grads
