"""Nodes and recording: what every value is, and how an op's result gets onto the active tapes.

A :class:`Node` is a value in a computation — a ``Scalar`` or a ``Tensor``. A
node made by an operation remembers it (``op``, ``inputs``, ``params``), so it
*is* one equation of the program, and the graph is reachable from any result
by following ``inputs``. :func:`record` runs an op and appends its result to
every active tape (:mod:`.tape`); :func:`module_scope` tags what runs inside
it with a module path. The reverse pass lives in :mod:`.reverse`.
"""

import contextvars
import threading
from contextlib import contextmanager

from .boundary import check_user_forward

__all__ = ["Node", "record", "record_floats", "float_operator", "module_scope", "current_tapes", "paused"]


# The active tapes and the module path, per thread and per async task: a tape
# opened in one thread never sees the operations of another.
_active_tapes: contextvars.ContextVar[tuple] = contextvars.ContextVar("microtape_tapes", default=())
_module_path: contextvars.ContextVar[str] = contextvars.ContextVar("microtape_module", default="")

# How many settings of each are in force, over all contexts together. While a
# count is zero, every context has the default (no tape, no module), so
# recording — once per op — need not look its context up: for a Scalar op that
# lookup costs as much as the arithmetic. A positive count only means "look".
_tapes_in_force = 0
_modules_in_force = 0
_count_lock = threading.Lock()


def _set_tapes(tapes):
    """Make ``tapes`` this context's active tapes; returns the token for :func:`_reset_tapes`."""
    global _tapes_in_force
    with _count_lock:
        _tapes_in_force += 1
    return _active_tapes.set(tapes)


def _reset_tapes(token):
    """Undo one :func:`_set_tapes`."""
    global _tapes_in_force
    _active_tapes.reset(token)
    with _count_lock:
        _tapes_in_force -= 1


def current_tapes():
    """The tapes recording in this context, innermost last."""
    return _active_tapes.get()


def _current_module():
    return _module_path.get() if _modules_in_force else ""


@contextmanager
def module_scope(name):
    """Tag the operations run inside with a module path (``"attn.q_proj"``).

    Graphs group nodes by it and listings print it; it changes no numbers.
    An empty name adds nothing.
    """
    global _modules_in_force
    if not name:
        yield
        return
    outer = _module_path.get()
    with _count_lock:
        _modules_in_force += 1
    token = _module_path.set(f"{outer}.{name}" if outer else name)
    try:
        yield
    finally:
        _module_path.reset(token)
        with _count_lock:
            _modules_in_force -= 1


@contextmanager
def paused():
    """Run a block that no active tape records (``mt.hvp`` and ``mt.jvp`` work on their own tapes)."""
    token = _set_tapes(())
    try:
        yield
    finally:
        _reset_tapes(token)


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
        self.module = _current_module()

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
        from .reverse import _gradients  # (the reverse pass sits above the nodes it walks)
        from .tape import Tape

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
    out.module = _module_path.get() if _modules_in_force else ""
    if params and op.forward_saving is not None:
        out.residuals = residuals
    for node in inputs:
        if node.requires_grad:
            out.requires_grad, out.op, out.inputs, out.params = True, op, inputs, params
            if _tapes_in_force:
                for tape in _active_tapes.get():
                    tape._nodes.append(out)
            break
    else:
        out.requires_grad, out.op, out.inputs, out.params = False, None, (), None
    return out


# ---------------------------------------------------------------- the Scalar fast path's recording

_new = object.__new__


def float_operator(op):
    """``record(op, (a,) or (a, b), None, name)`` made for one built-in op of Scalars without parameters.

    ``Scalar.__mul__ = float_operator(ops.mul)``: the function it returns,
    ``operator(a, b=None, name=None)``, *is* the recording — no argument tuple
    to build, no branches for parameters, residuals or user ops, and no
    second call: ``a * b`` is one Python call (a call saved is a sixth of a
    Scalar op's cost; see :mod:`.scalar_pass`). A ``b`` of another kind (a
    plain number) becomes a constant of ``a``'s kind first.
    """
    forward = op.forward

    def operator(a, b=None, name=None):
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
        out.module = _module_path.get() if _modules_in_force else ""
        out.params = None
        if a.requires_grad or (b is not None and b.requires_grad):
            out.requires_grad, out.op, out.inputs = True, op, (a,) if b is None else (a, b)
            if _tapes_in_force:
                for tape in _active_tapes.get():
                    tape._nodes.append(out)
        else:
            out.requires_grad, out.op, out.inputs = False, None, ()
        return out

    operator.__name__ = operator.__qualname__ = f"{op.name}_operator"
    operator.__doc__ = f"Record ``{op.name}`` on Scalars (made by :func:`microtape.node.float_operator`)."
    return operator


_float_operators = {}  # op -> its float_operator, made once per op (ops hash by identity)


def record_floats(op, a, b=None, name=None):
    """``record(op, (a,) or (a, b), None, name)`` for a built-in op of Scalars without parameters (by its operator)."""
    operator = _float_operators.get(op)
    if operator is None:
        operator = _float_operators[op] = float_operator(op)
    return operator(a, b, name)
