"""Reference solutions to the exercises — for teachers, never in the student handout.

This folder is not part of the ``microtape`` package (``pyproject.toml``
packages only ``microtape*``), so ``pip install microtape`` gives students the
exercises and the checker but no answer. Run the checker on a solution from
the repository's root to see what a passing answer looks like::

    >>> from microtape.exercises import check
    >>> from instructor import solutions
    >>> check("attention_backward", solutions.attention_backward).ok
    True

Each solution is plain numpy, written the way we hope students will: the
forward recomputed where needed (softmax stabilised by the row maximum), then
the chain rule one link at a time. The checker judges them against the
*tape*, not against themselves, so these are also an independent check of the
engine. ``tests/exercises/test_exercises.py`` runs every one of them on every visible
and hidden trial; ``assignment/source/microtape_lab.ipynb`` holds the same
answers between its solution markers.
"""

import numpy as np

__all__ = [
    "softmax_backward",
    "linear_backward",
    "tanh_layer_backward",
    "attention_backward",
    "masked_softmax_backward",
    "masked_attention",
    "dropout_backward",
    "attention_dropout_backward",
    "layernorm_backward",
    "logsumexp_vjp",
    "logaddexp_vjp",
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


def tanh_layer_backward(x, weight, bias, grad_h):
    h = np.tanh(x @ weight.T + bias)  # the forward, recomputed
    grad_z = grad_h * (1.0 - h**2)  # tanh'(z) = 1 − tanh(z)²
    grad_x, grad_weight, grad_bias = linear_backward(x, weight, grad_z)
    # Keyed by node name: exactly what mt.check.compare(tape, h, ...) takes.
    return {"z": grad_z, "x": grad_x, "weight": grad_weight, "bias": grad_bias}


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


def masked_attention(q, k, v, mask, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    weights = _softmax(q @ _t(k) * scale + mask)  # the mask is added before the softmax
    context = weights @ v
    grad_weights = grad_c @ _t(v)
    grad_v = _t(weights) @ grad_c
    grad_scores = softmax_backward(weights, grad_weights)  # 0 where masked: P is 0 there
    grad_q = grad_scores @ k * scale
    grad_k = _t(grad_scores) @ q * scale
    return context, grad_q, grad_k, grad_v


def dropout_backward(grad_y, mask, p):
    # y = x * mask / (1 − p): for a fixed (saved) mask, a constant times x.
    return grad_y * mask / (1.0 - p)


def attention_dropout_backward(q, k, v, mask, p, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    weights = _softmax(q @ _t(k) * scale)  # P
    keep = mask / (1.0 - p)
    dropped = weights * keep  # P̃ = P ⊙ keep
    # C = P̃ V
    grad_v = _t(dropped) @ grad_c  # dV = P̃ᵀ dC
    grad_dropped = grad_c @ _t(v)  # dP̃ = dC Vᵀ
    # P̃ = P ⊙ keep
    grad_weights = grad_dropped * keep  # dP = (dC Vᵀ) ⊙ keep
    # P = softmax(S): the softmax's own output, P, not P̃
    grad_scores = softmax_backward(weights, grad_weights)
    grad_q = grad_scores @ k * scale
    grad_k = _t(grad_scores) @ q * scale
    return grad_q, grad_k, grad_v


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


def logsumexp_vjp(g, ans, x):
    # y = log Σ exp(x): ∂y/∂x_j = exp(x_j) / Σ exp = exp(x_j − y), a softmax that
    # never overflows (y is at least the row's max). g has one entry per row.
    return (g[..., None] * np.exp(x - ans[..., None]),)


def logaddexp_vjp(g, ans, a, b):
    # y = log(e^a + e^b): ∂y/∂a = e^a / (e^a + e^b) = exp(a − y), and exp(b − y) for b —
    # stable (y >= max(a, b)). b may be one row shared by all rows of a: sum its gradient back.
    grad_b = g * np.exp(b - ans)
    return g * np.exp(a - ans), grad_b.sum(axis=tuple(range(grad_b.ndim - np.ndim(b))))


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}

# The other solution files' exercises, merged when this is imported as instructor.solutions (checked as a
# student's file in the box, each instructor/solutions*.py file runs on its own: there is no package there).
if __package__:  # imported as instructor.solutions (in the box, a file runs with no package)
    from .solutions_exa import SOLUTIONS as _EXA  # from the chain rule to a residual block
    from .solutions_exb import SOLUTIONS as _EXB  # convolution, recurrent nets, forward mode, second order, tiled
    from .solutions_steps import SOLUTIONS as _STEPS  # the stepped exercises

    SOLUTIONS.update(_EXA)
    SOLUTIONS.update(_EXB)
    SOLUTIONS.update(_STEPS)
