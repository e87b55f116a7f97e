"""What every edge of a picture says: the gradient that flows along it, in the student's names and numbers.

A backward edge reads ``∂L/∂f = g·d = 1·4 = 4`` for scalars (the formula,
then the numbers, then the value when short) and ``dQ_heads = dscores @
K_heads  [4, 6, 4]`` for tensors; ``+=`` marks one of several contributions.
The formulas come from each op's per-input templates
(:meth:`microtape.ops.Op.formula_for`), never from splitting a formula string.

:class:`Edges` is the half of :class:`~microtape.viz.paint.Painter` that
writes edges; the painter gives it ``view``, ``program``, ``trace``,
``backward``, ``values``, ``engine_step`` and ``current``.
"""

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from .picture import Arrow
from .text import flatten, fmt, grad_name, norm_text, number, shape_text
from .view import SHAPE_OPS

__all__ = ["Edges"]

_DOUBLE_PARENS = re.compile(r"\(\((-[0-9.e+-]+)\)\)")
SHORT = 32  # characters: a formula with its numbers longer than this leaves the numbers out
# Elementwise ops whose VJP sums a broadcast operand's gradient back to its shape (ops.unbroadcast).
BROADCASTING = frozenset({"add", "sub", "mul", "div", "add_constant"})


class Edges:
    """The arrows of a picture and what each says (mixed into :class:`~microtape.viz.paint.Painter`)."""

    if TYPE_CHECKING:  # what the Painter that mixes this in has
        trace: Any
        view: Any
        backward: bool
        engine_step: Any
        current: Any
        values: bool
        program: Any

    def arrow(self, link: Any) -> Arrow:
        trace = self.trace
        count = len(link.uses)
        summarised = self.view.by_id[link.tail].summarised or self.view.by_id[link.head].summarised
        label = f"{count} uses" if summarised and count > 1 else None  # values read along this one line
        if not self.backward or link.constant:
            return Arrow(link.tail, link.head, label, None, link.constant)
        steps = [trace.step_of.get(i) for i, _ in link.uses]
        if all(s is None for s in steps):
            return Arrow(link.tail, link.head, label, "off")
        finished = all(s is not None and s <= self.engine_step for s in steps if s is not None)
        state = "current" if link.head == self.current and finished else "done" if finished else "pending"
        if summarised:
            if finished and self.values:
                sent = [self._sent(i, p) for i, p in link.uses if self._sent(i, p) is not None]
                ends = [self.program.equations[i].inputs[p] for i, p in link.uses]
                flow = norm_text(flatten(sent), max(trace.noise(x) for x in ends)) if sent else None
                label = " ".join(t for t in (flow, label) if t)
            elif not self.values:
                label = self.what_flows(link)  # no numbers (a slide): say what flows, by name
            return Arrow(link.tail, link.head, label, state)
        i, position = link.uses[0]
        return Arrow(link.tail, link.head, self.formula(i, position, numbers=finished), state)

    def what_flows(self, link: Any) -> Any:
        """A summary edge in words: the formula of its one use, or the gradients it carries and how many uses."""
        if len(link.uses) == 1:
            return self.formula(*link.uses[0])
        program = self.program
        targets = []
        for i, position in link.uses:
            x = program.equations[i].inputs[position]
            x = self._folded_leaf(x) or x  # a Linear's W.T drawn in W's box carries dW
            if x.requires_grad:
                name = grad_name(program.name(x), x.data.__class__ is float, program.loss_name)
                targets += [name] if name not in targets else []
        shown = ", ".join(targets[:2]) + (" …" if len(targets) > 2 else "")
        return f"{shown} ({len(link.uses)} uses)" if shown else f"{len(link.uses)} uses"

    def _folded_leaf(self, x: Any) -> Any:
        """The leaf whose box shows ``x`` when ``x`` is a reshape/transpose chain folded into it, else None."""
        i = self.program.index.get(x)
        j = self.view.fold_of.get(i) if i is not None else None
        return None if j is None else self.program.leaves[j]

    def _fold_ops(self, x: Any) -> Any:
        """The ops of the folded chain that ends at ``x``, from the leaf on."""
        i = self.program.index[x]
        return [self.program.equations[m].op.name for m in sorted(m for m, r in enumerate(self.view.rep) if r == i)]

    def _sent(self, i: Any, position: Any) -> Any:
        s = self.trace.step_of.get(i)
        return None if s is None else self.trace.sent[s][position]

    def formula(self, i: Any, position: Any, numbers: bool = False) -> Any:
        """What flows to input ``position`` of equation ``i``, in the student's names (and numbers)."""
        program = self.program
        node = program.equations[i]
        x = node.inputs[position]
        scalar = node.data.__class__ is float
        loss = program.loss_name
        target = grad_name(program.name(x), scalar, loss)
        joins = " += " if self.trace.uses.get(x, 0) > 1 else " = "
        rep = self.view.rep[i]
        if node.op.name in SHAPE_OPS and rep != i and self.view.box_of(i) == f"n{rep}":
            # The first link of a folded reshape/transpose chain: the gradient is moved back.
            source = grad_name(program.name(program.equations[rep]), scalar, loss)
            return f"{target}{joins}{source} moved back {shape_text(x.data)}"
        names = {"g": "g" if scalar else grad_name(program.name(node), False, loss)}
        names.update({name: program.name(operand) for name, operand in zip(node.op.inputs, node.inputs)})
        names[node.op.output] = program.name(node)
        names.update({key: _param_text(value) for key, value in (node.params or {}).items()})
        text = _tidy(node.op.formula_for(position, names), scalar)
        owned = self._folded_leaf(x)
        if owned is not None and not scalar:
            # The edge starts at the leaf's box (a Linear's W.T is drawn in W's box): it carries the
            # gradient of the leaf as the student stores it, [out, in], not that of its transpose.
            leaf_target = grad_name(program.name(owned), False, loss)
            leaf_joins = " += " if self.trace.uses.get(owned, 0) > 1 else " = "
            return f"{leaf_target}{leaf_joins}{_moved_back(text, self._fold_ops(x))}  {shape_text(owned.data)}"
        if not scalar:
            if node.op.name in BROADCASTING and np.shape(x.data) != np.shape(node.data):
                return f"{target}{joins}{text} summed to {shape_text(x.data)}"
            return f"{target}{joins}{text}  {shape_text(x.data)}"
        text = f"{target}{joins}{text}"
        if numbers and self.values:
            g = self.trace.grad_out.get(i)
            values = {"g": number(g)}
            values.update({name: number(operand.data) for name, operand in zip(node.op.inputs, node.inputs)})
            values[node.op.output] = number(node.data)
            values.update({key: _param_text(value) for key, value in (node.params or {}).items()})
            with_numbers = _tidy(node.op.formula_for(position, values), scalar)
            sent = self._sent(i, position)
            result = fmt(sent) if sent is not None else "?"
            if len(with_numbers) <= SHORT and with_numbers != result:
                text += f" = {with_numbers}"
            text += f" = {result}"
        return text


_TRANSPOSED_PRODUCT = re.compile(r"^(\S+)\^T @ (\S+)$")


def _moved_back(text: str, ops: Any) -> str:
    """The gradient of a folded chain's result, written as the gradient of the leaf it started from.

    One transpose: ``(a^T @ g)^T`` is ``g^T @ a`` (a Linear's ``dW = dy^T @ x``);
    anything else is the gradient moved back through the chain.
    """
    if ops == ["transpose"]:
        product = _TRANSPOSED_PRODUCT.match(text)
        if product:
            return f"{product.group(2)}^T @ {product.group(1)}"
        return f"({text})^T"
    return f"({text}) moved back"


def _tidy(text: str, scalar: Any) -> Any:
    """Cosmetics on a filled-in formula: ``·`` for a scalar product, ``(Xᵀ)ᵀ = X``, ``f((-2))`` → ``f(-2)``."""
    text = _DOUBLE_PARENS.sub(r"(\1)", text.replace("^T^T", ""))
    return text.replace(" * ", "·") if scalar else text


def _param_text(value: Any) -> Any:
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        return number(value)
    if isinstance(value, np.ndarray):
        return f"array{shape_text(value)}"
    return str(value)
