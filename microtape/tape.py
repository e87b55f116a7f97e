"""The tape: a Wengert list of every operation, and the reverse pass over it.

This module lets you record a computation and differentiate it::

    import microtape as mt
    with mt.Tape() as tape:
        a, b = mt.Scalar(2.0, name="a"), mt.Scalar(3.0, name="b")
        y = (a * b + a).tanh()
    print(tape)                 # the program listing, one equation a line
    g = mt.gradients(y)         # {node: gradient}; nothing is written anywhere
    g[a], g[b]
    tape.backward(y)            # the same gradients, added into a.grad, b.grad

How the pieces fit (the design in one paragraph)
------------------------------------------------
Every value — a ``Scalar`` or a ``Tensor`` — is a :class:`Node`. A node made
by an operation remembers it: ``node.op`` (a primitive from
:mod:`microtape.ops`), ``node.inputs`` (the nodes it was computed from, in
operand order) and ``node.params``. So a node *is* one equation of the
program, ``output = op(inputs; params)``, and the graph is reachable from any
result by following ``inputs``. A :class:`Tape` adds the *recorded order*:
while it is active, every new node is appended to it. That order is already
topological, so the reverse pass needs no graph search — it walks the list
backwards (as JAX's Autodidax does); for a result computed with no tape,
:meth:`Tape.of` finds the same kind of order by an iterative depth-first
search. The reverse pass is one pure function, :func:`gradients`: it walks
the equations backwards, calls each op's VJP and *adds* the results into a
dict keyed by node (a value used twice gets the sum of its uses) — and writes
nothing. ``backward()`` is ``gradients()`` followed by adding the result into
the ``.grad`` fields; the step-by-step views, the checkers and the pictures
read the same result. Nodes point only at their inputs, never at their
outputs, so the graph has no reference cycles.
"""

import contextvars
from collections import Counter
from collections.abc import Mapping
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from .boundary import check_seed, check_user_forward, check_user_vjp, gradient_like, sum_into_grad, vjp_arity_problem

__all__ = [
    "Tape",
    "Node",
    "Equation",
    "Step",
    "Gradients",
    "gradients",
    "record",
    "module_scope",
    "current_tapes",
    "vjp_arity_problem",
]

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
    An empty name adds nothing.
    """
    if not name:
        yield
        return
    outer = _module_path.get()
    token = _module_path.set(f"{outer}.{name}" if outer else name)
    try:
        yield
    finally:
        _module_path.reset(token)


class Node:
    """A value in a computation: a leaf, or the output of one recorded op.

    ``Scalar`` and ``Tensor`` are both nodes; this class holds what they share.
    Subclasses set ``_output_data``, the function that turns an op's raw result
    into their kind of data (``float``, ``np.asarray``). Nodes compare and hash
    by identity, so they can be dictionary keys.
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
        """Backpropagate from this node and *add* the gradients into ``.grad``.

        ``grad`` is the gradient of some final quantity with respect to this
        node; the default is ones (for a single number: 1, "dy/dy = 1").
        Works with or without an active :class:`Tape`: the graph is found by
        following ``inputs``. Leaves accumulate (``+=``) across calls.
        """
        _gradients(self, grad, Tape.of(self), False, "backward").accumulate()

    def zero_grad(self):
        self.grad = None


def record(op, inputs, params=None, name=None):
    """Run ``op`` on ``inputs`` (nodes) and record the result on the active tapes.

    The output is a node of the first input's kind. It is recorded (on every
    active tape, and via ``.inputs`` for the graph) only when some input
    requires a gradient: constants combined with constants stay constants.
    Nothing is appended when the forward raises. (``op(x)`` checks its inputs
    and calls this; Scalar and Tensor methods call it directly.)
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
    if not op.builtin:
        data = check_user_forward(op, inputs, data)
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


# ---------------------------------------------------------------- the reverse pass


class Step(NamedTuple):
    """One step of the reverse pass: an equation, the gradient it got, what it sent on."""

    index: int  # the equation's position on the tape
    equation: "Equation"
    grad_output: object  # g: the complete gradient of the equation's output
    grad_inputs: tuple  # what the VJP sends to each input (None for constants)


class Gradients(Mapping):
    """The result of one reverse pass: ``g[node]`` is the gradient of ``node``.

    A read-only mapping over every node on the path from the output — leaves
    and intermediates — that needs a gradient. Arrays come out read-only (one
    array may serve several nodes: ``add`` hands the same ``g`` to both
    operands). With ``steps=True``, ``.steps`` lists every :class:`Step` in
    the order the pass took them and :meth:`completed_at` says when each
    gradient was complete.
    """

    def __init__(self, grads, tape, output, seed, steps, completed):
        self._grads = grads
        self.tape = tape
        self.output = output
        self.seed = seed
        self.steps = steps  # list of Step, or None
        self._completed = completed

    def __getitem__(self, node):
        try:
            grad = self._grads[node]
        except KeyError:
            raise KeyError(f"{node!r} is not on the path to the output (or needs no gradient)") from None
        if grad.__class__ is not float and grad.__class__ is not np.ndarray:
            grad = gradient_like(node.data, grad)  # numpy's 0-d arithmetic gives np.float64: an array again
        if grad.__class__ is np.ndarray and grad.flags.writeable:
            grad = grad.view()
            grad.flags.writeable = False
        return grad

    def __contains__(self, node):
        return node in self._grads

    def __iter__(self):
        return iter(self._grads)

    def __len__(self):
        return len(self._grads)

    def __repr__(self):
        return f"<Gradients of {len(self._grads)} nodes>"

    def completed_at(self, node):
        """The tape index of the step after which ``node``'s gradient is complete.

        For a computed node that is its own step; for a leaf, the last step that
        sent it a contribution. None when no gradient reached it (or steps were
        not kept).
        """
        return None if self._completed is None else self._completed.get(node)

    def accumulate(self):
        """Add these gradients into every node's ``.grad`` — what ``backward()`` does.

        All or nothing: every sum is computed and checked first, and only then
        is any ``.grad`` written, so a ``.grad`` that cannot take the sum (a
        string, the wrong shape) fails the call with every ``.grad`` as it was.

        One VJP may hand the same array (or views of it) to several nodes —
        add's ``g`` goes to both operands, reshape's is a view. Leaves (what
        people change in place: zeroing, clipping) each get memory of their
        own; computed nodes that share memory get read-only views. Either way
        no gradient can be changed through another, and only leaves pay for a
        copy.
        """
        grads = self._grads
        shared = Counter(_memory_of(g) for g in grads.values() if g.__class__ is np.ndarray)
        summed = []  # sums into an existing .grad, written last: the one step that can fail comes first
        try:
            for node, g in grads.items():
                if node.grad is not None:
                    summed.append((node, sum_into_grad(node, g)))
                    continue
                kind = g.__class__
                if kind is np.ndarray:
                    if shared[_memory_of(g)] > 1:
                        if node.op is None:
                            g = g.copy()
                        else:
                            g = g.view()
                            g.flags.writeable = False
                elif kind is not float:
                    g = gradient_like(node.data, g)  # numpy's 0-d arithmetic gives np.float64: an array again
                node.grad = g
        except Exception:
            # Undo: every .grad this loop wrote (before the node that failed) was None.
            failed, kept = node, {id(n) for n, _ in summed}
            for earlier in grads:
                if earlier is failed:
                    break
                if id(earlier) not in kept:
                    earlier.grad = None
            raise
        for node, total in summed:
            node.grad = total

    def step_at(self, index):
        """The step of the equation at tape position ``index`` (None if the pass skipped it)."""
        for step in self.steps or ():
            if step.index == index:
                return step
        return None


def gradients(output, grad=None, *, tape=None, steps=False):
    """The gradient of ``output`` with respect to every node on its path — writing nothing.

    ``grad`` seeds the pass (default: ones of the output's shape, ``1.0`` for a
    Scalar; a given seed must be finite). The order of the equations comes
    from ``tape`` when given (anything computed before that tape began is then
    a leaf), else from the graph: the innermost active tape's order when it
    recorded the whole computation, a search of the graph otherwise — so a
    call inside a ``with Tape()`` that opened midway still follows everything.
    Returns a :class:`Gradients` mapping ``{node: gradient}``. No ``.grad`` is
    written, nothing is recorded, and calling it twice gives the same answer.
    ``steps=True`` also keeps every step (for walks, frames and reports).

    The dtype rule: every gradient has the dtype of the value it belongs to
    (a float32 leaf used with float64 values gets a float32 gradient).
    """
    return _gradients(output, grad, tape, steps, "gradients")


def _gradients(output, grad, tape, steps, caller):
    """:func:`gradients`, with ``caller`` (``"backward"``, ``"Tape.backward"``…) naming the entry point in errors."""
    if not isinstance(output, Node):
        raise TypeError(f"{caller}(output): expected a Scalar or Tensor, got {type(output).__name__}")
    from_active = False
    if tape is None:
        active = _active_tapes.get()
        from_active = bool(active) and active[-1]._position(output) is not None
        tape = active[-1] if from_active else Tape.of(output)
    elif not isinstance(tape, Tape):
        raise TypeError(f"{caller}(tape=...): expected a microtape Tape, got {type(tape).__name__}")
    elif output.op is not None and tape._position(output) is None:
        raise ValueError(f"{caller}(output): {output!r} was not recorded on this tape")
    seed = check_seed(output, grad, caller)
    grads, taken, completed = _reverse(tape._nodes, output, seed, keep_steps=steps)
    if from_active and _began_before(tape, grads):
        # The active tape opened after part of this computation: its order
        # would stop there and treat computed values as leaves. Follow the graph.
        tape = Tape.of(output)
        grads, taken, completed = _reverse(tape._nodes, output, seed, keep_steps=steps)
    if steps:
        taken = [Step(index, tape[index], g, sent) for index, g, sent in taken]
    return Gradients(grads, tape, output, seed, taken, completed)


def _began_before(tape, grads):
    """True when a computed node got a gradient but is not on ``tape`` (it was computed before the tape began)."""
    recorded = set(tape._nodes)
    return any(node.op is not None and node not in recorded for node in grads)


def _reverse(equations, output, seed, keep_steps=False):
    """The reverse pass: walk ``equations`` backwards, summing gradients in a dict.

    When we reach an equation, every use of its output lies behind us, so its
    gradient ``g`` is complete. Its op's VJP turns ``g`` into one gradient per
    input, which we *add* to what those inputs already have. Returns the dict,
    and (``keep_steps``) the steps taken and the step completing each gradient.
    """
    grads = {output: seed}
    steps, completed = ([], {}) if keep_steps else (None, None)
    for index in range(len(equations) - 1, -1, -1):
        node = equations[index]
        g = grads.get(node)
        if g is None or node.op is None:
            continue  # not on the path to the output
        op, inputs = node.op, node.inputs
        # The VJP call, spelled out for one and two inputs (as in `record`): a
        # Scalar backward pays for every Python call.
        if node.params:
            sent = op.vjp(g, node.data, *[x.data for x in inputs], **node.params)
        elif len(inputs) == 2:
            sent = op.vjp(g, node.data, inputs[0].data, inputs[1].data)
        elif len(inputs) == 1:
            sent = op.vjp(g, node.data, inputs[0].data)
        else:
            sent = op.vjp(g, node.data, *[x.data for x in inputs])
        if not op.builtin:
            sent = check_user_vjp(op, node, sent)
        position = 0  # a counter, not enumerate(): this is the hottest loop of a Scalar backward
        for x in inputs:
            if x.requires_grad:
                gx = sent[position]
                if gx is None:
                    raise TypeError(
                        f"op {op.name!r} gives no gradient for input {op.inputs[position]!r} ({x!r:.60}), "
                        "which requires one; its input in that position must be a constant"
                    )
                if gx.__class__ is not float and (gx.__class__ is not np.ndarray or gx.dtype != x.data.dtype):
                    gx = gradient_like(x.data, gx)  # the dtype rule: a gradient has its value's type and dtype
                previous = grads.get(x)
                grads[x] = gx if previous is None else previous + gx
                if keep_steps:
                    completed[x] = index
            position += 1
        if keep_steps:
            completed[node] = index
            steps.append((index, g, tuple(sent)))
    return grads, steps, completed


def _memory_of(array):
    """Who owns an array's memory (numpy's ``base`` is the owner of any view)."""
    return id(array if array.base is None else array.base)


# ---------------------------------------------------------------- the tape


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

    @classmethod
    def of(cls, output):
        """A tape of the equations ``output`` depends on, in an order a recording would have.

        For a result computed with no tape active: the graph is found by
        following ``inputs`` (an iterative depth-first search, operand order
        kept, so the same computation always gives the same order).
        """
        if not isinstance(output, Node):
            raise TypeError(f"Tape.of(output): expected a Scalar or Tensor, got {type(output).__name__}")
        tape = cls()
        tape._nodes = _topological_order(output)
        return tape

    @classmethod
    @contextmanager
    def atomic(cls):
        """Record the block on a new tape, and on the enclosing tapes only if it finishes.

        ``with Tape.atomic() as tape: ...`` — while the block runs, its operations
        go to ``tape`` alone; when it ends without an error they are appended,
        in order, to every tape that was active around it. A block that fails
        midway leaves the enclosing tapes exactly as they were (layers run
        their forward this way: all or nothing).
        """
        outer = _active_tapes.get()
        tape = cls()
        token = _active_tapes.set((tape,))
        try:
            yield tape
        finally:
            _active_tapes.reset(token)
        for enclosing in outer:
            enclosing._nodes.extend(tape._nodes)

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

    def _position(self, node):
        for index in range(len(self._nodes) - 1, -1, -1):
            if self._nodes[index] is node:
                return index
        return None

    def index_of(self, node):
        """The position of ``node`` on the tape (raises ``ValueError`` if absent)."""
        index = self._position(node)
        if index is None:
            raise ValueError(f"{node!r} is not on this tape")
        return index

    def leaves(self):
        """Inputs of recorded equations that were not themselves recorded here, in order of first use."""
        recorded = set(self._nodes)
        seen, leaves = set(), []
        for node in self._nodes:
            for x in node.inputs:
                if x not in recorded and x not in seen:
                    seen.add(x)
                    leaves.append(x)
        return leaves

    def variable_names(self):
        """A distinct, readable name for every variable of the listing: ``{node: name}``.

        A node's own ``name`` when no other variable has it; otherwise the
        name qualified by its module (``q_proj.xW^T``), and if that is still
        shared, numbered in tape order (``e#1``, ``e#2``). Unnamed equations
        are ``%i`` (``i`` their position), unnamed leaves ``in0``, ``in1``, …
        """
        variables = [*self.leaves(), *self._nodes]
        wanted = Counter(node.name for node in variables if node.name)
        names = {}
        for i, leaf in enumerate(variables[: len(variables) - len(self._nodes)]):
            names[leaf] = _own_name(leaf, wanted) or f"in{i}"
        for i, node in enumerate(self._nodes):
            names[node] = _own_name(node, wanted) or f"%{i}"
        taken = Counter(names.values())
        numbered = Counter()
        for node, name in names.items():
            if taken[name] > 1:
                numbered[name] += 1
                names[node] = f"{name}#{numbered[name]}"
        return names

    def names(self):
        """``{name: node}`` for every variable (the inverse of :meth:`variable_names`)."""
        return {name: node for node, name in self.variable_names().items()}

    def variable(self, name):
        """The node (leaf or computed) called ``name`` in the listing; ``KeyError`` otherwise.

        ``name`` is a listing name (:meth:`variable_names`) or a node's own
        ``name`` if exactly one node has it. A name several nodes share is
        refused with the names that tell them apart: this never guesses.
        """
        if not isinstance(name, str):
            raise TypeError(f"tape lookup: expected a name (str), got {type(name).__name__}")
        by_listing = self.names()
        if name in by_listing:
            return by_listing[name]
        owners = [node for node in by_listing.values() if node.name == name]
        listed = self.variable_names()
        if len(owners) == 1:
            return owners[0]
        if owners:
            choices = ", ".join(listed[node] for node in owners)
            raise KeyError(f"{len(owners)} variables on this tape are named {name!r}; say which one: {choices}")
        available = (
            ", ".join(listed[node] for node in by_listing.values() if node.name) or "(none: give nodes a name=...)"
        )
        raise KeyError(f"no variable named {name!r} on this tape; the named variables are: {available}")

    def find(self, name):
        """The equation whose output is called ``name`` (see :meth:`variable`); never guesses."""
        node = self.variable(name)
        index = self._position(node)
        if index is None:
            raise KeyError(f"{name!r} is an input of this tape (a leaf), not an equation on it")
        return self[index]

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

    # -- the reverse pass over this tape

    def gradients(self, output, grad=None, *, steps=False):
        """:func:`gradients` in this tape's order (writes nothing)."""
        return _gradients(output, grad, self, steps, "Tape.gradients")

    def backward(self, output, grad=None):
        """Backpropagate from ``output`` and *add* the gradients into ``.grad``.

        Walks the tape in reverse (no graph search). Gradients reach the inputs
        of recorded equations; anything computed before the tape began is
        treated as a leaf. ``grad`` defaults to ones of the output's shape. A
        pass that fails midway changes no ``.grad``.
        """
        _gradients(output, grad, self, False, "Tape.backward").accumulate()

    def backward_steps(self, output, grad=None):
        """The reverse pass one :class:`Step` at a time, in the order it takes them; writes nothing.

        Each step holds the equation, the complete gradient of its output and
        what its VJP sends to each input.
        """
        return iter(_gradients(output, grad, self, True, "Tape.backward_steps").steps)


def _own_name(node, wanted):
    """A node's name, qualified by its module when another variable has the same name."""
    if not node.name:
        return None
    if wanted[node.name] > 1 and node.module and not node.name.startswith(node.module + "."):
        return f"{node.module}.{node.name}"
    return node.name


def _topological_order(root):
    """The computed nodes ``root`` depends on, inputs before outputs (iterative DFS).

    A node is appended once all its inputs are: a post-order, which is a
    forward topological order — the same order a tape would have recorded.
    Leaves are left out (nothing to do for them but receive a gradient).
    """
    if root.op is None:
        return []
    order = []
    visited = {root}
    stack = [root]
    while stack:
        node = stack[-1]
        # Descend into the first input not seen yet. Coming back up, the scan
        # starts over; ops have one or two inputs, so that costs less than
        # remembering where it stopped.
        for child in node.inputs:
            if child.op is not None and child not in visited:
                visited.add(child)
                stack.append(child)
                break
        else:
            # Every input is done (the graph has no cycles, so "seen" is "done").
            stack.pop()
            order.append(node)
    return order


def _shape_text(node):
    data = node.data
    if data.__class__ is float:
        return f" = {data:.4g}"
    return f" : {data.dtype.name}{list(data.shape)}"


def index_part_text(part):
    """One part of an index key as it is written: ``1:3``, ``::2``, ``...``, ``0`` (arrays by shape)."""
    if isinstance(part, slice):
        text = ":".join("" if v is None else str(v) for v in (part.start, part.stop, part.step))
        return text[:-1] if part.step is None else text
    if part is Ellipsis:
        return "..."
    return _param_text(part)


def _param_text(value):
    if isinstance(value, np.ndarray):
        return f"array{list(value.shape)}"
    if isinstance(value, tuple) and any(isinstance(v, (slice, np.ndarray)) or v is None or v is ... for v in value):
        return "[" + ", ".join(index_part_text(v) for v in value) + "]"  # an index key: [:, 1:3, array[3]]
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)
