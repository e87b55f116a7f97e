"""Reference solution to makemore's backprop ninja — for teachers, never in the student handout.

Every one of the 26 links by hand, in the order of the forward's lines read
backwards, the way makemore part 4 asks for them: each step is computed from
the steps just above it and the forward's values, nothing fused.
``instructor/solutions.py`` merges :data:`SOLUTIONS` into its own.
"""

import numpy as np

__all__ = ["backprop_ninja", "SOLUTIONS"]

EPS = 1e-5  # batch norm's epsilon, as in the forward


def _forward(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    """The forward in numpy, every intermediate kept by name."""
    n = len(xb)
    f = {"n": n, "xb": xb.astype(np.int64), "yb": yb.astype(np.int64)}
    f["emb"] = C[f["xb"]]
    f["embcat"] = f["emb"].reshape(n, -1)
    f["hprebn"] = f["embcat"] @ W1 + b1
    f["bnmeani"] = f["hprebn"].sum(axis=0, keepdims=True) / n
    f["bndiff"] = f["hprebn"] - f["bnmeani"]
    f["bndiff2"] = f["bndiff"] ** 2
    f["bnvar"] = f["bndiff2"].sum(axis=0, keepdims=True) / (n - 1)
    f["bnvar_inv"] = (f["bnvar"] + EPS) ** -0.5
    f["bnraw"] = f["bndiff"] * f["bnvar_inv"]
    f["h"] = np.tanh(bngain * f["bnraw"] + bnbias)
    f["logits"] = f["h"] @ W2 + b2
    f["logit_maxes"] = f["logits"].max(axis=1, keepdims=True)
    f["counts"] = np.exp(f["logits"] - f["logit_maxes"])
    f["counts_sum"] = f["counts"].sum(axis=1, keepdims=True)
    f["counts_sum_inv"] = f["counts_sum"] ** -1
    f["probs"] = f["counts"] * f["counts_sum_inv"]
    return f


def _through_the_loss(f):
    """logprobs → … → logits: the cross-entropy written out, link by link."""
    n, rows = f["n"], np.arange(f["n"])
    g = {}
    g["grad_logprobs"] = np.zeros_like(f["probs"])
    g["grad_logprobs"][rows, f["yb"]] = -1.0 / n  # loss = −mean of the picked entries
    g["grad_probs"] = g["grad_logprobs"] / f["probs"]  # log
    g["grad_counts_sum_inv"] = (g["grad_probs"] * f["counts"]).sum(axis=1, keepdims=True)  # broadcast summed
    g["grad_counts_sum"] = -g["grad_counts_sum_inv"] * f["counts_sum"] ** -2  # d(x⁻¹) = −x⁻²
    # counts reaches the loss through probs and through counts_sum: two paths, added
    g["grad_counts"] = g["grad_probs"] * f["counts_sum_inv"] + g["grad_counts_sum"]
    g["grad_norm_logits"] = g["grad_counts"] * f["counts"]  # exp' = exp
    g["grad_logit_maxes"] = -g["grad_norm_logits"].sum(axis=1, keepdims=True)  # ~0: the max never changes the loss
    arg_max = f["logits"] == f["logit_maxes"]
    g["grad_logits"] = g["grad_norm_logits"] + arg_max * g["grad_logit_maxes"]  # the max routes to its arg-max
    return g


def _through_the_norm(f, g, bngain, W2):
    """h → … → hprebn: tanh, then the batch norm written out."""
    n = f["n"]
    g["grad_h"] = g["grad_logits"] @ W2.T
    g["grad_W2"] = f["h"].T @ g["grad_logits"]
    g["grad_b2"] = g["grad_logits"].sum(axis=0)
    g["grad_hpreact"] = g["grad_h"] * (1 - f["h"] ** 2)  # tanh' = 1 − tanh²
    g["grad_bngain"] = (g["grad_hpreact"] * f["bnraw"]).sum(axis=0, keepdims=True)
    g["grad_bnbias"] = g["grad_hpreact"].sum(axis=0, keepdims=True)
    g["grad_bnraw"] = g["grad_hpreact"] * bngain
    g["grad_bnvar_inv"] = (g["grad_bnraw"] * f["bndiff"]).sum(axis=0, keepdims=True)
    g["grad_bnvar"] = g["grad_bnvar_inv"] * -0.5 * (f["bnvar"] + EPS) ** -1.5
    g["grad_bndiff2"] = np.ones_like(f["bndiff2"]) * g["grad_bnvar"] / (n - 1)  # Bessel: n − 1
    g["grad_bndiff"] = g["grad_bnraw"] * f["bnvar_inv"] + 2 * f["bndiff"] * g["grad_bndiff2"]  # two paths
    g["grad_bnmeani"] = -g["grad_bndiff"].sum(axis=0, keepdims=True)
    g["grad_hprebn"] = g["grad_bndiff"] + np.ones_like(f["hprebn"]) * g["grad_bnmeani"] / n  # two paths
    return g


def backprop_ninja(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    f = _forward(xb, yb, C, W1, b1, bngain, bnbias, W2, b2)
    g = _through_the_norm(f, _through_the_loss(f), bngain, W2)
    g["grad_embcat"] = g["grad_hprebn"] @ W1.T
    g["grad_W1"] = f["embcat"].T @ g["grad_hprebn"]
    g["grad_b1"] = g["grad_hprebn"].sum(axis=0)
    g["grad_emb"] = g["grad_embcat"].reshape(f["emb"].shape)
    g["grad_C"] = np.zeros_like(C)
    np.add.at(g["grad_C"], f["xb"], g["grad_emb"])  # a character read twice gets both gradients
    return g


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}
