"""Rows a picture keeps in order, so ``dot`` draws siblings as they were recorded.

``dot`` orders each rank as it sees fit, and may put ``v_proj`` before
``q_proj`` or sample 7 before sample 0. A view asks this module for

* :func:`sibling_rows`: the computations that could run side by side, in
  recorded order;
* :func:`junctions`, :func:`junction_rows`, :func:`below_junctions`: where a
  parameter shared by sibling modules splits into each module's uses, kept in
  one row above the modules it feeds (see :class:`~microtape.viz.boxes.Junction`).
"""

from typing import Any

from .boxes import Junction
from .clusters import by_module, within

__all__ = ["sibling_rows", "junctions", "junction_rows", "below_junctions"]


def sibling_rows(view: Any) -> Any:
    """Rows to keep in tape order: sibling computations side by side, left to right.

    Within each cluster, the
    computations that could run side by side — its boxes and its
    sub-clusters (each represented by its first box), at the same depth
    (longest path from a leaf) and with no path from one to another — are
    kept in the order they were recorded.
    """
    computed = [box for box in view.boxes if box.kind in ("op", "shape", "summary")]
    depth = _depths(view)
    first: dict[Any, Any]
    unit_of, first = {}, {}  # (cluster, box id) -> the box's unit in that cluster; unit -> its first box
    for box in computed:
        unit, path = ("box", box.id), box.cluster
        unit_of[(path, box.id)] = unit
        first.setdefault(unit, box.id)
        while path:
            parent = path.rpartition(".")[0]
            unit_of[(parent, box.id)] = ("cluster", path)
            first.setdefault(("cluster", path), box.id)
            path = parent
    reads: dict[Any, Any] = {}  # unit -> the units of the same cluster it reads from
    for link in view.links:
        path = view.by_id[link.head].cluster
        while True:
            tail, head = unit_of.get((path, link.tail)), unit_of.get((path, link.head))
            if tail is not None and head is not None and tail != head:
                reads.setdefault(head, set()).add(tail)
            if not path:
                break
            path = path.rpartition(".")[0]
    before = _Upstream(reads)
    rows: dict[Any, Any] = {}
    for (path, box_id), unit in unit_of.items():
        if first[unit] == box_id:
            rows.setdefault((path, depth.get(box_id, 0)), []).append(unit)
    orders = []
    for units in rows.values():
        row: list[Any] = []
        for unit in units:  # recorded order
            if all(unit not in before[kept] and kept not in before[unit] for kept in row):
                row.append(unit)
        if len(row) > 1:
            orders.append([first[unit] for unit in row])
    return orders


def _depths(view: Any) -> Any:
    """``{box id: longest path from a leaf}`` for the computed boxes (leaves are at depth 0)."""
    depth: dict[Any, Any] = {}
    for link in view.links:  # in tape order of their heads
        base = depth.get(link.tail, 0) if view.by_id[link.tail].kind in ("op", "shape", "summary") else 0
        depth[link.head] = max(depth.get(link.head, 0), base + 1)
    return depth


def junctions(view: Any) -> Any:
    """A :class:`Junction` for each (shared parameter, sibling module it feeds), parameters in order."""
    uses: dict[Any, Any] = {}  # parameter box id -> [link indices]
    for k, link in enumerate(view.links):
        if link.tail in view.shared:
            uses.setdefault(link.tail, []).append(k)
    junctions: list[Any] = []
    for tail, links in uses.items():
        modules = by_module([view.by_id[view.links[k].head].cluster for k in links])
        modules.pop(None, None)
        for module, positions in modules.items():
            fed = [links[p] for p in positions]
            junctions.append(Junction(f"j{len(junctions)}", view.by_id[tail].cluster, tail, module, fed))
    return junctions


def junction_rows(view: Any) -> Any:
    """The junctions side by side in one row, module by module in recorded order."""
    recorded: dict[Any, Any] = {}
    for box in view.boxes:
        path = box.cluster
        while path:
            recorded.setdefault(path, len(recorded))
            path = path.rpartition(".")[0]
    row = [j.id for j in sorted(view.junctions, key=lambda j: recorded[j.module])]
    return [row] if len(row) > 1 else []


def below_junctions(view: Any) -> Any:
    """``(junction, box)`` pairs: boxes that nothing feeds, kept below a junction row.

    With the junction row above every module it feeds, the row alone
    decides the modules' order: a module's constants drawn level with the
    junctions would let ``dot`` slide the module under another's
    junctions. Each module's unfed boxes go below its first junction, its
    first unfed box below each of its other junctions (more lines tying
    the module to its place), and the constants beside the row (the 0
    that Python's ``sum`` starts from) below the row.
    """
    if not view.junctions:
        return []
    fed = {link.head for link in view.links}
    of_module: dict[Any, Any] = {}
    for junction in view.junctions:
        of_module.setdefault(junction.module, []).append(junction.id)
    unfed: dict[Any, Any]
    unfed, pairs = {}, []
    for box in view.boxes:
        if box.id in fed or box.id in view.shared:
            continue
        module = next((m for m in of_module if within(box.cluster, (m,))), None)
        if module is not None:
            unfed.setdefault(module, []).append(box.id)
        elif box.kind == "constant" and not box.cluster:
            pairs.append((view.junctions[0].id, box.id))
    for module, ids in unfed.items():
        first, *others = of_module[module]
        pairs += [(first, i) for i in ids] + [(other, ids[0]) for other in others]
    return pairs


# -- questions the painters ask


class _Upstream(dict):
    """``upstream[unit]``: every unit it depends on (through ``reads``), found when first asked."""

    def __init__(self, reads: Any) -> None:
        super().__init__()
        self.reads = reads

    def __missing__(self, start: Any) -> Any:
        stack, seen = [start], set()
        while stack:
            for tail in self.reads.get(stack.pop(), ()):
                if tail not in seen:
                    seen.add(tail)
                    stack.append(tail)
        self[start] = seen
        return seen
