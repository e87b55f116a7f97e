"""Exercise (stepped): makemore's "backprop ninja" — 26 links of a character-level MLP, by hand.

The chain of Karpathy's makemore part 4: an embedding table ``C``, a linear
layer, a batch norm written out (bnmeani, bndiff, bndiff2, bnvar with
Bessel's n − 1, bnvar_inv, bnraw), tanh, a second linear layer and the
cross-entropy written out (logit_maxes, norm_logits, counts, counts_sum,
counts_sum_inv, probs, logprobs). The student returns the gradient of every
one of its 26 intermediates and parameters, from ``logprobs`` back to ``C``;
each link is judged against the tape (:mod:`microtape.exercises.links`), so a
wrong middle link is named and the links computed correctly from it are
carried. Declared with :func:`microtape.exercises.derivation`, as a teacher
declares an exercise of their own.

The characters and targets arrive as float64 arrays of whole numbers (every
argument of a derivation is float64); the forward and the student turn them
into indices.
"""

import numpy as np

from .. import Mistake, derivation

__all__ = ["backprop_ninja", "forward", "inputs", "EXERCISE", "EPS"]

#: Batch norm's epsilon, as in makemore.
EPS = 1e-5

#: (batch, vocabulary, block, embedding, hidden) per trial size: makemore's sizes to see (27 characters,
#: 3 of context, 10-dimensional embeddings, 64 hidden units; a batch of 30, not makemore's 32, so that no
#: step is a power of two that float32 would hold exactly), other sizes hidden, and a large trial of some
#: 26 000 parameters: numerical differentiation, one forward per entry, runs out of time.
SIZES = {"visible": (30, 27, 3, 10, 64), "hidden": (24, 27, 4, 6, 40), "large": (2048, 27, 8, 16, 160)}


def forward(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    """makemore part 4's forward, one named intermediate per line (every argument a Tensor)."""
    n = xb.shape[0]
    emb = C[np.asarray(xb.data, dtype=np.int64)]  # [n, block, n_embd]: a row of C per character
    embcat = emb.reshape(n, -1)  # [n, block · n_embd]
    hprebn = embcat @ W1 + b1  # [n, hidden]
    # batch norm, written out
    bnmeani = hprebn.sum(axis=0, keepdims=True) * (1 / n)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff**2
    bnvar = bndiff2.sum(axis=0, keepdims=True) * (1 / (n - 1))  # Bessel's correction: n − 1
    bnvar_inv = (bnvar + EPS) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = hpreact.tanh()
    logits = h @ W2 + b2  # [n, vocab]
    # the cross-entropy, written out
    logit_maxes = logits.max(axis=1, keepdims=True)
    norm_logits = logits - logit_maxes  # subtract each row's max: exp cannot overflow
    counts = norm_logits.exp()
    counts_sum = counts.sum(axis=1, keepdims=True)
    counts_sum_inv = counts_sum**-1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[np.arange(n), np.asarray(yb.data, dtype=np.int64)].mean()
    return {"emb": emb, "embcat": embcat, "hprebn": hprebn, "bnmeani": bnmeani, "bndiff": bndiff,
            "bndiff2": bndiff2, "bnvar": bnvar, "bnvar_inv": bnvar_inv, "bnraw": bnraw, "hpreact": hpreact,
            "h": h, "logits": logits, "logit_maxes": logit_maxes, "norm_logits": norm_logits, "counts": counts,
            "counts_sum": counts_sum, "counts_sum_inv": counts_sum_inv, "probs": probs, "logprobs": logprobs,
            "loss": loss}  # fmt: skip


def inputs(rng, size):
    """One trial: a batch of contexts and next characters, and parameters scaled as makemore's are."""
    n, vocab, block, n_embd, hidden = SIZES[size]
    fan_in = block * n_embd
    return {
        "xb": rng.integers(0, vocab, size=(n, block)).astype(np.float64),
        "yb": rng.integers(0, vocab, size=n).astype(np.float64),
        "C": rng.standard_normal((vocab, n_embd)),
        "W1": rng.standard_normal((fan_in, hidden)) * (5 / 3) / fan_in**0.5,
        "b1": rng.standard_normal(hidden) * 0.1,
        "bngain": 1 + 0.1 * rng.standard_normal((1, hidden)),
        "bnbias": 0.1 * rng.standard_normal((1, hidden)),
        "W2": rng.standard_normal((hidden, vocab)) * 0.1,
        "b2": rng.standard_normal(vocab) * 0.1,
    }


#: The steps, from the loss back: makemore's order of ``cmp`` lines.
STEPS = (
    "logprobs", "probs", "counts_sum_inv", "counts_sum", "counts", "norm_logits", "logit_maxes", "logits",
    "h", "W2", "b2", "hpreact", "bngain", "bnbias", "bnraw", "bnvar_inv", "bnvar", "bndiff2", "bndiff",
    "bnmeani", "hprebn", "embcat", "W1", "b1", "emb", "C",
)  # fmt: skip


def _values(arrays):
    """The forward in numpy (what a mistake's step is computed from), and the right upstream gradients.

    It takes the arrays as one tuple: no function of the package takes the student's arguments and
    returns a right step.
    """
    xb, yb, C, W1, b1, bngain, bnbias, W2, b2 = arrays
    n = len(xb)
    v = {"n": n, "xb": xb.astype(np.int64), "yb": yb.astype(np.int64)}
    v["emb"] = C[v["xb"]]
    v["hprebn"] = v["emb"].reshape(n, -1) @ W1 + b1
    v["bndiff"] = v["hprebn"] - v["hprebn"].mean(axis=0, keepdims=True)
    v["bnvar"] = (v["bndiff"] ** 2).sum(axis=0, keepdims=True) / (n - 1)
    v["bnvar_inv"] = (v["bnvar"] + EPS) ** -0.5
    v["bnraw"] = v["bndiff"] * v["bnvar_inv"]
    v["h"] = np.tanh(bngain * v["bnraw"] + bnbias)
    logits = v["h"] @ W2 + b2
    counts = np.exp(logits - logits.max(axis=1, keepdims=True))
    v["counts_sum"] = counts.sum(axis=1, keepdims=True)
    v["probs"] = counts / v["counts_sum"]
    # dL/dlogits, all in one (softmax's Jacobian with the one-hot): probs − onehot, over n
    grad_logits = v["probs"].copy()
    grad_logits[np.arange(n), v["yb"]] -= 1
    v["grad_logits"] = grad_logits / n
    v["grad_hpreact"] = (v["grad_logits"] @ W2.T) * (1 - v["h"] ** 2)
    return v


def _counts_sum_one_power(*args):
    v = _values(args)
    # the right link: grad_counts_sum = grad_counts_sum_inv · (−1/counts_sum²)
    counts = v["probs"] * v["counts_sum"]
    grad_probs = np.zeros_like(v["probs"])
    grad_probs[np.arange(v["n"]), v["yb"]] = -1 / (v["n"] * v["probs"][np.arange(v["n"]), v["yb"]])
    grad_counts_sum_inv = (grad_probs * counts).sum(axis=1, keepdims=True)
    return {"grad_counts_sum": -grad_counts_sum_inv / v["counts_sum"]}


def _logprobs_no_mean(*args):
    v = _values(args)
    grad_logprobs = np.zeros_like(v["probs"])
    grad_logprobs[np.arange(v["n"]), v["yb"]] = -1.0
    return {"grad_logprobs": grad_logprobs}


def _tanh_of_the_input(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    v = _values((xb, yb, C, W1, b1, bngain, bnbias, W2, b2))
    hpreact = bngain * v["bnraw"] + bnbias
    return {"grad_hpreact": (v["grad_logits"] @ W2.T) * (1 - hpreact**2)}


def _bnbias_not_summed(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    v = _values((xb, yb, C, W1, b1, bngain, bnbias, W2, b2))
    return {"grad_bnbias": v["grad_hpreact"].mean(axis=0, keepdims=True)}


def _bnvar_by_n(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    v = _values((xb, yb, C, W1, b1, bngain, bnbias, W2, b2))
    grad_bnraw = bngain * v["grad_hpreact"]
    grad_bnvar_inv = (grad_bnraw * v["bndiff"]).sum(axis=0, keepdims=True)
    grad_bnvar = grad_bnvar_inv * -0.5 * (v["bnvar"] + EPS) ** -1.5
    return {"grad_bndiff2": np.ones_like(v["bndiff"]) * grad_bnvar / v["n"]}


def _bndiff_one_path(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    v = _values((xb, yb, C, W1, b1, bngain, bnbias, W2, b2))
    return {"grad_bndiff": bngain * v["grad_hpreact"] * v["bnvar_inv"]}


def _repeats_dropped(xb, yb, C, W1, b1, bngain, bnbias, W2, b2):
    v = _values((xb, yb, C, W1, b1, bngain, bnbias, W2, b2))
    # the whole right chain down to emb (batch norm's backward in one line), then a plain assignment
    grad_bnraw = bngain * v["grad_hpreact"]
    n = v["n"]
    along_bnraw = (grad_bnraw * v["bnraw"]).sum(0)  # the part of the gradient along bnraw, per feature
    grad_hprebn = v["bnvar_inv"] / n * (n * grad_bnraw - grad_bnraw.sum(0) - n / (n - 1) * v["bnraw"] * along_bnraw)
    grad_emb = (grad_hprebn @ W1.T).reshape(v["emb"].shape)
    grad_C = np.zeros_like(C)
    grad_C[v["xb"]] = grad_emb  # a row used twice keeps only its last gradient
    return {"grad_C": grad_C}


MISTAKES = (
    Mistake(
        "logprobs_mean_forgotten",
        "missing_mean",
        "the loss is the mean over the batch of −logprobs at the targets: each picked entry's gradient is "
        "−1/n, not −1 (the others are 0).",
        _logprobs_no_mean,
        step="grad_logprobs",
    ),
    Mistake(
        "counts_sum_inv_one_power",
        "wrong_derivative",
        "counts_sum_inv = counts_sum⁻¹, and d(x⁻¹)/dx = −x⁻²: multiply the gradient arriving at counts_sum_inv by "
        "−1/counts_sum², squared, not −1/counts_sum.",
        _counts_sum_one_power,
        step="grad_counts_sum",
    ),
    Mistake(
        "tanh_of_the_input",
        "wrong_derivative",
        "h = tanh(hpreact), and tanh' = 1 − tanh² = 1 − h²: square the output h, not the input hpreact.",
        _tanh_of_the_input,
        step="grad_hpreact",
    ),
    Mistake(
        "bnbias_mean_not_sum",
        "broadcast_not_summed",
        "bnbias [1, hidden] is broadcast over the n rows of the batch: its gradient is the sum over the batch "
        "(axis 0, keepdims) of the gradient arriving at hpreact, not the mean.",
        _bnbias_not_summed,
        step="grad_bnbias",
    ),
    Mistake(
        "bnvar_bessel_n",
        "wrong_divisor",
        "bnvar divides the sum of bndiff2 by n − 1 (Bessel's correction), so each entry of bndiff2 gets "
        "bnvar's gradient divided by n − 1, not by n.",
        _bnvar_by_n,
        step="grad_bndiff2",
    ),
    Mistake(
        "bndiff_one_path",
        "missing_path",
        "bndiff is used twice: in bnraw = bndiff · bnvar_inv and in bndiff2 = bndiff². Add the second path: "
        "2 · bndiff times the gradient of bndiff2.",
        _bndiff_one_path,
        step="grad_bndiff",
    ),
    Mistake(
        "emb_repeats_not_added",
        "repeats_dropped",
        "a character appears many times in a batch: every position that read row C[i] sends it a gradient, and "
        "they add up (np.add.at(grad_C, xb, ...)); an assignment grad_C[xb] = ... keeps only the last one.",
        _repeats_dropped,
        step="grad_C",
    ),
)

EXERCISE = derivation(
    "backprop_ninja",
    forward,
    inputs=inputs,
    steps=STEPS,
    mistakes=MISTAKES,
    title="makemore's backprop ninja: 26 links by hand, from logprobs back through batch norm to the embedding C",
)

#: The stub the student fills in (made from the forward's signature; its docstring is the prompt).
backprop_ninja = EXERCISE.stub
#: The trials ``ex.derivation`` made from :func:`inputs`: visible ones, then hidden ones and the large one.
VISIBLE, HIDDEN = EXERCISE.visible, EXERCISE.hidden
