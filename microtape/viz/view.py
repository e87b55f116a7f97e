"""Which boxes a picture draws, and which equations and leaves each box stands for.

This module lets graph and frames agree on *what* is drawn before anyone
decides how it looks::

    view = View(program, detail="auto")      # boxes and links, no colours, no numbers
    view.boxes, view.links                   # in a stable order
    view.box_of_equation[i]                  # the id of the box showing equation i
    view.steps(trace)                        # the picture's steps: one per box the pass finishes

How a computation becomes boxes
-------------------------------
* One box per equation (``n{i}``) and per leaf (``x{j}``), in tape order and
  order of first use.
* ``detail="auto"`` folds chains of ``reshape``/``transpose`` into the box of
  their last link (up to a named value: ``K_heads`` and ``K_heads^T`` stay two
  boxes); a chain that starts at a leaf used nowhere else (a Linear's ``W.T``)
  folds into the leaf's box.
* Unnamed one-number constants of the same value in one module (a scalar
  trace's ``-1e9`` mask entries, its ``1/√d`` factors) share a box.
* Above ``max_nodes`` boxes (or with ``detail="summary"``) each module becomes
  one summary box; ``expand="attention.head0"`` keeps one module (or several)
  open. A computation without modules keeps its first and last two equations
  and cuts the rest into about six stretches.
* In big graphs (over 60 equations) a leaf used more than 16 times is drawn
  at each use: its first box is the whole leaf (with its total gradient),
  the others small copies (one hub with hundreds of edges is what makes
  ``dot`` slow) — unless it is a parameter shared by at most 64 sibling
  modules and used at most 16 times in each, which keeps one box and one
  line per module (below).
* Clusters: with ``group="module"`` every box sits in its module's cluster.
  An equation recorded outside every module, right after one module's work
  and reading only its results — a sample's loss, computed after the
  sample's scope closed — is drawn inside that module, when the results of
  several modules meet later (a loss on one layer's output stays outside).
* Sibling computations (Q, K and V; the neurons of a layer; the samples of a
  batch) are kept in the order they were recorded (see :meth:`View._orders`).
* A parameter shared by sibling modules (one MLP's weights on the samples of
  a batch) is drawn once, above them at the top level, with its total
  gradient. One line leaves it for each module and splits at a junction
  point into that module's uses (see :class:`Junction`).
"""

import math

import numpy as np

__all__ = ["View", "Box", "Link", "Junction", "SHAPE_OPS", "MAX_NODES"]

MAX_NODES = 150  # above this many boxes, detail="auto" draws module summaries
SHAPE_OPS = frozenset({"reshape", "transpose"})  # ops that only move numbers
DUPLICATE_LEAVES_ABOVE = 60  # equations; above this, heavily shared leaves are drawn per use
HUB_USES = 16  # a leaf used more often than this is a hub (drawn per use in big graphs)
JUNCTION_MODULES = 64  # ... unless it is a parameter shared by at most this many sibling modules
CHAIN_ENDS = 2  # a computation without modules keeps this many equations at each end
STRETCHES = 6  # ... and cuts the middle into about this many summaries


class Box:
    """One box of a picture: what it stands for, not how it looks."""

    __slots__ = ("id", "kind", "cluster", "equations", "leaves", "copy_of", "group")

    def __init__(self, id, kind, cluster, equations=(), leaves=(), copy_of=None, group=None):
        self.id = id
        self.kind = kind  # op, shape, input, parameter, constant, summary
        self.cluster = cluster  # module path ("" = top level)
        self.equations = list(equations)  # the equations drawn in this box
        self.leaves = list(leaves)  # the leaves drawn in this box
        self.copy_of = copy_of  # a per-use copy of a shared leaf: the id of the leaf's main box
        self.group = group  # a summary: its key (module path, or "path#k" for a stretch)

    @property
    def summarised(self):
        """True for a box that stands for a group (a module summary, or a group of leaves)."""
        return self.group is not None


class Link:
    """An edge: from the box of an input to the box of the equation that reads it.

    ``uses`` lists the ``(equation, operand position)`` pairs it stands for
    (one, unless an end is a summary); ``constant`` is True when none of them
    carries a gradient.
    """

    __slots__ = ("tail", "head", "uses", "constant")

    def __init__(self, tail, head, uses, constant):
        self.tail, self.head, self.uses, self.constant = tail, head, uses, constant


class Junction:
    """The point where a shared parameter's line to one sibling module splits into that module's uses.

    Why not one edge per use: wired straight to every use, a weight shared by
    samples 0…N makes every sample look alike to ``dot``'s crossing
    minimisation, which then orders them at random (the invisible same-rank
    edges of :meth:`View._orders` cannot order clusters: ``dot`` may swap
    them freely). Junctions are plain nodes next to the parameter (in its
    cluster), kept in one row in recorded order (module by module) above
    every module they feed (``View.below``), so the modules below follow
    that order.

    ``links`` are the indices (in ``View.links``) of the uses it feeds.
    """

    __slots__ = ("id", "cluster", "tail", "module", "links")

    def __init__(self, id, cluster, tail, module, links):
        self.id, self.cluster, self.tail, self.module, self.links = id, cluster, tail, module, links


class View:
    """The boxes and links of a picture of ``program`` (see the module docstring)."""

    def __init__(self, program, *, detail="auto", group="module", max_nodes=MAX_NODES, expand=None):
        self.program = program
        self.detail = detail
        self.clusters = _clusters(program, group)
        self.expand = _expand_paths(expand, self.clusters)
        self.max_nodes = max_nodes  # a summary with more modules than this summarises their parents
        self.note = None
        self.drawn_before = None  # boxes before summarising (for the warning)
        collapse = detail == "auto" and not self.expand
        # Collapsing comes first: when the boxes of the full view, counted without planning it (no links,
        # no orders), are already too many, only the summary is planned.
        counted = self._count_boxes() if collapse else 0
        if counted <= max_nodes:
            self._plan(merge=detail != "full", summarise=detail == "summary" or bool(self.expand))
        if collapse and (counted > max_nodes or len(self.boxes) > max_nodes):
            self.drawn_before = max(counted, len(getattr(self, "boxes", ())))
            self._plan(merge=True, summarise=True)
            self.note = (
                f"{self.drawn_before} boxes summarised as {len(self.boxes)} (one per module, or stretches of "
                "the tape when the modules are too many); "
                "graph(..., detail='full') draws every node, expand='module' opens one"
            )

    # -- planning

    def _count_boxes(self):
        """The boxes of the full ``detail="auto"`` view, counted without planning it (no links, no orders).

        Equations whose box stands alone (a shape chain is one box, a chain
        folded into its leaf none), plus leaves: repeated one-number
        constants of a module share one box, a hub leaf of a big graph gets
        one box per use (see the module docstring). A view this count lets
        through is still checked once planned.
        """
        program = self.program
        rep = _merge_shape_chains(program, self.clusters)
        folded = _fold_into_leaves(program, rep)
        count = sum(1 for i, r in enumerate(rep) if r == i and i not in folded)
        groups = {}
        for j, leaf in enumerate(program.leaves):
            if _repeated_constant(leaf, program.kinds[j]):
                key = (_number(leaf), self.clusters[program.uses[j][0][0]])
            else:
                key = j
            groups.setdefault(key, []).append(j)
        big = len(program.equations) > DUPLICATE_LEAVES_ABOVE
        for leaves in groups.values():
            uses = sum(len(program.uses[k]) for k in leaves)
            shared = program.kinds[leaves[0]] == "parameter" and self._fed_through_junctions(leaves)
            count += uses if big and uses > HUB_USES and not shared else 1  # a hub: one box per use
        return count

    def _plan(self, merge, summarise):
        program = self.program
        count = len(program.equations)
        self.rep = _merge_shape_chains(program, self.clusters) if merge else list(range(count))
        self.fold_of = _fold_into_leaves(program, self.rep) if merge else {}
        self.group_of = self._summary_keys() if summarise else [None] * count
        self.boxes, self.by_id = [], {}
        self.box_of_equation = [None] * count
        self.leaf_boxes = [None] * len(program.leaves)
        self.shared = set()  # the boxes of parameters drawn with junctions
        self._equation_boxes()
        self._leaf_box_plan(summarise)
        self.links = self._links()
        self.junctions = self._junctions()
        self.orders = self._orders() + self._junction_rows()
        self.below = self._below_junctions()

    def _add(self, box):
        self.boxes.append(box)
        self.by_id[box.id] = box
        return box

    def _summary_keys(self):
        """Per equation: the summary it belongs to, or None if drawn on its own (expanded).

        One summary per module — unless that is still too many boxes (every op
        in a module of its own): then one per parent module, and failing that
        the tape cut into stretches, as for a computation without modules.
        """
        clusters = self.clusters
        keys = [None if _within(path, self.expand) else path for path in clusters]
        if any(clusters):
            # Steps between modules (a residual sum, an activation) are drawn as themselves: a summary
            # of "everything outside the modules" would name no module and join unrelated steps.
            keys = [None if not path else key for path, key in zip(clusters, keys, strict=True)]
        summarised = [i for i, key in enumerate(keys) if key is not None]
        limit = self.max_nodes // 2
        while len({keys[i] for i in summarised}) > limit and any("." in keys[i] for i in summarised):
            for i in summarised:
                keys[i] = keys[i].rpartition(".")[0]
        if len({keys[i] for i in summarised}) > limit:
            for i in summarised:
                keys[i] = ""
        common = keys[summarised[0]] if summarised else None
        if len({keys[i] for i in summarised}) == 1 and summarised and (not common or len(summarised) > limit):
            # No module structure (or one big module): keep both ends of the chain, cut the middle into stretches.
            ends = CHAIN_ENDS if len(summarised) > 2 * CHAIN_ENDS + STRETCHES else 0
            middle = summarised[ends : len(summarised) - ends]
            size = max(1, math.ceil(len(middle) / STRETCHES))
            for i in summarised:
                keys[i] = None
            for k, i in enumerate(middle):
                keys[i] = f"{common}#{k // size}"
        return keys

    def _equation_boxes(self):
        program = self.program
        groups, chains = {}, {}
        for i, r in enumerate(self.rep):
            if self.group_of[i] is None and i not in self.fold_of:
                chains.setdefault(r, []).append(i)
        for i in range(len(program.equations)):
            key = self.group_of[i]
            if key is not None:
                if key not in groups:
                    groups[key] = self._add(Box(f"s{len(groups)}", "summary", _summary_cluster(key), group=key))
                groups[key].equations.append(i)
                self.box_of_equation[i] = groups[key].id
            elif self.rep[i] == i and i not in self.fold_of:
                members = chains[i]
                shape_only = all(program.equations[m].op.name in SHAPE_OPS for m in members)
                self._add(Box(f"n{i}", "shape" if shape_only else "op", self.clusters[i], members))
        for i in range(len(program.equations)):
            if self.box_of_equation[i] is None and i not in self.fold_of:
                self.box_of_equation[i] = f"n{self.rep[i]}"

    def _leaf_box_plan(self, summarise):
        program = self.program
        kinds = program.kinds
        groups = {}
        for j, leaf in enumerate(program.leaves):
            uses = program.uses[j]
            users = [self.group_of[i] for i, _ in uses if self.group_of[i] is not None]
            if summarise and users:
                key = ("summary", kinds[j], users[0])  # the leaves of a summary, by kind
            elif _repeated_constant(leaf, kinds[j]):
                key = ("constant", _number(leaf), self.clusters[uses[0][0]])
            else:
                key = ("leaf", j)
            groups.setdefault(key, []).append(j)
        big = len(program.equations) > DUPLICATE_LEAVES_ABOVE
        for key, leaves in groups.items():
            j = leaves[0]
            # A parameter shared by sibling modules reaches them through junctions (one line each), drawn
            # at the top level above them: a junction row inside a module's frame does not keep dot from
            # reordering the modules.
            shared = key[0] != "summary" and kinds[j] == "parameter" and self._fed_through_junctions(leaves)
            if key[0] == "summary":
                # Inputs at the top level; a summary's own parameters and constants next to it.
                homes = {
                    self.clusters[i] if self.group_of[i] is None else _summary_cluster(self.group_of[i])
                    for k in leaves
                    for i, _ in program.uses[k]
                }
                cluster = homes.pop() if kinds[j] != "input" and len(homes) == 1 else ""
                box = self._add(Box(f"xs{j}", kinds[j], cluster, leaves=leaves, group=key[2]))
            else:
                box = self._add(Box(f"x{j}", kinds[j], "" if shared else self._leaf_cluster(leaves), leaves=leaves))
                box.equations = [i for i, k in self.fold_of.items() if k == j]
            if shared:
                self.shared.add(box.id)
            uses = sum(len(program.uses[k]) for k in leaves)
            if big and key[0] != "summary" and uses > HUB_USES and not shared:
                # The first use keeps the main box; every other use gets a small copy.
                ids = [box.id]
                for k in leaves:
                    for u, (i, _) in enumerate(program.uses[k]):
                        if (k, u) != (j, 0):
                            copy = Box(f"x{k}_{u}", kinds[j], self.clusters[i], leaves=[k], copy_of=box.id)
                            ids.append(self._add(copy).id)
                self._assign_copies(leaves, ids)
            else:
                for k in leaves:
                    self.leaf_boxes[k] = [box.id]

    def _fed_through_junctions(self, leaves):
        """True for a parameter's leaves used in 2 to 64 sibling modules, at most 16 times in each.

        Such a parameter keeps one box and one line per module (see
        :class:`Junction`); one used more often inside a module (a weight
        at every step of a long chain) is better drawn per use.
        """
        modules = _by_module([self.clusters[i] for k in leaves for i, _ in self.program.uses[k]])
        direct = modules.pop(None, [])  # uses right in the module holding them all: plain edges
        return (
            2 <= len(modules) <= JUNCTION_MODULES and max(len(uses) for uses in [direct, *modules.values()]) <= HUB_USES
        )

    def _assign_copies(self, leaves, ids):
        """Leaf k's u-th use goes to the next id in order (the main box first)."""
        position = 0
        for k in leaves:
            self.leaf_boxes[k] = ids[position : position + len(self.program.uses[k])]
            position += len(self.program.uses[k])

    def _leaf_cluster(self, leaves):
        """Inputs sit at the top level; parameters and constants in the one module that uses them."""
        program = self.program
        leaf = program.leaves[leaves[0]]
        if program.kinds[leaves[0]] == "input":
            return ""
        homes = {self.clusters[i] for j in leaves for i, _ in program.uses[j]}
        own = leaf.module if any(self.clusters) else ""
        return own or (homes.pop() if len(homes) == 1 else "")

    def _links(self):
        program = self.program
        links, merged = [], {}
        use_number = [0] * len(program.leaves)
        for i, node in enumerate(program.equations):
            if i in self.fold_of:
                continue
            head = self.box_of_equation[i]
            for position, x in enumerate(node.inputs):
                k = program.index.get(x)
                if k is not None:
                    tail = self.box_of_equation[k] if k not in self.fold_of else self.leaf_boxes[self.fold_of[k]][0]
                else:
                    j = program.leaf_index[x]
                    ids = self.leaf_boxes[j]
                    tail = ids[min(use_number[j], len(ids) - 1)]
                    use_number[j] += 1
                if tail == head:
                    continue  # inside one box
                constant = not x.requires_grad
                if self.by_id[tail].summarised or self.by_id[head].summarised:
                    link = merged.get((tail, head))
                    if link is None:
                        link = merged[(tail, head)] = Link(tail, head, [], True)
                        links.append(link)
                    link.uses.append((i, position))
                    link.constant = link.constant and constant
                else:
                    links.append(Link(tail, head, [(i, position)], constant))
        return links

    def _orders(self):
        """Rows to keep in tape order: sibling computations side by side, left to right.

        ``dot`` orders a rank as it sees fit, and may put ``v_proj`` before
        ``q_proj`` or sample 7 before sample 0. Within each cluster, the
        computations that could run side by side — its boxes and its
        sub-clusters (each represented by its first box), at the same depth
        (longest path from a leaf) and with no path from one to another — are
        kept in the order they were recorded.
        """
        computed = [box for box in self.boxes if box.kind in ("op", "shape", "summary")]
        depth = self._depths()
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
        reads = {}  # unit -> the units of the same cluster it reads from
        for link in self.links:
            path = self.by_id[link.head].cluster
            while True:
                tail, head = unit_of.get((path, link.tail)), unit_of.get((path, link.head))
                if tail is not None and head is not None and tail != head:
                    reads.setdefault(head, set()).add(tail)
                if not path:
                    break
                path = path.rpartition(".")[0]
        before = _Upstream(reads)
        rows = {}
        for (path, box_id), unit in unit_of.items():
            if first[unit] == box_id:
                rows.setdefault((path, depth.get(box_id, 0)), []).append(unit)
        orders = []
        for units in rows.values():
            row = []
            for unit in units:  # recorded order
                if all(unit not in before[kept] and kept not in before[unit] for kept in row):
                    row.append(unit)
            if len(row) > 1:
                orders.append([first[unit] for unit in row])
        return orders

    def _depths(self):
        """``{box id: longest path from a leaf}`` for the computed boxes (leaves are at depth 0)."""
        depth = {}
        for link in self.links:  # in tape order of their heads
            base = depth.get(link.tail, 0) if self.by_id[link.tail].kind in ("op", "shape", "summary") else 0
            depth[link.head] = max(depth.get(link.head, 0), base + 1)
        return depth

    def _junctions(self):
        """A :class:`Junction` for each (shared parameter, sibling module it feeds), parameters in order."""
        uses = {}  # parameter box id -> [link indices]
        for k, link in enumerate(self.links):
            if link.tail in self.shared:
                uses.setdefault(link.tail, []).append(k)
        junctions = []
        for tail, links in uses.items():
            modules = _by_module([self.by_id[self.links[k].head].cluster for k in links])
            modules.pop(None, None)
            for module, positions in modules.items():
                fed = [links[p] for p in positions]
                junctions.append(Junction(f"j{len(junctions)}", self.by_id[tail].cluster, tail, module, fed))
        return junctions

    def _junction_rows(self):
        """The junctions side by side in one row, module by module in recorded order."""
        recorded = {}
        for box in self.boxes:
            path = box.cluster
            while path:
                recorded.setdefault(path, len(recorded))
                path = path.rpartition(".")[0]
        row = [j.id for j in sorted(self.junctions, key=lambda j: recorded[j.module])]
        return [row] if len(row) > 1 else []

    def _below_junctions(self):
        """``(junction, box)`` pairs: boxes that nothing feeds, kept below a junction row.

        With the junction row above every module it feeds, the row alone
        decides the modules' order: a module's constants drawn level with the
        junctions would let ``dot`` slide the module under another's
        junctions. Each module's unfed boxes go below its first junction, its
        first unfed box below each of its other junctions (more lines tying
        the module to its place), and the constants beside the row (the 0
        that Python's ``sum`` starts from) below the row.
        """
        if not self.junctions:
            return []
        fed = {link.head for link in self.links}
        of_module = {}
        for junction in self.junctions:
            of_module.setdefault(junction.module, []).append(junction.id)
        unfed, pairs = {}, []
        for box in self.boxes:
            if box.id in fed or box.id in self.shared:
                continue
            module = next((m for m in of_module if _within(box.cluster, (m,))), None)
            if module is not None:
                unfed.setdefault(module, []).append(box.id)
            elif box.kind == "constant" and not box.cluster:
                pairs.append((self.junctions[0].id, box.id))
        for module, ids in unfed.items():
            first, *others = of_module[module]
            pairs += [(first, i) for i in ids] + [(other, ids[0]) for other in others]
        return pairs

    # -- questions the painters ask

    def steps(self, trace):
        """The picture's steps: for each box the pass passes through, the engine step that finishes it.

        Returns a sorted list of engine step indices. Steps inside one box
        (a merged chain, a module summary) give one picture step.
        """
        last = {}
        for s, i in enumerate(trace.order):
            last[self.box_of(i)] = s
        return sorted(last.values())

    def box_of(self, i):
        """The id of the box that shows equation ``i``."""
        return self.box_of_equation[i] if i not in self.fold_of else self.leaf_boxes[self.fold_of[i]][0]


def _clusters(program, group):
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


def _feeds_outside(program, i):
    """True when equation ``i``'s result is read only by equations outside every module (or by none).

    A sample's loss, computed after the sample's scope closed, feeds the sum
    of the losses; a residual sum after a sublayer (``x + self_attn(x)``) or
    an activation between two Linears feeds the next module, and is a step of
    its own, not part of the module before it.
    """
    equations = program.equations
    return all(not equations[k].module for k in program.consumers[i])


def _by_module(paths):
    """Positions of ``paths`` by the module directly inside the innermost module holding them all.

    ``{module: [positions]}``; the key None collects the paths that are that
    innermost module itself. For uses in ``sample0.neuron1``, ``sample1`` and
    ``sample2.neuron0``: ``{"sample0": [0], "sample1": [1], "sample2": [2]}``.
    """
    parts = [path.split(".") if path else [] for path in paths]
    depth = 0
    while all(len(names) > depth for names in parts) and len({names[depth] for names in parts}) == 1:
        depth += 1
    modules = {}
    for position, names in enumerate(parts):
        module = ".".join(names[: depth + 1]) if len(names) > depth else None
        modules.setdefault(module, []).append(position)
    return modules


def _summary_cluster(key):
    """Where a summary sits: a module's in its parent's cluster, a stretch ("path#k") in its own module."""
    module, stretch, _ = key.partition("#")
    return module if stretch else module.rpartition(".")[0]


class _Upstream(dict):
    """``upstream[unit]``: every unit it depends on (through ``reads``), found when first asked."""

    def __init__(self, reads):
        super().__init__()
        self.reads = reads

    def __missing__(self, start):
        stack, seen = [start], set()
        while stack:
            for tail in self.reads.get(stack.pop(), ()):
                if tail not in seen:
                    seen.add(tail)
                    stack.append(tail)
        self[start] = seen
        return seen


def _all_paths(clusters):
    paths = set()
    for path in clusters:
        while path:
            paths.add(path)
            path = path.rpartition(".")[0]
    return paths


def _expand_paths(expand, clusters):
    if expand is None:
        return ()
    paths = (expand,) if isinstance(expand, str) else tuple(expand)
    known = _all_paths(clusters)
    for path in paths:
        if not isinstance(path, str) or path not in known:
            listed = ", ".join(sorted(known)) or "(none: this graph has no modules)"
            raise ValueError(f"graph(expand={expand!r}): no module {path!r} in this graph; its modules are: {listed}")
    return paths


def _within(path, modules):
    """True when ``path`` is one of ``modules`` or inside one of them."""
    return any(path == module or path.startswith(module + ".") for module in modules)


def _merge_shape_chains(program, clusters):
    """``rep[i]``: the equation whose box shows equation ``i`` (a shape chain's last link)."""
    equations = program.equations
    outputs = set(program.outputs)
    rep = list(range(len(equations)))
    for i, node in enumerate(equations):
        users = program.consumers[i]
        if node.op.name not in SHAPE_OPS or node.name or node in outputs or len(users) != 1:
            continue
        if equations[users[0]].op.name in SHAPE_OPS and clusters[users[0]] == clusters[i]:
            rep[i] = users[0]
    for i in range(len(rep) - 1, -1, -1):  # resolve chains: a later link may be merged further
        if rep[i] != i:
            rep[i] = rep[rep[i]]
    return rep


def _fold_into_leaves(program, rep):
    """``{equation: leaf}`` for shape chains that start at a leaf used nowhere else (a Linear's ``W.T``)."""
    equations = program.equations
    chains = {}
    for i, r in enumerate(rep):
        if equations[r].op.name in SHAPE_OPS:
            chains.setdefault(r, []).append(i)
    folded = {}
    outputs = set(program.outputs)
    for r, members in chains.items():
        if equations[r] in outputs:
            continue
        j = program.leaf_index.get(equations[members[0]].inputs[0])
        if j is not None and len(program.uses[j]) == 1:
            folded.update(dict.fromkeys(members, j))
    return folded


def _repeated_constant(leaf, kind):
    """An unnamed one-number constant (the ``2`` in ``2 * a``): such constants may share a box."""
    return kind == "constant" and not leaf.name and (leaf.data.__class__ is float or np.size(leaf.data) == 1)


def _number(leaf):
    """The one number a one-number leaf holds (a Scalar's float as it is: no array made for it)."""
    data = leaf.data
    return data if data.__class__ is float else float(np.reshape(data, -1)[0])
