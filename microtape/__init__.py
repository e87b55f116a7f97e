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
from .functions import (  # numpy's names: mt.sin(x), mt.where(m, a, b), mt.einsum("ij,jk->ik", a, b)
    abs,
    arccos,
    arcsin,
    arctan,
    arctan2,
    broadcast_to,
    cbrt,
    clip,
    cos,
    cosh,
    cumprod,
    cumsum,
    dot,
    einsum,
    exp,
    exp2,
    expand_dims,
    expm1,
    flip,
    log,
    log1p,
    log2,
    log10,
    log_softmax,
    logaddexp,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    norm,
    outer,
    power,
    prod,
    reciprocal,
    repeat,
    reshape,
    sin,
    sinh,
    softmax,
    sqrt,
    square,
    squeeze,
    std,
    sum,
    tan,
    tanh,
    tile,
    transpose,
    var,
    where,
)  # fmt: skip
from .higher_order import hessian, hvp
from .joining import concatenate, pad, split, stack

# Every built-in op is registered now, the tiled attention kernel's included,
# so the set of ops never depends on which subpackage was imported first.
from .nn import tiled as _tiled  # noqa: F401  (imported for its registration)
from .reverse import gradients
from .scalar import Scalar
from .tape import Tape, module_scope
from .tensor import Tensor

# fmt: off
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
    "split",
    "pad",
    # numpy's names (microtape.functions)
    "abs", "arccos", "arcsin", "arctan", "arctan2", "broadcast_to", "cbrt", "clip", "cos", "cosh", "cumprod",
    "cumsum", "dot", "einsum", "exp", "exp2", "expand_dims", "expm1", "flip", "log", "log1p", "log2", "log10",
    "log_softmax", "logaddexp", "logsumexp", "matmul", "max", "maximum", "mean", "min", "minimum", "norm", "outer",
    "power", "prod", "reciprocal", "repeat", "reshape", "sin", "sinh", "softmax", "sqrt", "square", "squeeze",
    "std", "sum", "tan", "tanh", "tile", "transpose", "var", "where",
    "ops",
    "check",
    "nn",
    "optim",
    "viz",
    "__version__",
]
# fmt: on
__version__ = "0.1.0"


def __getattr__(name):
    # Subpackages load on first use, so `import microtape` stays fast
    # (viz pulls in graphviz and matplotlib only when asked for).
    if name in ("check", "nn", "optim", "viz", "exercises", "train"):
        import importlib

        return importlib.import_module(f"microtape.{name}")
    raise AttributeError(f"module 'microtape' has no attribute {name!r}")
