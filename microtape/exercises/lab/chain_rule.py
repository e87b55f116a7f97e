"""Exercise: the chain rule by node, on a micrograd-style scalar expression.

The expression is the lecture's ``e = a*b; d = e + c; f = tanh(d); L = f*g``.
The student returns dL/d(node) at every node, working backwards from L the
way the micrograd lecture does. The arguments are arrays, each entry one
independent copy of the expression, so the same code works for one
expression or for thousands. The tape's answer builds every copy from
:class:`~microtape.Scalar`\\ s and runs ``L.backward()`` on it.
"""

from typing import Any

import numpy as np

from ...values.scalar import Scalar
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["scalar_chain_rule", "NODES"]

#: The nodes whose gradients the student returns, in the order of the outputs.
NODES = ("a", "b", "c", "e", "d", "f", "g")


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

    Return a dict ``{"grad_a": ..., "grad_b": ..., "grad_c": ..., "grad_e": ...,
    "grad_d": ..., "grad_f": ..., "grad_g": ...}`` (or a tuple in that order),
    each dL/d(node), shaped like ``a``.

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


def tape_gradients(inputs: dict[str, Any]) -> Any:
    leaves = [inputs[name] for name in ("a", "b", "c", "g")]
    grads = np.empty((len(NODES), leaves[0].size))
    # One small Scalar graph per copy, differentiated by L.backward(), as in the lecture.
    for i, (a_value, b_value, c_value, g_value) in enumerate(zip(*leaves, strict=True)):
        a, b, c, g = (Scalar(float(value), name) for value, name in zip((a_value, b_value, c_value, g_value), "abcg"))
        e = a * b
        d = e + c
        f = d.tanh()
        loss = f * g
        loss.backward()
        nodes = {"a": a, "b": b, "c": c, "e": e, "d": d, "f": f, "g": g}
        grads[:, i] = [nodes[name].grad for name in NODES]
    return tuple(grads[j].reshape(leaves[0].shape) for j in range(len(NODES)))


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the backward walk with exactly one link wrong; it
# returns only the gradients that link changes and refuses any other name, so
# no call of it is the right answer.

_CHANGES = {
    "tanh_derivative_of_d": ("grad_d", "grad_e", "grad_c", "grad_a", "grad_b"),
    "tanh_derivative_missing": ("grad_d", "grad_e", "grad_c", "grad_a", "grad_b"),
    "sum_splits_the_gradient": ("grad_e", "grad_c", "grad_a", "grad_b"),
    "product_partners_swapped": ("grad_a", "grad_b"),
    "upstream_gradient_dropped": ("grad_a", "grad_b"),
    "last_product_own_value": ("grad_f", "grad_g", "grad_d", "grad_e", "grad_c", "grad_a", "grad_b"),
}


def _with_mistake(mistake: Any, a: Any, b: Any, c: Any, g: Any) -> Any:
    if mistake not in _CHANGES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_CHANGES)}")
    d = a * b + c
    f = np.tanh(d)
    own = mistake == "last_product_own_value"
    grad_f, grad_g = (f, g) if own else (g, f)
    if mistake == "tanh_derivative_of_d":
        grad_d = grad_f * (1.0 - d**2)
    elif mistake == "tanh_derivative_missing":
        grad_d = grad_f
    else:
        grad_d = grad_f * (1.0 - f**2)
    half = 0.5 if mistake == "sum_splits_the_gradient" else 1.0
    grad_e = grad_c = grad_d * half
    if mistake == "product_partners_swapped":
        grad_a, grad_b = grad_e * a, grad_e * b
    elif mistake == "upstream_gradient_dropped":
        grad_a, grad_b = b, a
    else:
        grad_a, grad_b = grad_e * b, grad_e * a
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
    title="The chain rule by node: the gradient of L = tanh(a·b + c)·g at every node",
    outputs=tuple(Output(f"grad_{node}", node) for node in NODES),
    mistakes=(
        Mistake(
            "tanh_derivative_of_d",
            "wrong_derivative",
            "your grad_d uses 1 − d². The derivative of tanh is 1 − tanh(d)² = 1 − f²: square f, "
            "not d. grad_e, grad_c, grad_a and grad_b inherit the error.",
            variant(_with_mistake, "tanh_derivative_of_d"),
        ),
        Mistake(
            "tanh_derivative_missing",
            "skipped_step",
            "your grad_d equals dL/df: the tanh's local derivative is missing. "
            "grad_d = dL/df * (1 − f²), and grad_e, grad_c, grad_a, grad_b follow from it.",
            variant(_with_mistake, "tanh_derivative_missing"),
        ),
        Mistake(
            "sum_splits_the_gradient",
            "wrong_derivative",
            "your grad_e and grad_c are half of dL/dd. A sum d = e + c passes the gradient to "
            "each input unchanged (∂d/∂e = ∂d/∂c = 1): it copies, it does not split. "
            "grad_a and grad_b inherit the error.",
            variant(_with_mistake, "sum_splits_the_gradient"),
        ),
        Mistake(
            "product_partners_swapped",
            "wrong_derivative",
            "your grad_a is dL/de * a and your grad_b is dL/de * b. For e = a * b, ∂e/∂a is the "
            "*other* factor: grad_a = dL/de * b and grad_b = dL/de * a.",
            variant(_with_mistake, "product_partners_swapped"),
        ),
        Mistake(
            "upstream_gradient_dropped",
            "skipped_step",
            "your grad_a is b and your grad_b is a: the local derivatives only. The chain rule "
            "multiplies each by the gradient arriving from above: grad_a = dL/de * b, "
            "grad_b = dL/de * a.",
            variant(_with_mistake, "upstream_gradient_dropped"),
        ),
        Mistake(
            "last_product_own_value",
            "wrong_derivative",
            "your grad_f is f and your grad_g is g. For L = f * g, ∂L/∂f is the other factor g, and "
            "∂L/∂g is f; every gradient below f (grad_d, grad_e, grad_c, grad_a, grad_b) "
            "inherits the error.",
            variant(_with_mistake, "last_product_own_value"),
        ),
    ),
)
register(EXERCISE)
