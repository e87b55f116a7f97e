"""``mt.ops.define`` in the box: it records what was defined (the grader asks the VJP itself for answers)."""

from typing import Any

__all__ = ["define", "DEFINED"]

#: name -> the keyword arguments of define (forward, vjp, formula, ...).
DEFINED: dict[Any, Any] = {}


class DefinedOp:
    """What ``define`` returns here: it has a name, and refuses to run (no engine in the box)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"op {self.name!r}: ops do not run in graded code (there is no tape here)")

    def __repr__(self) -> str:
        return f"<op {self.name} (graded code: recorded, not run)>"


def define(name: str, forward: Any = None, vjp: Any = None, formula: Any = None, **more: Any) -> "DefinedOp":
    """Record the op ``name`` and return a stand-in for it."""
    DEFINED[name] = dict(forward=forward, vjp=vjp, formula=formula, **more)
    return DefinedOp(name)
