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
    dropped = grad_c @ np.swapaxes(v, -1, -2)
    dp = dropped * keep
    ds = weights * (dp - (dp * weights).sum(axis=-1, keepdims=True))
    dv = np.swapaxes(weights, -1, -2) @ grad_c  # forgot that V met the dropped weights
    return {
        "grad_dropped_weights": dropped,
        "grad_v": dv,
        "grad_weights": dp,
        "grad_scaled_scores": ds,
        "grad_q": ds @ k / np.sqrt(d),
        "grad_k": np.swapaxes(ds, -1, -2) @ q / np.sqrt(d),
    }


# %% logsumexp_vjp
def logsumexp_vjp(g, ans, x):
    e = np.exp(x)  # not stabilised: rows of size ±1000 overflow
    return (g[..., None] * e / e.sum(axis=-1, keepdims=True),)


# %% logaddexp_vjp
def logaddexp_vjp(g, ans, a, b):
    grad_b = g * np.exp(b - ans)
    return g * np.exp(a - ans), grad_b  # b's gradient not summed back where b was broadcast


# %% backprop_ninja
def backprop_ninja(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    n, rows, eps = len(xb), np.arange(len(xb)), 1e-5
    xb, yb = xb.astype(int), yb.astype(int)
    emb = C[xb]  # the forward, recomputed
    embcat = emb.reshape(n, -1)
    hprebn = embcat @ W1 + b1
    bndiff = hprebn - hprebn.mean(axis=0, keepdims=True)
    bnvar = (bndiff**2).sum(axis=0, keepdims=True) / (n - 1)  # Bessel: n − 1
    bnvar_inv = (bnvar + eps) ** -0.5
    bnraw = bndiff * bnvar_inv
    h = np.tanh(bngain * bnraw + bnbias)
    logits = h @ W2 + b2
    logit_maxes = logits.max(axis=1, keepdims=True)
    counts = np.exp(logits - logit_maxes)
    counts_sum = counts.sum(axis=1, keepdims=True)
    probs = counts / counts_sum
    g = {"grad_logprobs": np.zeros_like(probs)}  # then one link per line
    g["grad_logprobs"][rows, yb] = -1 / n
    g["grad_probs"] = g["grad_logprobs"] / probs
    g["grad_counts_sum_inv"] = (g["grad_probs"] * counts).sum(axis=1, keepdims=True)
    g["grad_counts_sum"] = (
        -g["grad_counts_sum_inv"] / counts_sum
    )  # d(1/x) taken as −1/x: one link wrong, the rest carried
    g["grad_counts"] = g["grad_probs"] / counts_sum + g["grad_counts_sum"]
    g["grad_norm_logits"] = g["grad_counts"] * counts
    g["grad_logit_maxes"] = -g["grad_norm_logits"].sum(axis=1, keepdims=True)
    g["grad_logits"] = g["grad_norm_logits"] + (logits == logit_maxes) * g["grad_logit_maxes"]
    g["grad_h"] = g["grad_logits"] @ W2.T
    g["grad_W2"] = h.T @ g["grad_logits"]
    g["grad_b2"] = g["grad_logits"].sum(axis=0)
    g["grad_hpreact"] = g["grad_h"] * (1 - h**2)
    g["grad_bngain"] = (g["grad_hpreact"] * bnraw).sum(axis=0, keepdims=True)
    g["grad_bnbias"] = g["grad_hpreact"].sum(axis=0, keepdims=True)
    g["grad_bnraw"] = g["grad_hpreact"] * bngain
    g["grad_bnvar_inv"] = (g["grad_bnraw"] * bndiff).sum(axis=0, keepdims=True)
    g["grad_bnvar"] = g["grad_bnvar_inv"] * -0.5 * (bnvar + eps) ** -1.5
    g["grad_bndiff2"] = np.ones_like(bndiff) * g["grad_bnvar"] / (n - 1)
    g["grad_bndiff"] = g["grad_bnraw"] * bnvar_inv + 2 * bndiff * g["grad_bndiff2"]
    g["grad_bnmeani"] = -g["grad_bndiff"].sum(axis=0, keepdims=True)
    g["grad_hprebn"] = g["grad_bndiff"] + g["grad_bnmeani"] / n
    g["grad_embcat"] = g["grad_hprebn"] @ W1.T
    g["grad_W1"] = embcat.T @ g["grad_hprebn"]
    g["grad_b1"] = g["grad_hprebn"].sum(axis=0)
    g["grad_emb"] = g["grad_embcat"].reshape(emb.shape)
    g["grad_C"] = np.zeros_like(C)
    np.add.at(g["grad_C"], xb, g["grad_emb"])  # a character read twice gets both gradients
    return g
