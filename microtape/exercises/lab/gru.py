"""Exercise (stepped): the backward pass of one step of a GRU cell (PyTorch's equations), gate by gate.

The student returns the gradient at each gate (n, z, r), at the two stacked
pre-activations (gi, gh), then at the inputs and parameters; each is judged
link by link. The tape's answer: the cell built on Tensors from ``matmul``,
slicing, ``sigmoid`` and ``tanh``, nodes named as the steps, and the tape
backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step, register
from .core import variant
from .taped_steps import step_gradients

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

    Return a dict with every step of the derivation, from h_next back:
        "grad_n"      dL/dn                              [N, H]
        "grad_z"      dL/dz                              [N, H]
        "grad_r"      dL/dr     (from grad_n)            [N, H]
        "grad_gi"     dL/dgi    (from grad_n, z, r)      [N, 3H]
        "grad_gh"     dL/dgh    (from grad_n, z, r)      [N, 3H]
        "grad_x"      dL/dx     (from grad_gi)           [N, D]
        "grad_h"      dL/dh     (from grad_gh, and h_next directly)   [N, H]
        "grad_W_ih", "grad_W_hh", "grad_b_ih", "grad_b_hh"   (from grad_gi, grad_gh)
    Each step is checked against the tape twice: against the true gradient,
    and against what the tape computes from your own earlier steps. A step
    right from a wrong earlier step is carried (it earns its point).

    The maths: recompute the gates. From h_next go back to n, z and h (h has
    two paths: straight through ``z * h``, and through gh). Through the
    nonlinearities (σ' = σ(1 − σ), tanh' = 1 − tanh²) to the pre-activations;
    r is reached through ``r * h_n``. Stack the three gates' pre-activation
    gradients back into [N, 3H] arrays for gi and for gh (for gh's n-part
    remember the factor r), then each is a Linear layer's backward.
    """
    raise NotImplementedError("gru_cell_backward: return {'grad_n': ..., 'grad_z': ..., ..., 'grad_b_hh': ...}")


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


#: The steps' nodes, in the order of the steps (from h_next back).
NODES = ("n", "z", "r", "gi", "gh", "x", "h", "W_ih", "W_hh", "b_ih", "b_hh")


def record(inputs: dict[str, Any]) -> Any:
    """One step of the cell on a new tape, nodes named as the steps: ``(tape, h_next)``."""
    t = {name: Tensor(inputs[name], requires_grad=True, name=name) for name in _LEAVES}
    hidden = inputs["h"].shape[1]
    gates = {"r": slice(0, hidden), "z": slice(hidden, 2 * hidden), "n": slice(2 * hidden, 3 * hidden)}
    with Tape() as tape:
        gi = t["x"] @ t["W_ih"].T + t["b_ih"]
        gi.name = "gi"
        gh = t["h"] @ t["W_hh"].T + t["b_hh"]
        gh.name = "gh"
        r = (gi[:, gates["r"]] + gh[:, gates["r"]]).sigmoid(name="r")
        z = (gi[:, gates["z"]] + gh[:, gates["z"]]).sigmoid(name="z")
        n = (gi[:, gates["n"]] + r * gh[:, gates["n"]]).tanh(name="n")
        h_next = (1.0 - z) * n + z * t["h"]
    return tape, h_next


tape_gradients = step_gradients(record, NODES, "grad_h_next")


# ---------------------------------------------------------------- known mistakes

_BELOW = ("grad_gi", "grad_gh", "grad_x", "grad_h", "grad_W_ih", "grad_W_hh", "grad_b_ih", "grad_b_hh")
#: The steps each mistake changes: the step it breaks and the later ones computed from it.
_CHANGES = {
    "update_gate_roles_swapped": ("grad_n", "grad_z", "grad_r", *_BELOW),
    "reset_outside_the_bias": ("grad_r", *_BELOW),
    "direct_path_missing": ("grad_h",),
    "sigmoid_derivative_wrong": _BELOW,
    "tanh_derivative_not_squared": ("grad_r", *_BELOW),
    "reset_gate_constant": ("grad_r", *_BELOW),
    "candidate_hidden_grad_not_gated": ("grad_gh", "grad_h", "grad_W_hh", "grad_b_hh"),
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
        "grad_n": grad_n,
        "grad_z": grad_z,
        "grad_r": grad_r,
        "grad_gi": grad_gi,
        "grad_gh": grad_gh,
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
    record=record,
    title="GRU cell backward, gate by gate: grad_n, grad_z → grad_r → grad_gi, grad_gh → the inputs and weights",
    outputs=(
        Step("grad_n", "the candidate n [N, H]", node="n"),
        Step("grad_z", "the update gate z [N, H]", node="z"),
        Step("grad_r", "the reset gate r [N, H]", after=("grad_n",), node="r"),
        Step("grad_gi", "gi = x W_ihᵀ + b_ih [N, 3H]", after=("grad_n", "grad_z", "grad_r"), node="gi"),
        Step("grad_gh", "gh = h W_hhᵀ + b_hh [N, 3H]", after=("grad_n", "grad_z", "grad_r"), node="gh"),
        Step("grad_x", "x", after=("grad_gi",), node="x"),
        Step("grad_h", "h", after=("grad_gh",), node="h"),
        Step("grad_W_ih", "W_ih", after=("grad_gi",), node="W_ih"),
        Step("grad_W_hh", "W_hh", after=("grad_gh",), node="W_hh"),
        Step("grad_b_ih", "b_ih", after=("grad_gi",), node="b_ih"),
        Step("grad_b_hh", "b_hh", after=("grad_gh",), node="b_hh"),
    ),
    mistakes=(
        Mistake(
            "update_gate_roles_swapped",
            "wrong_derivative",
            "your gradients treat h_next as z * n + (1 − z) * h. PyTorch's GRU keeps the old state "
            "with z: h_next = (1 − z) * n + z * h, so dn = g (1 − z), dz = g (h − n), and h gets g z directly.",
            variant(_with_mistake, "update_gate_roles_swapped"),
            step="grad_n",
        ),
        Mistake(
            "reset_outside_the_bias",
            "wrong_derivative",
            "your gradients gate only h @ W_hn.T with r, leaving b_hn outside. In PyTorch's GRU the "
            "reset gate multiplies h_n *with* its bias: dr = dn_pre * h_n, h_n = h @ W_hn.T + b_hn.",
            variant(_with_mistake, "reset_outside_the_bias"),
            step="grad_r",
        ),
        Mistake(
            "direct_path_missing",
            "skipped_step",
            "your grad_h misses the straight path: h_next = … + z * h adds grad_h_next * z to it.",
            variant(_with_mistake, "direct_path_missing"),
            step="grad_h",
        ),
        Mistake(
            "sigmoid_derivative_wrong",
            "wrong_derivative",
            "your gradients use 1 − σ² as the sigmoid's derivative (that is tanh's form). "
            "σ'(a) = σ(a) (1 − σ(a)): r (1 − r) and z (1 − z).",
            variant(_with_mistake, "sigmoid_derivative_wrong"),
            step="grad_gi",
        ),
        Mistake(
            "tanh_derivative_not_squared",
            "wrong_derivative",
            "your gradients use 1 − n as the candidate's tanh derivative: it is 1 − n².",
            variant(_with_mistake, "tanh_derivative_not_squared"),
            step="grad_r",
        ),
        Mistake(
            "reset_gate_constant",
            "skipped_step",
            "your gradients treat the reset gate r as a constant. r depends on x and h too: "
            "dr = dn_pre * h_n, then through σ' to r's pre-activation.",
            variant(_with_mistake, "reset_gate_constant"),
            step="grad_r",
        ),
        Mistake(
            "candidate_hidden_grad_not_gated",
            "skipped_step",
            "your grad_gh passes the candidate's gradient to h_n without the "
            "reset gate: n = tanh(i_n + r * h_n), so h_n receives dn_pre * r.",
            variant(_with_mistake, "candidate_hidden_grad_not_gated"),
            step="grad_gh",
        ),
    ),
)
register(EXERCISE)
