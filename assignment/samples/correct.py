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


# %% layernorm_backward_steps
def layernorm_backward_steps(x, gamma, grad_y, eps):
    axis, count = -1, x.shape[-1]
    centred = x - x.mean(axis=axis, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(axis=axis, keepdims=True) + eps)
    grad_xhat = grad_y * gamma
    grad_var = np.sum(grad_xhat * centred, axis=axis, keepdims=True) * -0.5 * inv_std**3
    grad_mean = -np.sum(grad_xhat * inv_std, axis=axis, keepdims=True)
    grad_x = grad_xhat * inv_std + grad_var * 2.0 * centred / count + grad_mean / count
    return {
        "grad_xhat": grad_xhat,
        "grad_var": grad_var,
        "grad_mean": grad_mean,
        "grad_x": grad_x,
        "grad_gamma": np.sum(grad_y * centred * inv_std, axis=0),
        "grad_beta": np.sum(grad_y, axis=0),
    }


# %% batchnorm_backward
def batchnorm_backward(x, gamma, grad_y, eps):
    axis, count = 0, x.shape[0]
    centred = x - x.mean(axis=axis, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(axis=axis, keepdims=True) + eps)
    grad_xhat = grad_y * gamma
    grad_var = np.sum(grad_xhat * centred, axis=axis, keepdims=True) * -0.5 * inv_std**3
    grad_mean = -np.sum(grad_xhat * inv_std, axis=axis, keepdims=True)
    grad_x = grad_xhat * inv_std + grad_var * 2.0 * centred / count + grad_mean / count
    return {
        "grad_xhat": grad_xhat,
        "grad_var": grad_var,
        "grad_mean": grad_mean,
        "grad_x": grad_x,
        "grad_gamma": np.sum(grad_y * centred * inv_std, axis=0),
        "grad_beta": np.sum(grad_y, axis=0),
    }


# %% attention_backward_steps
def attention_backward_steps(q, k, v, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    grad_p = grad_c @ np.swapaxes(v, -1, -2)
    grad_s = p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True))
    return {
        "grad_weights": grad_p,
        "grad_scaled_scores": grad_s,
        "grad_q": grad_s @ k * scale,
        "grad_k": np.swapaxes(grad_s, -1, -2) @ q * scale,
        "grad_v": np.swapaxes(p, -1, -2) @ grad_c,
    }


# %% tiled_attention_backward
def tiled_attention_backward(q, k, v, o, lse, grad_o):
    scale = 1.0 / np.sqrt(q.shape[-1])
    kt = np.swapaxes(k, -1, -2)
    weights = np.exp(q @ kt * scale - lse[..., None])  # P = exp(S − L): no max, no row sum
    grad_v = np.swapaxes(weights, -1, -2) @ grad_o  # dV = Pᵀ dO
    grad_weights = grad_o @ np.swapaxes(v, -1, -2)  # dP = dO Vᵀ
    row_delta = np.sum(grad_o * o, axis=-1, keepdims=True)  # D = rowsum(dO ⊙ O) = rowsum(dP ⊙ P)
    grad_scores = weights * (grad_weights - row_delta)  # dS = P ⊙ (dP − D)
    grad_q = grad_scores @ k * scale
    grad_k = np.swapaxes(grad_scores, -1, -2) @ q * scale
    return grad_q, grad_k, grad_v


# %% conv1d_backward
def conv1d_backward(x, w, grad_y, stride, padding):
    padded = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    grad_padded = np.zeros_like(padded)
    grad_w = np.zeros_like(w)
    length = grad_y.shape[2]
    for k in range(w.shape[2]):
        # Kernel tap k met xp at stride·l + k in every window l: one strided slice.
        reach = slice(k, k + stride * (length - 1) + 1, stride)
        grad_padded[:, :, reach] += np.einsum("nol,oc->ncl", grad_y, w[:, :, k])
        grad_w[:, :, k] = np.einsum("nol,ncl->oc", grad_y, padded[:, :, reach])
    grad_b = grad_y.sum(axis=(0, 2))  # shared by the batch and every position
    return grad_padded[:, :, padding : padding + x.shape[2]], grad_w, grad_b


# %% conv2d_backward
def conv2d_backward(x, w, grad_y, stride, padding):
    padded = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    grad_padded = np.zeros_like(padded)
    grad_w = np.zeros_like(w)
    rows, cols = grad_y.shape[2:]
    for p in range(w.shape[2]):
        for q in range(w.shape[3]):
            # Kernel tap (p, q) met xp at (stride·i + p, stride·j + q) in every window (i, j).
            reach = (slice(None), slice(None), slice(p, p + stride * (rows - 1) + 1, stride),
                     slice(q, q + stride * (cols - 1) + 1, stride))  # fmt: skip
            grad_padded[reach] += np.einsum("noij,oc->ncij", grad_y, w[:, :, p, q])
            grad_w[:, :, p, q] = np.einsum("noij,ncij->oc", grad_y, padded[reach])
    grad_b = grad_y.sum(axis=(0, 2, 3))
    height, width = x.shape[2:]
    return grad_padded[:, :, padding : padding + height, padding : padding + width], grad_w, grad_b


# %% maxpool_backward
def maxpool_backward(x, grad_y, kernel, stride):
    windows = np.lib.stride_tricks.sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    flat = windows.reshape(*windows.shape[:4], kernel * kernel)
    rows, cols = np.divmod(np.argmax(flat, axis=-1), kernel)  # the arg-max's place in its window
    n, c, i, j = np.indices(rows.shape)
    grad_x = np.zeros_like(x)
    # Overlapping windows may share their maximum: add, never overwrite.
    np.add.at(grad_x, (n, c, stride * i + rows, stride * j + cols), grad_y)
    return grad_x


# %% avgpool_backward
def avgpool_backward(x, grad_y, kernel, stride):
    rows, cols = grad_y.shape[2:]
    grad_x = np.zeros_like(x)
    for p in range(kernel):
        for q in range(kernel):
            # Entry (p, q) of every window: one slice with the stride as its step.
            grad_x[:, :, p : p + stride * (rows - 1) + 1 : stride, q : q + stride * (cols - 1) + 1 : stride] += (
                grad_y / kernel**2
            )
    return grad_x


# %% rnn_bptt
def rnn_bptt(x, h0, W_xh, W_hh, b, grad_h):
    states = [h0]  # the forward, every state kept: states[t + 1] is h_t
    for t in range(x.shape[0]):
        states.append(np.tanh(x[t] @ W_xh.T + states[-1] @ W_hh.T + b))
    grad_W_xh, grad_W_hh, grad_b = np.zeros_like(W_xh), np.zeros_like(W_hh), np.zeros_like(b)
    grad_x = np.zeros_like(x)
    carry = np.zeros_like(h0)  # what h_t receives from step t + 1
    for t in reversed(range(x.shape[0])):
        grad_z = (grad_h[t] + carry) * (1.0 - states[t + 1] ** 2)  # tanh' = 1 − h_t²
        grad_W_xh += grad_z.T @ x[t]  # the same weights at every step: add up over time
        grad_W_hh += grad_z.T @ states[t]  # W_hh met the previous state
        grad_b += grad_z.sum(axis=0)
        grad_x[t] = grad_z @ W_xh
        carry = grad_z @ W_hh  # back to h_{t−1}
    return grad_W_xh, grad_W_hh, grad_b, carry, grad_x


# %% gru_cell_backward
def gru_cell_backward(x, h, W_ih, W_hh, b_ih, b_hh, grad_h_next):
    def sigmoid(a):
        return 0.5 * (1.0 + np.tanh(0.5 * a))  # 1 / (1 + exp(−a)), never overflows

    g = grad_h_next
    i_r, i_z, i_n = np.split(x @ W_ih.T + b_ih, 3, axis=1)  # the forward, recomputed
    h_r, h_z, h_n = np.split(h @ W_hh.T + b_hh, 3, axis=1)
    r, z = sigmoid(i_r + h_r), sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    # h_next = (1 − z) n + z h
    grad_n, grad_z = g * (1.0 - z), g * (h - n)
    grad_an = grad_n * (1.0 - n**2)  # n = tanh(a_n), a_n = i_n + r h_n
    grad_ar = grad_an * h_n * r * (1.0 - r)  # r = σ(a_r), reached through r h_n
    grad_az = grad_z * z * (1.0 - z)
    grad_gi = np.concatenate([grad_ar, grad_az, grad_an], axis=1)
    grad_gh = np.concatenate([grad_ar, grad_az, grad_an * r], axis=1)  # h_n was gated by r
    grad_x = grad_gi @ W_ih
    grad_h = grad_gh @ W_hh + g * z  # through gh, and straight through z h
    return grad_x, grad_h, grad_gi.T @ x, grad_gh.T @ h, grad_gi.sum(axis=0), grad_gh.sum(axis=0)


# %% softmax_jvp
def softmax_jvp(s, ds):
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))  # stable: the row max taken out
    p = e / np.sum(e, axis=-1, keepdims=True)
    # dp_j = Σ_i p_j (δ_ij − p_i) ds_i = p_j (ds_j − Σ_i p_i ds_i)
    return p * (ds - np.sum(p * ds, axis=-1, keepdims=True))


# %% logsumexp_hvp
def logsumexp_hvp(x, v):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    p = e / np.sum(e, axis=-1, keepdims=True)  # the gradient of each row's logsumexp
    # H = diag(p) − p pᵀ per row: H v = p ⊙ v − p (p · v)
    return p * (v - np.sum(p * v, axis=-1, keepdims=True))
