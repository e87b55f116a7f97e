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

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, NamedTuple

from . import listing
from .lean import DroppedAsRecorded, check_keep, drop_unread_values
from .node import Node, _active_tapes, _reset_tapes, _set_tapes
from .protocols import Value

__all__ = ["Tape", "Equation", "register_reverse_pass", "topological_order"]


# The reverse pass (:mod:`.reverse`) reads tapes, so it sits above this module. When the
# engine is imported it puts its entry point in this slot, and Tape.backward calls it
# here: the call goes up, the import never does. Why this slot is always filled: Python
# runs a package's __init__ before any module in it, and engine/__init__ imports .reverse,
# so even `from microtape.engine.tape import Tape` alone fills it before a Tape exists
# (tests/values/test_fresh_import.py runs that in a fresh process).
_reverse_pass: Callable[..., Any] = None  # type: ignore[assignment]  # (filled at import)


def register_reverse_pass(run: Callable[..., Any]) -> None:
    """Called once, by :mod:`.reverse` at import: ``run(output, grad, tape, steps, create_graph, caller)``."""
    global _reverse_pass
    _reverse_pass = run


class Equation(NamedTuple):
    """A view of one tape entry: ``output = op(inputs; params)``."""

    index: int  # type: ignore[assignment]  # (a field named like tuple.index, as the listing calls it)
    op: Any
    inputs: Sequence[Node]
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

    ``Tape(lean=True)`` records lean (see :mod:`microtape.engine.lean`): when the
    recording ends it keeps only the values some VJP reads, the results, and
    the steps named in ``keep`` (``keep=("weights",)``); the reverse pass
    over it frees each intermediate gradient once used. Same gradients, less
    memory; the listing and pictures say "value not kept" for the rest.
    ``read_once=True`` promises that each value is read by one op, right
    after it (a chain): a lean tape then drops values as it records.
    """

    def __init__(self, *, lean: bool = False, keep: Sequence[str] = (), read_once: bool = False) -> None:
        if not isinstance(lean, bool):
            raise TypeError(f"Tape(lean={lean!r}): expected True or False")
        keep = check_keep(keep, "Tape")
        if keep and not lean:
            raise ValueError(f"Tape(keep={keep!r}): keep= names what a lean tape keeps; add lean=True")
        if not isinstance(read_once, bool) or (read_once and not lean):
            raise ValueError(f"Tape(read_once={read_once!r}): expected True (with lean=True) or False")
        # (A full tape's list is a plain list: recording pays nothing for the lean option.)
        self._nodes = DroppedAsRecorded(keep) if read_once else []
        self._token: contextvars.Token[tuple[Any, ...]] | None = None
        self.lean = lean
        self.keep = keep

    @classmethod
    def of(cls, output: Node, *, inputs: Iterable[Node] = ()) -> Tape:
        """A tape of the equations ``output`` depends on, in an order a recording would have.

        For a result computed with no tape active: the graph is found by
        following ``inputs`` (an iterative depth-first search, operand order
        kept, so the same computation always gives the same order).
        ``inputs``: nodes to stop at, as if they were leaves — the tape then
        holds only what was computed from them (a layer's own forward).
        """
        if not isinstance(output, Node):
            raise TypeError(f"Tape.of(output): expected a Scalar or Tensor, got {type(output).__name__}")
        stop_at = set(inputs)
        tape = cls()
        tape._nodes = [] if output in stop_at else topological_order(output, stop_at)
        return tape

    @classmethod
    @contextmanager
    def atomic(cls, *, lean: bool = False, keep: Sequence[str] = (), read_once: bool = False) -> Iterator[Tape]:
        """Record the block on a new tape, and on the enclosing tapes only if it finishes.

        ``with Tape.atomic() as tape: ...`` — while the block runs, its operations
        go to ``tape`` alone; when it ends without an error they are appended,
        in order, to every tape that was active around it. A block that fails
        midway leaves the enclosing tapes exactly as they were (layers run
        their forward this way: all or nothing). ``lean``/``keep``/``read_once``:
        as :class:`Tape`'s (what is left is dropped when the block ends).
        """
        outer = _active_tapes.get()
        tape = cls(lean=lean, keep=keep, read_once=read_once)
        token = _set_tapes((tape,))
        try:
            yield tape
        finally:
            _reset_tapes(token)
        if tape.lean:
            drop_unread_values(tape)
        for enclosing in outer:
            enclosing._nodes.extend(tape._nodes)

    # -- recording

    def __enter__(self) -> Tape:
        if self._token is not None:
            raise RuntimeError("this Tape is already active; make a new Tape() to nest")
        self._token = _set_tapes(_active_tapes.get() + (self,))
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        try:
            _reset_tapes(self._token)  # type: ignore[arg-type]  # (set by __enter__)
        finally:
            self._token = None
        if self.lean:
            drop_unread_values(self)
        return False

    # -- inspection

    def __len__(self) -> int:
        return len(self._nodes)

    def __getitem__(self, index: int) -> Equation:
        node = self._nodes[index]
        return Equation(index % len(self._nodes), node.op, node.inputs, node, node.params or {}, node.name, node.module)

    def __iter__(self) -> Iterator[Equation]:
        for index in range(len(self._nodes)):
            yield self[index]

    @property
    def nodes(self) -> list[Node]:
        """The recorded outputs, in the order they were computed."""
        return list(self._nodes)

    @property
    def read_once(self) -> bool:
        """Whether this tape drops values as it records (``Tape(lean=True, read_once=True)``)."""
        return isinstance(self._nodes, DroppedAsRecorded)

    def _position(self, node: Node) -> int | None:
        for index in range(len(self._nodes) - 1, -1, -1):
            if self._nodes[index] is node:
                return index
        return None

    def index_of(self, node: Node) -> int:
        """The position of ``node`` on the tape (raises ``ValueError`` if absent)."""
        index = self._position(node)
        if index is None:
            raise ValueError(f"{node!r} is not on this tape")
        return index

    def leaves(self) -> list[Node]:
        """Inputs of recorded equations that were not themselves recorded here, in order of first use."""
        recorded = set(self._nodes)
        seen, leaves = set(), []
        for node in self._nodes:
            for x in node.inputs:
                if x not in recorded and x not in seen:
                    seen.add(x)
                    leaves.append(x)
        return leaves

    def variable_names(self) -> dict[Node, str]:
        """A distinct, readable name for every variable of the listing: ``{node: name}`` (see :mod:`.listing`)."""
        return listing.variable_names(self._nodes, self.leaves())

    def names(self) -> dict[str, Node]:
        """``{name: node}`` for every variable (the inverse of :meth:`variable_names`)."""
        return {name: node for node, name in self.variable_names().items()}

    def variable(self, name: str) -> Node:
        """The node (leaf or computed) called ``name`` in the listing; ``KeyError`` otherwise.

        ``name`` is a listing name (:meth:`variable_names`) or a node's own
        ``name`` if exactly one node has it. A name several nodes share is
        refused with the names that tell them apart: this never guesses.
        """
        return listing.variable(self.variable_names(), name)

    def find(self, name: str) -> Equation:
        """The equation whose output is called ``name`` (see :meth:`variable`); never guesses."""
        node = self.variable(name)
        index = self._position(node)
        if index is None:
            raise KeyError(f"{name!r} is an input of this tape (a leaf), not an equation on it")
        return self[index]

    def __repr__(self) -> str:
        return f"<Tape: {len(self._nodes)} equations{', lean' if self.lean else ''}>"

    def __str__(self) -> str:
        return self.listing()

    def listing(self, limit: int = 60) -> str:
        """The program as text, one equation a line (like ``jax.make_jaxpr``)."""
        text = listing.listing(self._nodes, self.leaves(), self.variable_names(), limit)
        if self.lean:
            kept = f"; kept by name: {', '.join(self.keep)}" if self.keep else ""
            text = f"recorded lean: only the values the backward pass reads are kept{kept}\n{text}"
        return text

    # -- the reverse pass over this tape

    def backward(self, output: Node, grad: Value = None, *, create_graph: bool = False) -> None:
        """Backpropagate from ``output`` and *add* the gradients into ``.grad``.

        Walks the tape in reverse (no graph search). Gradients reach the inputs
        of recorded equations; anything computed before the tape began is
        treated as a leaf. ``grad`` defaults to ones of the output's shape. A
        pass that fails midway changes no ``.grad``. ``create_graph=True``: see
        :func:`gradients`.
        """
        _reverse_pass(output, grad, self, False, create_graph, "Tape.backward").accumulate()

    def backward_steps(self, output: Node, grad: Value = None) -> Iterator[Any]:  # (of Step: see reverse.py)
        """The reverse pass one :class:`Step` at a time, in the order it takes them; writes nothing.

        Each step holds the equation, the complete gradient of its output and
        what its VJP sends to each input.
        """
        return iter(_reverse_pass(output, grad, self, True, False, "Tape.backward_steps").steps)


def topological_order(root: Node, visited: set[Node] | None = None) -> list[Node]:
    """The computed nodes ``root`` depends on, inputs before outputs (iterative DFS).

    A node is appended once all its inputs are: a post-order, which is a
    forward topological order — the same order a tape would have recorded.
    Leaves are left out (nothing to do for them but receive a gradient).
    ``visited``: the nodes a caller's walk has reached already (left out, and
    added to), when it hands this walk what lies below ``root``.
    """
    if root.op is None:
        return []
    order = []
    visited = set() if visited is None else visited
    visited.add(root)
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
