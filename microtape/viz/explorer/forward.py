"""Forward mode, stepped: the tangents pushed through the tape one equation at a time, for the explorer.

This module lets the explorer step a Jacobian-vector product the way it
steps the backward pass::

    data["forward"] = forward_data(program, {"a": 1.0})   # a tangent per leaf, by node or by name
    data["forward"]["steps"][2]   # "step 2 of steps 0–3: %2 = %0 + %1: ẏ = 1·(-3) + 1·4 = 1"

Step ``k`` handles the ``k``-th equation (in tape order) that some tangent
reaches: its tangent ``ẏ = Σ ∂y/∂x · ẋ`` over its inputs, each local
derivative the one the backward panel shows (:mod:`.local`). The tangents
are :func:`microtape.transforms.forward_mode.push_forward`'s: the op's own
JVP rules, not a second implementation.
"""

from typing import Any

import numpy as np

from ...engine import Node
from ...transforms.forward_mode import push_forward
from ..text import number, step_text
from .local import expression, local_derivative
from .values import show_grad

__all__ = ["forward_data", "leaf_tangents"]


def leaf_tangents(program: Any, tangents: Any) -> Any:
    """``{leaf node: tangent}`` from a dict keyed by leaf nodes or their names (clear errors otherwise)."""
    if not isinstance(tangents, dict) or not tangents:
        raise TypeError(f"tangents=...: expected a dict {{leaf or name: tangent}}, got {tangents!r}")
    by_name = {program.name(leaf): leaf for leaf in program.leaves}
    found = {}
    for key, tangent in tangents.items():
        leaf = key if isinstance(key, Node) and key in program.leaf_index else by_name.get(key)
        if leaf is None:
            names = ", ".join(sorted(by_name))
            raise ValueError(f"tangents=...: {key!r} is not a leaf of this computation; its leaves are {names}")
        value = float(tangent) if leaf.data.__class__ is float else np.asarray(tangent, dtype=np.float64)
        if leaf.data.__class__ is not float and np.shape(value) != np.shape(leaf.data):
            raise ValueError(
                f"tangents[{program.name(leaf)!r}]: shape {np.shape(value)}, expected the leaf's {np.shape(leaf.data)}"
            )
        found[leaf] = value
    return found


def forward_data(program: Any, tangents: Any) -> Any:
    """The forward-mode steps and every node's tangent (see the module docstring)."""
    seeds = leaf_tangents(program, tangents)
    pushed = push_forward(program.tape, seeds)
    reached = [i for i, node in enumerate(program.equations) if node in pushed]
    count = len(reached)
    steps, step_of = [], {}
    for k, i in enumerate(reached):
        node = program.equations[i]
        step_of[program.name(node)] = k
        sources = [x for x in node.inputs if x in pushed]
        text = f"{step_text(k, count)}: {program.name(node)} = {expression(node, program.names)}: "
        text += _tangent_sum(program, i, pushed) + f" = {show_grad(pushed[node])['text']}"
        steps.append({"node": program.name(node), "text": text, "to": [program.name(x) for x in sources], "order": 0})
    shown = ", ".join(f"{program.name(leaf)} = {show_grad(t)['text']}" for leaf, t in seeds.items())
    return {
        "steps": steps,
        "before": f"before forward mode: the tangents ẋ of the inputs, {shown}",
        "tangents": {program.name(node): show_grad(t) for node, t in pushed.items()},
        "step_of": step_of,
        "seeded": [program.name(leaf) for leaf in seeds],
    }


def _tangent_sum(program: Any, i: Any, pushed: Any) -> Any:
    """``ẏ = ∂y/∂a·ȧ + ∂y/∂b·ḃ``, with this run's numbers for Scalars."""
    node = program.equations[i]
    terms = []
    for position, x in enumerate(node.inputs):
        if x not in pushed:
            continue
        local = local_derivative(program, i, position)
        dot = f"d{program.name(x)}"
        if local.get("value") is not None:
            terms.append(f"{number(local['value'])}·{number(pushed[x])}")
        else:
            terms.append(f"J_{program.name(x)}·{dot}")
    return f"d{program.name(node)} = " + " + ".join(terms)
