"""The stand-in for microtape that graded code sees: ``mt.ops.define`` only.

A submission may register its VJP as an op, as notebook 07 teaches; here
that records the definition and nothing more. The engine itself — tapes,
Tensors, gradients, the exercises — is not in the box: an answer must be
computed by the student's own numpy.
"""

from . import ops

__all__ = ["ops"]

_MISSING = (
    "microtape.{name} is not available to graded code: only the standard library, numpy and "
    "mt.ops.define are. Compute the answer with numpy."
)


def __getattr__(name):
    raise AttributeError(_MISSING.format(name=name))
