"""The attention layer's gradients by name: the tape route read under the analytic route's names.

:func:`named_tape_gradients` turns one reverse pass (the layer's own, or a
larger one that recorded its last forward) into the names both routes share
(``"weights"`` is dP, ``"Q_heads"`` dQ, …), with the step completing each;
:func:`backward_order` lists names from the output back to the inputs;
:func:`gradient_per_input` says what each input node receives.
"""

from typing import Any

from ..two_routes import NamedGradients
from .chain import step_names

__all__ = ["named_tape_gradients", "backward_order", "gradient_per_input"]


def named_tape_gradients(layer: Any, result: Any) -> Any:
    """The reverse pass's gradients under the analytic route's names, with the step completing each.

    ``result`` is the reverse pass of ``layer``'s tape or of a larger one that
    recorded its last forward (a Transformer layer's: its one pass serves its
    attention's rows too); indices are on ``result.tape``.
    """
    last = layer._last
    index_of = {node: i for i, node in enumerate(result.tape.nodes)}
    grads = NamedGradients(reverse_pass=result)
    for name, node in last.nodes.items():
        grads[name], grads.completed_at[name] = result[node], index_of[node]
    for name, tensor in layer.named_parameters():
        grads[name], grads.completed_at[name] = result[tensor], result.completed_at(tensor)
    for role, product in last.products.items():
        # What this role's projection sent back: dk and dv stay apart even
        # when key and value are one node.
        index = index_of[product]
        grads[role], grads.completed_at[role] = result.step_at(index).grad_inputs[0], index
    if last.self_attention:
        # What the three projections sent to x, summed in the order the pass adds them (v, k, then q).
        # On the layer's own tape that sum is result[x] (x has no other use there): no second sum. In a
        # larger computation result[x] also holds x's other uses (a residual), so the sum is made here.
        x = last.inputs["query"]
        own = result.tape is last.tape and x in result
        grads["x"] = result[x] if own else grads["value"] + grads["key"] + grads["query"]
        grads.completed_at["x"] = grads.completed_at["query"]
    return grads


def backward_order(names: Any) -> Any:
    """Gradient names from the output back to the inputs (the order the pass completes them)."""
    forward = {name: i for i, name in enumerate(step_names())}
    steps = sorted((n for n in names if n in forward), key=lambda n: -forward[n])
    return steps + [n for n in names if n not in forward]


def gradient_per_input(last: Any, grads: Any) -> Any:
    """``[(input node, gradient)]``, each node once: the sum over the roles it played (key and value, say).

    Self-attention's one input gets ``x``, what all three projections sent back.
    """
    if last.self_attention:
        return [(last.inputs["query"], grads["x"])]
    totals: dict[Any, Any] = {}  # id(node) -> [node, the sum of its roles' gradients, in role order]
    for role, node in last.inputs.items():
        if id(node) in totals:
            totals[id(node)][1] = totals[id(node)][1] + grads[role]
        else:
            totals[id(node)] = [node, grads[role]]
    return [tuple(pair) for pair in totals.values()]
