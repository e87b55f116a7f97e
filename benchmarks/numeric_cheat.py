"""``python -m benchmarks.numeric_cheat``: how long the forward differentiated entry by entry takes on each large trial.

Issue #35: a submission that differentiates the forward pass numerically —
finite differences, or the complex step (one forward per input entry, exact to
machine precision) — must not finish the large hidden trial within the time
limit, while a derivation answers it in milliseconds. For a representative
set of exercises (the cheap forwards first: elementwise, losses, lookups) this
times the forward in complex arithmetic on the large trial's inputs, as such a
submission would run it, multiplies by the number of entries it must perturb,
and prints that beside the grader's default time limit and the time the tape
takes for the right answer (measured in the same run).

    python -m benchmarks.numeric_cheat
    python -m benchmarks.numeric_cheat --repeats 5
"""

import argparse
import time

import numpy as np

from microtape.exercises.registry import get
from microtape.grading.gradebook import DEFAULT_TIMEOUT


def _softmax(s):
    e = np.exp(s - s.real.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _relu(z):
    return np.where(z.real > 0, z, 0)


def _gru(x, h, w_ih, w_hh, b_ih, b_hh):
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    i_r, i_z, i_n = np.split(gi, 3, axis=1)
    h_r, h_z, h_n = np.split(gh, 3, axis=1)
    r, z = _sigmoid(i_r + h_r), _sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def _layernorm(x, gamma, beta):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5) * gamma + beta


# exercise: (the forward a numeric submission would write, the parameters it perturbs, the rest it passes)
FORWARDS = {
    "scalar_chain_rule": (lambda a, b, c, g: np.tanh(a * b + c) * g, ("a", "b", "c", "g"), ()),
    "mse_backward": (lambda pred, target: np.mean((pred - target) ** 2), ("pred", "target"), ()),
    "logistic_loss_backward": (
        lambda logits, y: np.mean(np.log(1 + np.exp(-(2 * y - 1) * logits))),
        ("logits",),
        ("y",),
    ),
    "softmax_cross_entropy_backward": (
        lambda logits, y: -np.mean(np.log(_softmax(logits)[np.arange(len(y)), y])),
        ("logits",),
        ("y",),
    ),
    "embedding_backward": (lambda table, tokens: table[tokens], ("table",), ("tokens",)),
    "affine_relu_backward": (lambda x, w, b: _relu(x @ w + b), ("x", "w", "b"), ()),
    "mlp_backward": (
        lambda x, w1, b1, w2, b2: np.tanh(x @ w1.T + b1) @ w2.T + b2,
        ("x", "w1", "b1", "w2", "b2"),
        (),
    ),
    "gru_cell_backward": (_gru, ("x", "h", "W_ih", "W_hh", "b_ih", "b_hh"), ()),
    "softmax_backward": (lambda s: _softmax(s), ("s",), ()),
    "linear_backward": (lambda x, weight: x @ weight.T, ("x", "weight"), ()),
    "layernorm_backward": (_layernorm, ("x", "gamma", "beta"), ()),
    "logsumexp_vjp": (lambda x: np.log(np.exp(x - x.real.max(axis=-1, keepdims=True)).sum(axis=-1)), ("x",), ()),
    "attention_backward": (
        lambda q, k, v: _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])) @ v,
        ("q", "k", "v"),
        (),
    ),
}


def large_trial(name):
    exercise = get(name)
    (case,) = [case for case in exercise.cases(hidden=True) if case.get("shared")]
    return exercise, exercise.make_inputs(np.random.default_rng(0), case)


def measure(name, repeats):
    """(entries perturbed, seconds per complex forward, seconds of the tape's answer)."""
    forward, perturbed, rest = FORWARDS[name]
    exercise, inputs = large_trial(name)
    arrays = [np.asarray(inputs[p], dtype=complex) for p in perturbed] + [inputs[p] for p in rest]
    entries = sum(np.size(inputs[p]) for p in perturbed)
    forward(*arrays)  # warm up
    started = time.perf_counter()
    for _ in range(repeats):
        forward(*arrays)
    per_forward = (time.perf_counter() - started) / repeats
    started = time.perf_counter()
    exercise.tape_gradients(inputs)
    return entries, per_forward, time.perf_counter() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10, help="forwards timed per exercise")
    args = parser.parse_args(argv)
    print(f"the default time limit of one call (microtape grade): {DEFAULT_TIMEOUT:g} s")
    print(f"{'exercise':32s} {'entries':>9s} {'forward':>10s} {'numeric':>10s} {'÷ limit':>8s} {'tape':>9s}")
    for name in FORWARDS:
        entries, per_forward, tape = measure(name, args.repeats)
        numeric = entries * per_forward
        print(f"{name:32s} {entries:9d} {per_forward * 1e6:8.0f}µs {numeric:9.0f}s "
              f"{numeric / DEFAULT_TIMEOUT:7.0f}x {tape * 1e3:7.1f}ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
