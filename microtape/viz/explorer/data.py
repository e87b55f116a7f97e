"""Everything the explorer shows about one computation, gathered into one JSON-ready dict.

This module lets :func:`microtape.viz.explore` (and its tests) start from
anything the pictures take::

    data = explore_data(tape)        # a Tape, a Scalar/Tensor result, a layer that ran, a scalar trace
    data["views"][0]["svg"]          # the graph (see .graphs)
    data["nodes"]["a"]               # a node's panel (see .model)
    data["steps"]                    # the backward pass, step by step

It reads the computation through :func:`microtape.viz.program.collect` and
its reverse pass through :func:`~microtape.viz.program.trace_backward` (one
pure pass: no ``.grad`` changes), so it shows what the graphs show.
"""

from collections import Counter
from typing import Any

from ..picture import STATE
from ..program import collect, trace_backward
from .forward import forward_data
from .graphs import graph_views
from .model import backward_steps, node_panels, seed_text

__all__ = ["explore_data", "program_data"]

PALETTE_STATES = ("done", "partial", "current", "pending", "off")


def explore_data(source: Any, *, grad: Any = None, title: str | None = None, tangents: Any = None) -> Any:
    """The explorer's data for ``source`` (see the module docstring); ``grad`` seeds the backward pass.

    ``tangents`` (``{leaf or its name: tangent}``) adds forward mode, stepped the same way (:mod:`.forward`).
    """
    program = collect(source)
    data = program_data(program, trace_backward(program, grad), title=title)
    if tangents is not None:
        data["forward"] = forward_data(program, tangents)
    return data


def _note(overview: Any, count: Any) -> Any:
    """What the overview says of itself: how it was collapsed, and that a click opens a module."""
    if overview.drawn_before is None:
        return overview.note or ""
    opens = "click a module to open it" if count > 1 else "click a summary to list its ops"
    return f"{overview.drawn_before} boxes drawn as {len(overview.boxes)}, one per module: {opens}"


def program_data(program: Any, trace: Any, *, title: str | None = None) -> Any:
    """The explorer's data for a collected program and its reverse pass."""
    views, overview = graph_views(program)
    summaries = {}
    for box in overview.boxes:
        if box.kind == "summary":
            counts = Counter(program.equations[i].op.name for i in box.equations)
            text = f"{len(box.equations)} ops: " + ", ".join(f"{n} {op}" for op, n in counts.most_common())
            names = [program.name(program.equations[i]) for i in box.equations]
            summaries[box.group] = {"members": names, "text": text}
    return {
        "title": title or "",
        "note": _note(overview, len(views)),
        "loss": program.loss_name,
        "views": views,
        "summaries": summaries,
        "nodes": node_panels(program, trace),
        "steps": backward_steps(program, trace, overview),
        "before": seed_text(program, trace),
        "palette": {state: STATE[state][0] for state in PALETTE_STATES},
    }
