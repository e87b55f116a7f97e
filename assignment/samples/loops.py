# A sample submission with a function that never returns: it gets the time limit and
# no points; every other exercise is right and graded as usual.
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
def attention_backward(q, k, v, grad_c):
    grad_q = np.zeros_like(q)
    while not grad_q.any():  # never true: the loop never ends
        grad_q = grad_q * 2
    return grad_q, k, v


# %% masked_softmax_backward
def masked_softmax_backward(s, mask, grad_p):
    z = s + mask
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))


# %% masked_attention
def masked_attention(q, k, v, mask, grad_c):
    d = q.shape[-1]
    z = q @ np.swapaxes(k, -1, -2) / np.sqrt(d) + mask
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    dp = grad_c @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return p @ v, ds @ k / np.sqrt(d), np.swapaxes(ds, -1, -2) @ q / np.sqrt(d), np.swapaxes(p, -1, -2) @ grad_c


# %% dropout_backward
def dropout_backward(grad_y, mask, p):
    return grad_y * mask / (1 - p)


# %% attention_dropout_backward
def attention_dropout_backward(q, k, v, mask, p, grad_c):
    d = q.shape[-1]
    z = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    keep = mask / (1 - p)
    dp = (grad_c @ np.swapaxes(v, -1, -2)) * keep
    ds = weights * (dp - (dp * weights).sum(axis=-1, keepdims=True))
    return ds @ k / np.sqrt(d), np.swapaxes(ds, -1, -2) @ q / np.sqrt(d), np.swapaxes(weights * keep, -1, -2) @ grad_c


# %% layernorm_backward
def layernorm_backward(x, gamma, grad_y, eps):
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    g = grad_y * gamma
    dx = (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True)) / np.sqrt(
        x.var(-1, keepdims=True) + eps
    )
    return dx, (grad_y * xhat).sum(0), grad_y.sum(0)


# %% logsumexp_vjp
def logsumexp_vjp(g, ans, x):
    return (g[..., None] * np.exp(x - ans[..., None]),)


# %% logaddexp_vjp
def logaddexp_vjp(g, ans, a, b):
    grad_b = g * np.exp(b - ans)
    return g * np.exp(a - ans), grad_b.sum(axis=tuple(range(grad_b.ndim - np.ndim(b))))
