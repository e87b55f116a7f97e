"""Reference solutions to the exercises (for teachers: keep them out of the student handout).

Run the checker on them to see what a passing answer looks like::

    >>> from microtape.exercises import check, solutions
    >>> check("attention_backward", solutions.attention_backward).ok
    True

Each solution is plain numpy, written the way we hope students will: the
forward recomputed where needed, then the chain rule one link at a time.
The checker judges them against the *tape*, not against themselves, so these
are also an independent check of the engine.
"""

import numpy as np

__all__ = [
    "softmax_backward",
    "linear_backward",
    "attention_backward",
    "masked_softmax_backward",
    "dropout_backward",
    "layernorm_backward",
    "SOLUTIONS",
]


def _softmax(s):
    """Row-wise softmax, shifted by the row max so exp() cannot overflow."""
    shifted = s - np.max(s, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def _t(x):
    """Transpose the last two axes (a batch of matrices stays a batch)."""
    return np.swapaxes(x, -1, -2)


def softmax_backward(p, grad_p):
    # The Jacobian of one row is diag(p) − p pᵀ; applied to grad_p:
    #   grad_s_i = p_i grad_p_i − p_i Σ_j p_j grad_p_j
    return p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True))


def linear_backward(x, weight, grad_y):
    # y = x Wᵀ + b.  y_nj = Σ_i x_ni W_ji + b_j
    grad_x = grad_y @ weight  # [N, out] @ [out, in] -> [N, in]
    grad_weight = grad_y.T @ x  # [out, N] @ [N, in] -> [out, in]: the rows add up
    grad_bias = grad_y.sum(axis=0)  # every row used the same bias
    return grad_x, grad_weight, grad_bias


def attention_backward(q, k, v, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    weights = _softmax(q @ _t(k) * scale)  # P = softmax(Q Kᵀ / √d)
    # C = P V
    grad_weights = grad_c @ _t(v)  # dP = dC Vᵀ
    grad_v = _t(weights) @ grad_c  # dV = Pᵀ dC
    # P = softmax(S)
    grad_scores = softmax_backward(weights, grad_weights)  # dS = P ⊙ (dP − rowsum(dP ⊙ P))
    # S = Q Kᵀ / √d
    grad_q = grad_scores @ k * scale  # dQ = dS K / √d
    grad_k = _t(grad_scores) @ q * scale  # dK = dSᵀ Q / √d
    return grad_q, grad_k, grad_v


def masked_softmax_backward(s, mask, grad_p):
    # The mask is a constant added to the scores: it passes the gradient through
    # unchanged. It matters through P: masked weights are exactly 0, so their
    # gradient is 0 too (nudging a score nobody looks at changes nothing).
    weights = _softmax(s + mask)
    return softmax_backward(weights, grad_p)


def dropout_backward(grad_y, mask, p):
    # y = x * mask / (1 − p): for a fixed (saved) mask, a constant times x.
    return grad_y * mask / (1.0 - p)


def layernorm_backward(x, gamma, grad_y, eps):
    centred = x - x.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    xhat = centred * inv_std
    grad_gamma = (grad_y * xhat).sum(axis=0)  # gamma and beta are shared by all rows
    grad_beta = grad_y.sum(axis=0)
    g = grad_y * gamma  # dL/dxhat
    # Three paths from x to xhat (directly, via the mean, via the variance):
    grad_x = inv_std * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return grad_x, grad_gamma, grad_beta


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}
