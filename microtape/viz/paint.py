"""What every box and edge says: the student's names, the ops with their parameters, numbers, formulas.

This module lets a view of a computation become a picture, forward or at
any step of the backward pass::

    picture = paint(view)                      # forward: names, ops, values
    picture = paint(view, trace)               # backward: every gradient, every edge's formula
    picture = paint(view, trace, step=3)       # the pass after its step 3

Boxes
-----
An equation's box shows its name (``scores``, or ``%i`` when unnamed), its op
as :meth:`microtape.ops.Op.describe` says it (``pow ²``, ``scale ×0.5``;
``dropout p=0.1``, with ``p`` read off the keep-mask: kept entries are
``1/(1-p)``), its shape, and its value — a small array (up to 3×3) in full.
In the backward view it shows its gradient; a box the pass has not finished
shows what it has received so far (``so far … (1 of 2 uses)``).

Edges
-----
What flows along each edge, in the student's names and numbers: see
:mod:`microtape.viz.edges` (the painter's other half).
"""

from typing import Any

import numpy as np

from ..ops import OPS
from .edges import Edges
from .picture import Fork, Picture, Shape, spine
from .text import flatten, fmt, grad_lines, norm_text, shape_text, step_text, value_lines

__all__ = ["paint", "Painter", "describe"]

PLURAL = {"input": "inputs", "parameter": "parameters", "constant": "constants"}


def describe(node: Any) -> Any:
    """An equation's op as a box shows it: ``pow ²``, ``scale ×0.5``, ``dropout p=0.1``."""
    text = node.op.describe(node.params)
    if node.op is OPS["dropout"] and len(node.inputs) == 2:
        keep = np.asarray(node.inputs[1].data)
        kept = keep[keep > 0]
        if kept.size:
            text += f" p={fmt(1.0 - 1.0 / float(kept.max()))}"
    return text


def paint(
    view: Any,
    trace: Any = None,
    step: Any = None,
    *,
    values: bool = True,
    title: str | None = None,
    legend: bool = True,
    rankdir: Any = None,
    received: Any = None,
) -> Any:
    """The :class:`~microtape.viz.picture.Picture` of ``view`` (forward, or backward after ``step``)."""
    return Painter(view, trace, step, values=values, received=received).picture(title, legend, rankdir)


class Painter(Edges):
    """Paints one picture: ``step`` counts the picture's steps (:meth:`View.steps`), None = the whole pass."""

    def __init__(
        self, view: Any, trace: Any = None, step: Any = None, *, values: bool = True, received: Any = None
    ) -> None:
        self.view, self.program, self.trace = view, view.program, trace
        self.outputs = set(view.program.outputs)
        self.values = values
        self.backward = trace is not None
        self.whole = self.backward and step is None
        self.step = step
        self.current = None
        self.engine_step = -1
        self.received = {}
        if self.backward:
            steps = view.steps(trace)
            self.last_step = len(steps) - 1
            self.engine_step = steps[-1] if step is None else steps[step]
            if not self.whole:
                self.current = view.box_of(trace.order[self.engine_step])
            self.received = received if received is not None else trace.received(self.engine_step)

    # -- the whole picture

    def picture(self, title: str | None = None, legend: bool = True, rankdir: Any = None) -> Picture:
        view = self.view
        shapes = [self.shape(box) for box in view.boxes]
        arrows = [self.arrow(link) for link in view.links]
        rankdir = rankdir or ("LR" if len(shapes) <= 12 else "TB")
        note = view.note
        if self.program.tape.lean:  # said once on top: a collapsed module hides its boxes' "value not kept"
            said = "recorded lean: values no VJP reads were not kept"
            note = f"{said}; {note}" if note else said
        if self.backward and not self.whole:
            said = step_text(self.step, self.last_step + 1)
            note = f"{said}; {note}" if note else said
        keys = self.legend(shapes) if legend else []
        forks = [self.fork(junction, arrows) for junction in view.junctions]
        # A collapsed picture (one box per module) draws its main path straight: a layer's residual path.
        straight = spine(shapes, arrows) if any(shape.kind == "summary" for shape in shapes) else []
        return Picture(
            shapes, arrows, self.backward, rankdir, title, note, keys, view.orders, forks, view.below, straight
        )

    def fork(self, junction: Any, arrows: Any) -> Fork:
        """A junction's point; backward, its line into the parameter is done when every arrow from it is."""
        state = None
        if self.backward:
            states = {arrows[k].state for k in junction.links}
            state = next((s for s in ("current", "pending", "done", "off") if s in states), None)
            if state == "pending" and "done" in states:
                state = "partial"
        return Fork(junction.id, junction.cluster, junction.tail, list(junction.links), state)

    def legend(self, shapes: Any) -> Any:
        keys = []
        if self.backward:
            states = {shape.state for shape in shapes}
            keys += [("state", s) for s in ("done", "partial", "current", "pending", "off") if s in states]
        kinds = {shape.kind for shape in shapes}
        order = ("op", "shape", "summary", "input", "parameter", "constant")
        shown = [k for k in order if k in kinds and (not self.backward or k in ("input", "parameter", "constant"))]
        return keys + [("kind", k) for k in shown]

    # -- states

    def done(self, i: Any) -> Any:
        s = self.trace.step_of.get(i)
        return s is not None and s <= self.engine_step

    def state(self, box: Any) -> Any:
        """done, partial, current, pending or off (not on the path); None in a forward picture."""
        if not self.backward or box.kind == "constant":
            return None
        if self.current is not None and self.current in (box.id, box.copy_of):
            return "current"
        program, trace = self.program, self.trace
        # What the box waits for: its equations' steps, and the contributions its leaves receive.
        steps = [trace.step_of[i] for i in box.equations if i in trace.step_of]
        leaves = [program.leaves[j] for j in box.leaves]
        expected = sum(trace.uses.get(x, 0) for x in leaves)
        if not steps and not expected:
            return "off"
        got = sum(self.received.get(x, (None, 0))[1] for x in leaves)
        finished = sum(1 for s in steps if s <= self.engine_step)
        if finished == len(steps) and got == expected:
            return "done"
        # An equation's result may already have part of its gradient (from some of its uses).
        started = finished or got or any(program.equations[i] in self.received for i in box.equations)
        return "partial" if started else "pending"

    # -- boxes

    def shape(self, box: Any) -> Shape:
        state = self.state(box)
        if box.kind == "summary":
            lines = self.summary_lines(box, state)
        elif box.leaves and box.copy_of is not None:
            lines = [(self.program.name(self.program.leaves[box.leaves[0]]) + " ↺", "name")]
        elif box.leaves and box.summarised:
            lines = self.leaf_group_lines(box, state)
        elif box.leaves:
            lines = self.leaf_lines(box, state)
        else:
            lines = self.equation_lines(box, state)
        result = self._is_result(box)
        return Shape(box.id, box.kind, box.cluster, lines, state, result, box.copy_of is not None)

    def _is_result(self, box: Any) -> Any:
        """Results get a double border: the outputs (backward), or what nothing else reads (forward)."""
        program = self.program
        if box.kind not in ("op", "shape") or box.leaves:
            return False
        if self.backward:
            return any(program.equations[i] in self.outputs for i in box.equations)
        return any(not program.consumers[i] for i in box.equations)

    def equation_lines(self, box: Any, state: Any) -> Any:
        program = self.program
        members = box.equations
        node = program.equations[members[-1]]
        lines = [(program.name(node), "name")]
        ops = "→".join(describe(program.equations[m]) for m in members)
        scalar = node.data.__class__ is float
        lines.append((ops if scalar else f"{ops} {shape_text(node.data)}", "info"))
        if not self.values:
            return lines
        moved = box.kind == "shape" and len(members) > 1  # values repeat the input's
        if not moved and (not self.backward or scalar):
            lines += [(text, "value") for text in value_lines(node.data)]
        if self.backward:
            lines += self.grad_of(node, members[-1], state)
        return lines

    def grad_of(self, node: Any, i: Any, state: Any) -> Any:
        """The gradient lines of equation ``i``: complete, or what arrived so far."""
        trace = self.trace
        if state in ("done", "current") and i in trace.grad_out and self.done(i):
            return [(text, "grad") for text in grad_lines(trace.grad_out[i], trace.noise(node))]
        return self.so_far(node)

    def so_far(self, node: Any) -> Any:
        got = self.received.get(node)
        if got is None:
            return []
        total = self.trace.uses.get(node, 0)
        noise = self.trace.noise(node)
        if got[1] >= total:  # complete, waiting for its turn
            return [(text, "grad") for text in grad_lines(got[0], noise)]
        lines = grad_lines(got[0], noise, prefix="so far")
        return [(text, "grad") for text in lines] + [(f"({got[1]} of {total} uses)", "grad")]

    def leaf_lines(self, box: Any, state: Any) -> Any:
        program = self.program
        j = box.leaves[0]
        leaf = program.leaves[j]
        kind = program.kinds[j]
        uses = sum(len(program.uses[k]) for k in box.leaves)
        scalar = leaf.data.__class__ is float or np.size(leaf.data) == 1
        lines = [(program.name(leaf), "name")]
        info = kind if scalar else f"{kind} {shape_text(leaf.data)}"
        if leaf.op is not None:
            info += " (computed earlier)"
        if len(box.leaves) > 1:
            info += f", used {uses}×"
        lines.append((info, "info"))
        if box.equations:  # a shape chain folded into this box (a Linear's W.T)
            last = program.equations[box.equations[-1]]
            ops = "→".join(program.equations[m].op.name for m in box.equations)
            lines.append((f"used as {program.name(last)}" + ("" if ops == "transpose" else f" ({ops})"), "info"))
        if len(self.view.leaf_boxes[j]) > 1:
            lines.append((f"used {uses}×: ↺ marks each use", "info"))
        if not self.values:
            return lines
        named_number = kind == "constant" and not leaf.name and scalar
        if not named_number and (not self.backward or scalar or kind == "constant"):
            lines += [(text, "value") for text in value_lines(leaf.data, constant=kind == "constant")]
        if self.backward and kind != "constant" and len(box.leaves) == 1:
            if state == "done":
                lines += [(text, "grad") for text in grad_lines(self.trace.total.get(leaf), self.trace.noise(leaf))]
            else:
                lines += self.so_far(leaf)
        return lines

    def leaf_group_lines(self, box: Any, state: Any) -> Any:
        program = self.program
        if len(box.leaves) == 1:
            return self.leaf_lines(box, state)
        kind = program.kinds[box.leaves[0]]
        names = [program.name(program.leaves[j]) for j in box.leaves]
        lines = [(f"{len(box.leaves)} {PLURAL[kind]}", "name")]
        lines.append((", ".join(names[:3]) + (" …" if len(names) > 3 else ""), "info"))
        if self.backward and state == "done" and self.values:
            leaves = [program.leaves[j] for j in box.leaves if program.leaves[j] in self.trace.total]
            if leaves:
                noise = max(self.trace.noise(x) for x in leaves)
                lines.append((norm_text(flatten([self.trace.total[x] for x in leaves]), noise), "grad"))
        return lines

    def summary_lines(self, box: Any, state: Any) -> Any:
        program = self.program
        members = box.equations
        module, _, part = box.group.partition("#")
        parent = box.cluster
        title = (module[len(parent) + 1 :] if parent and module.startswith(parent + ".") else module) or "(outside)"
        if part:
            title = f"ops {members[0]}–{members[-1]}" + (f" of {title}" if module else "")
        counts: dict[Any, Any] = {}
        for i in members:
            counts[program.equations[i].op.name] = counts.get(program.equations[i].op.name, 0) + 1
        lines = [(title, "name"), (f"{len(members)} ops: " + ", ".join(f"{n} {k}" for k, n in counts.items()), "info")]
        lines.append((self._equation_text(members[0]), "info"))
        if len(members) > 2:
            lines.append((f"⋮  {len(members) - 2} more", "info"))
        if len(members) > 1:
            lines.append((self._equation_text(members[-1]), "info"))
        if not self.values:
            return lines
        if not self.backward:
            last = program.equations[members[-1]]
            lines.append(("out " + value_lines(last.data)[0], "value"))
            return lines
        trace = self.trace
        on_path = [i for i in members if i in trace.step_of]
        done = [i for i in on_path if self.done(i)]
        exits = self.exits(members)
        if exits and all(self.done(i) for i in exits):
            noise = max(trace.noise(program.equations[i]) for i in exits)
            lines.append((norm_text(flatten([trace.grad_out[i] for i in exits]), noise) + " at its output", "grad"))
        if self.whole and len(on_path) < len(members):
            lines.append((f"{len(on_path)} of {len(members)} ops on the path", "grad"))
        elif not self.whole and len(done) < len(on_path):
            lines.append((f"{len(done)} of {len(on_path)} ops done", "grad"))
        return lines

    def exits(self, members: Any) -> Any:
        """The members whose result leaves the group (or is an output), on the path."""
        program = self.program
        inside = set(members)
        return [
            i
            for i in members
            if i in self.trace.step_of
            and (program.equations[i] in self.outputs or any(c not in inside for c in program.consumers[i]))
        ]

    def _equation_text(self, i: Any) -> Any:
        program = self.program
        node = program.equations[i]
        args = ", ".join(program.name(x) for x in node.inputs)
        text = f"{program.name(node)} = {node.op.name}({args})"
        return text if len(text) <= 40 else text[:39] + "…"
