"""Exercise (stepped): backpropagation through time in a vanilla RNN unrolled over 3 steps, a step per time step.

The student returns the gradient of each time step's pre-activation
(``grad_z3``, ``grad_z2``, ``grad_z1``, walking back in time), then of the
initial state, the inputs and the weights; each is judged link by link, so a
wrong link at one time step is named there and the steps before it in time
are carried. The tape's answer: the cell ``h_t = tanh(x_t W_xhᵀ + h_{t−1}
W_hhᵀ + b)`` built step by step on Tensors (the same weights used at every
step), the pre-activations named ``z1 … z3``, and the tape backward — it
finds the recurrent path and the sum over time by itself. Every trial has
T = 3 (so that each time step is a named step); the trials differ in batch,
features and width.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step, register
from .core import variant
from .taped_steps import step_gradients

__all__ = ["rnn_bptt"]


def rnn_bptt(x, h0, W_xh, W_hh, b, grad_h):
    r"""Backpropagation through time (BPTT) for a vanilla RNN.

    Forward (done for you), T = 3 time steps t = 1, 2, 3, starting from ``h0``:
        z_t = x[t−1] @ W_xh.T + h_{t−1} @ W_hh.T + b
        h_t = tanh(z_t)
        x:  [3, N, D]   h0: [N, H]   W_xh: [H, D]   W_hh: [H, H]   b: [H]

    Arguments: the above and ``grad_h`` [3, N, H]: ``grad_h[t−1]`` is the
    gradient the loss sends *directly* to ``h_t`` (e.g. from an output layer
    at step t) — not yet what h_t passes on to later steps.

    Return a dict with every step of the derivation, back through time:
        "grad_z3"     dL/dz_3                              [N, H]
        "grad_z2"     dL/dz_2   (from grad_z3)             [N, H]
        "grad_z1"     dL/dz_1   (from grad_z2)             [N, H]
        "grad_h0"     dL/dh0    (from grad_z1)             [N, H]
        "grad_x"      dL/dx     (from grad_z1, z2, z3)     [3, N, D]
        "grad_W_xh", "grad_W_hh", "grad_b"   (from grad_z1, z2, z3)
    Each step is checked against the tape twice: against the true gradient,
    and against what the tape computes from your own later time steps. A
    step right from a wrong later one is carried (it earns its point).

    The maths: recompute the forward and keep every h_t. Then walk back from
    t = T−1: the total gradient of h_t is ``grad_h[t]`` plus what step t+1
    sends back through ``W_hh`` (h_t fed h_{t+1}). Through the tanh
    (``tanh'`` = 1 − h_t²) it gives ``dz_t``; from ``dz_t`` come step t's
    share of each weight's gradient (the *same* weights at every step: add the
    shares up over time), ``grad_x[t]``, and what goes back to ``h_{t−1}``.
    What reaches ``h_{−1}`` is ``grad_h0``.
    """
    raise NotImplementedError("rnn_bptt: return {'grad_z3': ..., 'grad_z2': ..., 'grad_z1': ..., ..., 'grad_b': ...}")


#: The time steps: fixed, so that each is a named step of the derivation.
STEPS_IN_TIME = 3

# One dict per trial: (T, N, D, H) and the scale of W_hh. The last hidden trial
# is large (~52 000 inputs): numeric differentiation cannot finish within the
# time limit, BPTT takes milliseconds.
VISIBLE = (
    {"shape": (3, 2, 3, 4), "recurrent": 0.5},
    {"shape": (3, 1, 2, 3), "recurrent": 0.8},
    {"shape": (3, 3, 4, 4), "recurrent": 0.5},
    {"shape": (3, 2, 3, 2), "recurrent": 1.0},
)
HIDDEN = (
    {"shape": (3, 2, 3, 3), "recurrent": 0.6},
    {"shape": (3, 1, 2, 4), "recurrent": 0.9},
    {"shape": (3, 3, 5, 2), "recurrent": 0.4},
    {"shape": (3, 2, 2, 5), "recurrent": 1.2},
    {"shape": (3, 256, 64, 48), "recurrent": 0.1, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    steps, batch, features, hidden = case["shape"]
    return {
        "x": rng.standard_normal((steps, batch, features)),
        "h0": rng.standard_normal((batch, hidden)) * 0.5,
        "W_xh": rng.standard_normal((hidden, features)) / np.sqrt(features),
        "W_hh": rng.standard_normal((hidden, hidden)) * case["recurrent"] / np.sqrt(hidden),
        "b": rng.standard_normal(hidden) * 0.1,
        "grad_h": rng.standard_normal((steps, batch, hidden)),
    }


#: The steps' nodes, in the order of the steps (back through time).
NODES = ("z3", "z2", "z1", "h0", "x", "W_xh", "W_hh", "b")


def record(inputs: dict[str, Any]) -> Any:
    """The unrolled RNN on a new tape, the pre-activations named ``z1 … z3``: ``(tape, loss)``."""
    leaves = {name: Tensor(inputs[name], requires_grad=True, name=name) for name in ("x", "h0", "W_xh", "W_hh", "b")}
    x, state = leaves["x"], leaves["h0"]
    with Tape() as tape:
        loss: Any = 0.0  # a Tensor from the first step on
        for t in range(x.shape[0]):
            z = x[t] @ leaves["W_xh"].T + state @ leaves["W_hh"].T + leaves["b"]
            z.name = f"z{t + 1}"
            state = z.tanh(name=f"h{t + 1}")
            # The loss reaches every h_t directly with grad_h[t − 1]: a weighted sum of the states.
            loss = loss + (state * inputs["grad_h"][t]).sum()
    return tape, loss


tape_gradients = step_gradients(record, NODES)


# ---------------------------------------------------------------- known mistakes

_BELOW = ("grad_h0", "grad_x", "grad_W_xh", "grad_W_hh", "grad_b")
#: The steps each mistake changes: the step it breaks and the later ones computed from it.
_CHANGES = {
    "no_recurrent_path": ("grad_z2", "grad_z1", *_BELOW),
    "not_summed_over_time": ("grad_W_xh", "grad_W_hh", "grad_b"),
    "tanh_derivative_not_squared": ("grad_z3", "grad_z2", "grad_z1", *_BELOW),
    "tanh_derivative_of_previous_state": ("grad_z3", "grad_z2", "grad_z1", *_BELOW),
    "recurrent_weight_grad_with_current_state": ("grad_W_hh",),
    "recurrent_grad_transposed": ("grad_z2", "grad_z1", *_BELOW),
    "h0_grad_skips_W_hh": ("grad_h0",),
}


def _with_mistake(mistake: Any, x: Any, h0: Any, W_xh: Any, W_hh: Any, b: Any, grad_h: Any) -> Any:
    """The outputs ``mistake`` changes, by BPTT with that one thing wrong (any other name is refused)."""
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    states = [h0]
    for t in range(x.shape[0]):
        states.append(np.tanh(x[t] @ W_xh.T + states[-1] @ W_hh.T + b))
    grads = {name: 0.0 for name in ("grad_W_xh", "grad_W_hh", "grad_b")}
    grad_zs = {}
    grad_x = np.zeros_like(x)
    carry, grad_z = np.zeros_like(h0), None
    for t in reversed(range(x.shape[0])):
        grad_state = grad_h[t] + (0.0 if mistake == "no_recurrent_path" else carry)
        derivative = {
            "tanh_derivative_not_squared": 1.0 - states[t + 1],
            "tanh_derivative_of_previous_state": 1.0 - states[t] ** 2,
        }.get(mistake, 1.0 - states[t + 1] ** 2)
        grad_z = grad_state * derivative
        grad_zs[f"grad_z{t + 1}"] = grad_z
        earlier = states[t + 1] if mistake == "recurrent_weight_grad_with_current_state" else states[t]
        shares = {"grad_W_xh": grad_z.T @ x[t], "grad_W_hh": grad_z.T @ earlier, "grad_b": grad_z.sum(axis=0)}
        for name, share in shares.items():
            grads[name] = share if mistake == "not_summed_over_time" else grads[name] + share
        grad_x[t] = grad_z @ W_xh
        carry = grad_z @ (W_hh.T if mistake == "recurrent_grad_transposed" else W_hh)
    every = {**grads, **grad_zs, "grad_h0": grad_z if mistake == "h0_grad_skips_W_hh" else carry, "grad_x": grad_x}
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="rnn_bptt",
    stub=rnn_bptt,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    record=record,
    title="RNN backpropagation through time, a step per time step: grad_z3 → grad_z2 → grad_z1 → h0, x, weights",
    outputs=(
        Step("grad_z3", "h0", node="z3"),
        Step("grad_z2", "h0", after=("grad_z3",), node="z2"),
        Step("grad_z1", "h0", after=("grad_z2",), node="z1"),
        Step("grad_h0", "h0", after=("grad_z1",), node="h0"),
        Step("grad_x", "x", after=("grad_z1", "grad_z2", "grad_z3"), node="x"),
        Step("grad_W_xh", "W_xh", after=("grad_z1", "grad_z2", "grad_z3"), node="W_xh"),
        Step("grad_W_hh", "W_hh", after=("grad_z1", "grad_z2", "grad_z3"), node="W_hh"),
        Step("grad_b", "b", after=("grad_z1", "grad_z2", "grad_z3"), node="b"),
    ),
    mistakes=(
        Mistake(
            "no_recurrent_path",
            "skipped_step",
            "your gradients use only grad_h[t] at each step: h_t also fed h_{t+1}. Carry the gradient "
            "back: the total at h_t is grad_h[t] + dz_{t+1} @ W_hh.",
            variant(_with_mistake, "no_recurrent_path"),
            step="grad_z2",
        ),
        Mistake(
            "not_summed_over_time",
            "broadcast_not_summed",
            "your grad_W_xh, grad_W_hh and grad_b hold one step's share only. The same weights were "
            "used at every step: add the shares of all T steps (+=).",
            variant(_with_mistake, "not_summed_over_time"),
            step="grad_W_xh",
        ),
        Mistake(
            "tanh_derivative_not_squared",
            "wrong_derivative",
            "your gradients use 1 − h_t as tanh's derivative: it is 1 − tanh(z)² = 1 − h_t².",
            variant(_with_mistake, "tanh_derivative_not_squared"),
            step="grad_z3",
        ),
        Mistake(
            "tanh_derivative_of_previous_state",
            "wrong_derivative",
            "your gradients take tanh's derivative at the previous state, 1 − h_{t−1}². Step t's "
            "tanh produced h_t: its derivative is 1 − h_t² (off by one step).",
            variant(_with_mistake, "tanh_derivative_of_previous_state"),
            step="grad_z3",
        ),
        Mistake(
            "recurrent_weight_grad_with_current_state",
            "wrong_derivative",
            "your grad_W_hh multiplies dz_t by h_t. W_hh multiplied the *previous* state in step t: "
            "its share is dz_tᵀ @ h_{t−1} (h0 at the first step).",
            variant(_with_mistake, "recurrent_weight_grad_with_current_state"),
            step="grad_W_hh",
        ),
        Mistake(
            "recurrent_grad_transposed",
            "transposed",
            "your gradients carry dz_t @ W_hh.T back to h_{t−1}. The forward multiplied by W_hh.T, "
            "so the backward multiplies by W_hh: dz_t @ W_hh.",
            variant(_with_mistake, "recurrent_grad_transposed"),
            step="grad_z2",
        ),
        Mistake(
            "h0_grad_skips_W_hh",
            "skipped_step",
            "your grad_h0 is dz at the first step: h0 entered through W_hh, so grad_h0 = dz_0 @ W_hh.",
            variant(_with_mistake, "h0_grad_skips_W_hh"),
            step="grad_h0",
        ),
    ),
)
register(EXERCISE)
