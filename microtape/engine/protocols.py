"""The types the engine's annotations speak of: what a node holds, what an op is, what a node is seen from below.

Only for readers and the type checker: nothing here runs in a computation.

* :data:`Value` — what a node holds and an op computes on: a numpy array (a
  Tensor's data), a Python float (a Scalar's) or, in a recorded reverse pass
  (``create_graph=True``), a Scalar or Tensor itself. They share their
  arithmetic but no declared type, so to the checker a value is ``Any``.
* :class:`Operation` — what the engine needs of an op: :class:`microtape.ops.Op`
  is one. The ops sit above the engine, so the engine names them by this
  protocol instead of importing them.
* :class:`NodeLike` — what :mod:`.boundary` reads of a node (it sits below
  :mod:`.node`, which imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeAlias

__all__ = ["Value", "Operation", "NodeLike"]

Value: TypeAlias = Any


class Operation(Protocol):
    """An op as the engine uses it: its name, forward, VJP, and what its VJP reads."""

    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> tuple[str, ...]: ...
    @property
    def forward(self) -> Callable[..., Any]: ...
    @property
    def vjp(self) -> Callable[..., Any]: ...
    @property
    def forward_saving(self) -> Callable[..., Any] | None: ...
    @property
    def builtin(self) -> bool: ...
    @property
    def higher_order(self) -> bool: ...
    @property
    def reads_output(self) -> bool: ...
    @property
    def read_inputs(self) -> tuple[int, ...]: ...


class NodeLike(Protocol):
    """A node as :mod:`.boundary` sees it: its value, its gradient, its inputs."""

    data: Value
    grad: Value | None
    requires_grad: bool

    @property
    def inputs(self) -> Sequence[Any]: ...
