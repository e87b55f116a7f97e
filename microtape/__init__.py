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

The package, folder by folder (imports flow downward only): ``engine/``
(nodes, the tape, the reverse pass: read it first) ← ``ops/`` (every
primitive) ← ``values/`` (Scalar, Tensor) ← ``numpy_api/`` and
``transforms/`` ← ``nn/`` and ``optim/`` ← ``check/`` ← ``viz/`` ←
``exercises/`` (the framework; the course in ``exercises/lab/``) and
``train/`` ← ``grading/`` (the grader's box) ← ``cli/``. ``import microtape`` loads the
first five and registers every built-in op; the others load on first use.
"""

from typing import Any

from . import ops
from .engine import Tape, gradients, module_scope
from .numpy_api import protocol as _protocol  # noqa: F401  (answers np.exp(tensor): fills Tensor's slots)
from .numpy_api.convolution import avg_pool2d, conv1d, conv2d, max_pool2d
from .numpy_api.functions import (  # fmt: skip
    abs,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
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
    logaddexp2,
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
)
from .numpy_api.joining import concatenate, pad, split, stack
from .transforms.forward_mode import jvp
from .transforms.higher_order import hessian, hvp
from .values.scalar import Scalar
from .values.tensor import Tensor

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
    "conv1d",
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
    # numpy's names (microtape.numpy_api.functions)
    "abs", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "broadcast_to", "cbrt", "clip",
    "cos", "cosh", "cumprod", "cumsum", "dot", "einsum", "exp", "exp2", "expand_dims", "expm1", "flip", "log",
    "log1p", "log2", "log10", "log_softmax", "logaddexp", "logaddexp2", "logsumexp", "matmul", "max", "maximum",
    "mean", "min", "minimum", "norm", "outer", "power", "prod", "reciprocal", "repeat", "reshape", "sin", "sinh",
    "softmax", "sqrt", "square", "squeeze", "std", "sum", "tan", "tanh", "tile", "transpose", "var", "where",
    "ops",
    "check",
    "nn",
    "optim",
    "viz",
    "__version__",
]
# fmt: on
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Subpackages load on first use, so `import microtape` stays fast
    # (viz pulls in graphviz and matplotlib only when asked for).
    if name in ("check", "nn", "optim", "viz", "exercises", "train"):
        import importlib

        return importlib.import_module(f"microtape.{name}")
    raise AttributeError(f"module 'microtape' has no attribute {name!r}")
