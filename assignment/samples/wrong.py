# A sample submission: every exercise attempted, none right (expected: 0 points).
# Each "# %% NAME" section is the answer cell of exercise NAME in the student notebook.

# %% softmax_backward
def softmax_backward(p, grad_p):
    return p * grad_p  # no rowsum term


# %% linear_backward
def linear_backward(x, weight, grad_y):
    return (grad_y @ weight).astype(np.float32), (grad_y.T @ x).astype(np.float32), grad_y.sum(0).astype(np.float32)


# %% tanh_layer_backward
def tanh_layer_backward(x, weight, bias, grad_h):
    z = x @ weight.T + bias
    dz = grad_h * (1 - z * z)  # tanh' taken at z instead of h
    return {"z": dz, "x": dz @ weight, "weight": dz.T @ x, "bias": dz.sum(axis=0)}


# %% attention_backward
def attention_backward(q, k, v, grad_c):
    e = np.exp(q @ np.swapaxes(k, -1, -2))  # no 1/√d, and not stabilised
    p = e / e.sum(axis=-1, keepdims=True)
    dp = grad_c @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ grad_c


# %% masked_softmax_backward
def masked_softmax_backward(s, mask, grad_p):
    e = np.exp(s - s.max(axis=-1, keepdims=True))  # the mask is forgotten
    p = e / e.sum(axis=-1, keepdims=True)
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))


# %% masked_attention
def masked_attention(q, k, v, mask, grad_c):
    return 0.0 * q, 0.0 * q, 0.0 * k, 0.0 * v  # placeholders


# %% dropout_backward
def dropout_backward(grad_y, mask, p):
    return grad_y * mask  # the 1/(1 − p) is missing


# %% attention_dropout_backward
def attention_dropout_backward(q, k, v, mask, p, grad_c):
    return -q, -k, -v


# %% layernorm_backward
def layernorm_backward(x, gamma, grad_y, eps):
    return grad_y.T, gamma, grad_y


# %% logsumexp_vjp
def logsumexp_vjp(g, ans, x):
    return (g[..., None] * np.exp(x),)  # not divided by the sum


# %% logaddexp_vjp
def logaddexp_vjp(g, ans, a, b):
    return g * np.exp(b - ans), g * np.exp(a - ans)  # swapped
