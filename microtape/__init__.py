"""microtape: an educational autograd engine you can see and check.

A :class:`Tape` records every operation — on single :class:`Scalar` numbers
or whole :class:`Tensor` arrays — and :func:`gradients` runs the reverse
pass over it (a pure function: ``backward()`` adds its result into
``.grad``; with ``create_graph=True`` it records itself, so :func:`hvp`
and :func:`hessian` differentiate twice, and :func:`jvp` runs forward
mode). ``microtape.ops`` holds every primitive (and lets you define
your own), ``microtape.nn`` builds layers from them, ``microtape.optim``
updates their parameters, ``microtape.check`` checks derivatives step by
step, ``microtape.viz`` draws graphs and heatmaps, and ``microtape.train``
trains a tiny Transformer on a toy task.
"""

from . import ops
from .forward_mode import jvp
from .higher_order import hessian, hvp

# Every built-in op is registered now, the tiled attention kernel's included,
# so the set of ops never depends on which subpackage was imported first.
from .nn import tiled as _tiled  # noqa: F401  (imported for its registration)
from .scalar import Scalar
from .tape import Tape, gradients, module_scope
from .tensor import Tensor, concatenate, stack

__all__ = [
    "Scalar",
    "Tensor",
    "Tape",
    "gradients",
    "hvp",
    "hessian",
    "jvp",
    "module_scope",
    "concatenate",
    "stack",
    "ops",
    "check",
    "nn",
    "optim",
    "viz",
    "__version__",
]
__version__ = "0.1.0"


def __getattr__(name):
    # Subpackages load on first use, so `import microtape` stays fast
    # (viz pulls in graphviz and matplotlib only when asked for).
    if name in ("check", "nn", "optim", "viz", "exercises", "train"):
        import importlib

        return importlib.import_module(f"microtape.{name}")
    raise AttributeError(f"module 'microtape' has no attribute {name!r}")
