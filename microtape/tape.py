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

from . import listing
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
    "paused",
    "derivative_labels",
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


@contextmanager
def paused():
    """Run a block that no active tape records (``mt.hvp`` and ``mt.jvp`` work on their own tapes)."""
    token = _active_tapes.set(())
    try:
        yield
    finally:
        _active_tapes.reset(token)


class Node:
    """A value in a computation: a leaf, or the output of one recorded op.

    ``Scalar`` and ``Tensor`` are both nodes; this class holds what they share.
    Subclasses set ``_output_data``, the function that turns an op's raw result
    into their kind of data (``float``, ``np.asarray``). Nodes compare and hash
    by identity, so they can be dictionary keys.
    """

    # ``residuals``: what an op with ``forward_saving`` kept from its forward for
    # its backward (set only on such nodes).
    __slots__ = ("data", "grad", "name", "requires_grad", "op", "inputs", "params", "module", "residuals")

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

    def backward(self, grad=None, *, create_graph=False):
        """Backpropagate from this node and *add* the gradients into ``.grad``.

        ``grad`` is the gradient of some final quantity with respect to this
        node; the default is ones (for a single number: 1, "dy/dy = 1").
        Works with or without an active :class:`Tape`: the graph is found by
        following ``inputs``. Leaves accumulate (``+=``) across calls. With
        ``create_graph=True`` the reverse pass is recorded and each ``.grad``
        is a Scalar or Tensor you can differentiate again.
        """
        _gradients(self, grad, Tape.of(self), False, create_graph, "backward").accumulate()

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
        # (An op that keeps residuals is called with parameters: see Op.forward_saving.)
        if op.forward_saving is None:
            data = op.forward(*[node.data for node in inputs], **params)
        else:
            data, residuals = op.forward_saving(*[node.data for node in inputs], **params)
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
    if params and op.forward_saving is not None:
        out.residuals = residuals
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

    def __init__(self, grads, tape, output, seed, steps, completed, program=None):
        self._grads = grads
        self.tape = tape
        self.output = output
        self.seed = seed
        self.steps = steps  # list of Step, or None
        self._completed = completed
        # create_graph=True: the tape of the reverse pass itself (the gradients are its values).
        self.program = program

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

        All or nothing: a ``.grad`` that cannot take its sum (a string, the
        wrong shape) fails the call with every ``.grad`` as it was.

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


def gradients(output, grad=None, *, tape=None, steps=False, create_graph=False):
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


def _gradients(output, grad, tape, steps, create_graph, caller):
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
        grads, taken, completed = _reverse(tape._nodes, output, seed, keep_steps=steps)
        program = None
    else:
        seed = _seed_node(output, grad, caller)
        _refuse_first_order_ops(tape._nodes, output)
        names = derivative_labels(tape)
        with Tape.atomic() as program:
            grads, taken, completed = _reverse(tape._nodes, output, seed, keep_steps=steps, names=names)
    if steps:
        taken = [Step(index, tape[index], g, sent) for index, g, sent in taken]
    return Gradients(grads, tape, output, seed, taken, completed, program)


def _began_before(tape, output):
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


def _reverse(equations, output, seed, keep_steps=False, names=None):
    """The reverse pass: walk ``equations`` backwards, summing gradients in a dict.

    When we reach an equation, every use of its output lies behind us, so its
    gradient ``g`` is complete. Its op's VJP turns ``g`` into one gradient per
    input, which we *add* to what those inputs already have. Returns the dict,
    and (``keep_steps``) the steps taken and the step completing each gradient.
    With ``names`` (a recorded pass, ``create_graph=True``) the VJPs get the
    nodes themselves instead of their data, and so record what they compute.
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
        if names is not None:
            sent = _recorded_vjp(node, g, names[node])
        elif node.params:
            if op.forward_saving is None:
                sent = op.vjp(g, node.data, *[x.data for x in inputs], **node.params)
            else:
                sent = op.vjp(g, node.data, *[x.data for x in inputs], **_vjp_params(node))
        elif len(inputs) == 2:
            sent = op.vjp(g, node.data, inputs[0].data, inputs[1].data)
        elif len(inputs) == 1:
            sent = op.vjp(g, node.data, inputs[0].data)
        else:
            sent = op.vjp(g, node.data, *[x.data for x in inputs])
        if not op.builtin:
            sent = check_user_vjp(op, node, sent, recorded=names is not None)
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
                    if names is None:  # (a recorded pass sends tape values)
                        gx = gradient_like(x.data, gx)  # the dtype rule: a gradient has its value's type and dtype
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
    return grads, steps, completed


def _vjp_params(node):
    """The keywords of a node's VJP: its parameters, and its residuals when the op saved some.

    (An op that saves residuals is recorded with parameters; called without any,
    its VJP gets none and computes them again.)
    """
    params = node.params or {}
    if node.op.forward_saving is not None and node.params:
        return {**params, "residuals": node.residuals}
    return params


def derivative_labels(tape):
    """What each variable's derivative is grouped under: its name, or its op and position (``reshape%3``).

    A recorded pass (``create_graph=True``) runs each step in the module ``∂label``.
    """
    names = tape.variable_names()
    return {node: name if node.name or node.op is None else f"{node.op.name}{name}" for node, name in names.items()}


def _recorded_vjp(node, g, name):
    """One VJP run on the nodes themselves (``create_graph=True``), recorded in the module ``∂name``."""
    with module_scope(f"∂{name}"):
        sent = node.op.vjp(g, node, *node.inputs, **_vjp_params(node))
    # A gradient that came out as a plain number or array (it depends on nothing
    # being differentiated) is still a tape value: a constant of the input's kind.
    return tuple(
        gx if gx is None or isinstance(gx, Node) else x.__class__._constant(gx, x) for gx, x in zip(sent, node.inputs)
    )


def _refuse_first_order_ops(equations, output):
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


def _seed_node(output, grad, caller="gradients"):
    """The seed of a recorded pass as a tape value: ``grad`` itself if it is one, else a constant."""
    if isinstance(grad, Node):
        if not isinstance(grad, output.__class__) or np.shape(grad.data) != np.shape(output.data):
            raise ValueError(
                f"gradients(grad=...): grad is a {type(grad).__name__} of shape {np.shape(grad.data)}; expected a "
                f"{type(output).__name__} of the output's shape {np.shape(output.data)}"
            )
        check_seed(output, None, caller)  # the output must still require a gradient
        return grad
    seed = output.__class__._constant(check_seed(output, grad, caller), output)
    seed.name = "g"  # what the formulas call the incoming gradient
    return seed


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
        """A distinct, readable name for every variable of the listing: ``{node: name}`` (see :mod:`.listing`)."""
        return listing.variable_names(self._nodes, self.leaves())

    def names(self):
        """``{name: node}`` for every variable (the inverse of :meth:`variable_names`)."""
        return {name: node for node, name in self.variable_names().items()}

    def variable(self, name):
        """The node (leaf or computed) called ``name`` in the listing; ``KeyError`` otherwise.

        ``name`` is a listing name (:meth:`variable_names`) or a node's own
        ``name`` if exactly one node has it. A name several nodes share is
        refused with the names that tell them apart: this never guesses.
        """
        return listing.variable(self.variable_names(), name)

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
        return listing.listing(self._nodes, self.leaves(), self.variable_names(), limit)

    # -- the reverse pass over this tape

    def gradients(self, output, grad=None, *, steps=False, create_graph=False):
        """:func:`gradients` in this tape's order (writes nothing)."""
        return _gradients(output, grad, self, steps, create_graph, "Tape.gradients")

    def backward(self, output, grad=None, *, create_graph=False):
        """Backpropagate from ``output`` and *add* the gradients into ``.grad``.

        Walks the tape in reverse (no graph search). Gradients reach the inputs
        of recorded equations; anything computed before the tape began is
        treated as a leaf. ``grad`` defaults to ones of the output's shape. A
        pass that fails midway changes no ``.grad``. ``create_graph=True``: see
        :func:`gradients`.
        """
        _gradients(output, grad, self, False, create_graph, "Tape.backward").accumulate()

    def backward_steps(self, output, grad=None):
        """The reverse pass one :class:`Step` at a time, in the order it takes them; writes nothing.

        Each step holds the equation, the complete gradient of its output and
        what its VJP sends to each input.
        """
        return iter(_gradients(output, grad, self, True, False, "Tape.backward_steps").steps)


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
