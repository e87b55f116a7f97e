"""Which module (cluster) each box of a picture is drawn in, and questions about module paths.

A module path is dotted (``"layer0.self_attn.q_proj"``); ``""`` is the top
level. A view reads these to place boxes and to find sibling modules.
"""

from typing import Any

__all__ = ["equation_clusters", "by_module", "summary_cluster", "expand_paths", "within"]


def equation_clusters(program: Any, group: Any) -> Any:
    """The module path each equation is drawn in (see "Clusters" in the module docstring).

    An equation recorded outside every module joins the top-level module of
    the equation recorded just before it when all its computed inputs come
    from that module — a sample's loss, computed right after the sample —
    provided the results of several modules meet later (otherwise it is a
    step after the whole computation, like a loss on a layer's output, and
    stays outside).
    """
    equations = program.equations
    if group != "module":
        return [""] * len(equations)
    paths = [node.module for node in equations]
    if not any(paths):
        return paths  # no module anywhere: nothing to join (a long chain's 50,000 equations)
    top = [path.split(".")[0] for path in paths]
    joins, merges = {}, False
    for i, node in enumerate(equations):
        if paths[i]:
            continue
        sources = {top[k] for k in (program.index.get(x) for x in node.inputs) if k is not None}
        if len(sources) > 1:
            merges = True  # the results of several modules meet here
        elif len(sources) == 1 and i > 0 and top[i - 1] in sources and top[i - 1] and _feeds_outside(program, i):
            top[i] = joins[i] = top[i - 1]
    if merges:
        for i, path in joins.items():
            paths[i] = path
    return paths


def _feeds_outside(program: Any, i: Any) -> Any:
    """True when equation ``i``'s result is read only by equations outside every module (or by none).

    A sample's loss, computed after the sample's scope closed, feeds the sum
    of the losses; a residual sum after a sublayer (``x + self_attn(x)``) or
    an activation between two Linears feeds the next module, and is a step of
    its own, not part of the module before it.
    """
    equations = program.equations
    return all(not equations[k].module for k in program.consumers[i])


def by_module(paths: Any) -> Any:
    """Positions of ``paths`` by the module directly inside the innermost module holding them all.

    ``{module: [positions]}``; the key None collects the paths that are that
    innermost module itself. For uses in ``sample0.neuron1``, ``sample1`` and
    ``sample2.neuron0``: ``{"sample0": [0], "sample1": [1], "sample2": [2]}``.
    """
    parts = [path.split(".") if path else [] for path in paths]
    depth = 0
    while all(len(names) > depth for names in parts) and len({names[depth] for names in parts}) == 1:
        depth += 1
    modules: dict[Any, Any] = {}
    for position, names in enumerate(parts):
        module = ".".join(names[: depth + 1]) if len(names) > depth else None
        modules.setdefault(module, []).append(position)
    return modules


def summary_cluster(key: Any) -> Any:
    """Where a summary sits: a module's in its parent's cluster, a stretch ("path#k") in its own module."""
    module, stretch, _ = key.partition("#")
    return module if stretch else module.rpartition(".")[0]


def _all_paths(clusters: Any) -> Any:
    paths = set()
    for path in clusters:
        while path:
            paths.add(path)
            path = path.rpartition(".")[0]
    return paths


def expand_paths(expand: Any, clusters: Any) -> Any:
    if expand is None:
        return ()
    paths = (expand,) if isinstance(expand, str) else tuple(expand)
    known = _all_paths(clusters)
    for path in paths:
        if not isinstance(path, str) or path not in known:
            listed = ", ".join(sorted(known)) or "(none: this graph has no modules)"
            raise ValueError(f"graph(expand={expand!r}): no module {path!r} in this graph; its modules are: {listed}")
    return paths


def within(path: Any, modules: Any) -> Any:
    """True when ``path`` is one of ``modules`` or inside one of them."""
    return any(path == module or path.startswith(module + ".") for module in modules)
