"""Draw a computation as a graph: forward values, backward gradients, step by step.

This module lets you *see* a tape::

    import microtape as mt
    with mt.Tape() as tape:
        a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
        y = (a * b + a**2).tanh()
    mt.viz.graph(tape)                   # forward: names, ops, values
    mt.viz.graph(tape, backward=True)    # gradients, and each edge's VJP formula
    mt.viz.graph(tape, step=2)           # the backward pass frozen after step 2

:func:`graph` returns a ``graphviz.Digraph``: Jupyter shows it inline,
:func:`microtape.viz.render` writes it to SVG/PNG.

What is drawn
-------------
* One box per equation (``n{i}``, ``i`` its position on the tape): its name
  (``%i`` when unnamed), op and shape, and a value summary — a scalar's value,
  a tensor's mean and largest absolute value (masked entries left out and
  counted).
* Leaves (``x{j}``, in order of first use), in three styles: **inputs** (green:
  need a gradient, are not parameters), **parameters** (yellow: need a
  gradient and their name contains ``weight`` or ``bias``, or you list them in
  ``parameters=``), **constants** (grey, dashed: need no gradient — the
  attention mask, the dropout keep-mask, the ``2`` in ``2 * a``).
* Results (equations nothing else reads; in the backward view, the output the
  pass starts from) have a double border. Edges run input → output in operand
  order.
* ``group="module"`` puts each module path (``q_proj``, ``attention``,
  ``attention.head0``, set by :func:`microtape.module_scope`) in a box of its own;
  nested paths nest, so an attention that tags its heads gets a box per head.

The backward view (``backward=True``) draws the same layout with the arrows
turned round (``dir=back``: the gradient flows from the output to the leaves)
and labels every edge with its part of the op's VJP formula. Each node shows
its gradient (a scalar's value, a tensor's norm and largest entry).
``step=k`` freezes the pass after step ``k`` (``0`` handles the output):
finished nodes in orange, the current one highlighted (its VJP has just sent
gradients along its orange edges), the rest grey.

The gradients come from one *private* replay of the backward pass (see
:mod:`microtape.viz._trace`): no ``.grad`` field is touched. The pass starts
from ``grad`` if given, else from the output's ``.grad`` (so after
``attn.backward(g)`` the picture shows the same numbers), else from ones.

Readable at any size
--------------------
``detail="auto"`` (the default) merges chains of ``reshape``/``transpose`` into
one light box each (they only move numbers around; a chain that starts at a
leaf used nowhere else, like a Linear's ``W.T``, folds into the leaf's box),
and when a graph would still have more than ``max_nodes`` (150) boxes it draws
one summary box per module instead (a graph without modules is cut into about
eight consecutive stretches of the tape), with a warning and a note on the
picture saying how to get everything: ``detail="full"``. ``detail="summary"``
asks for the summary view. Summaries keep every connection, so the smaller
graph stays connected. Graphs of up to 12 boxes are laid out left to right,
larger ones top to bottom (``rankdir=`` chooses).

``step=k`` counts steps of the engine's backward pass (one per equation the
output depends on); :func:`microtape.viz.backward_frames` draws them all.
In large graphs (over 60 equations) a leaf used many times — a weight read
by every token of a scalar-level trace — is drawn once *per use*, as a small
copy next to its user: one hub with hundreds of edges is what makes ``dot``
slow.

Stable output: ids come from positions, clusters and edges are written in tape
order, so the same computation gives the same DOT source, byte for byte.
"""

import html
import math
import warnings

import numpy as np

from ._trace import collect, fmt, grad_summary, leaf_kind, shape_text, trace_backward, value_summary

__all__ = ["graph", "GraphCollapsedWarning", "MAX_NODES", "SHAPE_OPS"]

MAX_NODES = 150  # above this many boxes, detail="auto" draws module summaries
SHAPE_OPS = frozenset({"reshape", "transpose"})  # ops that only move numbers
LR_UP_TO = 12  # boxes; smaller graphs are drawn left to right by default
DUPLICATE_LEAVES_ABOVE = 60  # equations; above this, shared leaves are drawn per use

# Colours: fill, border. Chosen to stay distinct for common colour-blindness.
STYLE = {
    "op": ("#e8eef7", "#3b5b92"),
    "shape": ("#ffffff", "#9aa5b1"),
    "input": ("#d4edda", "#2e7d32"),
    "parameter": ("#fff3cd", "#b8860b"),
    "constant": ("#eeeeee", "#777777"),
    "summary": ("#dde4f0", "#3b5b92"),
    "done": ("#fde2c8", "#d35400"),
    "current": ("#f5a25d", "#b03a2e"),
    "pending": ("#f7f7f7", "#c8c8c8"),
}
PENDING_TEXT = "#9e9e9e"
EDGE = "#555555"


class GraphCollapsedWarning(UserWarning):
    """A graph was too large to draw box by box and was summarised."""


def _import_graphviz():
    try:
        import graphviz
    except ImportError:  # pragma: no cover - graphviz is a dependency
        raise ImportError(
            "microtape.viz.graph needs the 'graphviz' Python package: pip install graphviz "
            "(and Graphviz's `dot` program to render it)"
        ) from None
    return graphviz


def graph(
    tape_or_output,
    *,
    backward=False,
    step=None,
    group="module",
    detail="auto",
    values=True,
    output=None,
    grad=None,
    parameters=None,
    max_nodes=MAX_NODES,
    rankdir=None,
    legend=True,
    title=None,
):
    """Draw a tape (or the computation behind a result) as a ``graphviz.Digraph``.

    ``tape_or_output``: a :class:`~microtape.Tape`, a ``Scalar``/``Tensor``
    result (its graph is found by following ``.inputs``), or a layer with a
    ``.tape`` (its last forward). ``backward=True`` shows gradients and VJP
    formulas; ``step=k`` the backward pass frozen after step ``k`` (implies
    ``backward``). ``group``: ``"module"`` or ``None``. ``detail``: ``"auto"``,
    ``"full"`` or ``"summary"``. ``values=False`` leaves numbers out.
    ``output``: which node of a tape is the result (default: the last one);
    ``grad``: the gradient to start the backward pass with. ``parameters``:
    leaves (or their names) to style as parameters. ``rankdir``: ``"LR"``
    (left to right), ``"TB"`` (top to bottom), or None: LR for a graph of at
    most 12 boxes (a scalar expression reads like a sentence), TB otherwise
    (an attention fits a slide). See the module docstring for the whole picture.
    """
    program = collect(tape_or_output, output)
    trace = trace_backward(program, grad) if (backward or step is not None) else None
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"graph(step=...): expected an integer, got {type(step).__name__}")
        if not 0 <= step < len(trace):
            raise ValueError(
                f"graph(step={step}): the backward pass from this output has {len(trace)} steps, "
                f"so step must be in 0..{len(trace) - 1}"
            )
    options = _options(group, detail, values, parameters, max_nodes, rankdir, legend, title)
    return _draw(program, trace, step, options)


def _options(group, detail, values, parameters, max_nodes, rankdir, legend, title):
    """Check the drawing options once (graph and backward_frames share them)."""
    if group not in ("module", None):
        raise ValueError(f"graph(group=...): expected 'module' or None, got {group!r}")
    if detail not in ("auto", "full", "summary"):
        raise ValueError(f"graph(detail=...): expected 'auto', 'full' or 'summary', got {detail!r}")
    if rankdir not in (None, "LR", "TB", "RL", "BT"):
        raise ValueError(f"graph(rankdir=...): expected 'LR', 'TB' or None, got {rankdir!r}")
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"graph(max_nodes=...): expected a positive integer, got {max_nodes!r}")
    return dict(
        group=group,
        detail=detail,
        values=bool(values),
        parameters=parameters,
        max_nodes=max_nodes,
        rankdir=rankdir,
        legend=legend,
        title=title,
    )


def _draw(program, trace, step, options, warn=True):
    """The Digraph of ``program`` (forward if ``trace`` is None, else after ``step``)."""
    graphviz = _import_graphviz()
    builder = _Builder(program, trace, step, options["group"], options["values"], options["parameters"])
    note = _simplify(builder, options, warn)
    rankdir = options["rankdir"] or ("LR" if builder.count() <= LR_UP_TO else "TB")
    return builder.emit(graphviz, rankdir=rankdir, legend=options["legend"], title=options["title"], note=note)


def _simplify(builder, options, warn=True):
    """Apply ``detail``: fold shape chains, place leaves, summarise if too big.

    Returns the note to print on the picture (or None).
    """
    detail, max_nodes = options["detail"], options["max_nodes"]
    if detail == "summary":
        builder.summarise()
        return None
    if detail == "auto":
        builder.merge_shape_chains()
    builder.place_leaves(duplicate=len(builder.program.equations) > DUPLICATE_LEAVES_ABOVE)
    drawn = builder.count()
    if detail != "auto" or drawn <= max_nodes:
        return None
    builder.summarise()
    if warn:
        warnings.warn(
            f"microtape.viz.graph: this graph has {drawn} boxes (more than max_nodes={max_nodes}), "
            f"so it is drawn as {builder.count()} summary boxes, one per module. "
            "Pass detail='full' to draw every node (dot gets slow above a few hundred), "
            "or max_nodes=... to move the threshold.",
            GraphCollapsedWarning,
            stacklevel=4,  # _simplify, _draw, graph/backward_frames, the caller
        )
    return f"{drawn} boxes summarised as {builder.count()} (one per module); graph(..., detail='full') draws every node"


class _Item:
    """One box of the drawing."""

    __slots__ = ("id", "kind", "cluster", "lines", "state", "members")

    def __init__(self, id, kind, cluster, lines, state=None, members=None):
        self.id = id
        self.kind = kind  # op, shape, input, parameter, constant, summary
        self.cluster = cluster  # module path ("" = top level)
        self.lines = lines  # label lines: (text, role) with role in name/info/value/grad
        self.state = state  # backward: done, current, pending, None
        self.members = members


class _Builder:
    """Turns a Program (and maybe a BackwardTrace) into boxes and edges, then DOT."""

    def __init__(self, program, trace, step, group, values, parameters):
        self.program = program
        self.trace = trace
        self.backward = trace is not None
        # The whole backward view is the pass after its last step, with no "current" box.
        self.whole = trace is not None and step is None
        self.step = (len(trace) - 1) if self.whole else step
        self.group = group
        self.values = values
        self.kinds = [leaf_kind(x, parameters) for x in program.leaves]
        # rep[i]: the equation whose box stands for equation i (itself unless merged).
        self.rep = list(range(len(program.equations)))
        self.merged = False  # reshape/transpose chains folded (auto detail)
        self.folded = {}  # leaf j -> the shape ops folded into its box
        self.fold_of = {}  # equation i -> the leaf j it was folded into
        self.summary = None  # equation index -> summary group key
        self.leaf_boxes = None  # leaf j -> list of box ids, one per use (or a single one)
        self.leaf_grads = trace.leaf_grads(self.step) if trace is not None else {}

    # -- states of the backward pass

    def eq_state(self, i):
        if not self.backward:
            return None
        s = self.trace.step_of.get(i)
        if s is None or s > self.step:
            return "pending"
        return "current" if s == self.step and not self.whole else "done"

    def group_state(self, members):
        """The state of a box that stands for several equations."""
        if not self.backward:
            return None
        states = {self.eq_state(m) for m in members}
        if "current" in states:
            return "current"
        return "done" if states == {"done"} else "pending"

    def leaf_state(self, j):
        if not self.backward or self.kinds[j] == "constant":
            return None
        if j in self.folded:
            return self.group_state(self.folded[j])
        steps = [self.trace.step_of.get(i) for i, _ in self.program.uses[j]]
        steps = [s for s in steps if s is not None]
        if steps and max(steps) <= self.step:
            return "done"
        return "pending"

    # -- simplifications

    def merge_shape_chains(self):
        """Fold each chain of reshape/transpose into its last link (auto detail)."""
        equations = self.program.equations
        consumers = self.program.consumers
        self.merged = True
        for i, node in enumerate(equations):
            if node.op.name not in SHAPE_OPS or node is self.program.output:
                continue
            users = consumers[i]
            if len(users) != 1:
                continue
            user = equations[users[0]]
            if user.op.name in SHAPE_OPS and user.module == node.module:
                self.rep[i] = users[0]
        # Resolve chains forward (a later link may itself be merged further).
        for i in range(len(self.rep) - 1, -1, -1):
            if self.rep[i] != i:
                self.rep[i] = self.rep[self.rep[i]]
        # A chain that starts from a leaf used nowhere else (a Linear's W.T) is
        # folded into that leaf's box: "q_proj.weight, used transposed".
        program = self.program
        chains = {}
        for i, r in enumerate(self.rep):
            if equations[r].op.name in SHAPE_OPS:
                chains.setdefault(r, []).append(i)
        for r, members in chains.items():
            if r == program.index.get(program.output):
                continue
            source = equations[members[0]].inputs[0]
            j = program.leaf_index.get(source)
            if j is not None and len(program.uses[j]) == 1:
                self.folded[j] = members
                for m in members:
                    self.fold_of[m] = j

    def place_leaves(self, duplicate):
        """One box per leaf, or (``duplicate``) one small box per use of a shared leaf."""
        self.leaf_boxes = []
        for j, uses in enumerate(self.program.uses):
            if duplicate and len(uses) > 1:
                self.leaf_boxes.append([f"x{j}_{u}" for u in range(len(uses))])
            else:
                self.leaf_boxes.append([f"x{j}"])

    def summarise(self):
        """Group equations by module (cut into stretches when there are no modules)."""
        equations = self.program.equations
        keys = [node.module if self.group == "module" else "" for node in equations]
        if len(dict.fromkeys(keys)) == 1:
            # No module structure: cut the tape into about eight consecutive
            # stretches instead of drawing one box.
            size = max(1, math.ceil(len(equations) / 8))
            keys = [f"{key}#{i // size}" for i, key in enumerate(keys)]
        self.summary = keys
        self.rep = list(range(len(equations)))
        self.leaf_boxes = None

    def box_of(self, i):
        """The id of the box that shows equation ``i``."""
        if self.summary is not None:
            keys = list(dict.fromkeys(self.summary))
            return f"s{keys.index(self.summary[i])}"
        if i in self.fold_of:
            return f"x{self.fold_of[i]}"
        return f"n{self.rep[i]}"

    def box_title(self, i):
        """What the box of equation ``i`` is called, for captions: ``merged (reshape→…)``."""
        equations = self.program.equations
        if self.summary is not None:
            module = self.summary[i].partition("#")[0]
            return f"{module or '(outside modules)'} (summary)"
        if i in self.fold_of:
            j = self.fold_of[i]
            leaf = self.program.leaves[j]
            ops = "→".join(equations[m].op.name for m in self.folded[j])
            return f"{leaf.name or f'x{j}'} ({ops})"
        members = [m for m, r in enumerate(self.rep) if r == self.rep[i]] if self.merged else [i]
        named = [equations[m].name for m in members if equations[m].name]
        name = named[-1] if named else f"%{self.rep[i]}"
        return f"{name} ({'→'.join(equations[m].op.name for m in members)})"

    def count(self):
        if self.summary is not None:
            return len(self._summary_groups()) + len(self._summary_leaf_groups())
        boxes = len({r for i, r in enumerate(self.rep) if i not in self.fold_of})
        return boxes + sum(len(ids) for ids in self.leaf_boxes)

    # -- boxes

    def _cluster(self, module):
        return module if self.group == "module" else ""

    def _eq_lines(self, i, members):
        equations = self.program.equations
        node = equations[i]
        name = node.name or next((equations[m].name for m in reversed(members) if equations[m].name), None)
        lines = [(name or f"%{i}", "name")]
        ops = "→".join(equations[m].op.name for m in members)
        is_scalar = node.data.__class__ is float
        lines.append((ops if is_scalar else f"{ops} {shape_text(node.data)}", "info"))
        shape_only = all(equations[m].op.name in SHAPE_OPS for m in members)
        # With auto detail a shape op's values repeat its input's: leave them out.
        if self.values and not (shape_only and self.merged):
            if not self.backward or is_scalar:
                lines.append((value_summary(node.data), "value"))
            if self.backward and self.eq_state(i) != "pending":
                lines.append((grad_summary(self.trace.grad_out.get(i)), "grad"))
        return lines

    def _leaf_lines(self, j, small=False):
        leaf = self.program.leaves[j]
        kind = self.kinds[j]
        is_scalar = leaf.data.__class__ is float
        # An unnamed one-number constant (the 2 in 2 * a) is called by its value.
        number = kind == "constant" and not leaf.name and np.size(leaf.data) == 1
        if leaf.name:
            name = leaf.name
        elif number:
            name = fmt(np.reshape(leaf.data, -1)[0])
        else:
            name = f"x{j}"
        lines = [(name, "name")]
        if small:
            return lines
        info = kind if (is_scalar or number) else f"{kind} {shape_text(leaf.data)}"
        if leaf.op is not None:
            info += " (computed earlier)"
        lines.append((info, "info"))
        if j in self.folded:
            members = self.folded[j]
            ops = "→".join(self.program.equations[m].op.name for m in members)
            shape = shape_text(self.program.equations[members[-1]].data)
            lines.append(("used transposed" if ops == "transpose" else f"used as {ops} {shape}", "info"))
        if self.values:
            if not number and (not self.backward or is_scalar or kind == "constant"):
                lines.append((value_summary(leaf.data, constant=kind == "constant"), "value"))
            if self.backward and kind != "constant" and self.leaf_state(j) == "done":
                lines.append((grad_summary(self.leaf_grads.get(j)), "grad"))
        return lines

    def boxes(self):
        """Every box, in a stable order: equations by tape position, leaves by first use."""
        program = self.program
        items = []
        if self.summary is not None:
            return self._summary_boxes()
        members = {}
        for i, r in enumerate(self.rep):
            members.setdefault(r, []).append(i)
        # Results get a double border: in the backward view the output the pass
        # starts from; in the forward view every equation nothing else reads.
        if self.backward:
            results = {program.index.get(program.output)}
        else:
            results = {i for i, users in enumerate(program.consumers) if not users}
        for i, node in enumerate(program.equations):
            if self.rep[i] != i or i in self.fold_of:
                continue
            group = members[i]
            shape_only = all(program.equations[m].op.name in SHAPE_OPS for m in group)
            kind = "shape" if shape_only else "op"
            item = _Item(f"n{i}", kind, self._cluster(node.module), self._eq_lines(i, group))
            item.state = self.group_state(group)
            item.members = group
            if any(m in results for m in group):
                item.kind = "output" if kind == "op" else kind
            items.append(item)
        for j, leaf in enumerate(program.leaves):
            ids = self.leaf_boxes[j]
            kind = self.kinds[j]
            uses = program.uses[j]
            if len(ids) == 1:
                cluster = ""
                if kind != "input":
                    homes = {self._cluster(program.equations[i].module) for i, _ in uses}
                    own = self._cluster(leaf.module)
                    cluster = own if own else (homes.pop() if len(homes) == 1 else "")
                item = _Item(ids[0], kind, cluster, self._leaf_lines(j))
                item.state = self.leaf_state(j)
                items.append(item)
            else:
                for box, (i, _) in zip(ids, uses, strict=True):
                    cluster = self._cluster(program.equations[i].module)
                    item = _Item(box, kind, cluster, self._leaf_lines(j, small=True))
                    item.state = self.leaf_state(j)
                    item.members = "copy"
                    items.append(item)
        return items

    def edges(self):
        """``(tail, head, attrs)`` for every edge, input → output, in operand order."""
        program = self.program
        if self.summary is not None:
            return self._summary_edges()
        use_number = [0] * len(program.leaves)
        result = []
        for i, node in enumerate(program.equations):
            if i in self.fold_of:
                continue  # drawn inside its leaf's box
            head = f"n{self.rep[i]}"
            for position, x in enumerate(node.inputs):
                k = program.index.get(x)
                if k is not None:
                    tail = f"n{self.rep[k]}" if k not in self.fold_of else f"x{self.fold_of[k]}"
                    if tail == head:
                        continue  # inside a merged chain
                else:
                    j = program.leaf_index[x]
                    ids = self.leaf_boxes[j]
                    tail = ids[use_number[j]] if len(ids) > 1 else ids[0]
                    use_number[j] += 1
                result.append((tail, head, self._edge_attrs(i, position, x)))
        return result

    def _edge_attrs(self, i, position, x):
        node = self.program.equations[i]
        attrs = {}
        if not x.requires_grad:
            attrs.update(style="dashed", color="#999999")
            if self.backward:
                attrs["dir"] = "none"  # no gradient flows into a constant
            return attrs
        if not self.backward:
            return attrs
        attrs["dir"] = "back"
        state = self.eq_state(i)
        if node.op.name not in SHAPE_OPS or self.rep[i] == i:
            attrs["label"] = _formula_part(node.op, position)
        if state == "current":
            attrs.update(color=STYLE["current"][1], fontcolor=STYLE["current"][1], penwidth="2")
        elif state == "done":
            attrs.update(color=STYLE["done"][1], fontcolor="#7a3b10")
        else:
            attrs.update(color=STYLE["pending"][1], fontcolor=PENDING_TEXT)
        return attrs

    # -- summary view

    def _summary_groups(self):
        groups = {}
        for i, key in enumerate(self.summary):
            groups.setdefault(key, []).append(i)
        return groups

    def _summary_leaf_groups(self):
        """Leaves grouped by (kind, summary group of their first user)."""
        groups = {}
        for j, uses in enumerate(self.program.uses):
            key = (self.kinds[j], self.summary[uses[0][0]])
            groups.setdefault(key, []).append(j)
        return groups

    def _summary_boxes(self):
        program = self.program
        items = []
        self._group_id = {}
        self._summary_groups_by_id = {}
        for g, (key, members) in enumerate(self._summary_groups().items()):
            box = f"s{g}"
            self._group_id[key] = box
            self._summary_groups_by_id[box] = members
            module, _, part = key.partition("#")
            counts = {}
            for i in members:
                counts[program.equations[i].op.name] = counts.get(program.equations[i].op.name, 0) + 1
            ops = ", ".join(f"{name} ×{n}" for name, n in counts.items())
            parent = module.rpartition(".")[0] if self.group == "module" else ""
            # Inside its parent's box, a nested module shows its own name only.
            title = (module[len(parent) + 1 :] if parent else module) or "(outside modules)"
            if part:
                title += f" · ops {members[0]}–{members[-1]}"
            named = [program.equations[i].name for i in members if program.equations[i].name]
            lines = [(title, "name"), (f"{len(members)} ops: {ops}", "info")]
            if named:
                shown = ", ".join(dict.fromkeys(named[:6]))
                lines.append((shown + (" …" if len(named) > 6 else ""), "value"))
            item = _Item(box, "summary", parent, lines, members=members)
            item.state = self.group_state(members)
            items.append(item)
        self._leaf_group_id = {}
        for g, ((kind, key), leaves) in enumerate(self._summary_leaf_groups().items()):
            box = f"xs{g}"
            self._leaf_group_id[(kind, key)] = box
            if len(leaves) == 1:
                lines = self._leaf_lines(leaves[0])
            else:
                plural = {"input": "inputs", "parameter": "parameters", "constant": "constants"}[kind]
                names = [program.leaves[j].name for j in leaves if program.leaves[j].name]
                lines = [(f"{len(leaves)} {plural}", "name")]
                if names:
                    lines.append((", ".join(names[:3]) + (" …" if len(names) > 3 else ""), "info"))
            item = _Item(box, kind, "", lines)
            if self.backward and kind != "constant":
                states = {self.leaf_state(j) for j in leaves}
                item.state = "done" if states == {"done"} else "pending"
            items.append(item)
        return items

    def _summary_edges(self):
        program = self.program
        if not hasattr(self, "_group_id"):
            self._summary_boxes()
        leaf_group = {}
        for (kind, key), leaves in self._summary_leaf_groups().items():
            for j in leaves:
                leaf_group[j] = self._leaf_group_id[(kind, key)]
        counts = {}
        constant = {}
        for i, node in enumerate(program.equations):
            head = self._group_id[self.summary[i]]
            for x in node.inputs:
                k = program.index.get(x)
                tail = self._group_id[self.summary[k]] if k is not None else leaf_group[program.leaf_index[x]]
                if tail == head:
                    continue
                counts[(tail, head)] = counts.get((tail, head), 0) + 1
                constant[(tail, head)] = constant.get((tail, head), True) and not x.requires_grad
        result = []
        for (tail, head), n in counts.items():
            attrs = {}
            if n > 1:
                attrs["label"] = f"×{n}"
            if constant[(tail, head)]:
                attrs.update(style="dashed", color="#999999")
            elif self.backward:
                attrs["dir"] = "back"
                states = {self.eq_state(i) for i in self._summary_groups_by_id[head]}
                if "current" in states:
                    attrs.update(color=STYLE["current"][1], penwidth="2")
                elif states == {"done"}:
                    attrs["color"] = STYLE["done"][1]
                else:
                    attrs["color"] = STYLE["pending"][1]
            result.append((tail, head, attrs))
        return result

    # -- DOT

    def emit(self, graphviz, *, rankdir, legend, title, note):
        dot = graphviz.Digraph(name="microtape")
        dot.attr(
            rankdir=rankdir,
            newrank="true",
            fontname="Helvetica",
            fontsize="11",
            nodesep="0.18",
            ranksep="0.32",
            labelloc="b",
            labeljust="l",
        )
        dot.attr("node", shape="box", style="rounded,filled", fontname="Helvetica", fontsize="10")
        dot.attr("node", margin="0.08,0.03", height="0.3")
        dot.attr("edge", color=EDGE, arrowsize="0.6", fontname="Helvetica", fontsize="8")
        items = self.boxes()
        caption = _caption(self, items, title, note, legend)
        if caption:
            dot.attr(label=caption)
        # Clusters: one subgraph per module path, nested by dotted prefix.
        paths = []
        for item in items:
            path = item.cluster
            while path and path not in paths:
                paths.append(path)
                path = path.rpartition(".")[0]
        order = {}
        for path in paths:  # first appearance order, parents before children
            for k in range(1, path.count(".") + 2):
                prefix = ".".join(path.split(".")[:k])
                order.setdefault(prefix, len(order))
        bodies = {path: graphviz.Digraph(name=f"cluster_{order[path]}") for path in order}
        for path, sub in bodies.items():
            sub.attr(
                label=path.rpartition(".")[2],
                style="rounded,dashed",
                color="#8a94a6",
                fontcolor="#4a5568",
                fontsize="11",
                margin="6",
                labelloc="t",
                labeljust="l",
            )
        for item in items:
            target = bodies[item.cluster] if item.cluster else dot
            target.node(item.id, _label(item), **self._node_attrs(item))
        # Attach children to parents, deepest first, so each body is complete.
        for path in sorted(order, key=lambda p: (-p.count("."), order[p])):
            parent = path.rpartition(".")[0]
            (bodies[parent] if parent else dot).subgraph(bodies[path])
        for tail, head, attrs in self.edges():
            dot.edge(tail, head, **attrs)
        return dot

    def _node_attrs(self, item):
        kind = "op" if item.kind == "output" else item.kind
        fill, line = STYLE[kind]
        attrs = {"fillcolor": fill, "color": line}
        if kind == "constant":
            attrs["style"] = "rounded,filled,dashed"
        if kind == "shape":
            attrs.update(style="rounded,filled,dashed", fontsize="9")
        if kind == "summary":
            attrs["shape"] = "box3d"
            attrs["style"] = "filled"
        if item.members == "copy":
            attrs.update(fontsize="8", height="0.2", margin="0.04,0.01")
        if item.kind == "output":
            attrs["peripheries"] = "2"
        if item.state is not None:
            fill, line = STYLE[item.state]
            attrs.update(fillcolor=fill, color=line)
            if item.state == "current":
                attrs["penwidth"] = "2.5"
            elif item.state == "pending":
                attrs["fontcolor"] = PENDING_TEXT
        return attrs


def _formula_part(op, position):
    """The part of an op's VJP formula that concerns input ``position``."""
    parts = [p.strip() for p in op.formula.split(";") if p.strip()]
    if len(parts) == op.arity:
        return parts[position]
    return parts[0] if position == 0 else ""


def _label(item):
    """An HTML-like graphviz label: the name in bold, then smaller lines."""
    rows = []
    for text, role in item.lines:
        text = html.escape(str(text), quote=False)
        if role == "name":
            rows.append(f"<b>{text}</b>")
        elif role == "grad":
            colour = "#7a3b10" if item.state != "pending" else PENDING_TEXT
            rows.append(f'<font point-size="9" color="{colour}">{text}</font>')
        else:
            rows.append(f'<font point-size="9">{text}</font>')
    return "<" + "<br/>".join(rows) + ">"


def _caption(builder, items, title, note, legend):
    """The graph's label, one row: title and note, then the legend of the styles in use.

    (One row, because graphviz stretches the cells of a table row to the
    width of the widest row.)
    """
    cells = []
    text = []
    if title:
        text.append(f"<b>{html.escape(title, quote=False)}</b>")
    if note:
        text.append(f'<font point-size="9">{html.escape(note, quote=False)}</font>')
    if text:
        cells.append('<td align="left" balign="left">' + "<br/>".join(text) + "</td>")
    if legend:
        kinds = {item.kind for item in items}
        states = {item.state for item in items}
        if builder.whole:
            keys = [("done", "has its gradient")]
            if "pending" in states:
                keys.append(("pending", "not on the path to the output"))
        elif builder.backward:
            keys = [("done", "gradient done"), ("current", "current step"), ("pending", "not yet")]
        else:
            keys = [("op", "operation")] if kinds & {"op", "output", "shape"} else []
            if "summary" in kinds:
                keys.append(("summary", "summary of a module"))
            keys += [(k, k) for k in ("input", "parameter") if k in kinds]
        if "constant" in kinds:
            keys.append(("constant", "constant (no gradient)"))
        cells += [
            f'<td bgcolor="{STYLE[k][0]}" border="1" color="{STYLE[k][1]}"><font point-size="9">'
            f"{html.escape(text, quote=False)}</font></td>"
            for k, text in keys
        ]
        if builder.backward and not builder.whole and len(builder.trace):
            last = len(builder.trace) - 1
            cells.append(f'<td><font point-size="9">step {builder.step} of 0..{last}</font></td>')
    if not cells:
        return None
    return '<<table border="0" cellspacing="4" cellpadding="2"><tr>' + "".join(cells) + "</tr></table>>"
