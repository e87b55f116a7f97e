# A sample submission: some exercises right, some partly right, two not started.
# Each "# %% NAME" section is the answer cell of exercise NAME in the student notebook;
# exercises without a section keep the stub (not started).

# %% softmax_backward
def softmax_backward(p, grad_p):
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))


# %% linear_backward
def linear_backward(x, weight, grad_y):
    return grad_y @ weight, grad_y.T @ x, grad_y  # the bias gradient is not summed over the rows


# %% tanh_layer_backward
def tanh_layer_backward(x, weight, bias, grad_h):
    h = np.tanh(x @ weight.T + bias)
    dz = grad_h * (1 - h * h)
    return {"z": dz, "x": dz @ weight, "weight": x.T @ dz, "bias": dz.sum(axis=0)}  # weight transposed


# %% attention_backward
def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_backward(q, k, v, grad_c):
    d = q.shape[-1]
    p = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(d))
    dp = grad_c @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ grad_c  # no 1/√d on dQ, dK


# %% masked_softmax_backward
def masked_softmax_backward(s, mask, grad_p):
    p = softmax(s + mask)
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))


# %% dropout_backward
def dropout_backward(grad_y, mask, p):
    return grad_y * mask / (1 - p)


# %% attention_dropout_backward
def attention_dropout_backward(q, k, v, mask, p, grad_c):
    d = q.shape[-1]
    weights = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(d))
    keep = mask / (1 - p)
    dp = (grad_c @ np.swapaxes(v, -1, -2)) * keep
    ds = weights * (dp - (dp * weights).sum(axis=-1, keepdims=True))
    dv = np.swapaxes(weights, -1, -2) @ grad_c  # forgot that V met the dropped weights
    return ds @ k / np.sqrt(d), np.swapaxes(ds, -1, -2) @ q / np.sqrt(d), dv


# %% logsumexp_vjp
def logsumexp_vjp(g, ans, x):
    e = np.exp(x)  # not stabilised: rows of size ±1000 overflow
    return (g[..., None] * e / e.sum(axis=-1, keepdims=True),)


# %% logaddexp_vjp
def logaddexp_vjp(g, ans, a, b):
    grad_b = g * np.exp(b - ans)
    return g * np.exp(a - ans), grad_b  # b's gradient not summed back where b was broadcast
