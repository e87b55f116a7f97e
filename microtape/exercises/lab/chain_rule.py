"""Exercise (stepped): the chain rule by node, on a micrograd-style scalar expression.

The expression is the lecture's ``e = a*b; d = e + c; f = tanh(d); L = f*g``.
The student returns dL/d(node) at every node, working backwards from L the
way the micrograd lecture does; each node is a step, judged link by link. The
arguments are arrays, each entry one independent copy of the expression, so
the same code works for one expression or for thousands. The tape's answer
records every copy at once (elementwise Tensors, nodes named as the
lecture's) and runs the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Step, register
from .core import variant
from .taped_steps import step_gradients

__all__ = ["scalar_chain_rule", "NODES"]

#: The nodes whose gradients the student returns, in the order of the steps (from L back).
NODES = ("f", "g", "d", "e", "c", "a", "b")


def scalar_chain_rule(a, b, c, g):
    r"""The gradient of L at every node of a small scalar expression, by hand.

    Forward (compute it yourself from the leaves a, b, c, g):
        e = a * b
        d = e + c
        f = tanh(d)
        L = f * g

    Arguments: ``a``, ``b``, ``c``, ``g`` — numpy float64 arrays of the same
    shape [n]. Entry i of each is one independent copy of the expression, so
    write the maths for one copy with elementwise numpy operations
    (``np.tanh``, ``*``, ``+``) and it works for all of them at once.

    Return a dict with dL/d(node) at every node, each shaped like ``a``, from
    L back:
        "grad_f"   dL/df
        "grad_g"   dL/dg
        "grad_d"   dL/dd     (from grad_f)
        "grad_e"   dL/de     (from grad_d)
        "grad_c"   dL/dc     (from grad_d)
        "grad_a"   dL/da     (from grad_e)
        "grad_b"   dL/db     (from grad_e)
    Each node is checked against the tape twice: against the true gradient,
    and against what the tape computes from your own gradient just above it.
    A node right from a wrong one above is carried (it earns its point).

    The maths: start at L, where dL/dL = 1, and walk the graph backwards. At
    each node multiply the gradient arriving from above by the node's *local*
    derivative: a product ``u * v`` sends ``v`` times the gradient to ``u`` and
    ``u`` times it to ``v``; a sum ``u + v`` sends the gradient to both
    unchanged; ``tanh`` has derivative ``1 − tanh(d)²`` — and ``tanh(d)`` is f.
    """
    raise NotImplementedError("scalar_chain_rule: return the gradient of L at every node")


# One dict per trial: n, the number of independent copies of the expression,
# and the spread of the leaves (large: tanh saturates, 1 − f² is near 0).
# The hidden trials include 20 000 copies: 80 000 inputs, far too many to
# differentiate numerically one by one within the time limit, while the chain rule
# runs in microseconds.
VISIBLE = (
    {"n": 1},
    {"n": 3},
    {"n": 5, "spread": 2.0},
    {"n": 2},
    {"n": 4, "spread": 0.3},
)
HIDDEN = (
    {"n": 2},
    {"n": 6, "spread": 2.0},
    {"n": 1, "spread": 0.5},
    {"n": 7},
    {"n": 9, "spread": 3.0},
    {"n": 20000, "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    shape = (case["n"],)
    spread = case.get("spread", 1.0)
    return {name: rng.standard_normal(shape) * spread for name in ("a", "b", "c", "g")}


def record(inputs: dict[str, Any]) -> Any:
    """Every copy of the expression at once, on a new tape, nodes named as the lecture's: ``(tape, L)``."""
    a, b, c, g = (Tensor(inputs[name], requires_grad=True, name=name) for name in ("a", "b", "c", "g"))
    with Tape() as tape:
        e = a * b
        e.name = "e"
        d = e + c
        d.name = "d"
        f = d.tanh(name="f")
        loss = (f * g).sum()  # the copies are independent: the sum's gradient is 1 at each
    return tape, loss


tape_gradients = step_gradients(record, NODES)


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the backward walk with exactly one link wrong; it
# returns the node that link breaks and the nodes below computed from it, and
# refuses any other name, so no call of it is the right answer.

_CHANGES = {
    "tanh_derivative_of_d": ("grad_d", "grad_e", "grad_c", "grad_a", "grad_b"),
    "tanh_derivative_missing": ("grad_d", "grad_e", "grad_c", "grad_a", "grad_b"),
    "sum_splits_the_gradient": ("grad_e", "grad_a", "grad_b"),
    "product_partner_swapped": ("grad_a",),
    "upstream_gradient_dropped": ("grad_b",),
    "last_product_own_value": ("grad_f", "grad_d", "grad_e", "grad_c", "grad_a", "grad_b"),
}


def _with_mistake(mistake: Any, a: Any, b: Any, c: Any, g: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    d = a * b + c
    f = np.tanh(d)
    grad_f, grad_g = (f if mistake == "last_product_own_value" else g), f
    if mistake == "tanh_derivative_of_d":
        grad_d = grad_f * (1.0 - d**2)
    elif mistake == "tanh_derivative_missing":
        grad_d = grad_f
    else:
        grad_d = grad_f * (1.0 - f**2)
    grad_e = grad_d * (0.5 if mistake == "sum_splits_the_gradient" else 1.0)
    grad_c = grad_d
    grad_a = grad_e * (a if mistake == "product_partner_swapped" else b)
    grad_b = a if mistake == "upstream_gradient_dropped" else grad_e * a
    every = {
        "grad_a": grad_a,
        "grad_b": grad_b,
        "grad_c": grad_c,
        "grad_e": grad_e,
        "grad_d": grad_d,
        "grad_f": grad_f,
        "grad_g": grad_g,
    }
    return {name: every[name] for name in _CHANGES[mistake]}


EXERCISE = Exercise(
    name="scalar_chain_rule",
    stub=scalar_chain_rule,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    record=record,
    title="The chain rule by node: the gradient of L = tanh(a·b + c)·g at every node, from L back",
    outputs=(
        Step("grad_f", "a", node="f"),
        Step("grad_g", "a", node="g"),
        Step("grad_d", "a", after=("grad_f",), node="d"),
        Step("grad_e", "a", after=("grad_d",), node="e"),
        Step("grad_c", "a", after=("grad_d",), node="c"),
        Step("grad_a", "a", after=("grad_e",), node="a"),
        Step("grad_b", "a", after=("grad_e",), node="b"),
    ),
    mistakes=(
        Mistake(
            "tanh_derivative_of_d",
            "wrong_derivative",
            "your grad_d uses 1 − d². The derivative of tanh is 1 − tanh(d)² = 1 − f²: square f, "
            "not d. grad_e, grad_c, grad_a and grad_b inherit the error.",
            variant(_with_mistake, "tanh_derivative_of_d"),
            step="grad_d",
        ),
        Mistake(
            "tanh_derivative_missing",
            "skipped_step",
            "your grad_d equals dL/df: the tanh's local derivative is missing. "
            "grad_d = dL/df * (1 − f²), and grad_e, grad_c, grad_a, grad_b follow from it.",
            variant(_with_mistake, "tanh_derivative_missing"),
            step="grad_d",
        ),
        Mistake(
            "sum_splits_the_gradient",
            "wrong_derivative",
            "your grad_e is half of dL/dd. A sum d = e + c passes the gradient to "
            "each input unchanged (∂d/∂e = ∂d/∂c = 1): it copies, it does not split. "
            "grad_a and grad_b inherit the error.",
            variant(_with_mistake, "sum_splits_the_gradient"),
            step="grad_e",
        ),
        Mistake(
            "product_partner_swapped",
            "wrong_derivative",
            "your grad_a is dL/de * a. For e = a * b, ∂e/∂a is the *other* factor: grad_a = dL/de * b.",
            variant(_with_mistake, "product_partner_swapped"),
            step="grad_a",
        ),
        Mistake(
            "upstream_gradient_dropped",
            "skipped_step",
            "your grad_b is a: the local derivative only. The chain rule multiplies it by the "
            "gradient arriving from above: grad_b = dL/de * a.",
            variant(_with_mistake, "upstream_gradient_dropped"),
            step="grad_b",
        ),
        Mistake(
            "last_product_own_value",
            "wrong_derivative",
            "your grad_f is f. For L = f * g, ∂L/∂f is the other factor, g; every gradient below f "
            "(grad_d, grad_e, grad_c, grad_a, grad_b) inherits the error.",
            variant(_with_mistake, "last_product_own_value"),
            step="grad_f",
        ),
    ),
)
register(EXERCISE)
