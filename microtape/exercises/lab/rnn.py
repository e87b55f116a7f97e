"""Exercise: backpropagation through time in a vanilla RNN unrolled over T steps.

The tape's answer: the cell ``h_t = tanh(x_t W_xhᵀ + h_{t−1} W_hhᵀ + b)``
built step by step on Tensors (the same weights used at every step) and the
tape backward — it finds the recurrent path and the sum over time by itself.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["rnn_bptt"]


def rnn_bptt(x, h0, W_xh, W_hh, b, grad_h):
    r"""Backpropagation through time (BPTT) for a vanilla RNN.

    Forward (done for you), for t = 0 … T−1, starting from ``h_{−1} = h0``:
        h_t = tanh(x[t] @ W_xh.T + h_{t−1} @ W_hh.T + b)
        x:  [T, N, D]   h0: [N, H]   W_xh: [H, D]   W_hh: [H, H]   b: [H]

    Arguments: the above and ``grad_h`` [T, N, H]: ``grad_h[t]`` is the
    gradient the loss sends *directly* to ``h_t`` (e.g. from an output layer
    at step t) — not yet what h_t passes on to later steps.

    Return a tuple ``(grad_W_xh, grad_W_hh, grad_b, grad_h0, grad_x)`` shaped
    like ``W_xh``, ``W_hh``, ``b``, ``h0`` and ``x``.

    The maths: recompute the forward and keep every h_t. Then walk back from
    t = T−1: the total gradient of h_t is ``grad_h[t]`` plus what step t+1
    sends back through ``W_hh`` (h_t fed h_{t+1}). Through the tanh
    (``tanh'`` = 1 − h_t²) it gives ``dz_t``; from ``dz_t`` come step t's
    share of each weight's gradient (the *same* weights at every step: add the
    shares up over time), ``grad_x[t]``, and what goes back to ``h_{t−1}``.
    What reaches ``h_{−1}`` is ``grad_h0``.
    """
    raise NotImplementedError("rnn_bptt: write backpropagation through time here")


# One dict per trial: (T, N, D, H) and the scale of W_hh. The last hidden trial
# is large (~49 000 inputs over 48 steps): numeric differentiation cannot
# finish within the time limit, BPTT takes milliseconds.
VISIBLE = (
    {"shape": (3, 2, 3, 4), "recurrent": 0.5},
    {"shape": (4, 1, 2, 3), "recurrent": 0.8},
    {"shape": (2, 3, 4, 4), "recurrent": 0.5},
    {"shape": (5, 2, 3, 2), "recurrent": 1.0},
)
HIDDEN = (
    {"shape": (4, 2, 3, 3), "recurrent": 0.6},
    {"shape": (6, 1, 2, 4), "recurrent": 0.9},
    {"shape": (3, 3, 5, 2), "recurrent": 0.4},
    {"shape": (5, 2, 2, 5), "recurrent": 1.2},
    {"shape": (48, 16, 64, 48), "recurrent": 0.1, "shared": True},
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


def tape_gradients(inputs: dict[str, Any]) -> Any:
    leaves = {name: Tensor(inputs[name], requires_grad=True, name=name) for name in ("x", "h0", "W_xh", "W_hh", "b")}
    x, state = leaves["x"], leaves["h0"]
    with Tape() as tape:
        loss: Any = 0.0  # a Tensor from the first step on
        for t in range(x.shape[0]):
            state = (x[t] @ leaves["W_xh"].T + state @ leaves["W_hh"].T + leaves["b"]).tanh(name=f"h{t}")
            # The loss reaches every h_t directly with grad_h[t]: a weighted sum of the states.
            loss = loss + (state * inputs["grad_h"][t]).sum()
    tape.backward(loss)
    return tuple(leaves[name].grad for name in ("W_xh", "W_hh", "b", "h0", "x"))


# ---------------------------------------------------------------- known mistakes

_ALL = ("grad_W_xh", "grad_W_hh", "grad_b", "grad_h0", "grad_x")
#: The outputs each mistake changes.
_CHANGES = {
    "no_recurrent_path": _ALL,
    "not_summed_over_time": ("grad_W_xh", "grad_W_hh", "grad_b"),
    "tanh_derivative_not_squared": _ALL,
    "tanh_derivative_of_previous_state": _ALL,
    "recurrent_weight_grad_with_current_state": ("grad_W_hh",),
    "recurrent_grad_transposed": _ALL,
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
    grad_x = np.zeros_like(x)
    carry, grad_z = np.zeros_like(h0), None
    for t in reversed(range(x.shape[0])):
        grad_state = grad_h[t] + (0.0 if mistake == "no_recurrent_path" else carry)
        derivative = {
            "tanh_derivative_not_squared": 1.0 - states[t + 1],
            "tanh_derivative_of_previous_state": 1.0 - states[t] ** 2,
        }.get(mistake, 1.0 - states[t + 1] ** 2)
        grad_z = grad_state * derivative
        earlier = states[t + 1] if mistake == "recurrent_weight_grad_with_current_state" else states[t]
        shares = {"grad_W_xh": grad_z.T @ x[t], "grad_W_hh": grad_z.T @ earlier, "grad_b": grad_z.sum(axis=0)}
        for name, share in shares.items():
            grads[name] = share if mistake == "not_summed_over_time" else grads[name] + share
        grad_x[t] = grad_z @ W_xh
        carry = grad_z @ (W_hh.T if mistake == "recurrent_grad_transposed" else W_hh)
    every = {**grads, "grad_h0": grad_z if mistake == "h0_grad_skips_W_hh" else carry, "grad_x": grad_x}
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="rnn_bptt",
    stub=rnn_bptt,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="RNN backpropagation through time: grad_W_xh, grad_W_hh, grad_b, grad_h0, grad_x",
    outputs=(
        Output("grad_W_xh", "W_xh"),
        Output("grad_W_hh", "W_hh"),
        Output("grad_b", "b"),
        Output("grad_h0", "h0"),
        Output("grad_x", "x"),
    ),
    mistakes=(
        Mistake(
            "no_recurrent_path",
            "skipped_step",
            "your gradients use only grad_h[t] at each step: h_t also fed h_{t+1}. Carry the gradient "
            "back: the total at h_t is grad_h[t] + dz_{t+1} @ W_hh.",
            variant(_with_mistake, "no_recurrent_path"),
        ),
        Mistake(
            "not_summed_over_time",
            "broadcast_not_summed",
            "your grad_W_xh, grad_W_hh and grad_b hold one step's share only. The same weights were "
            "used at every step: add the shares of all T steps (+=).",
            variant(_with_mistake, "not_summed_over_time"),
        ),
        Mistake(
            "tanh_derivative_not_squared",
            "wrong_derivative",
            "your gradients use 1 − h_t as tanh's derivative: it is 1 − tanh(z)² = 1 − h_t².",
            variant(_with_mistake, "tanh_derivative_not_squared"),
        ),
        Mistake(
            "tanh_derivative_of_previous_state",
            "wrong_derivative",
            "your gradients take tanh's derivative at the previous state, 1 − h_{t−1}². Step t's "
            "tanh produced h_t: its derivative is 1 − h_t² (off by one step).",
            variant(_with_mistake, "tanh_derivative_of_previous_state"),
        ),
        Mistake(
            "recurrent_weight_grad_with_current_state",
            "wrong_derivative",
            "your grad_W_hh multiplies dz_t by h_t. W_hh multiplied the *previous* state in step t: "
            "its share is dz_tᵀ @ h_{t−1} (h0 at the first step).",
            variant(_with_mistake, "recurrent_weight_grad_with_current_state"),
        ),
        Mistake(
            "recurrent_grad_transposed",
            "transposed",
            "your gradients carry dz_t @ W_hh.T back to h_{t−1}. The forward multiplied by W_hh.T, "
            "so the backward multiplies by W_hh: dz_t @ W_hh.",
            variant(_with_mistake, "recurrent_grad_transposed"),
        ),
        Mistake(
            "h0_grad_skips_W_hh",
            "skipped_step",
            "your grad_h0 is dz at the first step: h0 entered through W_hh, so grad_h0 = dz_0 @ W_hh.",
            variant(_with_mistake, "h0_grad_skips_W_hh"),
        ),
    ),
)
register(EXERCISE)
