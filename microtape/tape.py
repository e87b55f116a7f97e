"""The tape: a Wengert list of every operation, and the backward pass over it.

This module lets you record a computation and differentiate it::

    import microtape as mt
    with mt.Tape() as tape:
        a, b = mt.Scalar(2.0, name="a"), mt.Scalar(3.0, name="b")
        y = (a * b + a).tanh()
    print(tape)            # the program listing, one equation a line
    tape.backward(y)       # a.grad, b.grad are now set

How the pieces fit (the design in one paragraph)
------------------------------------------------
Every value — a ``Scalar`` or a ``Tensor`` — is a :class:`Node`. A node made
by an operation remembers that operation: ``node.op`` (a primitive from
:mod:`microtape.ops`), ``node.inputs`` (the nodes it was computed from, in
operand order) and ``node.params``. So a node *is* one equation of the
program, ``output = op(inputs; params)``, and the graph is reachable from any
result by following ``inputs`` — which is why ``y.backward()`` works with no
tape at all: it finds a topological order by an iterative depth-first search.
A :class:`Tape` adds the *recorded order*: while it is active, every new node
is appended to it. That order is already topological, so ``tape.backward``
needs no graph search — it walks the list in reverse (as JAX's Autodidax
does) — and the tape can be printed, iterated, drawn and checked step by
step. Nodes point only at their inputs, never at their outputs, so the graph
has no reference cycles: Python frees it as soon as nothing refers to it.

Both backward routes are iterative (no recursion: a chain of a million ops
is fine) and share one loop, :func:`_backprop`. Gradients are *added* into a
dict keyed by node, so a value used many times gets the sum of its uses. The
``.grad`` fields are written only after the whole pass succeeded, so a failed
backward leaves every gradient as it was.
"""

import contextvars
from collections import Counter, deque
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

__all__ = ["Tape", "Node", "Equation", "Step", "module_scope", "current_tapes"]

# The active tapes and the module path, per thread and per async task: a tape
# opened in one thread never sees the operations of another.
_active_tapes: contextvars.ContextVar[tuple] = contextvars.ContextVar("microtape_tapes", default=())
_module_path: contextvars.ContextVar[str] = contextvars.ContextVar("microtape_module", default="")


def current_tapes():
    """The tapes recording in this context, innermost last."""
    return _active_tapes.get()


@contextmanager
def module_scope(name):
    """Tag the operations run inside with a module path (``"attn.q_proj"``).

    Graphs group nodes by it and listings print it; it changes no numbers.
    """
    outer = _module_path.get()
    token = _module_path.set(f"{outer}.{name}" if outer else name)
    try:
        yield
    finally:
        _module_path.reset(token)


class Node:
    """A value in a computation: a leaf, or the output of one recorded op.

    ``Scalar`` and ``Tensor`` are both nodes; this class holds what they share
    and the backward pass. Subclasses set ``_output_data``, the function that
    turns an op's raw result into their kind of data (``float``, ``np.asarray``).
    """

    __slots__ = ("data", "grad", "name", "requires_grad", "op", "inputs", "params", "module")

    def _init_leaf(self, data, requires_grad, name):
        self.data = data
        self.grad = None
        self.name = name
        self.requires_grad = requires_grad
        self.op = None
        self.inputs = ()
        self.params = None
        self.module = _module_path.get()

    @property
    def is_leaf(self):
        """True for inputs, parameters and constants (nodes no op produced)."""
        return self.op is None

    def backward(self, grad=None):
        """Backpropagate from this node and accumulate ``.grad`` on every node.

        ``grad`` is the gradient of some final quantity with respect to this
        node; the default is ones (for a single number: 1, "dy/dy = 1").
        Works with or without an active :class:`Tape`: the graph is found by
        following ``inputs``. Leaves accumulate (``+=``) across calls.
        """
        _exhaust(_backprop(_topological_order(self), self, grad, steps=False))

    def zero_grad(self):
        self.grad = None


def _apply(op, inputs, params=None, name=None):
    """Run ``op`` on ``inputs`` (nodes) and record the result.

    The output is a node of the first input's kind. It is recorded (on every
    active tape, and via ``.inputs`` for the graph) only when some input
    requires a gradient: constants combined with constants stay constants.
    """
    first = inputs[0]
    # The one- and two-input calls are spelled out: for a Scalar, building an
    # argument list would cost more than the arithmetic itself.
    if params:
        data = op.forward(*[node.data for node in inputs], **params)
    elif len(inputs) == 2:
        data = op.forward(first.data, inputs[1].data)
    elif len(inputs) == 1:
        data = op.forward(first.data)
    else:
        data = op.forward(*[node.data for node in inputs])
    cls = first.__class__
    out = object.__new__(cls)  # a bare node (no __init__): every field is set below
    out.data = cls._output_data(data)
    out.grad = None
    out.name = name
    out.module = _module_path.get()
    for node in inputs:
        if node.requires_grad:
            out.requires_grad, out.op, out.inputs, out.params = True, op, inputs, params
            for tape in _active_tapes.get():
                tape._nodes.append(out)
            break
    else:
        out.requires_grad, out.op, out.inputs, out.params = False, None, (), None
    return out


# ---------------------------------------------------------------- backward


def _topological_order(root):
    """The computed nodes ``root`` depends on, inputs before outputs (iterative DFS).

    A node is appended once all its inputs are: a post-order, which is a
    forward topological order — the same order a tape would have recorded.
    Leaves are left out (nothing to do for them but receive a gradient), and
    so is everything that needs no gradient.
    """
    order = []
    visited = {root}
    stack = [root]
    while stack:
        node = stack[-1]
        # Descend into the first input not seen yet. Coming back up, the scan
        # starts over; ops have one or two inputs, so that costs less than
        # remembering where it stopped.
        for child in node.inputs:
            if child.op is not None and child.requires_grad and child not in visited:
                visited.add(child)
                stack.append(child)
                break
        else:
            # Every input is done (the graph has no cycles, so "seen" is "done").
            stack.pop()
            order.append(node)
    return order


def _seed_gradient(root, grad):
    """Check (or make) the gradient that starts the backward pass."""
    if not root.requires_grad:
        raise ValueError(
            f"backward(): {root!r} does not require a gradient — no input of the "
            "computation had requires_grad=True, so there is nothing to differentiate"
        )
    data = root.data
    if data.__class__ is float:
        if grad is None:
            return 1.0
        if isinstance(grad, (int, float)) and not isinstance(grad, bool):
            return float(grad)
        raise TypeError(f"backward(grad=...): expected a number for a Scalar, got {type(grad).__name__}")
    if grad is None:
        return np.ones_like(data)
    grad = np.asarray(getattr(grad, "data", grad))
    if grad.shape != data.shape:
        raise ValueError(
            f"backward(grad=...): grad has shape {grad.shape} but the output has shape "
            f"{data.shape}; pass a gradient of the output's shape"
        )
    if not np.issubdtype(grad.dtype, np.number) or np.issubdtype(grad.dtype, np.complexfloating):
        raise TypeError(f"backward(grad=...): expected a real-valued array, got dtype {grad.dtype}")
    # A copy: the caller's array must never become (or alias) some node's .grad.
    return np.array(grad, dtype=data.dtype)


def _backprop(nodes_in_order, root, grad, steps=True):
    """The one backward loop: yield ``(node, g, input_grads)`` per step.

    ``nodes_in_order`` lists nodes in forward (topological) order; we walk it
    in reverse. When we reach a node, every use of it lies behind us, so its
    gradient ``g`` in ``grads`` is complete. The VJP of its op turns ``g`` into
    one gradient per input, which we *add* to what those inputs already have.
    ``.grad`` fields are assigned at the very end, so an error midway leaves
    them untouched.
    """
    grads = {root: _seed_gradient(root, grad)}
    for node in reversed(nodes_in_order):
        g = grads.get(node)
        if g is None or node.op is None:
            continue  # not on the path to root, or a leaf
        op, inputs, params = node.op, node.inputs, node.params
        # Spelled out for one and two inputs, as in _apply.
        if params:
            input_grads = op.vjp(g, node.data, *[x.data for x in inputs], **params)
        elif len(inputs) == 2:
            input_grads = op.vjp(g, node.data, inputs[0].data, inputs[1].data)
        elif len(inputs) == 1:
            input_grads = op.vjp(g, node.data, inputs[0].data)
        else:
            input_grads = op.vjp(g, node.data, *[x.data for x in inputs])
        # An explicit position counter: in this, the hottest loop of a Scalar
        # backward, it costs less than zip() or enumerate().
        position = 0
        for x in inputs:
            if x.requires_grad:
                gx = input_grads[position]
                if gx is None:
                    raise TypeError(
                        f"op {op.name!r} gives no gradient for input {x!r}, which requires one; "
                        "its input in that position must be a constant"
                    )
                previous = grads.get(x)
                grads[x] = gx if previous is None else previous + gx
            position += 1
        if steps:
            yield node, g, input_grads
    # `grads` now holds the gradient of every node on the path, leaves included.
    # VJPs may pass the same array (or views of it) to several nodes — add's g
    # goes to both operands, reshape's is a view. Leaves (what people change in
    # place: zeroing, clipping) each get memory of their own; computed nodes
    # that share memory get read-only views. Either way, no gradient can be
    # changed through another, and only leaves pay for a copy.
    shared = Counter(_memory_of(g) for g in grads.values() if g.__class__ is np.ndarray)
    for node, g in grads.items():
        if node.grad is not None:
            node.grad = node.grad + g
            continue
        if g.__class__ is np.ndarray and shared[_memory_of(g)] > 1:
            if node.op is None:
                g = g.copy()
            else:
                g = g.view()
                g.flags.writeable = False
        node.grad = g


def _memory_of(array):
    """Who owns an array's memory (numpy's ``base`` is the owner of any view)."""
    return id(array if array.base is None else array.base)


def _exhaust(steps):
    deque(steps, maxlen=0)


class Step(NamedTuple):
    """One step of the backward pass, as :meth:`Tape.backward_steps` yields it."""

    index: int  # the equation's position on the tape
    equation: "Equation"
    grad_output: object  # g: the gradient arriving at the equation's output
    grad_inputs: tuple  # what the VJP sends to each input (None for constants)


class Equation(NamedTuple):
    """A view of one tape entry: ``output = op(inputs; params)``."""

    index: int
    op: object
    inputs: tuple
    output: Node
    params: dict
    name: str
    module: str


class Tape:
    """An ordered record of the operations run while it is active.

    Use it as a context manager (``with mt.Tape() as tape: ...``). Tapes nest:
    an operation is recorded on every tape active at the time, so a layer's
    own tape and an enclosing model tape both see the layer's operations.
    A tape is kept after backward, so it can be printed, drawn and checked.
    """

    def __init__(self):
        self._nodes = []
        self._token = None

    # -- recording

    def __enter__(self):
        if self._token is not None:
            raise RuntimeError("this Tape is already active; make a new Tape() to nest")
        self._token = _active_tapes.set(_active_tapes.get() + (self,))
        return self

    def __exit__(self, *exc):
        try:
            _active_tapes.reset(self._token)
        finally:
            self._token = None
        return False

    # -- inspection

    def __len__(self):
        return len(self._nodes)

    def __getitem__(self, index):
        node = self._nodes[index]
        return Equation(index % len(self._nodes), node.op, node.inputs, node, node.params or {}, node.name, node.module)

    def __iter__(self):
        for index in range(len(self._nodes)):
            yield self[index]

    @property
    def nodes(self):
        """The recorded outputs, in the order they were computed."""
        return list(self._nodes)

    def index_of(self, node):
        """The position of ``node`` on the tape (raises ``ValueError`` if absent)."""
        for index, candidate in enumerate(self._nodes):
            if candidate is node:
                return index
        raise ValueError(f"{node!r} is not on this tape")

    def find(self, name):
        """The equation whose output is named ``name`` (the last one, if several)."""
        for index in range(len(self._nodes) - 1, -1, -1):
            if self._nodes[index].name == name:
                return self[index]
        names = sorted({n.name for n in self._nodes if n.name})
        raise KeyError(f"no node named {name!r} on this tape; named nodes are: {', '.join(names) or '(none)'}")

    def leaves(self):
        """Inputs of recorded equations that were not themselves recorded here."""
        recorded = set(self._nodes)
        seen, leaves = set(), []
        for node in self._nodes:
            for x in node.inputs:
                if x not in recorded and x not in seen:
                    seen.add(x)
                    leaves.append(x)
        return leaves

    def variable_names(self):
        """A readable name for every node the listing mentions (``%i`` if unnamed)."""
        names = {}
        for i, leaf in enumerate(self.leaves()):
            names[leaf] = leaf.name or f"in{i}"
        for i, node in enumerate(self._nodes):
            names[node] = node.name or f"%{i}"
        return names

    def __repr__(self):
        return f"<Tape: {len(self._nodes)} equations>"

    def __str__(self):
        return self.listing()

    def listing(self, limit=60):
        """The program as text, one equation a line (like ``jax.make_jaxpr``)."""
        names = self.variable_names()
        lines = []
        leaves = self.leaves()
        if leaves:
            lines.append("inputs: " + ", ".join(f"{names[x]}{_shape_text(x)}" for x in leaves))
        shown = self._nodes if len(self._nodes) <= limit else self._nodes[: limit - 10]
        width = max((len(names[n]) for n in shown), default=0)
        for i, node in enumerate(shown):
            args = ", ".join(names[x] for x in node.inputs)
            params = ""
            if node.params:
                params = "; " + ", ".join(f"{k}={_param_text(v)}" for k, v in node.params.items())
            where = f"   [{node.module}]" if node.module else ""
            lines.append(f"{i:>4}  {names[node]:<{width}} = {node.op.name}({args}{params}){_shape_text(node)}{where}")
        if len(shown) < len(self._nodes):
            skipped = len(self._nodes) - len(shown) - 1
            last = self._nodes[-1]
            lines.append(f"   …  ({skipped} more equations)")
            lines.append(f"{len(self._nodes) - 1:>4}  {names[last]} = {last.op.name}(…){_shape_text(last)}")
        return "\n".join(lines)

    # -- backward

    def backward(self, output, grad=None):
        """Backpropagate from ``output`` through the recorded equations.

        Walks the tape in reverse (no graph search). Gradients reach the inputs
        of recorded equations; anything computed before the tape began is
        treated as a leaf. ``grad`` defaults to ones of the output's shape.
        """
        _exhaust(self._steps(output, grad))

    def backward_steps(self, output, grad=None):
        """Like :meth:`backward`, one step at a time: yields a :class:`Step` per equation.

        Steps come in reverse tape order; each holds the incoming gradient and
        what the VJP sends to each input. The ``.grad`` fields are written when
        the iteration finishes (stop early and they stay as they were).
        """
        self._check_output(output)
        index_of = {node: i for i, node in enumerate(self._nodes)}
        for node, g, input_grads in self._steps(output, grad):
            index = index_of[node]
            yield Step(index, self[index], g, input_grads)

    def _check_output(self, output):
        if not isinstance(output, Node):
            raise TypeError(f"backward(output): expected a Scalar or Tensor, got {type(output).__name__}")
        if output.op is not None and not any(node is output for node in reversed(self._nodes)):
            raise ValueError(f"backward(output): {output!r} was not recorded on this tape")

    def _steps(self, output, grad):
        self._check_output(output)
        return _backprop(self._nodes, output, grad)


def _shape_text(node):
    data = node.data
    if data.__class__ is float:
        return f" = {data:.4g}"
    return f" : {data.dtype.name}{list(data.shape)}"


def _param_text(value):
    if isinstance(value, np.ndarray):
        return f"array{list(value.shape)}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)
