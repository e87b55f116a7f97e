"""A teacher's own exercise: a small makemore-style MLP, its backward pass one named step at a time.

Load it with ``--exercises teacher_mlp.py`` on ``microtape exercises list|stub|check``
and ``microtape grade``; in a notebook, ``import`` it (or run it) before ``ex.check``.
"""

import numpy as np

import microtape.exercises as ex


def forward(x, w1, b1, w2, targets):
    """Two layers and a softmax cross-entropy, written out link by link (every argument a Tensor)."""
    pre = x @ w1 + b1  # [n, hidden]
    hidden = pre.tanh()
    logits = hidden @ w2  # [n, classes]
    counts = logits.exp()
    probs = counts / counts.sum(axis=1, keepdims=True)
    logprobs = probs.log()
    loss = -(logprobs * targets).sum(axis=1).mean()
    return {"pre": pre, "hidden": hidden, "logits": logits, "counts": counts, "probs": probs,
            "logprobs": logprobs, "loss": loss}  # fmt: skip


def inputs(rng, size):
    """One trial's float64 arrays: a batch of 4 to see, 8 hidden, 4096 in the one large trial."""
    n = {"visible": 4, "hidden": 8, "large": 4096}[size]
    labels = rng.integers(0, 3, size=n)
    return {
        "x": rng.standard_normal((n, 5)),
        "w1": 0.5 * rng.standard_normal((5, 6)),
        "b1": 0.1 * rng.standard_normal(6),
        "w2": 0.5 * rng.standard_normal((6, 3)),
        "targets": np.eye(3)[labels],  # one-hot rows
    }


def _probs_without_the_sum_path(x, w1, b1, w2, targets):
    """A known mistake: dL/dcounts taken as dL/dprobs / sum, forgetting that the sum depends on counts too."""
    hidden = np.tanh(x @ w1 + b1)
    counts = np.exp(hidden @ w2)
    total = counts.sum(axis=1, keepdims=True)
    probs = counts / total
    grad_probs = -targets / probs / len(x)
    return {"grad_counts": grad_probs / total}


ex.derivation(
    "mlp_cross_entropy_steps",
    forward,
    inputs=inputs,
    steps=["logprobs", "probs", "counts", "logits", "w2", "hidden", "pre", "b1", "w1"],
    points={"counts": 2},
    mistakes=[
        ex.Mistake(
            "sum_path_forgotten",
            "normaliser_held_fixed",
            "counts reaches probs twice: directly, and through the row sum that divides it. Add the sum's "
            "path: grad_counts = grad_probs / sum − rowsum(grad_probs · counts) / sum².",
            _probs_without_the_sum_path,
            step="counts",
            kind_label="the normaliser treated as a constant",
        )
    ],
    title="A makemore-style MLP's backward pass, step by step: logprobs → probs → counts → logits → …",
)
