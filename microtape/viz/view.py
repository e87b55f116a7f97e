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
  batch) are kept in the order they were recorded (see :func:`microtape.viz.orders.sibling_rows`).
* A parameter shared by sibling modules (one MLP's weights on the samples of
  a batch) is drawn once, above them at the top level, with its total
  gradient. One line leaves it for each module and splits at a junction
  point into that module's uses (see :class:`Junction`).
"""

import math
from typing import Any

from .boxes import Box, Junction, Link
from .clusters import by_module, equation_clusters, expand_paths, summary_cluster, within
from .folding import SHAPE_OPS, fold_into_leaves, merge_shape_chains, one_number, repeated_constant
from .orders import below_junctions, junction_rows, junctions, sibling_rows

__all__ = ["View", "Box", "Link", "Junction", "SHAPE_OPS", "MAX_NODES"]

MAX_NODES = 150  # above this many boxes, detail="auto" draws module summaries
DUPLICATE_LEAVES_ABOVE = 60  # equations; above this, heavily shared leaves are drawn per use
HUB_USES = 16  # a leaf used more often than this is a hub (drawn per use in big graphs)
JUNCTION_MODULES = 64  # ... unless it is a parameter shared by at most this many sibling modules
CHAIN_ENDS = 2  # a computation without modules keeps this many equations at each end
STRETCHES = 6  # ... and cuts the middle into about this many summaries


class View:
    """The boxes and links of a picture of ``program`` (see the module docstring)."""

    def __init__(
        self,
        program: Any,
        *,
        detail: str = "auto",
        group: str = "module",
        max_nodes: Any = MAX_NODES,
        expand: Any = None,
    ) -> None:
        self.program = program
        self.detail = detail
        self.clusters = equation_clusters(program, group)
        self.expand = expand_paths(expand, self.clusters)
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

    def _count_boxes(self) -> Any:
        """The boxes of the full ``detail="auto"`` view, counted without planning it (no links, no orders).

        Equations whose box stands alone (a shape chain is one box, a chain
        folded into its leaf none), plus leaves: repeated one-number
        constants of a module share one box, a hub leaf of a big graph gets
        one box per use (see the module docstring). A view this count lets
        through is still checked once planned.
        """
        program = self.program
        rep = merge_shape_chains(program, self.clusters)
        folded = fold_into_leaves(program, rep)
        self._merged = (rep, folded)  # the merged plan reuses them
        count = sum(1 for i, r in enumerate(rep) if r == i and i not in folded)
        groups: dict[Any, Any] = {}
        for j, leaf in enumerate(program.leaves):
            if repeated_constant(leaf, program.kinds[j]):
                key = (one_number(leaf), self.clusters[program.uses[j][0][0]])
            else:
                key = j
            groups.setdefault(key, []).append(j)
        big = len(program.equations) > DUPLICATE_LEAVES_ABOVE
        for leaves in groups.values():
            uses = sum(len(program.uses[k]) for k in leaves)
            shared = program.kinds[leaves[0]] == "parameter" and self._fed_through_junctions(leaves)
            count += uses if big and uses > HUB_USES and not shared else 1  # a hub: one box per use
        return count

    def _plan(self, merge: Any, summarise: Any) -> None:
        program = self.program
        count = len(program.equations)
        if merge and getattr(self, "_merged", None):
            self.rep, self.fold_of = self._merged  # counted already (_count_boxes): the same chains and folds
        else:
            self.rep = merge_shape_chains(program, self.clusters) if merge else list(range(count))
            self.fold_of = fold_into_leaves(program, self.rep) if merge else {}
        self.group_of = self._summary_keys() if summarise else [None] * count
        self.boxes: list[Any]
        self.by_id: dict[Any, Any]
        self.boxes, self.by_id = [], {}
        self.box_of_equation: list[Any] = [None] * count
        self.leaf_boxes = [None] * len(program.leaves)
        self.shared: set[Any] = set()  # the boxes of parameters drawn with junctions
        self._equation_boxes()
        self._leaf_box_plan(summarise)
        self.links = self._links()
        self.junctions = junctions(self)
        self.orders = sibling_rows(self) + junction_rows(self)
        self.below = below_junctions(self)

    def _add(self, box: Any) -> Any:
        self.boxes.append(box)
        self.by_id[box.id] = box
        return box

    def _summary_keys(self) -> Any:
        """Per equation: the summary it belongs to, or None if drawn on its own (expanded).

        One summary per module — unless that is still too many boxes (every op
        in a module of its own): then one per parent module, and failing that
        the tape cut into stretches, as for a computation without modules.
        """
        clusters = self.clusters
        keys = [None if within(path, self.expand) else path for path in clusters] if self.expand else list(clusters)
        if any(clusters):
            # Steps between modules (a residual sum, an activation) are drawn as themselves: a summary
            # of "everything outside the modules" would name no module and join unrelated steps.
            keys = [None if not path else key for path, key in zip(clusters, keys, strict=True)]
        summarised = [i for i, key in enumerate(keys) if key is not None]
        limit = self.max_nodes // 2
        while len({keys[i] for i in summarised}) > limit and any("." in keys[i] for i in summarised):  # type: ignore[operator]  # not None there
            for i in summarised:
                keys[i] = keys[i].rpartition(".")[0]  # type: ignore[union-attr]  # not None there
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

    def _equation_boxes(self) -> None:
        program = self.program
        groups: dict[Any, Any]
        chains: dict[Any, Any]
        groups, chains = {}, {}
        for i, r in enumerate(self.rep):
            if self.group_of[i] is None and i not in self.fold_of:
                chains.setdefault(r, []).append(i)
        for i in range(len(program.equations)):
            key = self.group_of[i]
            if key is not None:
                if key not in groups:
                    groups[key] = self._add(Box(f"s{len(groups)}", "summary", summary_cluster(key), group=key))
                groups[key].equations.append(i)
                self.box_of_equation[i] = groups[key].id
            elif self.rep[i] == i and i not in self.fold_of:
                members = chains[i]
                shape_only = all(program.equations[m].op.name in SHAPE_OPS for m in members)
                self._add(Box(f"n{i}", "shape" if shape_only else "op", self.clusters[i], members))
        for i in range(len(program.equations)):
            if self.box_of_equation[i] is None and i not in self.fold_of:
                self.box_of_equation[i] = f"n{self.rep[i]}"

    def _leaf_box_plan(self, summarise: Any) -> None:
        program = self.program
        kinds = program.kinds
        group_of = self.group_of
        groups: dict[Any, Any] = {}
        for j, leaf in enumerate(program.leaves):
            uses = program.uses[j]
            user = next((group_of[i] for i, _ in uses if group_of[i] is not None), None) if summarise else None
            if user is not None:
                key = ("summary", kinds[j], user)  # the leaves of a summary, by kind
            elif repeated_constant(leaf, kinds[j]):
                key = ("constant", one_number(leaf), self.clusters[uses[0][0]])
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
                homes = self._homes(leaves)
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

    def _homes(self, leaves: Any) -> Any:
        """The clusters of the boxes that use ``leaves``: a summary's, or an equation's own."""
        clusters, group_of, homes, seen = self.clusters, self.group_of, set(), set()
        for k in leaves:
            for i, _ in self.program.uses[k]:
                group = group_of[i]
                if group is None:
                    homes.add(clusters[i])
                elif group not in seen:  # one summary_cluster per summary, not one per use
                    seen.add(group)
                    homes.add(summary_cluster(group))
        return homes

    def _fed_through_junctions(self, leaves: Any) -> Any:
        """True for a parameter's leaves used in 2 to 64 sibling modules, at most 16 times in each.

        Such a parameter keeps one box and one line per module (see
        :class:`Junction`); one used more often inside a module (a weight
        at every step of a long chain) is better drawn per use.
        """
        modules = by_module([self.clusters[i] for k in leaves for i, _ in self.program.uses[k]])
        direct = modules.pop(None, [])  # uses right in the module holding them all: plain edges
        return (
            2 <= len(modules) <= JUNCTION_MODULES and max(len(uses) for uses in [direct, *modules.values()]) <= HUB_USES
        )

    def _assign_copies(self, leaves: Any, ids: Any) -> None:
        """Leaf k's u-th use goes to the next id in order (the main box first)."""
        position = 0
        for k in leaves:
            self.leaf_boxes[k] = ids[position : position + len(self.program.uses[k])]
            position += len(self.program.uses[k])

    def _leaf_cluster(self, leaves: Any) -> Any:
        """Inputs sit at the top level; parameters and constants in the one module that uses them."""
        program = self.program
        leaf = program.leaves[leaves[0]]
        if program.kinds[leaves[0]] == "input":
            return ""
        homes = {self.clusters[i] for j in leaves for i, _ in program.uses[j]}
        own = leaf.module if any(self.clusters) else ""
        return own or (homes.pop() if len(homes) == 1 else "")

    def _links(self) -> Any:
        program = self.program
        merged: dict[Any, Any]
        links, merged = [], {}
        use_number = [0] * len(program.leaves)
        # Bound once: this loop runs once per input of every equation (100,000 times for a long chain).
        fold_of, box_of_equation, leaf_boxes = self.fold_of, self.box_of_equation, self.leaf_boxes
        index, leaf_index = program.index, program.leaf_index
        summarised = {box.id for box in self.boxes if box.summarised}
        for i, node in enumerate(program.equations):
            if i in fold_of:
                continue
            head = box_of_equation[i]
            for position, x in enumerate(node.inputs):
                k = index.get(x)
                if k is not None:
                    tail = box_of_equation[k] if k not in fold_of else leaf_boxes[fold_of[k]][0]
                else:
                    j = leaf_index[x]
                    ids = leaf_boxes[j]
                    tail = ids[use_number[j]] if use_number[j] < len(ids) else ids[-1]
                    use_number[j] += 1
                if tail == head:
                    continue  # inside one box
                constant = not x.requires_grad
                if tail in summarised or head in summarised:
                    link = merged.get((tail, head))
                    if link is None:
                        link = merged[(tail, head)] = Link(tail, head, [], True)
                        links.append(link)
                    link.uses.append((i, position))
                    link.constant = link.constant and constant
                else:
                    links.append(Link(tail, head, [(i, position)], constant))
        return links

    def steps(self, trace: Any) -> Any:
        """The picture's steps: for each box the pass passes through, the engine step that finishes it.

        Returns a sorted list of engine step indices. Steps inside one box
        (a merged chain, a module summary) give one picture step.
        """
        last = {}
        for s, i in enumerate(trace.order):
            last[self.box_of(i)] = s
        return sorted(last.values())

    def box_of(self, i: Any) -> Any:
        """The id of the box that shows equation ``i``."""
        return self.box_of_equation[i] if i not in self.fold_of else self.leaf_boxes[self.fold_of[i]][0]
