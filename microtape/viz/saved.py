"""Saved values on the graph: what each step's VJP will read, as small boxes of their own.

This module lets :func:`microtape.viz.graph` answer "what does backward keep?"::

    mt.viz.graph(tape, saved=True)        # every step: the values its VJP reads
    mt.viz.graph(attn, saved=True)        # a lean layer: kept and dropped values
    mt.viz.graph(hessian_tape)            # a recorded derivative: steps coloured by order

Each op declares what its VJP reads (:attr:`microtape.ops.Op.reads`:
``softmax`` its output, ``matmul`` both operands, ``scale`` nothing). With
``saved=True`` each step box gets, for every value its VJP reads, a small
box — the value's name, shape, dtype and bytes — joined to it by a dotted
purple line (not a data edge: nothing flows along it; the step *holds* it
until its backward runs). What an op saved from its forward
(``node.residuals``: the tiled op's row statistics) is drawn the same way.
On a lean tape, the values it dropped are drawn as crossed-out grey boxes
beside the step that made them, with the bytes freed. A module drawn as one
summary box gets one saved box: how many values, how many bytes, the
largest three by name.

Second order: the steps of a recorded derivative (``create_graph=True``
runs each VJP in a module ``∂name``) are filled by their order — the
function, first-derivative steps, second-derivative steps — in every
graph, with a legend (:func:`microtape.viz.lifetimes.order_of`).
"""

from typing import Any

import numpy as np

from ..engine.lean import NotKept
from .lifetimes import VIEW_OPS, human_bytes, order_of
from .picture import Arrow, Shape

__all__ = ["add_saved", "colour_orders", "read_values"]


def read_values(node: Any, names: Any) -> Any:
    """``[(name, value)]`` the VJP of ``node``'s op reads: read operands, the output, saved residuals."""
    op = node.op
    read = [(names[node.inputs[k]], node.inputs[k].data) for k in op.read_inputs]
    if op.reads_output:
        read.append((names[node], node.data))
    residuals = getattr(node, "residuals", None) if op.forward_saving is not None and node.params else None
    if residuals is not None:
        arrays = residuals if isinstance(residuals, (tuple, list)) else [residuals]
        read += [(f"{names[node]}: saved{'' if len(arrays) == 1 else k}", r) for k, r in enumerate(arrays)]
    return read


def _describe(data: Any) -> Any:
    """``(shape and dtype, bytes)`` of a value: ``float64[2, 5, 5]``, ``400 B``; a float is 8 bytes."""
    if data.__class__ is float:
        return "float", 8
    shape = tuple(np.shape(data))
    dtype = np.dtype(data.dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return f"{dtype.name}[{', '.join(map(str, shape))}]", nbytes


def add_saved(picture: Any, view: Any) -> Any:
    """Add the saved-value boxes (and, on a lean tape, the dropped ones) to ``picture``; returns it."""
    program = view.program
    names = program.names
    shapes_by_id = {shape.id: shape for shape in picture.shapes}
    per_box: dict[Any, Any] = {}  # box id -> [(name, data, dropped)] in tape order
    for i, node in enumerate(program.equations):
        box_id = view.box_of(i)
        if box_id not in shapes_by_id:
            continue
        entries = per_box.setdefault(box_id, [])
        for name, data in read_values(node, names):
            entries.append((name, data, False))
        if isinstance(node.data, NotKept):
            # A dropped view (reshape, transpose) freed nothing: its numbers were its input's.
            entries.append((names[node], node.data, "view" if node.op.name in VIEW_OPS else True))
    count = 0
    for box_id, entries in per_box.items():
        host = shapes_by_id[box_id]
        if not entries:
            continue
        if host.kind == "summary":
            groups = [_summary_entry(entries)]
        else:
            seen, groups = set(), []
            for name, data, dropped in entries:
                if (name, dropped) not in seen:
                    seen.add((name, dropped))
                    groups.append(_one_entry(name, data, dropped))
        for kind, lines in groups:
            if kind is None:
                continue
            shape_id = f"saved{count}"
            count += 1
            picture.shapes.append(Shape(shape_id, kind, host.cluster, lines))
            picture.arrows.append(Arrow(shape_id, box_id, saved=True))
    kinds = [k for k in ("saved", "dropped") if any(s.kind == k for s in picture.shapes)]
    picture.legend = list(picture.legend) + [("kind", k) for k in kinds]
    return picture


def _one_entry(name: str, data: Any, dropped: Any) -> Any:
    described, nbytes = _describe(data)
    if dropped == "view":
        return "dropped", [(f"✗ {name}", "name"), (f"{described}, a view: 0 B freed", "info")]
    if dropped:
        return "dropped", [(f"✗ {name}", "name"), (f"{described}, {human_bytes(nbytes)} freed", "info")]
    return "saved", [(name, "name"), (f"{described}, {human_bytes(nbytes)}", "info")]


def _summary_entry(entries: Any) -> Any:
    """One box for a summary: how many values its steps read, their bytes, the largest three."""
    kept: dict[Any, Any] = {}
    dropped = 0
    for name, data, gone in entries:
        if gone == "view":
            continue
        if gone:
            dropped += _describe(data)[1]
        else:
            kept.setdefault(name, _describe(data)[1])
    if not kept and not dropped:
        return None, []
    largest = sorted(kept, key=lambda n: -kept[n])[:3]
    lines = [(f"saved {human_bytes(sum(kept.values()))}", "name")]
    if largest:
        more = f" +{len(kept) - 3}" if len(kept) > 3 else ""
        lines.append((", ".join(largest) + more, "info"))
    if dropped:
        lines.append((f"dropped (lean): {human_bytes(dropped)}", "info"))
    return "saved", lines


def colour_orders(picture: Any, view: Any) -> Any:
    """Mark every step box with its order (0 function, 1 first derivative, …) when any is above 0."""
    program = view.program
    if not any(node.module and "∂" in node.module for node in program.equations):
        return picture
    orders = order_of(program)
    by_id = {box.id: box for box in view.boxes}
    used = set()
    for shape in picture.shapes:
        box = by_id.get(shape.id)
        if box is None or not box.equations:
            continue
        shape.order = max(orders[i] for i in box.equations)
        used.add(min(shape.order, 2))
    if len(used) > 1 or used - {0}:
        picture.legend = list(picture.legend) + [("order", k) for k in sorted(used)]
    return picture
