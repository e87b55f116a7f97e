# A sample submission: every exercise right (expected: full marks).
# Each "# %% NAME" section is the answer cell of exercise NAME in the student notebook.

# %% softmax_backward
def softmax_backward(p, grad_p):
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))


# %% linear_backward
def linear_backward(x, weight, grad_y):
    return grad_y @ weight, grad_y.T @ x, grad_y.sum(axis=0)


# %% tanh_layer_backward
def tanh_layer_backward(x, weight, bias, grad_h):
    h = np.tanh(x @ weight.T + bias)
    dz = grad_h * (1 - h * h)
    return {"z": dz, "x": dz @ weight, "weight": dz.T @ x, "bias": dz.sum(axis=0)}


# %% attention_backward
def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_backward(q, k, v, grad_c):
    d = q.shape[-1]
    kt = np.swapaxes(k, -1, -2)
    p = softmax(q @ kt / np.sqrt(d))
    dp = grad_c @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ k / np.sqrt(d), np.swapaxes(ds, -1, -2) @ q / np.sqrt(d), np.swapaxes(p, -1, -2) @ grad_c


# %% masked_softmax_backward
def masked_softmax_backward(s, mask, grad_p):
    p = softmax(s + mask)
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))


# %% masked_attention
def masked_attention(q, k, v, mask, grad_c):
    d = q.shape[-1]
    p = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(d) + mask)
    dp = grad_c @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return p @ v, ds @ k / np.sqrt(d), np.swapaxes(ds, -1, -2) @ q / np.sqrt(d), np.swapaxes(p, -1, -2) @ grad_c


# %% dropout_backward
def dropout_backward(grad_y, mask, p):
    return np.where(mask, grad_y / (1 - p), 0.0)


# %% attention_dropout_backward
def attention_dropout_backward(q, k, v, mask, p, grad_c):
    d = q.shape[-1]
    weights = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(d))
    keep = mask / (1 - p)
    dp = (grad_c @ np.swapaxes(v, -1, -2)) * keep
    ds = weights * (dp - (dp * weights).sum(axis=-1, keepdims=True))
    dv = np.swapaxes(weights * keep, -1, -2) @ grad_c
    return ds @ k / np.sqrt(d), np.swapaxes(ds, -1, -2) @ q / np.sqrt(d), dv


# %% layernorm_backward
def layernorm_backward(x, gamma, grad_y, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + eps)
    g = grad_y * gamma
    dx = (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True)) / np.sqrt(var + eps)
    return dx, (grad_y * xhat).sum(axis=0), grad_y.sum(axis=0)


# %% logsumexp_vjp
def logsumexp_vjp(g, ans, x):
    return (g[..., None] * np.exp(x - ans[..., None]),)


# %% logaddexp_vjp
def logaddexp_vjp(g, ans, a, b):
    grad_b = g * np.exp(b - ans)
    return g * np.exp(a - ans), grad_b.sum(axis=tuple(range(grad_b.ndim - np.ndim(b))))


# %% scalar_chain_rule
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


# %% mlp_backward
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
    return grad_x, grad_w1, grad_b1, grad_w2, grad_b2


# %% affine_relu_backward
def affine_relu_backward(x, w, b, grad_out):
    z = x @ w + b  # the forward's pre-activation
    grad_z = grad_out * (z > 0)  # the ReLU passes the gradient where z > 0
    grad_x = grad_z @ w.T  # [N, M] @ [M, D]
    grad_w = x.T @ grad_z  # [D, N] @ [N, M]: w is stored [D, M]
    grad_b = grad_z.sum(axis=0)
    return grad_x, grad_w, grad_b


# %% softmax_cross_entropy_backward
def softmax_cross_entropy_backward(logits, y):
    rows = logits.shape[0]
    shifted = logits - logits.max(axis=-1, keepdims=True)  # stable: exp(0) at most
    p = np.exp(shifted)
    p /= p.sum(axis=-1, keepdims=True)
    # −log p_y = −s_y + logsumexp(s): the logsumexp gives p, the −s_y a −1 at the label.
    grad = p.copy()
    grad[np.arange(rows), y] -= 1.0
    return grad / rows  # the mean over the rows


# %% mse_backward
def mse_backward(pred, target):
    # L = (1/M) Σ (pred − target)²: each entry appears once, d(u²)/du = 2u.
    grad_pred = 2.0 * (pred - target) / pred.size  # the mean is over every entry
    return grad_pred, -grad_pred  # ∂(pred − target)/∂target = −1


# %% logistic_loss_backward
def logistic_loss_backward(logits, y):
    # One term is log(1 + e^z) − y z; its derivative σ(z) − y. σ without overflow:
    # σ(z) = 1 / (1 + e^{−z}) = exp(−log(1 + e^{−z})) = exp(−logaddexp(0, −z)).
    sigma = np.exp(-np.logaddexp(0.0, -logits))
    return (sigma - y) / logits.shape[0]  # the mean over the examples


# %% embedding_backward
def embedding_backward(tokens, table, grad_out):
    # out[b, t] is a copy of row tokens[b, t]: that row receives grad_out[b, t].
    # np.add.at adds every one, so a repeated token's gradients add up.
    grad_table = np.zeros_like(table)
    np.add.at(grad_table, tokens, grad_out)
    return grad_table


# %% residual_norm_backward
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
    return grad_x, grad_w, grad_b, grad_gamma, grad_beta
