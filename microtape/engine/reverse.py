"""The reverse pass: :func:`gradients`, a pure function over a tape's equations, and what it returns.

``gradients(y)`` walks the equations backwards, calls each op's VJP and *adds*
the results into a dict keyed by node (a value used twice gets the sum of its
uses) — and writes nothing. :class:`Gradients` is that dict, read-only;
``backward()`` is its :meth:`Gradients.accumulate`. With ``create_graph=True``
the same walk runs on the nodes themselves, so it records a program of its own.

Read it top to bottom: :func:`gradients` and the checks at its door, then the
loop (:func:`_reverse`), then the loop's helpers (one VJP on numbers, one
recorded), then the door's helpers, ``backward()``'s entry, and last what
the pass returns (:class:`Step`, :class:`Gradients`). The guards where user
code meets the pass — the seed, a user op's VJP, adding into ``.grad`` all
or nothing — are in :mod:`.boundary`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .boundary import add_into_grads, check_seed, check_user_vjp, gradient_like
from .lean import not_kept_error
from .node import Node, _active_tapes, module_scope
from .protocols import Operation, Value
from .tape import Equation, Tape, register_reverse_pass

__all__ = ["Step", "Gradients", "gradients", "backward_pass", "derivative_labels", "vjp_params", "no_gradient_error"]


def gradients(
    output: Node, grad: Value = None, *, tape: Tape | None = None, steps: bool = False, create_graph: bool = False
) -> Gradients:
    """The gradient of ``output`` with respect to every node on its path — writing nothing.

    ``grad`` seeds the pass (default: ones of the output's shape, ``1.0`` for a
    Scalar; a given seed must be finite). The order of the equations comes
    from ``tape`` when given (anything computed before that tape began is then
    a leaf), else from the graph: the innermost active tape's order when it
    recorded the whole computation, a search of the graph otherwise — so a
    call inside a ``with Tape()`` that opened midway still follows everything.
    Returns a :class:`Gradients` mapping ``{node: gradient}``. No ``.grad`` is
    written, and calling it twice gives the same answer. ``steps=True`` also
    keeps every step (for walks, frames and reports). The dtype rule: every
    gradient has the dtype of the value it belongs to (a float32 leaf used
    with float64 values gets a float32 gradient).

    ``create_graph=True`` runs the same pass on Scalars and Tensors instead of
    their numbers: every VJP records its ops (on a tape of its own,
    ``result.program``, and on the tapes active around the call), so each
    gradient is a tape value that can be differentiated again — a Hessian-vector
    product is the gradient of ``sum(gradient * v)``. Each recorded step runs in
    the module ``∂name``, ``name`` being the forward variable it differentiates,
    so pictures group the backward program by the forward op it came from.
    """
    return _gradients(output, grad, tape, steps, create_graph, "gradients")


def _gradients(output: Node, grad: Value, tape: Tape | None, steps: bool, create_graph: bool, caller: str) -> Gradients:
    """:func:`gradients`, with ``caller`` (``"backward"``, ``"Tape.backward"``…) naming the entry point in errors."""
    if not isinstance(output, Node):
        raise TypeError(f"{caller}(output): expected a Scalar or Tensor, got {type(output).__name__}")
    if not isinstance(create_graph, bool):
        raise TypeError(f"{caller}(create_graph={create_graph!r}): expected True or False")
    if tape is None:
        active = _active_tapes.get()
        on_active = active and active[-1]._position(output) is not None
        # A tape that opened after part of this computation would stop there and treat
        # computed values as leaves: then the graph itself gives the order.
        tape = active[-1] if on_active and not _began_before(active[-1], output) else Tape.of(output)
    elif not isinstance(tape, Tape):
        raise TypeError(f"{caller}(tape=...): expected a microtape Tape, got {type(tape).__name__}")
    elif output.op is not None and tape._position(output) is None:
        raise ValueError(f"{caller}(output): {output!r} was not recorded on this tape")
    if not create_graph:
        seed = check_seed(output, grad, caller)
        # A lean tape frees each intermediate gradient once used (unless the steps are wanted: they hold them all).
        kept = tape.keep if tape.lean and not steps else None
        grads, taken, completed = _reverse(tape._nodes, output, seed, keep_steps=steps, kept=kept)
        program = None
    else:
        if tape.lean:
            raise ValueError(
                f"{caller}(create_graph=True): the tape was recorded lean, so the values a recorded "
                "reverse pass runs on are not all kept; record it fully (mt.Tape() / lean=False)"
            )
        seed = _seed_node(output, grad, caller)
        _refuse_first_order_ops(tape._nodes, output)
        names = derivative_labels(tape)
        with Tape.atomic() as program:
            grads, taken, completed = _reverse(tape._nodes, output, seed, keep_steps=steps, names=names)
    kept_steps = [Step(index, tape[index], g, sent) for index, g, sent in taken] if taken is not None else None
    return Gradients(grads, tape, output, seed, kept_steps, completed, program)


def _reverse(
    equations: Sequence[Node],
    output: Node,
    seed: Value,
    keep_steps: bool = False,
    names: dict[Node, str] | None = None,
    kept: tuple[str, ...] | None = None,
) -> tuple[dict[Node, Value], list[tuple[int, Value, tuple[Value, ...]]] | None, dict[Node, int] | None]:
    """The reverse pass: walk ``equations`` backwards, summing gradients in a dict.

    When we reach an equation, every use of its output lies behind us, so its
    gradient ``g`` is complete. Its op's VJP turns ``g`` into one gradient per
    input, which we *add* to what those inputs already have. Returns the dict,
    and (``keep_steps``) the steps taken and the step completing each gradient.
    With ``names`` (a recorded pass, ``create_graph=True``) the VJPs get the
    nodes themselves instead of their data, and so record what they compute.
    With ``kept`` (a lean tape's ``keep`` names) a computed node's gradient is
    dropped from the dict as soon as its VJP has it, unless ``kept`` names it.
    """
    grads = {output: seed}
    steps: list[tuple[int, Value, tuple[Value, ...]]] = []  # (filled only with keep_steps)
    completed: dict[Node, int] = {}
    for index in range(len(equations) - 1, -1, -1):
        node = equations[index]
        g = grads.get(node)
        if g is None or node.op is None:
            continue  # not on the path to the output
        if kept is not None and node.name not in kept:
            del grads[node]  # lean: nothing reads it after this step (g goes when the next step starts)
        sent = _vjp(node, g) if names is None else _recorded_vjp(node, g, names[node])
        position = 0  # a counter, not enumerate(): this is the hottest loop of a reverse pass
        for x in node.inputs:
            if x.requires_grad:
                gx = sent[position]
                if gx is None:
                    raise no_gradient_error(node.op, position, x)
                previous = grads.get(x)
                if previous is None:
                    grads[x] = gx
                elif names is None:
                    grads[x] = previous + gx
                else:  # recorded: the sum of x's uses is part of x's gradient
                    with module_scope(f"∂{names[x]}"):
                        grads[x] = previous + gx
                if keep_steps:
                    completed[x] = index
            position += 1
        if keep_steps:
            completed[node] = index
            steps.append((index, g, tuple(sent)))
    return (grads, steps, completed) if keep_steps else (grads, None, None)


def _vjp(node: Node, g: Value) -> tuple[Value, ...]:
    """One VJP on numbers: the gradients ``node``'s op sends its inputs, each of its input's type and dtype.

    The call is spelled out for one and two inputs: a Scalar pass pays for
    every Python call.
    """
    op, inputs = node.op, node.inputs
    if node.params:
        sent = op.vjp(g, node.data, *[x.data for x in inputs], **vjp_params(node))
    elif len(inputs) == 2:
        sent = op.vjp(g, node.data, inputs[0].data, inputs[1].data)
    elif len(inputs) == 1:
        sent = op.vjp(g, node.data, inputs[0].data)
    else:
        sent = op.vjp(g, node.data, *[x.data for x in inputs])
    if not op.builtin:
        return check_user_vjp(op, node, sent)  # (which applies the dtype rule too)
    for x, gx in zip(inputs, sent):
        if (
            gx is not None
            and gx.__class__ is not float
            and (gx.__class__ is not np.ndarray or gx.dtype != x.data.dtype)
        ):
            # The dtype rule: a gradient has its value's type and dtype.
            return tuple(gx if gx is None else gradient_like(x.data, gx) for x, gx in zip(inputs, sent))
    return sent


def _recorded_vjp(node: Node, g: Value, name: str) -> tuple[Value, ...]:
    """One VJP run on the nodes themselves (``create_graph=True``), recorded in the module ``∂name``."""
    with module_scope(f"∂{name}"):
        sent = node.op.vjp(g, node, *node.inputs, **vjp_params(node))
    if not node.op.builtin:
        sent = check_user_vjp(node.op, node, sent, recorded=True)
    # A gradient that came out as a plain number or array (it depends on nothing
    # being differentiated) is still a tape value: a constant of the input's kind.
    sent = tuple(
        gx if gx is None or isinstance(gx, Node) else x.__class__._constant(gx, x) for gx, x in zip(sent, node.inputs)
    )
    return tuple(_dtype_rule(gx, x) for gx, x in zip(sent, node.inputs))


def _dtype_rule(gx: Value, x: Node) -> Value:
    """The dtype rule on a recorded gradient: a float32 input mixed with float64 values gets a float32 gradient.

    The cast is recorded (``astype``), so the gradient still differentiates
    back to what it came from; Scalars are Python floats and need none.
    """
    if gx is None or x.data.__class__ is not np.ndarray or gx.data.__class__ is not np.ndarray:
        return gx
    if gx.data.dtype == x.data.dtype:
        return gx
    return gx.astype(x.data.dtype)


def vjp_params(node: Node) -> dict[str, Any]:
    """The keywords of a node's VJP: its parameters, and its residuals when the op saved some.

    (An op that saves residuals is recorded with parameters; called without any,
    its VJP gets none and computes them again.)
    """
    params = node.params or {}
    if node.op.forward_saving is not None and node.params:
        return {**params, "residuals": node.residuals}
    return params


def no_gradient_error(op: Operation, position: int, x: Value) -> TypeError:
    """The error for a VJP that sends ``None`` to an input that requires a gradient."""
    return TypeError(
        f"op {op.name!r} gives no gradient for input {op.inputs[position]!r} ({x!r:.60}), "
        "which requires one; its input in that position must be a constant"
    )


def _began_before(tape: Tape, output: Node) -> bool:
    """True when a computed value ``output`` depends on is not on ``tape`` (it was computed before the tape began)."""
    recorded = set(tape._nodes)
    needed = {output}
    for node in reversed(tape._nodes):
        if node in needed:
            for x in node.inputs:
                if x.requires_grad:
                    if x.op is not None and x not in recorded:
                        return True
                    needed.add(x)
    return False


def _seed_node(output: Node, grad: Value, caller: str = "gradients") -> Node:
    """The seed of a recorded pass as a tape value: ``grad`` itself if it is one, else a constant."""
    if isinstance(grad, Node):
        if not isinstance(grad, output.__class__) or np.shape(grad.data) != np.shape(output.data):
            raise ValueError(
                f"gradients(grad=...): grad is a {type(grad).__name__} of shape {np.shape(grad.data)}; expected a "
                f"{type(output).__name__} of the output's shape {np.shape(output.data)}"
            )
        check_seed(output, None, caller)  # the output must still require a gradient
        check_seed(output, grad.data, caller)  # and the seed be finite, as a seed given as numbers must be
        return grad
    seed = output.__class__._constant(check_seed(output, grad, caller), output)
    seed.name = "g"  # what the formulas call the incoming gradient
    return seed


def _refuse_first_order_ops(equations: Sequence[Node], output: Node) -> None:
    """Before a recorded pass changes anything: refuse an op on the path whose VJP cannot be recorded."""
    needed = {output}
    for node in reversed(equations):
        if node not in needed or node.op is None:
            continue
        if not node.op.higher_order:
            raise ValueError(
                f"gradients(create_graph=True): op {node.op.name!r}"
                + (f" (computing {node.name!r})" if node.name else "")
                + " has no higher-order "
                "derivative: its VJP works on numbers only, so it cannot be recorded"
                + (
                    "; define it with higher_order=True once its vjp uses only operators and microtape ops"
                    if not node.op.builtin
                    else ""
                )
            )
        needed.update(x for x in node.inputs if x.requires_grad)


def derivative_labels(tape: Tape) -> dict[Node, str]:
    """What each variable's derivative is grouped under: its name, or its op and position (``reshape%3``).

    A recorded pass (``create_graph=True``) runs each step in the module ``∂label``.
    """
    names = tape.variable_names()
    return {node: name if node.name or node.op is None else f"{node.op.name}{name}" for node, name in names.items()}


def backward_pass(output: Node, grad: Value = None, create_graph: bool = False) -> None:
    """What ``y.backward(grad)`` does: :func:`gradients` over ``output``'s whole graph, added into ``.grad``.

    The order comes from the graph itself (:meth:`Tape.of`), whatever tape is
    active. All or nothing: a pass that fails changes no ``.grad``.
    """
    _gradients(output, grad, Tape.of(output), False, create_graph, "backward").accumulate()


class Step(NamedTuple):
    """One step of the reverse pass: an equation, the gradient it got, what it sent on."""

    index: int  # type: ignore[assignment]  # the equation's position on the tape
    equation: Equation
    grad_output: object  # g: the complete gradient of the equation's output
    grad_inputs: tuple  # what the VJP sends to each input (None for constants)


class Gradients(Mapping[Node, Value]):
    """The result of one reverse pass: ``g[node]`` is the gradient of ``node``.

    A read-only mapping over every node on the path from the output — leaves
    and intermediates — that needs a gradient. Arrays come out read-only (one
    array may serve several nodes: ``add`` hands the same ``g`` to both
    operands). With ``steps=True``, ``.steps`` lists every :class:`Step` in
    the order the pass took them and :meth:`completed_at` says when each
    gradient was complete.
    """

    def __init__(
        self,
        grads: dict[Node, Value],
        tape: Tape,
        output: Node,
        seed: Value,
        steps: list[Step] | None,
        completed: dict[Node, int] | None,
        program: Tape | None = None,
    ) -> None:
        self._grads = grads
        self.tape = tape
        self.output = output
        self.seed = seed
        self.steps = steps  # list of Step, or None
        self._completed = completed
        # create_graph=True: the tape of the reverse pass itself (the gradients are its values).
        self.program = program

    def __getitem__(self, node: Node) -> Value:
        try:
            grad = self._grads[node]
        except KeyError:
            if self.tape.lean and getattr(node, "op", None) is not None and self.tape._position(node) is not None:
                # (freed by the lean pass: only leaves' and kept steps' gradients stay)
                name = self.tape.variable_names()[node]
                raise KeyError(str(not_kept_error(name, "gradient", node.name))) from None
            raise KeyError(f"{node!r} is not on the path to the output (or needs no gradient)") from None
        if grad.__class__ is not float and grad.__class__ is not np.ndarray:
            grad = gradient_like(node.data, grad)  # numpy's 0-d arithmetic gives np.float64: an array again
        if grad.__class__ is np.ndarray and grad.flags.writeable:
            grad = grad.view()
            grad.flags.writeable = False
        return grad

    def __contains__(self, node: object) -> bool:
        return node in self._grads

    def __iter__(self) -> Iterator[Node]:
        return iter(self._grads)

    def __len__(self) -> int:
        return len(self._grads)

    def __repr__(self) -> str:
        return f"<Gradients of {len(self._grads)} nodes>"

    def completed_at(self, node: Node) -> int | None:
        """The tape index of the step after which ``node``'s gradient is complete.

        For a computed node that is its own step; for a leaf, the last step that
        sent it a contribution. None when no gradient reached it (or steps were
        not kept).
        """
        return None if self._completed is None else self._completed.get(node)

    def accumulate(self) -> None:
        """Add these gradients into every node's ``.grad`` — what ``backward()`` does.

        All or nothing, and no gradient shares memory another can change
        through: see :func:`~microtape.engine.boundary.add_into_grads`.
        """
        add_into_grads(self._grads)

    def step_at(self, index: int) -> Step | None:
        """The step of the equation at tape position ``index`` (None if the pass skipped it)."""
        for step in self.steps or ():
            if step.index == index:
                return step
        return None


register_reverse_pass(_gradients)
