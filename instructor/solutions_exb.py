"""Reference solutions to the exb batch of exercises (convolution, pooling, recurrent nets,
forward mode, second order, tiled attention) — for teachers, never in the student handout.

Plain numpy, the chain rule one link at a time; the checker judges them
against the tape. ``instructor/solutions.py`` merges :data:`SOLUTIONS` into its own.
"""

import numpy as np

__all__ = [
    "conv1d_backward",
    "conv2d_backward",
    "maxpool_backward",
    "avgpool_backward",
    "rnn_bptt",
    "gru_cell_backward",
    "softmax_jvp",
    "logsumexp_hvp",
    "tiled_attention_backward",
    "SOLUTIONS",
]


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


def maxpool_backward(x, grad_y, kernel, stride):
    windows = np.lib.stride_tricks.sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    flat = windows.reshape(*windows.shape[:4], kernel * kernel)
    rows, cols = np.divmod(np.argmax(flat, axis=-1), kernel)  # the arg-max's place in its window
    n, c, i, j = np.indices(rows.shape)
    grad_x = np.zeros_like(x)
    # Overlapping windows may share their maximum: add, never overwrite.
    np.add.at(grad_x, (n, c, stride * i + rows, stride * j + cols), grad_y)
    return grad_x


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


def rnn_bptt(x, h0, W_xh, W_hh, b, grad_h):
    states = [h0]  # the forward, every state kept: states[t + 1] is h_t
    for t in range(x.shape[0]):
        states.append(np.tanh(x[t] @ W_xh.T + states[-1] @ W_hh.T + b))
    grad_W_xh, grad_W_hh, grad_b = np.zeros_like(W_xh), np.zeros_like(W_hh), np.zeros_like(b)
    grad_x, steps = np.zeros_like(x), {}
    carry = np.zeros_like(h0)  # what h_t receives from step t + 1
    for t in reversed(range(x.shape[0])):
        grad_z = (grad_h[t] + carry) * (1.0 - states[t + 1] ** 2)  # tanh' = 1 − h_t²
        steps[f"grad_z{t + 1}"] = grad_z  # z_1 … z_3: a step per time step
        grad_W_xh += grad_z.T @ x[t]  # the same weights at every step: add up over time
        grad_W_hh += grad_z.T @ states[t]  # W_hh met the previous state
        grad_b += grad_z.sum(axis=0)
        grad_x[t] = grad_z @ W_xh
        carry = grad_z @ W_hh  # back to h_{t−1}
    return {
        **steps,
        "grad_h0": carry,
        "grad_x": grad_x,
        "grad_W_xh": grad_W_xh,
        "grad_W_hh": grad_W_hh,
        "grad_b": grad_b,
    }


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
    grad_r = grad_an * h_n  # reached through r h_n
    grad_ar = grad_r * r * (1.0 - r)  # r = σ(a_r)
    grad_az = grad_z * z * (1.0 - z)
    grad_gi = np.concatenate([grad_ar, grad_az, grad_an], axis=1)
    grad_gh = np.concatenate([grad_ar, grad_az, grad_an * r], axis=1)  # h_n was gated by r
    grad_x = grad_gi @ W_ih
    grad_h = grad_gh @ W_hh + g * z  # through gh, and straight through z h
    return {
        "grad_n": grad_n,
        "grad_z": grad_z,
        "grad_r": grad_r,
        "grad_gi": grad_gi,
        "grad_gh": grad_gh,
        "grad_x": grad_x,
        "grad_h": grad_h,
        "grad_W_ih": grad_gi.T @ x,
        "grad_W_hh": grad_gh.T @ h,
        "grad_b_ih": grad_gi.sum(axis=0),
        "grad_b_hh": grad_gh.sum(axis=0),
    }


def softmax_jvp(s, ds):
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))  # stable: the row max taken out
    p = e / np.sum(e, axis=-1, keepdims=True)
    # dp_j = Σ_i p_j (δ_ij − p_i) ds_i = p_j (ds_j − Σ_i p_i ds_i)
    return p * (ds - np.sum(p * ds, axis=-1, keepdims=True))


def logsumexp_hvp(x, v):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    p = e / np.sum(e, axis=-1, keepdims=True)  # the gradient of each row's logsumexp
    # H = diag(p) − p pᵀ per row: H v = p ⊙ v − p (p · v)
    return p * (v - np.sum(p * v, axis=-1, keepdims=True))


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


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}
