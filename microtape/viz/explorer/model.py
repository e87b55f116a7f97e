"""The explorer's data: every node's panel and every step of the backward pass, as plain JSON-ready data.

This module lets the page (saved or in the widget) answer a click without
Python::

    data = explore_data(tape)           # or a result, a layer that ran, a scalar trace
    data["nodes"]["a"]                  # the panel of a: value, gradient, its uses, their local derivatives
    data["steps"][3]                    # step 3 of the backward pass: who, what it receives, what it sends

What a node's panel holds
-------------------------
``op`` and ``expr`` (an equation: ``mul``, ``a·b``), ``shape``, ``value`` and
``grad`` (:mod:`.values`), ``local`` — for each input of the equation, the
local derivative in words and numbers (:mod:`.local`) — ``uses`` — for each
place the node is read: the local derivative there, the upstream gradient
``g`` that arrives at that equation, and their product, this use's share
of the node's gradient (the chain rule); the shares sum to ``grad`` —
and ``saved``: what the VJP of this equation reads (:func:`microtape.viz.saved.read_values`).

The steps are the engine's (:func:`microtape.gradients` with ``steps=True``,
read through :func:`microtape.viz.program.trace_backward`): step ``s``
handles one equation, which receives its complete gradient and sends a
share to each input. ``step`` and ``gets`` on a node say when it is
handled and when each share arrives, so the page can colour the graph at
any step.
"""

from typing import Any

import numpy as np

from ..lifetimes import order_of
from ..paint import Painter, describe
from ..picture import ORDER_TEXT
from ..saved import read_values
from ..text import shape_text, step_text
from .local import expression, local_derivative
from .values import cells, show, show_grad

__all__ = ["node_panels", "backward_steps", "seed_text", "MAX_USES"]

MAX_USES = 40  # uses listed one by one on a panel; the rest are counted (their sum is still the gradient)


def _uses_of(program: Any) -> Any:
    """``{node: [(equation index, operand position), ...]}`` for every value some equation reads."""
    uses: dict[Any, Any] = {}
    for i, node in enumerate(program.equations):
        for position, x in enumerate(node.inputs):
            uses.setdefault(x, []).append((i, position))
    return uses


def node_panels(program: Any, trace: Any) -> Any:
    """``{name: panel}`` for every equation and leaf of ``program`` (see the module docstring)."""
    uses = _uses_of(program)
    orders = order_of(program)
    found = {}

    def local(
        i: Any, position: Any
    ) -> Any:  # each use's local derivative, worked out once (a node's panel and its input's)
        key = (i, position)
        if key not in found:
            found[key] = local_derivative(program, i, position)
        return found[key]

    panels = {}
    for j, leaf in enumerate(program.leaves):
        panels[program.name(leaf)] = _leaf_panel(program, trace, leaf, program.kinds[j], uses, local)
    for i, node in enumerate(program.equations):
        panels[program.name(node)] = _equation_panel(program, trace, i, uses, orders[i], local)
    return panels


def _base(program: Any, trace: Any, node: Any, uses: Any, local: Any) -> Any:
    scalar = node.data.__class__ is float
    grad = trace.total.get(node)
    panel = {
        "name": program.name(node),
        "scalar": scalar,
        "shape": "" if scalar else shape_text(node.data),
        "value": show(node.data, constant=not node.requires_grad),
        "grad": show_grad(grad, trace.noise(node)) if node.requires_grad else None,
        "output": node in trace.seeds,
        "module": node.module or "",
    }
    panel["uses"], panel["more_uses"] = _use_entries(program, trace, node, uses.get(node, ()), local)
    # when its shares arrive, from every use (a constant receives none: it stays "off" as the pass goes by)
    panel["gets"] = sorted(
        {
            trace.step_of[i]
            for i, position in uses.get(node, ())
            if i in trace.step_of and trace.sent[trace.step_of[i]][position] is not None
        }
    )
    if node in trace.seeds:
        panel["gets"].insert(0, -1)  # the seed is there before the first step
        panel["seed"] = show_grad(trace.seeds[node])
    return panel


def _leaf_panel(program: Any, trace: Any, leaf: Any, kind: Any, uses: Any, local: Any) -> Any:
    panel = _base(program, trace, leaf, uses, local)
    panel.update(kind=kind, op=kind, expr="", step=None, local=[], saved=[], order=0)
    return panel


def _equation_panel(program: Any, trace: Any, i: Any, uses: Any, order: Any, local: Any) -> Any:
    node = program.equations[i]
    panel = _base(program, trace, node, uses, local)
    panel.update(kind="op", op=describe(node), expr=expression(node, program.names), order=order)
    panel["order_text"] = ORDER_TEXT.get(order, f"order-{order} derivative step") if order else ""
    panel["step"] = trace.step_of.get(i)
    panel["local"] = [
        _pruned({"input": program.name(x), **local(i, position)}) for position, x in enumerate(node.inputs)
    ]
    panel["saved"] = [[name, " ".join(show(data)["text"].split())] for name, data in read_values(node, program.names)]
    panel["inputs"] = [program.name(x) for x in node.inputs]
    return panel


def _use_entries(program: Any, trace: Any, node: Any, places: Any, local_of: Any) -> Any:
    """Each use of ``node``: the chain rule's product there (upstream × local = share), in tape order."""
    entries = []
    shape = np.shape(node.data)
    for i, position in places[:MAX_USES]:
        consumer = program.equations[i]
        s = trace.step_of.get(i)
        local = local_of(i, position)
        share = trace.sent[s][position] if s is not None else None
        upstream = trace.grad_out.get(i)
        entry = {
            "at": program.name(consumer),
            "step": s,
            "symbol": local["symbol"],
            "text": local["text"],
            "numbers": local["numbers"],
            "local": local["value"],
            # (text and number: the heatmaps are the consumer's gradient and share_cells below)
            "upstream": show_grad(upstream, heat=False),
            "share": show_grad(share, trace.noise(node), heat=False),
        }
        entry = _pruned(entry)
        if share is not None and np.size(share) > 1 and len(places) > 1:
            # (one use: its share is the whole gradient, whose heatmap the panel has already)
            entry["share_cells"] = cells(share, shape, trace.noise(node))
        entries.append(entry)
    return entries, max(0, len(places) - MAX_USES)


def _pruned(entry: Any) -> Any:
    """``entry`` without its empty fields (a big tape has thousands of these: the page reads a missing one as empty)."""
    return {key: value for key, value in entry.items() if value is not None and value != ""}


def backward_steps(program: Any, trace: Any, view: Any) -> Any:
    """The engine's steps, each ``{"node", "text", "to", "order"}``: who, what happens, who receives."""
    painter = Painter(view, trace)  # the whole pass: its edges' formulas carry this run's numbers
    orders = order_of(program)
    count = len(trace)
    steps = []
    for s, i in enumerate(trace.order):
        node = program.equations[i]
        name = program.name(node)
        receivers = [
            (position, x)
            for position, x in enumerate(node.inputs)
            if x.requires_grad and trace.sent[s][position] is not None
        ]
        sends = [painter.formula(i, position, numbers=True) for position, _ in receivers]
        received = show_grad(trace.grad_out[i], trace.noise(node))["text"]
        text = f"{step_text(s, count)}: {name} = {expression(node, program.names)} receives {received}"
        if orders[i]:  # a step of a recorded derivative (create_graph=True), told apart from the function's
            text += f" [{ORDER_TEXT.get(orders[i], f'order-{orders[i]} derivative step')}]"
        if sends:
            text += "; sends " + ";  ".join(sends)
        if s == count - 1:
            text += "  — done: every leaf has its gradient"
        steps.append({"node": name, "text": text, "to": [program.name(x) for _, x in receivers], "order": orders[i]})
    return steps


def seed_text(program: Any, trace: Any) -> Any:
    """What the pass starts from, before its first step."""
    parts = [f"{program.name(node)} starts with gradient {show_grad(g)['text']}" for node, g in trace.seeds.items()]
    shown = "; ".join(parts[:3]) + (f"; … ({len(parts)} outputs)" if len(parts) > 3 else "")
    return f"before the backward pass: {shown}" if parts else "before the backward pass"
