"""Primitive operations, each defined once: forward, VJP, JVP and one formula per input.

This package lets you look up every operation the tape can record, and add
your own::

    >>> from microtape.ops import OPS
    >>> OPS["mul"].formula
    'grad_a = g * b;  grad_b = g * a'
    >>> OPS["mul"].formula_for(1, {"a": "d", "g": "1"})
    '1 * d'

What an op is lives in :mod:`.core` (:class:`Op`, :data:`OPS`,
:func:`define`); the built-in ops live by family — :mod:`.arithmetic`,
:mod:`.elementwise`, :mod:`.trig`, :mod:`.exp_log`, :mod:`.binary`,
:mod:`.piecewise`, :mod:`.reductions`, :mod:`.scans`, :mod:`.shape`,
:mod:`.linalg`, :mod:`.nn`, :mod:`.convolution` (convolution and pooling),
:mod:`.tiled_attention` (the tiled attention core as one op, with its kernel;
:mod:`.attention_links` holds the hand-derived link functions it shares with
the attention layer) — and broadcasting's inverse, :func:`unbroadcast`, serves
them all. Importing ``microtape`` registers every built-in op (the tiled attention
kernel included), so the set of ops never depends on what you imported.

Every op here works on numpy arrays; the elementwise ones also work on Python
floats (that is what ``Scalar`` uses). The built-in VJPs are written with the
ops themselves, so on Scalars and Tensors they record: that is how
``create_graph=True`` turns the reverse pass into a program of its own.

Your own op: :func:`define` returns an :class:`Op` you can call on Scalars and
Tensors (``sigmoid(x)``); it is recorded like the built-in ones, drawn in
graphs with its formula, and checked by ``microtape.check.gradcheck``.
"""

from .arithmetic import add, add_constant, div, dropout, maximum, minimum, mul, neg, scale, sub
from .binary import arctan2, logaddexp, logaddexp2, power
from .broadcasting import unbroadcast
from .convolution import avg_pool2d, conv, conv_transpose, conv_weight_grad, max_pool2d
from .core import OPS, Op, define, primitive, register, value_of
from .elementwise import GELU_C, GELU_K, abs_, exp, gelu, log, pow_, relu, sigmoid, sqrt, tanh
from .exp_log import cbrt, exp2, expm1, log1p, log2, log10, reciprocal, square
from .linalg import einsum, matmul, norm
from .nn import log_softmax, softmax, softmax_backward
from .piecewise import clip, where
from .reductions import logsumexp, max_, mean, min_, prod, sum_
from .scans import cumprod, cumsum
from .shape import broadcast_to, cast, concatenate, index, index_add, reshape, scatter_add, take, transpose
from .tiled_attention import TILED_ATTENTION
from .trig import arccos, arccosh, arcsin, arcsinh, arctan, arctanh, cos, cosh, sin, sinh, tan

# fmt: off
__all__ = [
    "Op", "OPS", "define", "primitive", "register", "unbroadcast", "value_of", "GELU_C", "GELU_K",
    "add", "sub", "mul", "div", "neg", "scale", "add_constant", "dropout", "maximum", "minimum",  # arithmetic
    "pow_", "exp", "log", "tanh", "relu", "sqrt", "abs_", "sigmoid", "gelu",  # elementwise
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh",  # trig
    "log1p", "expm1", "log2", "log10", "exp2", "cbrt", "square", "reciprocal",  # exp_log
    "logaddexp", "logaddexp2", "arctan2", "power", "clip", "where",  # binary, piecewise
    "sum_", "mean", "max_", "min_", "prod", "logsumexp", "cumsum", "cumprod",  # reductions, scans
    "softmax", "log_softmax", "softmax_backward", "matmul", "einsum", "norm",  # nn, linalg
    "reshape", "transpose", "cast", "broadcast_to", "take", "scatter_add", "index", "index_add", "concatenate",
    "conv", "conv_transpose", "conv_weight_grad", "max_pool2d", "avg_pool2d",  # convolution
    "TILED_ATTENTION",
]
# fmt: on
