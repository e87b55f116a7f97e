"""What backward keeps, counted: every array a tape's forward and reverse pass hold, and for how long.

This module lets the memory pictures read a tape's memory without running
anything on the hot path::

    ledger = lifetimes(tape)            # or a layer after its forward, or a result
    ledger.rows                         # one Row a tick: step, live bytes, what is alive
    print(ledger)                       # the same as a table
    ledger.peak                         # the row with the most live bytes
    ledger.arrays                       # every array: name, kind, bytes, born, freed

The counting is done when asked, from the tape (shapes × itemsizes, and each
array's lifetime); recording pays nothing for it. The clock has one tick per
forward equation, then one per step of the reverse pass (reverse tape order,
only the steps on the path to the output).

What is counted (the model, said once)
--------------------------------------
* **values** — the output of each equation, born at its step. A full tape
  keeps every one to the end (that is what lets you draw and check it); a
  lean tape drops what no VJP reads: when the recording ends, or, recorded
  ``read_once``, as the op that reads it last is recorded. A view (a
  reshape or transpose that moved no numbers) costs nothing: bytes are
  counted once per block of memory, whoever shares it.
* **saved** — what an op kept from its forward for its backward
  (``node.residuals``: the tiled op's row statistics), born with it.
* **gradients** — the gradient of each node, born at the reverse step that
  first sends it something and, on a lean tape, freed after the step that
  reads it (a full tape's pass keeps them all, as :func:`microtape.gradients`
  does; leaves' gradients always stay). A gradient that is a view of another
  (``reshape``'s VJP, ``add`` handing ``g`` on) costs nothing; a contribution
  that is summed into an earlier one lives only during its step.

* **scratch** — what one step allocates for itself and frees before the
  next: the temporaries an op declares (``Op.scratch``, from the shapes: a
  convolution's im2col columns and padded copy, pooling's index arrays, the
  tiled op's block-sized tiles), and the gradients a VJP computes for inputs
  that need none (a convolution's input gradient when the input is data).
  Each lives for its own tick only.

Not counted: the leaves' values (inputs and parameters: you hold them
before and after), and the temporaries of ops that declare none (an
elementwise op's, a reduction's: each at most the size of its operands).
Against ``tracemalloc`` the computed peak agrees within ±15 % on attention
(full and lean tape, and the tiled op), a small conv net and a GRU
(``tests/viz/test_memory.py`` checks each). To know which gradient arrays
share memory, the reverse pass is run once (:func:`microtape.gradients`:
pure, it writes nothing) — reading memory changes no value, gradient or tape.
"""

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine import Node, Tape, gradients
from ..engine.lean import NotKept
from .program import Recorded, collect

__all__ = ["Array", "Row", "Ledger", "lifetimes", "order_of", "VIEW_OPS"]

# Ops whose output is a view of their input (no numbers move), for values a lean tape dropped:
# those are gone, so their memory can no longer be asked.
VIEW_OPS = frozenset({"reshape", "transpose", "expand_dims", "squeeze", "broadcast_to"})


@dataclass
class Array:
    """One array on the clock: ``born`` is its first tick, ``freed`` the first tick it is gone (None: kept)."""

    name: str
    kind: str  # "value", "saved", "gradient" or "scratch"
    shape: tuple
    dtype: str
    nbytes: int  # 0 for a view of memory counted elsewhere
    born: int
    freed: int | None = None
    order: int = 0  # 0: the function; 1: a step of a recorded (create_graph) first derivative; …

    def alive(self, tick: Any) -> Any:
        return self.born <= tick and (self.freed is None or tick < self.freed)


@dataclass
class Row:
    """One tick: ``phase`` (forward/backward), the step's name, live bytes and what is alive (largest first)."""

    tick: int
    phase: str
    step: str
    live_bytes: int
    alive: tuple


@dataclass
class Ledger:
    """Every array of one tape's forward and reverse pass, with the table of live bytes per tick."""

    arrays: list = field(repr=False)
    rows: list = field(repr=False)
    forward_ticks: int
    lean: bool
    tiled: bool = False

    def __repr__(self) -> str:
        peak = self.peak
        return f"<Ledger: {len(self.rows)} ticks, peak {human_bytes(peak.live_bytes)} at {peak.phase} {peak.step}>"

    def __str__(self) -> str:
        return self.text()

    @property
    def peak(self) -> Any:
        """The row with the most live bytes (the first such)."""
        return max(self.rows, key=lambda row: row.live_bytes)

    @property
    def peak_bytes(self) -> Any:
        return self.peak.live_bytes

    def text(self, limit: Any = None) -> Any:
        """The rows as a table: tick, phase, step, live bytes, what is alive (the first ``limit`` rows)."""
        lines = [f"{'tick':>4}  {'phase':<8}  {'step':<28}  {'live':>10}  alive (largest first)"]
        for row in self.rows[:limit]:
            alive = ", ".join(row.alive[:4]) + (f", … (+{len(row.alive) - 4})" if len(row.alive) > 4 else "")
            mark = " ← peak" if row is self.peak else ""
            lines.append(
                f"{row.tick:>4}  {row.phase:<8}  {row.step[:28]:<28}  {human_bytes(row.live_bytes):>10}  {alive}{mark}"
            )
        return "\n".join(lines)


def human_bytes(count: int) -> Any:
    """``1.5 MB``, ``320 B`` (powers of 1024, as tracemalloc's users read them)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(count) < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GB"


def order_of(program: Any) -> Any:
    """Per equation: 0 for the function, k for a step of a recorded k-th derivative (``∂name`` modules).

    A recorded pass (``create_graph=True``) runs each step in the module
    ``∂label``, ``label`` naming the variable it differentiates; that
    variable's own order plus one is the step's.
    """
    labels: dict[Any, Any] = {}
    for node, name in program.tape.variable_names().items():
        labels.setdefault(name, node)
        if node.op is not None and not node.name:
            labels.setdefault(f"{node.op.name}{name}", node)
    orders: dict[Any, Any] = {}
    for node in program.equations:
        module = node.module or ""
        mark = module.find("∂")
        order = 0
        if mark >= 0:
            # (The label runs to the end: a variable's name may hold dots, "∂q_proj.weight".)
            target = labels.get(module[mark + 1 :])
            order = 1 + (orders.get(target, 0) if target is not None else 0)
        orders[node] = order
    return [orders[node] for node in program.equations]


def lifetimes(source: Any, grad: Any = None) -> "Ledger":
    """The :class:`Ledger` of a tape, a layer (its last forward) or a result: see the module docstring.

    ``grad``: the gradient the reverse pass starts from (default: the
    output's ``.grad`` if a backward ran, else ones). Changes nothing.
    """
    program = _program(source)
    counter = _Counter(program)
    counter.count_values()
    steps = counter.count_gradients(grad)
    equations = program.equations
    labels = [("forward", program.names[node]) for node in equations]
    labels += [("backward", f"∂{program.names[step.equation.output]}") for step in steps]
    rows = []
    for tick, (phase, step) in enumerate(labels):
        live = [a for a in counter.arrays if a.alive(tick)]
        biggest = sorted((a for a in live if a.nbytes), key=lambda a: -a.nbytes)
        rows.append(Row(tick, phase, step, int(sum(a.nbytes for a in live)), tuple(a.name for a in biggest)))
    tiled = any(node.op.forward_saving is not None for node in equations)
    return Ledger(counter.arrays, rows, len(equations), counter.lean, tiled)


def _program(source: Tape | Node | Recorded) -> Any:
    """The program of ``source``, refused with a clear error when memory cannot be counted for it."""
    if not isinstance(source, (Tape, Node)) and not hasattr(source, "tape"):
        raise TypeError(
            f"memory(tape_or_layer): expected a Tape, a layer (mt.nn) or a Tensor result; got {type(source).__name__}"
        )
    if not isinstance(source, (Tape, Node)) and source.tape is None:
        raise ValueError(
            f"memory(tape_or_layer): this {type(source).__name__} has not run a forward yet (or its forward "
            "returned no Tensor), so there is nothing to count; call the layer first"
        )
    program = collect(source)
    if program.output is None:
        raise TypeError("memory(tape_or_layer): a scalar trace has many outputs; pass a Tape of Tensors")
    if any(node.data.__class__ is not np.ndarray and not isinstance(node.data, NotKept) for node in program.equations):
        raise ValueError(
            "memory(tape_or_layer): this tape records Scalars (one Python float each); memory is counted for "
            "Tensor tapes, whose values are numpy arrays — record the computation with mt.Tensor"
        )
    output = program.output
    if isinstance(output.data, NotKept):
        raise ValueError(f"memory(tape_or_layer): the output's value was freed ({output.data.name}); nothing to count")
    return program


class _Counter:
    """Builds the arrays of one program: values on the forward clock, gradients on the reverse clock."""

    def __init__(self, program: Any) -> None:
        self.program = program
        self.tape = program.tape
        self.lean = bool(self.tape.lean)
        self.orders = order_of(program)
        self.names = program.names
        self.arrays: list[Any] = []
        self.owners: dict[Any, Any] = {}  # memory block -> the arrays living in it

    def add(self, name: str, kind: Any, data: Any, born: Any, key: Any, order: int = 0, free: bool = True) -> Any:
        """One array; its bytes only if its memory block (``key``) was not counted before (``free``: it may be)."""
        paid = free and key not in self.owners
        array = Array(name, kind, tuple(np.shape(data)), str(np.dtype(data.dtype)), 0, born, None, order)
        array.nbytes = _nbytes(data) if paid else 0
        self.owners.setdefault(key, []).append(array)
        self.arrays.append(array)
        return array

    # -- values (and what ops saved)

    def count_values(self) -> None:
        program, equations = self.program, self.program.equations
        read_once = self.tape.read_once
        last_reader = {x: i for i, node in enumerate(equations) for x in node.inputs}
        leaf_blocks = {_owner_key(x.data) for x in program.leaves if x.data.__class__ is np.ndarray}
        value_of: dict[Any, Any] = {}
        for i, node in enumerate(equations):
            name, order = self.names[node], self.orders[i]
            data = node.data
            if isinstance(data, NotKept):
                # Dropped by a lean tape: its block is gone; a view op's output shared its input's.
                shared = value_of.get(node.inputs[0]) if node.op.name in VIEW_OPS else None
                key = ("view-of", id(shared)) if shared is not None else ("dropped", i)
                if shared is not None:
                    self.owners.setdefault(key, [shared])
                array = self.add(name, "value", data, i, key, order)
                array.freed = (last_reader.get(node, i) + 1) if read_once else len(equations)
            else:
                key = _owner_key(data)
                # A view of an input or a parameter (W.T) lives in the caller's memory: not counted.
                array = self.add(name, "value", data, i, key, order, free=key not in leaf_blocks)
            value_of[node] = array
            self.add_scratch(f"{name} (scratch)", _scratch(node)[0], i, order)
            residuals = node.residuals if node.op.forward_saving is not None and node.params else None
            for k, saved in enumerate(_arrays_in(residuals)):
                self.add(f"{name}.saved{k}", "saved", saved, i, _owner_key(saved), order)
        _share_lifetimes(self.owners)

    # -- gradients (one pure pass tells which share memory)

    def count_gradients(self, grad: Any) -> Any:
        program, output = self.program, self.program.output
        result = gradients(output, output.grad if grad is None else grad, tape=self.tape, steps=True)
        start = len(program.equations)
        step_tick = {step.equation.output: start + k for k, step in enumerate(result.steps)}  # type: ignore[arg-type]  # steps=True
        keep = self.tape.keep if self.lean else None
        self.owners = {}
        seed = self.add_gradient(f"∂{self.names[output]} (seed)", np.asarray(result.seed), start, self.orders[-1])
        if keep is not None and output.op is not None and output.name not in keep:
            seed.freed = start + 1
        grad_of = {output: seed}
        for k, step in enumerate(result.steps):  # type: ignore[arg-type]  # steps=True
            tick, node = start + k, step.equation.output
            step_name = f"∂{self.names[node]}"
            self.add_scratch(f"{step_name} (scratch)", _scratch(node)[1], tick, self.orders[program.index[node]])
            for x, gx in zip(node.inputs, step.grad_inputs, strict=True):
                if gx.__class__ is np.ndarray and not x.requires_grad:
                    # Computed by the VJP and dropped (an input that is data): alive for the step only.
                    self.add_scratch(f"{step_name} (unused ∂{self.names.get(x, '?')})", _nbytes(gx), tick, 0)
                if gx is None or not x.requires_grad or gx.__class__ is not np.ndarray:
                    continue
                label = f"∂{self.names.get(x, x.name or '?')}"
                order = self.orders[program.index.get(x, program.index[node])]
                if x in grad_of:
                    # A second use: the contribution lives for its step; the sum is a new block.
                    self.add_gradient(label + " (term)", gx, tick, order).freed = tick + 1
                    previous = grad_of[x]
                    summed = self.add_gradient(label, result[x], tick, order)
                    summed.freed, previous.freed = previous.freed, tick + 1
                    grad_of[x] = summed
                    continue
                array = grad_of[x] = self.add_gradient(label, gx, tick, order)
                if keep is not None and x.op is not None and x.name not in keep and x in step_tick:
                    array.freed = step_tick[x] + 1  # a lean pass drops it once its own step has run
        _share_lifetimes(self.owners)
        return result.steps

    def add_scratch(self, name: str, nbytes: Any, tick: Any, order: Any) -> None:
        """Bytes one step allocates for itself (see the module docstring): alive during ``tick`` only."""
        if nbytes > 0:
            self.arrays.append(Array(name, "scratch", (int(nbytes),), "uint8", int(nbytes), tick, tick + 1, order))

    def add_gradient(self, name: str, data: Any, born: Any, order: Any) -> Any:
        return self.add(name, "gradient", data, born, ("grad",) + _owner_key(data), order)


def _scratch(node: Any) -> Any:
    """``(forward, vjp)``: the bytes ``node``'s op declares for its own steps (``Op.scratch``); (0, 0) if none."""
    declared = getattr(node.op, "scratch", None)
    if declared is None:
        return 0, 0
    shapes = [tuple(getattr(v.data, "shape", np.shape(v.data))) for v in (node, *node.inputs)]
    return declared(shapes, np.dtype(node.data.dtype).itemsize, **(node.params or {}))


def _nbytes(data: Any) -> Any:
    shape = np.shape(data)
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(data.dtype).itemsize


def _owner_key(array: Any) -> Any:
    """Which block of memory ``array`` lives in (numpy's ``base`` of a view is the owner)."""
    owner = array
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    return ("block", id(owner))


def _arrays_in(residuals: Any) -> Any:
    if residuals is None:
        return []
    if isinstance(residuals, np.ndarray):
        return [residuals]
    if isinstance(residuals, dict):
        residuals = list(residuals.values())
    if isinstance(residuals, (tuple, list)):
        return [r for item in residuals for r in _arrays_in(item)]
    return []


def _share_lifetimes(owners: Any) -> None:
    """Arrays in one memory block: the block is born with the first and freed with the last."""
    for members in owners.values():
        if len(members) < 2:
            continue
        born = min(a.born for a in members)
        freed = None if any(a.freed is None for a in members) else max(a.freed for a in members)
        payer = next((a for a in members if a.nbytes), None)
        if payer is not None:
            payer.born, payer.freed = born, freed
