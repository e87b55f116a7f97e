"""An honest file written with Python loops over rows (slower than the reference, but derived by hand).

Used by tests/grading/test_grading_round3.py: every answer must keep its marks
under the "too slow for a derivation" limit.
"""

import numpy as np


def linear_backward(x, weight, grad_y):
    grad_x = np.zeros(x.shape)
    grad_weight = np.zeros(weight.shape)
    for n in range(x.shape[0]):  # one row at a time: y_n = W x_n
        grad_x[n] = weight.T @ grad_y[n]
        grad_weight += np.outer(grad_y[n], x[n])
    return grad_x, grad_weight, grad_y.sum(axis=0)


def affine_relu_backward(x, w, b, grad_out):
    grad_x, grad_w, grad_b = np.zeros(x.shape), np.zeros(w.shape), np.zeros(b.shape)
    for n in range(x.shape[0]):
        z = x[n] @ w + b
        grad_z = grad_out[n] * (z > 0)
        grad_x[n] = w @ grad_z
        grad_w += np.outer(x[n], grad_z)
        grad_b += grad_z
    return {"grad_z": grad_out * (x @ w + b > 0), "grad_x": grad_x, "grad_w": grad_w, "grad_b": grad_b}


def softmax_cross_entropy_backward(logits, y):
    rows = logits.shape[0]
    grad_log_p, grad_p, grad_logits = np.zeros(logits.shape), np.zeros(logits.shape), np.zeros(logits.shape)
    for n in range(rows):
        row = np.exp(logits[n] - logits[n].max())
        p = row / row.sum()
        grad_log_p[n, y[n]] = -1.0 / rows  # L = −mean of log_p at the labels
        grad_p[n] = grad_log_p[n] / p  # log's derivative: 1/p
        grad_logits[n] = p * (grad_p[n] - grad_p[n] @ p)  # the softmax's VJP
    return {"grad_log_p": grad_log_p, "grad_p": grad_p, "grad_logits": grad_logits}


def logaddexp_vjp(g, ans, a, b):
    grad_a = np.zeros(np.shape(a))
    grad_b = np.zeros(np.shape(b))
    for n in range(a.shape[0]):
        grad_a[n] = g[n] * np.exp(a[n] - ans[n])
        share = g[n] * np.exp(np.broadcast_to(b, a.shape)[n] - ans[n])
        if np.ndim(b) < np.ndim(a):
            grad_b += share
        else:
            grad_b[n] = share
    return grad_a, grad_b


def embedding_backward(tokens, table, grad_out):
    grad_table = np.zeros(table.shape)
    flat_tokens = tokens.reshape(-1)
    flat_grads = grad_out.reshape(-1, table.shape[1])
    for i in range(flat_tokens.size):
        grad_table[flat_tokens[i]] += flat_grads[i]
    return grad_table


def softmax_backward(p, grad_p):
    grad_s = np.zeros(p.shape)
    for index in np.ndindex(*p.shape[:-1]):
        grad_s[index] = p[index] * (grad_p[index] - grad_p[index] @ p[index])
    return grad_s
