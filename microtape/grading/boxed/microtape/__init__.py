"""The stand-in for microtape that graded code sees: ``mt.ops.define`` only.

A submission may register its VJP as an op, as notebook 07 teaches; here
that records the definition and nothing more. The engine itself — tapes,
Tensors, gradients, the exercises — is not in the box: an answer must be
computed by the student's own numpy.
"""

from typing import Any

from . import _absent, ops

__all__ = ["ops"]

_absent.install()  # `import microtape.check` and the like: stand-ins that fail only when called

_MISSING = (
    "microtape.{name} is not available to graded code: only the standard library, numpy and "
    "mt.ops.define are. Compute the answer with numpy."
)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(_MISSING.format(name=name))
    if f"microtape.{name}" not in _absent.USED:
        _absent.USED.append(f"microtape.{name}")
    return _absent.Absent(f"microtape.{name}")  # mt.check.gradcheck(...) fails when called, not at import
