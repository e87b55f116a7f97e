"""Nodes and recording: what every value is, and how an op's result gets onto the active tapes.

A :class:`Node` is a value in a computation — a ``Scalar`` or a ``Tensor``. A
node made by an operation remembers it (``op``, ``inputs``, ``params``), so it
*is* one equation of the program, and the graph is reachable from any result
by following ``inputs``. :func:`record` runs an op and appends its result to
every active tape (:mod:`.tape`); :func:`module_scope` tags what runs inside
it with a module path. The reverse pass lives in :mod:`.reverse`; a value's
``backward()`` is defined by its class (:mod:`microtape.values`), which calls it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from .boundary import check_user_forward
from .protocols import Operation, Value

__all__ = ["Node", "record", "module_scope", "current_tapes", "paused"]


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


def _set_tapes(tapes: tuple[Any, ...]) -> contextvars.Token[tuple[Any, ...]]:
    """Make ``tapes`` this context's active tapes; returns the token for :func:`_reset_tapes`."""
    global _tapes_in_force
    with _count_lock:
        _tapes_in_force += 1
    return _active_tapes.set(tapes)


def _reset_tapes(token: contextvars.Token[tuple[Any, ...]]) -> None:
    """Undo one :func:`_set_tapes`."""
    global _tapes_in_force
    _active_tapes.reset(token)
    with _count_lock:
        _tapes_in_force -= 1


def current_tapes() -> tuple[Any, ...]:
    """The tapes recording in this context, innermost last."""
    return _active_tapes.get()


def _current_module() -> str:
    return _module_path.get() if _modules_in_force else ""


@contextmanager
def module_scope(name: str) -> Iterator[None]:
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
def paused() -> Iterator[None]:
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

    data: Value  # a float (Scalar) or a numpy array (Tensor)
    grad: Value | None
    name: str | None
    requires_grad: bool
    # The op that made it (an Operation), None for a leaf. Typed Any: the engine reads it only on
    # nodes it knows are computed, which the checker cannot follow, and no runtime check is added for it.
    op: Any
    inputs: Sequence[Node]
    params: dict[str, Any] | None
    module: str
    residuals: Any
    # Set by each kind of node (values/): its data from an op's raw result, and a constant beside a node.
    _output_data: ClassVar[Callable[..., Value]]
    _constant: ClassVar[Callable[..., Node]]

    def _init_leaf(self, data: Value, requires_grad: bool, name: str | None) -> None:
        self.data = data
        self.grad = None
        self.name = name
        self.requires_grad = requires_grad
        self.op = None
        self.inputs = ()
        self.params = None
        self.module = _current_module()

    @property
    def is_leaf(self) -> bool:
        """True for inputs, parameters and constants (nodes no op produced)."""
        return self.op is None

    def zero_grad(self) -> None:
        self.grad = None


#: A node of one kind (Scalar or Tensor): what :func:`record` returns is of its first input's kind.
NodeT = TypeVar("NodeT", bound="Node")


def record(
    op: Operation, inputs: Sequence[NodeT], params: dict[str, Any] | None = None, name: str | None = None
) -> NodeT:
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
