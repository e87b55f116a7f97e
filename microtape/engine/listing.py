"""The tape as text: a distinct name for every variable, and the program listing (like a jaxpr).

:class:`~microtape.engine.tape.Tape` calls these: ``tape.variable_names()``,
``tape.variable(name)``, ``print(tape)``. They read nodes (``.name``,
``.module``, ``.op``, ``.inputs``, ``.params``, ``.data``) and change nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from .lean import NotKept
from .node import Node
from .protocols import Value

__all__ = ["variable_names", "variable", "listing", "index_part_text"]


def variable_names(nodes: Sequence[Node], leaves: Sequence[Node]) -> dict[Node, str]:
    """A distinct, readable name for every variable: ``{node: name}``.

    A node's own ``name`` when no other variable has it; otherwise the
    name qualified by its module (``q_proj.xW^T``), and if that is still
    shared, numbered in tape order (``e#1``, ``e#2``). Unnamed equations
    are ``%i`` (``i`` their position), unnamed leaves ``in0``, ``in1``, …
    """
    variables = [*leaves, *nodes]
    wanted = Counter(node.name for node in variables if node.name)
    names = {}
    for i, leaf in enumerate(leaves):
        names[leaf] = (leaf.name and _own_name(leaf, wanted)) or f"in{i}"
    for i, node in enumerate(nodes):
        names[node] = (node.name and _own_name(node, wanted)) or f"%{i}"
    shared = {name for name, count in Counter(names.values()).items() if count > 1}
    if shared:  # numbered in tape order (only these: a long tape has 100,000 names and no repeats)
        numbered: Counter[str] = Counter()
        for node, name in names.items():
            if name in shared:
                numbered[name] += 1
                names[node] = f"{name}#{numbered[name]}"
    return names


def variable(listed: dict[Node, str], name: str) -> Node:
    """The node called ``name`` among ``listed`` (``{node: listing name}``); never guesses.

    ``name`` is a listing name or a node's own ``name`` if exactly one node
    has it; otherwise ``KeyError`` with the names that tell them apart.
    """
    if not isinstance(name, str):
        raise TypeError(f"tape lookup: expected a name (str), got {type(name).__name__}")
    by_listing = {listed_name: node for node, listed_name in listed.items()}
    if name in by_listing:
        return by_listing[name]
    owners = [node for node in by_listing.values() if node.name == name]
    if len(owners) == 1:
        return owners[0]
    if owners:
        choices = ", ".join(listed[node] for node in owners)
        raise KeyError(f"{len(owners)} variables on this tape are named {name!r}; say which one: {choices}")
    available = ", ".join(listed[node] for node in by_listing.values() if node.name) or "(none: give nodes a name=...)"
    raise KeyError(f"no variable named {name!r} on this tape; the named variables are: {available}")


def listing(nodes: Sequence[Node], leaves: Sequence[Node], names: dict[Node, str], limit: int = 60) -> str:
    """The program as text, one equation a line."""
    lines = []
    if leaves:
        lines.append("inputs: " + ", ".join(f"{names[x]}{_shape_text(x)}" for x in leaves))
    shown = nodes if len(nodes) <= limit else nodes[: limit - 10]
    width = max((len(names[n]) for n in shown), default=0)
    for i, node in enumerate(shown):
        args = ", ".join(names[x] for x in node.inputs)
        params = ""
        if node.params:
            params = "; " + ", ".join(f"{k}={_param_text(v)}" for k, v in node.params.items())
        where = f"   [{node.module}]" if node.module else ""
        lines.append(f"{i:>4}  {names[node]:<{width}} = {node.op.name}({args}{params}){_shape_text(node)}{where}")
    if len(shown) < len(nodes):
        skipped = len(nodes) - len(shown) - 1
        last = nodes[-1]
        lines.append(f"   …  ({skipped} more equations)")
        lines.append(f"{len(nodes) - 1:>4}  {names[last]} = {last.op.name}(…){_shape_text(last)}")
    return "\n".join(lines)


def _own_name(node: Node, wanted: Counter[str]) -> str | None:
    """A node's name, qualified by its module when another variable has the same name."""
    if not node.name:
        return None
    if wanted[node.name] > 1 and node.module and not node.name.startswith(node.module + "."):
        return f"{node.module}.{node.name}"
    return node.name


def _shape_text(node: Node) -> str:
    data = node.data
    if data.__class__ is float:
        return f" = {data:.4g}"
    if data.__class__ is NotKept:  # dropped by a lean tape: the shape is all there is
        return f" : {data.dtype.name}{list(data.shape)}  (value not kept)"
    return f" : {data.dtype.name}{list(data.shape)}"


def index_part_text(part: Any) -> str:
    """One part of an index key as it is written: ``1:3``, ``::2``, ``...``, ``0`` (arrays by shape)."""
    if isinstance(part, slice):
        text = ":".join("" if v is None else str(v) for v in (part.start, part.stop, part.step))
        return text[:-1] if part.step is None else text
    if part is Ellipsis:
        return "..."
    return _param_text(part)


def _param_text(value: Value) -> str:
    if isinstance(value, np.ndarray):
        return f"array{list(value.shape)}"
    if isinstance(value, tuple) and any(isinstance(v, (slice, np.ndarray)) or v is None or v is ... for v in value):
        return "[" + ", ".join(index_part_text(v) for v in value) + "]"  # an index key: [:, 1:3, array[3]]
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)
