"""The lean tape: keep only the values the backward pass (and the pictures you ask for) will read.

A full tape keeps every value it recorded — that is what lets you print,
draw and check every step. For long sequences that is costly: attention's
``scores``, ``scaled_scores`` and ``weights`` are each ``B·H·T²`` numbers. A
tape recorded lean (``mt.Tape(lean=True)``, or the attention layer's
``lean=True``) keeps a value only when

* some op's VJP reads it — each op declares what its VJP reads
  (:attr:`microtape.ops.Op.reads`: softmax reads its output, ``scale``
  nothing, ``matmul`` both inputs); an op that declares nothing (a user op)
  keeps everything it touches;
* or you named it in ``keep=`` (``keep=("weights",)`` keeps what a heatmap
  needs);
* or no op on the tape used it (a result: you hold it).

Every other value is replaced, when the recording ends, by :class:`NotKept`:
its shape and dtype stay (VJPs that only reshape or sum need no more), and
any other use raises an error saying how to record it fully
(``tests/ops/test_op_reads.py`` runs every op's VJP with its undeclared values
replaced by it). The reverse pass over a lean tape frees the gradient of an
intermediate step as soon as its VJP has run; the gradients of leaves
(inputs, parameters) and of the kept steps stay. The gradients are the same,
bit for bit, as a full tape's: the same VJPs run in the same order on the
same numbers.

Values are dropped when the recording ends, not as it goes: until then any
later op may still read them. A recording that reads each value once, in the
op right after it (a chain, such as the attention layer's forward), can say
so — ``Tape(lean=True, read_once=True)`` — and then each value is dropped as
soon as the op that reads it is recorded (:class:`DroppedAsRecorded`), so
the forward never holds more than the chain's live values. Only arrays are
dropped (a Scalar's value is one float), and since nodes are shared, a value a lean tape dropped is gone
for every tape that recorded it. A lean tape cannot run ``create_graph=True``
(that pass records ops on the values themselves).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from .node import Node
from .protocols import Value

__all__ = ["NotKept", "not_kept_error", "check_keep", "unread_values", "drop_unread_values", "DroppedAsRecorded"]


def not_kept_error(name: str, what: str = "value", step: str | None = None) -> ValueError:
    """The error for reading a value (or gradient) of ``name`` that a lean tape did not keep.

    ``step``: the node's own name, which ``keep=`` takes (an unnamed node cannot be kept by name).
    """
    keep = f", or keep it by name when recording lean (keep=({step!r},))" if step else ""
    return ValueError(
        f"the {what} of {name} was not kept: it was recorded on a lean tape, which keeps only what the "
        f"backward pass reads. Record it fully (mt.Tape(), or lean=False on the layer){keep}"
    )


class NotKept:
    """Stands in for a value a lean tape dropped: its shape and dtype, and an error on any other use.

    ``shape``, ``dtype``, ``ndim`` and ``size`` answer (a VJP that only needs
    shapes still runs); turning it into an array, arithmetic, indexing or
    comparing it raise a ``ValueError`` naming the step and how to keep it.
    """

    __slots__ = ("shape", "dtype", "name", "step")

    def __init__(self, shape: Sequence[int], dtype: Any, name: str, step: str | None = None) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.name = name  # what the listing calls it
        self.step = step  # its own name (what keep= takes), or None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        return "value not kept"

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise not_kept_error(self.name, step=self.step)

    # Any use of the numbers: numpy's conversion, arithmetic, comparisons, indexing, truth.
    __array__ = __array_ufunc__ = _refuse  # (numpy functions that need only the shape — np.size — work)
    __getitem__ = __setitem__ = __iter__ = __len__ = __bool__ = __float__ = __int__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __hash__ = object.__hash__

    def __getattr__(self, attribute: str) -> NoReturn:
        # Anything an array has beyond its shape and dtype (``.T``, ``.sum``, ``.astype``…) reads the numbers.
        # (Protocol probes — ``__deepcopy__`` and friends — get the usual AttributeError.)
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise not_kept_error(object.__getattribute__(self, "name"), step=object.__getattribute__(self, "step"))


def check_keep(keep: object, where: str) -> tuple[str, ...]:
    """``keep`` as a tuple of step names (a tuple or list of strings; a lone string is refused)."""
    if isinstance(keep, str) or not isinstance(keep, (tuple, list)) or not all(isinstance(k, str) for k in keep):
        raise TypeError(f"{where}(keep={keep!r}): expected a tuple of step names, such as keep=('weights',)")
    return tuple(keep)


def unread_values(nodes: Sequence[Node], keep: Sequence[str] = ()) -> list[Node]:
    """The computed nodes among ``nodes`` whose values no VJP on ``nodes`` reads and ``keep`` does not name.

    Not among them: a node no op of ``nodes`` used (a result), one whose
    value is not an array (a Scalar's float), and one whose array shares its
    memory with a kept one (a view, like ``K_heads`` under the kept
    ``K_headsᵀ``: dropping it would free nothing).
    """
    read: set[Node] = set()
    used: set[Node] = set()
    for node in nodes:
        op = node.op
        if op.reads_output:
            read.add(node)
        inputs = node.inputs
        for position in op.read_inputs:
            read.add(inputs[position])
        used.update(inputs)
    candidates, owners = [], set()
    for node in nodes:
        data = node.data
        if data.__class__ is not np.ndarray:
            continue
        if node in used and node not in read and node.name not in keep:
            candidates.append(node)
        else:
            owners.add(id(_owner(data)))
    return [node for node in candidates if id(_owner(node.data)) not in owners]


def _owner(array: Value) -> np.ndarray:
    """The array that owns ``array``'s memory (numpy's ``base`` of a view is the owner itself)."""
    return array if array.base is None else array.base


def drop_unread_values(tape: Any) -> int:
    """Replace the values of ``tape`` no VJP reads by :class:`NotKept` (see the module doc); returns how many."""
    dropped = unread_values(tape._nodes, tape.keep)
    if dropped:
        names = tape.variable_names()
        for node in dropped:
            node.data = NotKept(node.data.shape, node.data.dtype, names.get(node, node.name), node.name)
    return len(dropped)


class DroppedAsRecorded(list):
    """A ``read_once`` lean tape's list of equations: appending one drops the values its op was the last to read.

    Recording appends each new node to its tapes' lists; this list's
    ``append`` then drops the value of each input recorded on this tape
    that no VJP reads (neither the new op's nor the input's own), that
    ``keep`` does not name, and that the new output is not a view of.
    "The last to read" is the recorder's promise (``read_once``): a later op
    reading a dropped value gets the :class:`NotKept` error.
    """

    __slots__ = ("keep", "recorded")

    def __init__(self, keep: Sequence[str]) -> None:
        super().__init__()
        self.keep = keep
        # The nodes on this tape (an input from before it began is not this tape's to drop).
        self.recorded: set[Node] = set()

    def append(self, node: Node) -> None:
        list.append(self, node)
        self.recorded.add(node)
        read = node.op.read_inputs
        output = node.data
        output_owner = _owner(output) if output.__class__ is np.ndarray else None
        for position, x in enumerate(node.inputs):
            if position in read or x not in self.recorded or x.op.reads_output or x.name in self.keep:
                continue
            data = x.data
            if data.__class__ is np.ndarray and _owner(data) is not output_owner:
                x.data = NotKept(data.shape, data.dtype, x.name or f"an output of {x.op.name}", x.name)
