"""Reference solutions to the exercises from the chain rule to a residual block (issue #36, part a).

Teachers only: like :mod:`instructor.solutions`, this folder is not part of the
package. Each solution is plain numpy, the chain rule one link at a time; the
checker judges them against the tape. ``instructor/solutions.py`` merges
:data:`SOLUTIONS` into its own.
"""

import numpy as np

__all__ = [
    "scalar_chain_rule",
    "mlp_backward",
    "affine_relu_backward",
    "softmax_cross_entropy_backward",
    "mse_backward",
    "logistic_loss_backward",
    "embedding_backward",
    "residual_norm_backward",
    "SOLUTIONS",
]


def scalar_chain_rule(a, b, c, g):
    # The forward, node by node.
    e = a * b
    d = e + c
    f = np.tanh(d)
    # Backwards from L = f * g, where dL/dL = 1.
    grad_f = g  # ∂(f g)/∂f = g
    grad_g = f  # ∂(f g)/∂g = f
    grad_d = grad_f * (1.0 - f**2)  # tanh'(d) = 1 − tanh(d)² = 1 − f²
    grad_e = grad_d  # a sum copies the gradient to both inputs
    grad_c = grad_d
    grad_a = grad_e * b  # ∂(a b)/∂a = b
    grad_b = grad_e * a
    return {
        "grad_a": grad_a,
        "grad_b": grad_b,
        "grad_c": grad_c,
        "grad_e": grad_e,
        "grad_d": grad_d,
        "grad_f": grad_f,
        "grad_g": grad_g,
    }


def mlp_backward(x, w1, b1, w2, grad_y):
    h = np.tanh(x @ w1.T + b1)  # the forward, recomputed (y itself is not needed)
    # The second layer, y = h w2ᵀ + b2: the Linear exercise with input h.
    grad_w2 = grad_y.T @ h  # [O, N] @ [N, H] -> [O, H]
    grad_b2 = grad_y.sum(axis=0)
    grad_h = grad_y @ w2  # [N, O] @ [O, H] -> [N, H]
    # The tanh: tanh'(z) = 1 − tanh(z)² = 1 − h².
    grad_z = grad_h * (1.0 - h**2)
    # The first layer, z = x w1ᵀ + b1.
    grad_w1 = grad_z.T @ x
    grad_b1 = grad_z.sum(axis=0)
    grad_x = grad_z @ w1
    return {"grad_w2": grad_w2, "grad_b2": grad_b2, "grad_h": grad_h, "grad_z": grad_z,
            "grad_x": grad_x, "grad_w1": grad_w1, "grad_b1": grad_b1}  # fmt: skip


def affine_relu_backward(x, w, b, grad_out):
    z = x @ w + b  # the forward's pre-activation
    grad_z = grad_out * (z > 0)  # the ReLU passes the gradient where z > 0
    grad_x = grad_z @ w.T  # [N, M] @ [M, D]
    grad_w = x.T @ grad_z  # [D, N] @ [N, M]: w is stored [D, M]
    grad_b = grad_z.sum(axis=0)
    return {"grad_z": grad_z, "grad_x": grad_x, "grad_w": grad_w, "grad_b": grad_b}


def softmax_cross_entropy_backward(logits, y):
    rows = logits.shape[0]
    shifted = logits - logits.max(axis=-1, keepdims=True)  # stable: exp(0) at most
    p = np.exp(shifted)
    p /= p.sum(axis=-1, keepdims=True)
    grad_log_p = np.zeros_like(logits)  # L = −mean of log_p at the labels: −1/N there, 0 elsewhere
    grad_log_p[np.arange(rows), y] = -1.0 / rows
    grad_p = grad_log_p / p  # log's derivative: 1/p
    # the softmax's VJP: p ⊙ (g − rowsum(g ⊙ p)) — here (p − onehot(y)) / N
    grad_logits = p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))
    return {"grad_log_p": grad_log_p, "grad_p": grad_p, "grad_logits": grad_logits}


def mse_backward(pred, target):
    # L = (1/M) Σ (pred − target)²: each entry appears once, d(u²)/du = 2u.
    grad_pred = 2.0 * (pred - target) / pred.size  # the mean is over every entry
    return grad_pred, -grad_pred  # ∂(pred − target)/∂target = −1


def logistic_loss_backward(logits, y):
    # One term is log(1 + e^z) − y z; its derivative σ(z) − y. σ without overflow:
    # σ(z) = 1 / (1 + e^{−z}) = exp(−log(1 + e^{−z})) = exp(−logaddexp(0, −z)).
    sigma = np.exp(-np.logaddexp(0.0, -logits))
    return (sigma - y) / logits.shape[0]  # the mean over the examples


def embedding_backward(tokens, table, grad_out):
    # out[b, t] is a copy of row tokens[b, t]: that row receives grad_out[b, t].
    # np.add.at adds every one, so a repeated token's gradients add up.
    grad_table = np.zeros_like(table)
    np.add.at(grad_table, tokens, grad_out)
    return grad_table


def residual_norm_backward(x, w, b, gamma, grad_y, eps):
    # The forward, recomputed: r = x + f(x), then the layer norm of r.
    r = x + x @ w.T + b
    centred = r - r.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    rhat = centred * inv_std
    # The layer norm's backward (as in layernorm_backward), from y back to r.
    grad_gamma = (grad_y * rhat).sum(axis=0)
    grad_beta = grad_y.sum(axis=0)
    g = grad_y * gamma
    grad_r = inv_std * (g - g.mean(axis=-1, keepdims=True) - rhat * (g * rhat).mean(axis=-1, keepdims=True))
    # r = x + h copies grad_r to x (the skip) and to h = x wᵀ + b (the Linear layer).
    grad_w = grad_r.T @ x
    grad_b = grad_r.sum(axis=0)
    grad_x = grad_r + grad_r @ w  # both paths add up
    return {"grad_gamma": grad_gamma, "grad_beta": grad_beta, "grad_rhat": g, "grad_r": grad_r,
            "grad_h": grad_r, "grad_x": grad_x, "grad_w": grad_w, "grad_b": grad_b}  # fmt: skip


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}
