"""A student's answer to docs/examples/teacher_mlp.py: the row sum's path forgotten in grad_counts, grad_w1 doubled."""

import numpy as np


def mlp_cross_entropy_steps(x, w1, b1, w2, targets):
    n = len(x)
    pre = x @ w1 + b1
    hidden = np.tanh(pre)
    logits = hidden @ w2
    counts = np.exp(logits)
    total = counts.sum(axis=1, keepdims=True)
    probs = counts / total
    grad_logprobs = -targets / n
    grad_probs = grad_logprobs / probs
    grad_counts = grad_probs / total  # the row sum's path forgotten
    grad_logits = grad_counts * counts
    grad_w2 = hidden.T @ grad_logits
    grad_hidden = grad_logits @ w2.T
    grad_pre = grad_hidden * (1 - hidden**2)
    return {
        "grad_logprobs": grad_logprobs,
        "grad_probs": grad_probs,
        "grad_counts": grad_counts,
        "grad_logits": grad_logits,
        "grad_w2": grad_w2,
        "grad_hidden": grad_hidden,
        "grad_pre": grad_pre,
        "grad_b1": grad_pre.sum(axis=0),
        "grad_w1": x.T @ grad_pre * 2,
    }
