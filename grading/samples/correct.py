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
