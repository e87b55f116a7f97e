"""An optimisation of recording and of the reverse pass, for Scalars (Python floats).

Read it after :mod:`.reverse`: it computes nothing the reference pass does not,
it only does it with fewer Python calls.

A Scalar computation pays for every Python call: a micrograd-sized MLP step
is ~700 ops, each a few hundred nanoseconds. The reference path —
:func:`~microtape.engine.node.record` and :func:`~microtape.engine.reverse.gradients` followed by
:meth:`~microtape.engine.reverse.Gradients.accumulate` — is written to be read; this module
does the same work with fewer calls, and a test
(``tests/engine/test_fast_scalar.py``) proves it gives the same gradients, bit for
bit, on random graphs of every Scalar op:

* :func:`float_operator` is ``record`` made for one built-in op of
  one or two Scalars with no parameters, with the argument tuple and the
  branches taken out: ``Scalar.__mul__`` *is* ``float_operator(ops.mul)``,
  and ``a.relu()`` calls :func:`record_floats`, which finds the
  operator of the op ``microtape.ops.relu`` is at that moment;
* :func:`backward` walks the same order as the reference (``Tape.of``'s
  depth-first order, so each gradient's terms are added in the same order)
  but adds the terms straight into the nodes' ``.grad`` fields instead of a
  dict that is copied into them afterwards. Nodes that already hold a
  ``.grad`` keep it aside during the pass and get ``old + new`` at the end,
  exactly as :meth:`~microtape.engine.reverse.Gradients.accumulate` computes it; a pass that
  fails midway puts every ``.grad`` back as it was (all or nothing).

Each op is still defined once: both paths call the same ``op.forward`` and
``op.vjp``. The fast path runs only for a first-order ``backward()`` of a
Scalar; ``create_graph=True``, :func:`~microtape.engine.reverse.gradients` and every Tensor
use the reference path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from . import node as recording  # (read at each op: the counts of tapes and modules in force change)
from .boundary import check_seed, check_user_vjp, gradient_like, sum_into_grad
from .node import Node
from .protocols import Operation, Value
from .reverse import no_gradient_error, vjp_params
from .tape import topological_order

__all__ = ["float_operator", "record_floats", "backward"]


# ---------------------------------------------------------------- recording

_new = object.__new__


def float_operator(op: Operation) -> Callable[..., Any]:
    """``record(op, (a,) or (a, b), None, name)`` made for one built-in op of Scalars without parameters.

    ``Scalar.__mul__ = float_operator(ops.mul)``: the function it returns,
    ``operator(a, b=None, name=None)``, *is* the recording — no argument tuple
    to build, no branches for parameters, residuals or user ops, and no
    second call: ``a * b`` is one Python call (a call saved is a sixth of a
    Scalar op's cost; see this module's docstring). A ``b`` of another kind (a
    plain number) becomes a constant of ``a``'s kind first.
    """
    forward = op.forward

    def operator(a: Node, b: Any = None, name: str | None = None) -> Node:
        if b is None:
            data = forward(a.data)
        else:
            if b.__class__ is not a.__class__:
                b = a._constant(b)
            data = forward(a.data, b.data)
        out = _new(a.__class__)  # a bare node: every field is set below (as in record)
        out.data = data if data.__class__ is float else float(data)
        out.grad = None
        out.name = name
        out.module = recording._module_path.get() if recording._modules_in_force else ""
        out.params = None
        if a.requires_grad or (b is not None and b.requires_grad):
            out.requires_grad, out.op, out.inputs = True, op, (a,) if b is None else (a, b)
            if recording._tapes_in_force:
                for tape in recording._active_tapes.get():
                    tape._nodes.append(out)
        else:
            out.requires_grad, out.op, out.inputs = False, None, ()
        return out

    operator.__name__ = operator.__qualname__ = f"{op.name}_operator"
    operator.__doc__ = f"Record ``{op.name}`` on Scalars (made by :func:`microtape.engine.fast_scalar.float_operator`)."
    return operator


N = TypeVar("N", bound=Node)  # the kind of value in is the kind out (a Scalar gives a Scalar)

# op -> its float_operator, made once per op (ops hash by identity)
_float_operators: dict[Operation, Callable[..., Any]] = {}


def record_floats(op: Operation, a: N, b: Any = None, name: str | None = None) -> N:
    """``record(op, (a,) or (a, b), None, name)`` for a built-in op of Scalars without parameters (by its operator)."""
    operator = _float_operators.get(op)
    if operator is None:
        operator = _float_operators[op] = float_operator(op)
    return operator(a, b, name)


# ---------------------------------------------------------------- the reverse pass


# How deep the fast walk recurses before it hands what lies deeper to the reference's
# iterative walk: a Python call is cheaper than an explicit stack, but a chain of a
# million ops must not reach Python's recursion limit.
_RECURSION_DEPTH = 100


def backward(output: Node, grad: Value = None) -> None:
    """``output.backward(grad)`` for a Scalar ``output``: the same ``.grad`` values as the reference path."""
    seed = check_seed(output, grad, "backward")
    held: list[
        tuple[Node, Value]
    ] = []  # (node, its .grad before the pass): the pass sums into .grad, so those wait aside
    try:
        order = _order_holding(output, held)
    except BaseException:  # (an interrupt)
        for node, old in held:
            node.grad = old
        raise
    try:
        output.grad = seed
        _reverse_into_grads(order)
        totals = []
        for node, old in held:
            new, node.grad = node.grad, old
            totals.append((node, sum_into_grad(node, new)))  # may refuse a junk .grad: then nothing changes
    except BaseException:
        _put_back(output, order, held)
        raise
    for node, total in totals:
        node.grad = total


def _order_holding(root: Node, held: list[tuple[Node, Value]]) -> list[Node]:
    """``Tape.of(root)``'s order, and every ``.grad`` the pass will write to set aside into ``held``.

    The same depth-first post-order as :func:`~.tape.topological_order`
    (operand order kept), by a recursion that hands anything deeper than
    :data:`_RECURSION_DEPTH` to that iterative walk. Setting the ``.grad``
    fields aside on the way costs one more look at each input.
    """
    _hold_gradients((), held, root)
    if root.op is None:
        return []
    order: list[Node] = []
    try:
        _visit(root, _RECURSION_DEPTH, set(), order, held)
    except RecursionError:
        # The caller was already near Python's recursion limit: the iterative walk, the same order.
        for node, old in held:
            node.grad = old
        held.clear()
        order = topological_order(root)
        _hold_gradients(order, held, root)
    return order


def _visit(node: Node, depth: int, entered: set[Node], order: list[Node], held: list[tuple[Node, Value]]) -> None:
    """Order what ``node`` depends on, then ``node`` (a module function: a closure calling itself is a cycle)."""
    entered.add(node)
    for child in node.inputs:
        if child.op is None:  # a leaf
            if child.grad is not None and child.requires_grad:
                held.append((child, child.grad))
                child.grad = None
        elif child not in entered:
            if child.grad is not None:
                held.append((child, child.grad))
                child.grad = None
            if depth:
                _visit(child, depth - 1, entered, order, held)
            else:
                deeper = topological_order(child, entered)
                _hold_gradients(deeper, held)
                order.extend(deeper)
    order.append(node)


def _hold_gradients(nodes: Sequence[Node], held: list[tuple[Node, Value]], root: Node | None = None) -> None:
    """Set aside the ``.grad`` of ``root``, of ``nodes`` and of their inputs into ``held``, leaving ``None`` there."""
    if root is not None and root.grad is not None:
        held.append((root, root.grad))
        root.grad = None
    for node in nodes:
        if node.grad is not None:
            held.append((node, node.grad))
            node.grad = None
        for x in node.inputs:
            if x.grad is not None and x.requires_grad:
                held.append((x, x.grad))
                x.grad = None


def _reverse_into_grads(order: Sequence[Node]) -> None:
    """The reverse pass of :func:`~.reverse._reverse`, with each node's ``.grad`` as its sum.

    Reaching a node, every use of it lies behind us, so its ``.grad`` is
    complete; its VJP's results are added into its inputs' ``.grad``, in the
    order the reference adds them into its dict. One and two inputs are
    spelled out (a loop over the inputs costs more than the additions).
    """
    for node in reversed(order):
        op, inputs = node.op, node.inputs
        if node.params or not op.builtin:
            _general_step(node)
        elif len(inputs) == 2:
            a, b = inputs
            grad_a, grad_b = op.float_vjp(node.grad, node.data, a.data, b.data)
            if a.requires_grad:
                if grad_a.__class__ is not float:
                    grad_a = _as_gradient(op, 0, a, grad_a)
                previous = a.grad
                a.grad = grad_a if previous is None else previous + grad_a
            if b.requires_grad:
                if grad_b.__class__ is not float:
                    grad_b = _as_gradient(op, 1, b, grad_b)
                previous = b.grad
                b.grad = grad_b if previous is None else previous + grad_b
        elif len(inputs) == 1:
            (x,) = inputs
            (grad_x,) = op.float_vjp(node.grad, node.data, x.data)
            if grad_x.__class__ is not float:
                grad_x = _as_gradient(op, 0, x, grad_x)
            previous = x.grad
            x.grad = grad_x if previous is None else previous + grad_x
        else:
            _general_step(node)


def _general_step(node: Node) -> None:
    """One step for a node with parameters, a user-defined op, or three inputs: the reference's loop."""
    op, inputs = node.op, node.inputs
    sent = op.vjp(node.grad, node.data, *[x.data for x in inputs], **vjp_params(node))
    if not op.builtin:
        sent = check_user_vjp(op, node, sent)
    for position, x in enumerate(inputs):
        if x.requires_grad:
            gx = sent[position]
            if gx.__class__ is not float:
                gx = _as_gradient(op, position, x, gx)
            previous = x.grad
            x.grad = gx if previous is None else previous + gx


def _as_gradient(op: Operation, position: int, x: Node, gx: Value) -> Value:
    """A gradient that is not a float: refused if missing, else made a float (the dtype rule)."""
    if gx is None:
        raise no_gradient_error(op, position, x)
    return gradient_like(x.data, gx)


def _put_back(output: Node, order: Sequence[Node], held: list[tuple[Node, Value]]) -> None:
    """Undo a pass that failed: every ``.grad`` it wrote to is ``None`` again, then the held ones return."""
    output.grad = None
    for node in order:
        for x in node.inputs:
            if x.requires_grad:
                x.grad = None
    for node, old in held:
        node.grad = old
