"""Exercise: the backward pass of one step of a GRU cell (PyTorch's equations, gates r, z, n).

The tape's answer: the cell built on Tensors from ``matmul``, slicing,
``sigmoid`` and ``tanh``, and the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["gru_cell_backward"]


def gru_cell_backward(x, h, W_ih, W_hh, b_ih, b_hh, grad_h_next):
    r"""Backward pass of one step of a GRU cell, as ``torch.nn.GRUCell`` computes it.

    Forward (done for you). The weights stack the three gates in the order r, z, n
    (H rows each): ``W_ih [3H, D]``, ``W_hh [3H, H]``, ``b_ih [3H]``, ``b_hh [3H]``.
        gi = x @ W_ih.T + b_ih = [i_r, i_z, i_n]     gh = h @ W_hh.T + b_hh = [h_r, h_z, h_n]
        r = σ(i_r + h_r)            the reset gate
        z = σ(i_z + h_z)            the update gate
        n = tanh(i_n + r * h_n)     the candidate (r multiplies h_n *with* its bias)
        h_next = (1 − z) * n + z * h
        x: [N, D]   h: [N, H]   h_next: [N, H]

    Arguments: the above and ``grad_h_next`` = dL/dh_next [N, H].

    Return a tuple ``(grad_x, grad_h, grad_W_ih, grad_W_hh, grad_b_ih, grad_b_hh)``
    shaped like ``x``, ``h``, ``W_ih``, ``W_hh``, ``b_ih`` and ``b_hh``.

    The maths: recompute the gates. From h_next go back to n, z and h (h has
    two paths: straight through ``z * h``, and through gh). Through the
    nonlinearities (σ' = σ(1 − σ), tanh' = 1 − tanh²) to the pre-activations;
    r is reached through ``r * h_n``. Stack the three gates' pre-activation
    gradients back into [N, 3H] arrays for gi and for gh (for gh's n-part
    remember the factor r), then each is a Linear layer's backward.
    """
    raise NotImplementedError("gru_cell_backward: write the backward pass of the GRU cell here")


# One dict per trial: (N, D, H). The last hidden trial is large (~220 000 weights and biases:
# numeric differentiation cannot finish within the time limit; the chain takes milliseconds).
VISIBLE = (
    {"shape": (3, 4, 2)},
    {"shape": (2, 3, 3)},
    {"shape": (4, 2, 5)},
    {"shape": (1, 5, 4)},
)
HIDDEN = (
    {"shape": (2, 5, 3)},
    {"shape": (5, 3, 4)},
    {"shape": (3, 3, 3)},
    {"shape": (1, 2, 6)},
    {"shape": (8, 192, 192), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    batch, features, hidden = case["shape"]
    return {
        "x": rng.standard_normal((batch, features)),
        "h": rng.standard_normal((batch, hidden)) * 0.5,
        "W_ih": rng.standard_normal((3 * hidden, features)) / np.sqrt(features),
        "W_hh": rng.standard_normal((3 * hidden, hidden)) / np.sqrt(hidden),
        "b_ih": rng.standard_normal(3 * hidden) * 0.5,
        "b_hh": rng.standard_normal(3 * hidden) * 0.5,
        "grad_h_next": rng.standard_normal((batch, hidden)),
    }


_LEAVES = ("x", "h", "W_ih", "W_hh", "b_ih", "b_hh")


def tape_gradients(inputs: dict[str, Any]) -> Any:
    t = {name: Tensor(inputs[name], requires_grad=True, name=name) for name in _LEAVES}
    hidden = inputs["h"].shape[1]
    gates = {"r": slice(0, hidden), "z": slice(hidden, 2 * hidden), "n": slice(2 * hidden, 3 * hidden)}
    with Tape() as tape:
        gi = t["x"] @ t["W_ih"].T + t["b_ih"]
        gh = t["h"] @ t["W_hh"].T + t["b_hh"]
        r = (gi[:, gates["r"]] + gh[:, gates["r"]]).sigmoid(name="r")
        z = (gi[:, gates["z"]] + gh[:, gates["z"]]).sigmoid(name="z")
        n = (gi[:, gates["n"]] + r * gh[:, gates["n"]]).tanh(name="n")
        h_next = (1.0 - z) * n + z * t["h"]
    tape.backward(h_next, inputs["grad_h_next"])
    return tuple(t[name].grad for name in _LEAVES)


# ---------------------------------------------------------------- known mistakes

_ALL = ("grad_x", "grad_h", "grad_W_ih", "grad_W_hh", "grad_b_ih", "grad_b_hh")
#: The outputs each mistake changes.
_CHANGES = {
    "update_gate_roles_swapped": _ALL,
    "reset_outside_the_bias": _ALL,
    "direct_path_missing": ("grad_h",),
    "sigmoid_derivative_wrong": _ALL,
    "tanh_derivative_not_squared": _ALL,
    "reset_gate_constant": _ALL,
    "candidate_hidden_grad_not_gated": ("grad_h", "grad_W_hh", "grad_b_hh"),
}


def _sigmoid(a: Any) -> Any:
    return 0.5 * (1.0 + np.tanh(0.5 * a))  # = 1 / (1 + exp(−a)), without overflow


def _with_mistake(mistake: Any, x: Any, h: Any, W_ih: Any, W_hh: Any, b_ih: Any, b_hh: Any, grad_h_next: Any) -> Any:
    """The outputs ``mistake`` changes, by the chain with that one thing wrong (any other name is refused)."""
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    g = grad_h_next
    i_r, i_z, i_n = np.split(x @ W_ih.T + b_ih, 3, axis=1)
    h_r, h_z, h_n = np.split(h @ W_hh.T + b_hh, 3, axis=1)
    r, z = _sigmoid(i_r + h_r), _sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    keep, new = (1.0 - z, z) if mistake == "update_gate_roles_swapped" else (z, 1.0 - z)
    grad_n = g * new
    grad_z = g * (n - h) if mistake == "update_gate_roles_swapped" else g * (h - n)
    direct = 0.0 if mistake == "direct_path_missing" else g * keep
    sigmoid_slope = (lambda s: 1.0 - s**2) if mistake == "sigmoid_derivative_wrong" else (lambda s: s * (1.0 - s))
    grad_an = grad_n * ((1.0 - n) if mistake == "tanh_derivative_not_squared" else (1.0 - n**2))
    if mistake == "reset_gate_constant":
        grad_r = np.zeros_like(r)
    else:
        grad_r = grad_an * (h_n - b_hh[2 * h.shape[1] :] if mistake == "reset_outside_the_bias" else h_n)
    grad_ar, grad_az = grad_r * sigmoid_slope(r), grad_z * sigmoid_slope(z)
    grad_gi = np.concatenate([grad_ar, grad_az, grad_an], axis=1)
    gated = grad_an if mistake == "candidate_hidden_grad_not_gated" else grad_an * r
    grad_gh = np.concatenate([grad_ar, grad_az, gated], axis=1)
    grad_b_hh = grad_gh.sum(axis=0)
    if mistake == "reset_outside_the_bias":  # b_hn added after the gate: its gradient is not gated
        grad_b_hh = np.concatenate([grad_ar, grad_az, grad_an], axis=1).sum(axis=0)
    every = {
        "grad_x": grad_gi @ W_ih,
        "grad_h": grad_gh @ W_hh + direct,
        "grad_W_ih": grad_gi.T @ x,
        "grad_W_hh": grad_gh.T @ h,
        "grad_b_ih": grad_gi.sum(axis=0),
        "grad_b_hh": grad_b_hh,
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="gru_cell_backward",
    stub=gru_cell_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="GRU cell backward (one step, gates r, z, n): grad_x, grad_h, and the weights' and biases' gradients",
    outputs=(
        Output("grad_x", "x"),
        Output("grad_h", "h"),
        Output("grad_W_ih", "W_ih"),
        Output("grad_W_hh", "W_hh"),
        Output("grad_b_ih", "b_ih"),
        Output("grad_b_hh", "b_hh"),
    ),
    mistakes=(
        Mistake(
            "update_gate_roles_swapped",
            "wrong_derivative",
            "your gradients treat h_next as z * n + (1 − z) * h. PyTorch's GRU keeps the old state "
            "with z: h_next = (1 − z) * n + z * h, so dn = g (1 − z), dz = g (h − n), and h gets g z directly.",
            variant(_with_mistake, "update_gate_roles_swapped"),
        ),
        Mistake(
            "reset_outside_the_bias",
            "wrong_derivative",
            "your gradients gate only h @ W_hn.T with r, leaving b_hn outside. In PyTorch's GRU the "
            "reset gate multiplies h_n *with* its bias: dr = dn_pre * h_n, h_n = h @ W_hn.T + b_hn.",
            variant(_with_mistake, "reset_outside_the_bias"),
        ),
        Mistake(
            "direct_path_missing",
            "skipped_step",
            "your grad_h misses the straight path: h_next = … + z * h adds grad_h_next * z to it.",
            variant(_with_mistake, "direct_path_missing"),
        ),
        Mistake(
            "sigmoid_derivative_wrong",
            "wrong_derivative",
            "your gradients use 1 − σ² as the sigmoid's derivative (that is tanh's form). "
            "σ'(a) = σ(a) (1 − σ(a)): r (1 − r) and z (1 − z).",
            variant(_with_mistake, "sigmoid_derivative_wrong"),
        ),
        Mistake(
            "tanh_derivative_not_squared",
            "wrong_derivative",
            "your gradients use 1 − n as the candidate's tanh derivative: it is 1 − n².",
            variant(_with_mistake, "tanh_derivative_not_squared"),
        ),
        Mistake(
            "reset_gate_constant",
            "skipped_step",
            "your gradients treat the reset gate r as a constant. r depends on x and h too: "
            "dr = dn_pre * h_n, then through σ' to r's pre-activation.",
            variant(_with_mistake, "reset_gate_constant"),
        ),
        Mistake(
            "candidate_hidden_grad_not_gated",
            "skipped_step",
            "your grad_h, grad_W_hh and grad_b_hh pass the candidate's gradient to h_n without the "
            "reset gate: n = tanh(i_n + r * h_n), so h_n receives dn_pre * r.",
            variant(_with_mistake, "candidate_hidden_grad_not_gated"),
        ),
    ),
)
register(EXERCISE)
