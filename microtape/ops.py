"""Primitive operations, each defined once: forward, VJP and formula.

This module lets you look up every operation the tape can record::

    >>> from microtape.ops import OPS
    >>> OPS["mul"].formula
    'grad_a = g * b;  grad_b = g * a'

A primitive is plain data (like a row of PyTorch's ``derivatives.yaml``):

``forward(*inputs, **params)``
    computes the output from numpy arrays (or Python floats, for ``Scalar``).
``vjp(g, ans, *inputs, **params)``
    the vector-Jacobian product: given ``g`` (the gradient of the final result
    with respect to this op's output ``ans``) it returns one gradient per input,
    each of that input's shape. ``None`` means "this input is a constant".
``formula`` / ``latex``
    the VJP written out for people, shown by graphs and reports.

Every op here works on numpy arrays; the elementwise ones also work on Python
floats (that is what ``Scalar`` uses). Broadcasting binary ops return their
gradients through one helper, :func:`unbroadcast`, which sums a gradient back
down to the shape of the input it belongs to.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Op", "OPS", "define", "unbroadcast"]


@dataclass(frozen=True)
class Op:
    """One primitive: its name, forward, VJP and the VJP's formula."""

    name: str
    forward: Callable
    vjp: Callable
    formula: str
    latex: str
    arity: int
    # Where the inputs may come from when tests sample them: "real" or "positive".
    domain: str = "real"
    # Example parameters, so tests can call every op without special cases.
    example_params: dict = field(default_factory=dict)

    def __repr__(self):
        return f"Op({self.name!r}: {self.formula})"


OPS: dict[str, Op] = {}


def define(name, forward, vjp, formula, latex, arity, domain="real", example_params=None):
    """Register a primitive op and return it (the registry is :data:`OPS`)."""
    if name in OPS:
        raise ValueError(f"op {name!r} is already defined")
    op = Op(name, forward, vjp, formula, latex, arity, domain, dict(example_params or {}))
    OPS[name] = op
    return op


def unbroadcast(grad, like):
    """Sum ``grad`` down to the shape of ``like`` (undoing numpy broadcasting).

    If ``x`` of shape (3, 1) was broadcast to (2, 3, 4) in the forward pass,
    every copy of ``x`` received some gradient: the total gradient of ``x`` is
    the sum over the broadcast axes. Python floats (Scalar's values) never
    broadcast, so they pass straight through.
    """
    if grad.__class__ is float:
        return grad
    shape = np.shape(like)
    if grad.shape == shape:
        return grad
    # Axes that numpy prepended to match ranks: sum them away.
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    # Axes that were 1 in the input and stretched in the output: sum, keep the 1.
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def _unbroadcast_both(grad_a, a, grad_b, b):
    """:func:`unbroadcast` for both operands of a binary op, in one call.

    Scalars pay for every Python call in their backward pass, and their
    gradients (floats) never need reducing: they skip both calls at once.
    """
    if grad_a.__class__ is float and grad_b.__class__ is float:
        return grad_a, grad_b
    return unbroadcast(grad_a, a), unbroadcast(grad_b, b)


# Python floats take the math module's path: for one number it is ~20x faster
# than a numpy ufunc, and the scalar engine lives or dies by per-op cost.
def _pick(scalar_fn, array_fn):
    def fn(x):
        return scalar_fn(x) if x.__class__ is float else array_fn(x)

    fn.__name__ = array_fn.__name__
    return fn


_exp = _pick(math.exp, np.exp)
_log = _pick(math.log, np.log)
_tanh = _pick(math.tanh, np.tanh)


# ---------------------------------------------------------------- elementwise


def _add_vjp(g, ans, a, b):
    return _unbroadcast_both(g, a, g, b)


add = define(
    "add",
    lambda a, b: a + b,
    _add_vjp,
    "grad_a = g;  grad_b = g",
    r"\bar a = \bar y,\quad \bar b = \bar y",
    arity=2,
)


def _sub_vjp(g, ans, a, b):
    return _unbroadcast_both(g, a, -g, b)


sub = define(
    "sub",
    lambda a, b: a - b,
    _sub_vjp,
    "grad_a = g;  grad_b = -g",
    r"\bar a = \bar y,\quad \bar b = -\bar y",
    arity=2,
)


def _mul_vjp(g, ans, a, b):
    return _unbroadcast_both(g * b, a, g * a, b)


mul = define(
    "mul",
    lambda a, b: a * b,
    _mul_vjp,
    "grad_a = g * b;  grad_b = g * a",
    r"\bar a = \bar y\, b,\quad \bar b = \bar y\, a",
    arity=2,
)


def _div_vjp(g, ans, a, b):
    grad_a = g / b
    return _unbroadcast_both(grad_a, a, -grad_a * ans, b)


div = define(
    "div",
    lambda a, b: a / b,
    _div_vjp,
    "grad_a = g / b;  grad_b = -g * a / b**2",
    r"\bar a = \bar y / b,\quad \bar b = -\bar y\, a / b^2",
    arity=2,
)


def _add_constant_vjp(g, ans, x, constant):
    # The constant (a mask) receives no gradient: it is data, not a parameter.
    return unbroadcast(g, x), None


add_constant = define(
    "add_constant",
    lambda x, constant: x + constant,
    _add_constant_vjp,
    "grad_x = g  (the constant gets none)",
    r"\bar x = \bar y",
    arity=2,
)


def _scale_vjp(g, ans, x, factor):
    return (g * factor,)


scale = define(
    "scale",
    lambda x, factor: x * factor,
    _scale_vjp,
    "grad_x = g * factor",
    r"\bar x = c\,\bar y",
    arity=1,
    example_params={"factor": 0.5},
)


neg = define(
    "neg",
    lambda x: -x,
    lambda g, ans, x: (-g,),
    "grad_x = -g",
    r"\bar x = -\bar y",
    arity=1,
)


def _pow_vjp(g, ans, x, exponent):
    return (g * exponent * x ** (exponent - 1),)


pow_ = define(
    "pow",
    lambda x, exponent: x**exponent,
    _pow_vjp,
    "grad_x = g * p * x**(p-1)",
    r"\bar x = \bar y\, p\, x^{p-1}",
    arity=1,
    domain="positive",
    example_params={"exponent": 1.5},
)


exp = define(
    "exp",
    _exp,
    lambda g, ans, x: (g * ans,),
    "grad_x = g * exp(x)",
    r"\bar x = \bar y\, e^{x}",
    arity=1,
)


log = define(
    "log",
    _log,
    lambda g, ans, x: (g / x,),
    "grad_x = g / x",
    r"\bar x = \bar y / x",
    arity=1,
    domain="positive",
)


tanh = define(
    "tanh",
    _tanh,
    lambda g, ans, x: (g * (1.0 - ans * ans),),
    "grad_x = g * (1 - tanh(x)**2)",
    r"\bar x = \bar y\,(1 - \tanh^2 x)",
    arity=1,
)


def _relu_forward(x):
    if x.__class__ is float:
        return x if x > 0.0 else 0.0
    return np.maximum(x, 0)


relu = define(
    "relu",
    _relu_forward,
    lambda g, ans, x: (g * (x > 0),),
    "grad_x = g * (x > 0)",
    r"\bar x = \bar y\,[x > 0]",
    arity=1,
)


def _dropout_vjp(g, ans, x, keep):
    # The mask is a constant input (so graphs can draw it), not a parameter.
    return g * keep, None


dropout = define(
    "dropout",
    # `keep` is the saved mask already scaled by 1/(1-p) ("inverted" dropout),
    # so the forward and the backward are the same multiplication.
    lambda x, keep: x * keep,
    _dropout_vjp,
    "grad_x = g * keep / (1-p)",
    r"\bar x = \bar y \odot \frac{m}{1-p}",
    arity=2,
)


# ---------------------------------------------------------------- reductions


def _expand_like(g, x, axis, keepdims):
    """Broadcast a reduced gradient back to the shape of the reduced input."""
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    # A copy, not a broadcast view: this may become a leaf's .grad.
    return np.broadcast_to(g, np.shape(x)).copy()


sum_ = define(
    "sum",
    lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims),
    lambda g, ans, x, axis=None, keepdims=False: (_expand_like(g, x, axis, keepdims),),
    "grad_x = broadcast(g)",
    r"\bar x_i = \bar y",
    arity=1,
    example_params={"axis": -1, "keepdims": False},
)


def _mean_vjp(g, ans, x, axis=None, keepdims=False):
    count = np.size(x) // max(np.size(ans), 1)
    return (_expand_like(g, x, axis, keepdims) / count,)


mean = define(
    "mean",
    lambda x, axis=None, keepdims=False: np.mean(x, axis=axis, keepdims=keepdims),
    _mean_vjp,
    "grad_x = broadcast(g) / n",
    r"\bar x_i = \bar y / n",
    arity=1,
    example_params={"axis": 0, "keepdims": True},
)


def _max_vjp(g, ans, x, axis=None, keepdims=False):
    # The gradient goes to the arg-max; ties share it equally.
    peak = ans if (keepdims or axis is None) else np.expand_dims(ans, axis)
    winners = x == peak
    share = winners / np.sum(winners, axis=axis, keepdims=True, dtype=x.dtype)
    return (_expand_like(g, x, axis, keepdims) * share,)


max_ = define(
    "max",
    lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
    _max_vjp,
    "grad_x = g at the arg-max (ties share), 0 elsewhere",
    r"\bar x_i = \bar y\,[x_i = \max x] / \#\mathrm{ties}",
    arity=1,
    example_params={"axis": -1, "keepdims": True},
)


def _softmax_forward(x, axis=-1):
    # Subtracting the row max changes nothing mathematically (it cancels in the
    # ratio) but keeps exp() from overflowing: the "numerically stable" softmax.
    weights = np.asarray(x - np.max(x, axis=axis, keepdims=True))
    # exp and the division work in place: one score-sized array, not three.
    np.exp(weights, out=weights)
    weights /= np.sum(weights, axis=axis, keepdims=True)
    return weights


def _rowdot(a, b, axis):
    """``sum(a * b, axis, keepdims=True)`` without building ``a * b`` (einsum fuses it)."""
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    return np.expand_dims(np.einsum("...i,...i->...", a, b), axis)


def _softmax_vjp(g, ans, x, axis=-1):
    # The Jacobian of softmax is diag(p) - p p^T; applied to g, row by row:
    # p * (g - rowsum(g * p)), computed in one new array.
    grad_x = g - _rowdot(g, ans, axis)
    grad_x *= ans
    return (grad_x,)


softmax = define(
    "softmax",
    _softmax_forward,
    _softmax_vjp,
    "grad_x = p * (g - rowsum(g * p))",
    r"\bar S = P \odot (\bar P - \mathrm{rowsum}(\bar P \odot P))",
    arity=1,
    example_params={"axis": -1},
)


# ---------------------------------------------------------------- linear algebra


def _swap_last(a):
    return np.swapaxes(a, -1, -2)


def _matmul_vjp(g, ans, a, b):
    # C = A B  gives  grad_A = g B^T  and  grad_B = A^T g  (batched over leading axes).
    if a.ndim == 1 and b.ndim == 1:
        return g * b, g * a  # the dot product: c = Σ a_i b_i
    # A 1-D operand is a row (for a) or column (for b) vector in disguise.
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = np.expand_dims(g2, -2)
    if b.ndim == 1:
        g2 = np.expand_dims(g2, -1)
    grad_a = g2 @ _swap_last(b2)
    if b2.ndim == 2 and a2.ndim > 2:
        # A weight shared by every row of a batch (x @ W): fold the batch into
        # the rows instead of building one [n, m] product per batch entry.
        rows = a2.shape[-1]
        grad_b = a2.reshape(-1, rows).T @ g2.reshape(-1, g2.shape[-1])
    else:
        grad_b = _swap_last(a2) @ g2
    if a.ndim == 1:
        grad_a = grad_a[..., 0, :]
    if b.ndim == 1:
        grad_b = grad_b[..., :, 0]
    return unbroadcast(grad_a, a), unbroadcast(grad_b, b)


matmul = define(
    "matmul",
    np.matmul,
    _matmul_vjp,
    "grad_a = g @ b^T;  grad_b = a^T @ g",
    r"\bar A = \bar C B^{\top},\quad \bar B = A^{\top} \bar C",
    arity=2,
)


# ---------------------------------------------------------------- shape


cast = define(
    "cast",
    lambda x, dtype: x.astype(dtype),
    # The gradient goes back in the input's own precision.
    lambda g, ans, x, dtype: (g.astype(x.dtype),),
    "grad_x = g, in x's dtype",
    r"\bar x = \bar y",
    arity=1,
    example_params={"dtype": "float32"},
)


reshape = define(
    "reshape",
    lambda x, shape: np.reshape(x, shape),
    lambda g, ans, x, shape: (np.reshape(g, np.shape(x)),),
    "grad_x = reshape(g, x.shape)",
    r"\bar x = \mathrm{reshape}(\bar y)",
    arity=1,
    example_params={"shape": (-1,)},
)


transpose = define(
    "transpose",
    lambda x, axes: np.transpose(x, axes),
    # axes=None reverses the axes, and reversing is its own inverse.
    lambda g, ans, x, axes: (np.transpose(g, None if axes is None else np.argsort(axes)),),
    "grad_x = transpose(g, inverse axes)",
    r"\bar x = \bar y^{\top}",
    arity=1,
    example_params={"axes": None},
)
