"""Reference solutions to the stepped exercises — for teachers, never in the student handout.

Each returns every step of its derivation by name, computed the way the
prompt's chain reads, one link at a time. ``instructor/solutions.py`` merges
:data:`SOLUTIONS` into its own.
"""

import numpy as np

__all__ = ["attention_backward_steps", "layernorm_backward_steps", "batchnorm_backward", "SOLUTIONS"]


def _softmax(s):
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _t(x):
    return np.swapaxes(x, -1, -2)


def attention_backward_steps(q, k, v, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = _softmax(q @ _t(k) * scale)  # P = softmax(Q Kᵀ / √d)
    grad_weights = grad_c @ _t(v)  # C = P V:  dP = dC Vᵀ
    grad_v = _t(p) @ grad_c  # dV = Pᵀ dC
    grad_scores = p * (grad_weights - np.sum(grad_weights * p, axis=-1, keepdims=True))  # the softmax
    return {
        "grad_weights": grad_weights,
        "grad_scaled_scores": grad_scores,
        "grad_q": grad_scores @ k * scale,  # S = Q Kᵀ / √d:  dQ = dS K / √d
        "grad_k": _t(grad_scores) @ q * scale,  # dK = dSᵀ Q / √d
        "grad_v": grad_v,
    }


def _norm_steps(x, gamma, grad_y, eps, axis):
    """The normalisation chain along ``axis`` (layer norm: -1, batch norm: 0), every step by name."""
    count = x.shape[axis]
    centred = x - x.mean(axis=axis, keepdims=True)
    var = (centred**2).mean(axis=axis, keepdims=True)
    inv_std = 1.0 / np.sqrt(var + eps)
    xhat = centred * inv_std
    grad_xhat = grad_y * gamma  # y = gamma * xhat + beta
    # xhat = (x − mu) (var + eps)^(-1/2):  d/dvar = (x − mu) · (−½) (var + eps)^(-3/2)
    grad_var = np.sum(grad_xhat * centred, axis=axis, keepdims=True) * -0.5 * inv_std**3
    # d xhat / d mu = −1/sqrt(var + eps); the path mu → var adds grad_var · mean(−2 (x − mu)) = 0
    grad_mean = -np.sum(grad_xhat * inv_std, axis=axis, keepdims=True)
    # x's three paths: directly, through var (d var/dx = 2 (x − mu)/count), through mu (d mu/dx = 1/count)
    grad_x = grad_xhat * inv_std + grad_var * 2.0 * centred / count + grad_mean / count
    return {
        "grad_xhat": grad_xhat,
        "grad_var": grad_var,
        "grad_mean": grad_mean,
        "grad_x": grad_x,
        "grad_gamma": np.sum(grad_y * xhat, axis=0),  # gamma, beta: one per feature, shared by the rows
        "grad_beta": np.sum(grad_y, axis=0),
    }


def layernorm_backward_steps(x, gamma, grad_y, eps):
    return _norm_steps(x, gamma, grad_y, eps, axis=-1)


def batchnorm_backward(x, gamma, grad_y, eps):
    return _norm_steps(x, gamma, grad_y, eps, axis=0)


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}
