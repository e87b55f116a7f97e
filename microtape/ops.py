"""Primitive operations, each defined once: forward, VJP and one formula per input.

This module lets you look up every operation the tape can record, and add
your own::

    >>> from microtape.ops import OPS
    >>> OPS["mul"].formula
    'grad_a = g * b;  grad_b = g * a'
    >>> OPS["mul"].formula_for(1, {"a": "d", "g": "1"})
    '1 * d'

A primitive is plain data, like a row of PyTorch's ``derivatives.yaml``:

``forward(*inputs, **params)``
    computes the output from numpy arrays (or Python floats, for ``Scalar``).
``vjp(g, ans, *inputs, **params)``
    the vector-Jacobian product: given ``g`` (the gradient of the final result
    with respect to this op's output ``ans``) it returns one gradient per input,
    each of that input's shape; ``None`` for an input that is not
    differentiable (a mask: data, not a parameter).
``inputs`` and ``grads``
    the operands' names and, per operand, the gradient it receives written for
    people — ``None`` for the non-differentiable ones. A formula is a template:
    ``{g}`` is the incoming gradient, ``{b}`` an operand, ``{exponent}`` a
    parameter, so a picture can print the student's own names (``g * {b}``
    becomes ``1 * d``) and the listing the generic ones (``g * b``).

Every op here works on numpy arrays; the elementwise ones also work on Python
floats (that is what ``Scalar`` uses). Broadcasting binary ops return their
gradients through one helper, :func:`unbroadcast`, which sums a gradient back
down to the shape of the input it belongs to.

Your own op: :func:`define` returns an :class:`Op` you can call on Scalars and
Tensors (``sigmoid(x)``); it is recorded like the built-in ones, drawn in
graphs with its formula, and checked by ``microtape.check.gradcheck``.
"""

import math
import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .tape import Node, index_part_text, record

__all__ = ["Op", "OPS", "RESERVED_NAMES", "define", "unbroadcast", "softmax_backward"]

# A placeholder in a formula template: {g}, {x}, {exponent}.
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, eq=False)
class Op:
    """One primitive: its forward, its VJP and, per input, the gradient's formula.

    Call it on nodes to record it: ``op(x)``, ``op(a, b, name="y", **params)``
    returns a node of its first node input's kind (Scalar or Tensor).
    """

    name: str
    forward: Callable
    vjp: Callable
    inputs: tuple  # the operands' names, as the formulas call them: ("a", "b")
    grads: tuple  # per input: its gradient as a text template, or None (not differentiable)
    grads_latex: tuple  # the same in LaTeX (None where not differentiable)
    output: str = "y"  # what the formulas call the output
    note: str = ""  # a fact the formulas rely on, said once (dropout's keep ∈ {0, 1/(1-p)})
    # Where the inputs may come from when tests sample them: "real" or "positive".
    domain: str = "real"
    # Example parameters, so tests can call every op without special cases.
    example_params: dict = field(default_factory=dict)
    # What a box in a graph shows of the parameters (pow "²", scale "×0.5"), or None.
    label: Callable | None = None
    builtin: bool = True

    # -- what the op is, as data

    @property
    def arity(self):
        return len(self.inputs)

    @property
    def differentiable(self):
        """One bool per input: does the op pass a gradient to it?"""
        return tuple(formula is not None for formula in self.grads)

    @property
    def constant_inputs(self):
        """Positions of the inputs that receive no gradient (masks)."""
        return tuple(i for i, formula in enumerate(self.grads) if formula is None)

    def formula_for(self, position, names=None):
        """The gradient of input ``position`` as text, placeholders filled in.

        ``names`` maps placeholders (``"g"``, operand names, the output's name,
        parameter names) to what to print; the rest print as themselves.
        None for an input that is not differentiable.
        """
        template = self.grads[position]
        if template is None:
            return None
        names = names or {}
        return _PLACEHOLDER.sub(lambda m: str(names.get(m.group(1), m.group(1))), template)

    @property
    def formula(self):
        """The whole VJP on one line: ``grad_a = g * b;  grad_b = g * a``."""
        parts = [
            f"grad_{name} = {self.formula_for(i)}" if self.grads[i] is not None else f"{name}: constant (no gradient)"
            for i, name in enumerate(self.inputs)
        ]
        text = ";  ".join(parts)
        return f"{text}  ({self.note})" if self.note else text

    @property
    def latex(self):
        r"""The whole VJP in LaTeX: ``\bar a = \bar y\, b,\quad \bar b = \bar y\, a``."""
        return r",\quad ".join(latex for latex in self.grads_latex if latex is not None)

    def describe(self, params):
        """What a picture shows of this op: ``pow ²``, ``scale ×0.5``, or just its name."""
        extra = self.label(params or {}) if self.label is not None else ""
        return f"{self.name} {extra}" if extra else self.name

    def __repr__(self):
        return f"Op({self.name!r}: {self.formula})"

    # -- recording it

    def __call__(self, *operands, name=None, **params):
        """Run this op on Scalars/Tensors (numbers and arrays become constants) and record it."""
        if len(operands) != self.arity:
            raise TypeError(
                f"op {self.name!r} takes {self.arity} input{'s' if self.arity != 1 else ''} "
                f"({', '.join(self.inputs)}), got {len(operands)}"
            )
        nodes = [x for x in operands if isinstance(x, Node)]
        if not nodes:
            raise TypeError(f"op {self.name!r}: give at least one Scalar or Tensor input, got only plain values")
        kind = nodes[0].__class__
        inputs = []
        for position, x in enumerate(operands):
            if not isinstance(x, Node):
                x = kind._constant(x, nodes[0])
            elif not isinstance(x, kind):
                raise TypeError(
                    f"op {self.name!r}: input {self.inputs[position]!r} is a {type(x).__name__} but the first "
                    f"input is a {kind.__name__}; Scalars and Tensors do not mix"
                )
            if x.requires_grad and self.grads[position] is None:
                raise ValueError(
                    f"op {self.name!r}: input {self.inputs[position]!r} is not differentiable (a constant), "
                    "so it must not require a gradient"
                )
            inputs.append(x)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"op {self.name!r}: name must be a string, got {type(name).__name__}")
        return record(self, tuple(inputs), params or None, name)


#: Every op by name: the built-in ones below, then any you :func:`define`.
OPS: dict[str, Op] = {}

#: Built-in ops registered by modules that load later (``microtape.nn.tiled``
#: on first use). Their names are reserved from the start, so ``define`` cannot
#: take one before its owner is imported (and be silently replaced then).
#: A module that registers a built-in op outside this file adds its name here.
RESERVED_NAMES = frozenset({"tiled_attention"})

_DEFAULT_INPUTS = {1: ("x",), 2: ("a", "b"), 3: ("a", "b", "c")}


def _op(name, forward, vjp, grads, latex, *, inputs=None, **fields):
    """Register a built-in op (one formula per input; None marks a constant input)."""
    grads, latex = tuple(grads), tuple(latex)
    inputs = tuple(inputs or _DEFAULT_INPUTS[len(grads)])
    assert len(inputs) == len(grads) == len(latex), f"{name}: one name, formula and LaTeX per input"
    assert name not in OPS or OPS[name].builtin, f"{name}: a user op has a built-in name (add it to RESERVED_NAMES)"
    op = Op(name, forward, vjp, inputs, grads, latex, **fields)
    OPS[name] = op
    return op


def define(
    name,
    forward,
    vjp,
    formula,
    latex=None,
    *,
    inputs=None,
    output="y",
    note="",
    domain="real",
    example_params=None,
    label=None,
):
    """Define your own op and return it; call it on Scalars or Tensors to record it.

    ``forward(*inputs, **params)`` computes the output (numpy arrays, or floats
    for Scalars); ``vjp(g, ans, *inputs, **params)`` returns one gradient per
    input (a tuple; ``None`` for a non-differentiable input). ``formula`` is
    one string for a one-input op, or one per input (``None`` for a
    non-differentiable one) — write ``{x}`` for an operand and ``{g}`` for the
    incoming gradient, and graphs print the real names there. ``inputs`` names
    the operands (default ``x``, or ``a, b, …``)::

        sigmoid = mt.ops.define(
            "sigmoid",
            forward=lambda x: 1 / (1 + np.exp(-x)),
            vjp=lambda g, s, x: (g * s * (1 - s),),
            formula="{g} * s * (1 - s)",
        )
        y = sigmoid(mt.Tensor(np.zeros(3), requires_grad=True))

    Redefining one of your own ops replaces it (so a notebook cell can be run
    again); the built-in names are refused.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"define(name={name!r}): expected a name like 'sigmoid' (letters, digits, _)")
    if (name in OPS and OPS[name].builtin) or name in RESERVED_NAMES:
        raise ValueError(f"define({name!r}): {name!r} is a built-in op and cannot be redefined; choose another name")
    for what, fn in (("forward", forward), ("vjp", vjp)):
        if not callable(fn):
            raise TypeError(f"define({name!r}, {what}=...): expected a function, got {type(fn).__name__}")
    grads = (formula,) if isinstance(formula, str) else formula
    if not isinstance(grads, Sequence) or not grads or not all(f is None or isinstance(f, str) for f in grads):
        raise TypeError(
            f"define({name!r}, formula=...): expected a string (one input) or a list with one string per "
            f"input (None for a non-differentiable one), got {formula!r}"
        )
    if all(f is None for f in grads):
        raise ValueError(f"define({name!r}, formula=...): at least one input must be differentiable")
    arity = len(grads)
    if latex is None:
        latex = [None if f is None else r"\text{" + f.replace("{", "").replace("}", "") + "}" for f in grads]
    elif isinstance(latex, str):
        latex = [latex]
    if len(latex) != arity:
        raise ValueError(f"define({name!r}, latex=...): give one LaTeX formula per input ({arity})")
    names = tuple(inputs) if inputs is not None else _DEFAULT_INPUTS.get(arity, tuple(f"x{i}" for i in range(arity)))
    if len(names) != arity or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise ValueError(f"define({name!r}, inputs={inputs!r}): expected {arity} operand names")
    if domain not in ("real", "positive"):
        raise ValueError(f"define({name!r}, domain={domain!r}): expected 'real' or 'positive'")
    op = Op(
        name,
        forward,
        vjp,
        names,
        tuple(grads),
        tuple(latex),
        output=output,
        note=note,
        domain=domain,
        example_params=dict(example_params or {}),
        label=label,
        builtin=False,
    )
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


def _number_text(value):
    return f"{value:g}" if isinstance(value, numbers.Real) else str(value)


# ---------------------------------------------------------------- elementwise


def _add_vjp(g, ans, a, b):
    return _unbroadcast_both(g, a, g, b)


add = _op(
    "add",
    lambda a, b: a + b,
    _add_vjp,
    ["{g}", "{g}"],
    [r"\bar a = \bar y", r"\bar b = \bar y"],
)


def _sub_vjp(g, ans, a, b):
    return _unbroadcast_both(g, a, -g, b)


sub = _op(
    "sub",
    lambda a, b: a - b,
    _sub_vjp,
    ["{g}", "-{g}"],
    [r"\bar a = \bar y", r"\bar b = -\bar y"],
)


def _mul_vjp(g, ans, a, b):
    return _unbroadcast_both(g * b, a, g * a, b)


mul = _op(
    "mul",
    lambda a, b: a * b,
    _mul_vjp,
    ["{g} * {b}", "{g} * {a}"],
    [r"\bar a = \bar y\, b", r"\bar b = \bar y\, a"],
)


def _div_vjp(g, ans, a, b):
    grad_a = g / b
    return _unbroadcast_both(grad_a, a, -grad_a * ans, b)


div = _op(
    "div",
    lambda a, b: a / b,
    _div_vjp,
    ["{g} / {b}", "-{g} * {a} / {b}**2"],
    [r"\bar a = \bar y / b", r"\bar b = -\bar y\, a / b^2"],
)


def _add_constant_vjp(g, ans, x, constant):
    # The constant (a mask) receives no gradient: it is data, not a parameter.
    return unbroadcast(g, x), None


add_constant = _op(
    "add_constant",
    lambda x, constant: x + constant,
    _add_constant_vjp,
    ["{g}", None],
    [r"\bar x = \bar y", None],
    inputs=("x", "constant"),
)


def _scale_vjp(g, ans, x, factor):
    return (g * factor,)


scale = _op(
    "scale",
    lambda x, factor: x * factor,
    _scale_vjp,
    ["{g} * {factor}"],
    [r"\bar x = c\,\bar y"],
    example_params={"factor": 0.5},
    label=lambda params: f"×{_number_text(params.get('factor', '?'))}",
)


neg = _op(
    "neg",
    lambda x: -x,
    lambda g, ans, x: (-g,),
    ["-{g}"],
    [r"\bar x = -\bar y"],
)


def _pow_vjp(g, ans, x, exponent):
    if exponent == 0:
        # x**0 is the constant 1 (also at x = 0, where x**-1 would give 0 * inf).
        return (g * 0.0 if g.__class__ is float else np.zeros_like(g * x),)
    if x.__class__ is float and x == 0.0 and exponent < 1:
        # d/dx x**p at 0 for p < 1 is infinite (Python floats raise instead of saying so).
        return (g * exponent * math.inf,)
    with np.errstate(divide="ignore"):  # the same infinity, for arrays holding a 0
        return (g * exponent * x ** (exponent - 1),)


_SUPERSCRIPTS = str.maketrans("0123456789-.", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻·")


def _pow_label(params):
    exponent = params.get("exponent")
    if isinstance(exponent, numbers.Real) and float(exponent).is_integer() and abs(exponent) < 100:
        return str(int(exponent)).translate(_SUPERSCRIPTS)
    return f"^{_number_text(exponent)}"


pow_ = _op(
    "pow",
    lambda x, exponent: x**exponent,
    _pow_vjp,
    ["{g} * {exponent} * {x}**({exponent}-1)"],
    [r"\bar x = \bar y\, p\, x^{p-1}"],
    domain="positive",
    example_params={"exponent": 1.5},
    label=_pow_label,
)


exp = _op(
    "exp",
    _exp,
    lambda g, ans, x: (g * ans,),
    ["{g} * exp({x})"],
    [r"\bar x = \bar y\, e^{x}"],
)


log = _op(
    "log",
    _log,
    lambda g, ans, x: (g / x,),
    ["{g} / {x}"],
    [r"\bar x = \bar y / x"],
    domain="positive",
)


tanh = _op(
    "tanh",
    _tanh,
    lambda g, ans, x: (g * (1.0 - ans * ans),),
    ["{g} * (1 - tanh({x})**2)"],
    [r"\bar x = \bar y\,(1 - \tanh^2 x)"],
)


def _relu_forward(x):
    if x.__class__ is float:
        return x if x > 0.0 else 0.0
    return np.maximum(x, 0)


relu = _op(
    "relu",
    _relu_forward,
    lambda g, ans, x: (g * (x > 0),),
    ["{g} * ({x} > 0)"],
    [r"\bar x = \bar y\,[x > 0]"],
)


def _dropout_vjp(g, ans, x, keep):
    # The mask is a constant input (so graphs can draw it), not a parameter.
    return g * keep, None


dropout = _op(
    "dropout",
    # `keep` is the saved mask already scaled by 1/(1-p) ("inverted" dropout),
    # so the forward and the backward are the same multiplication.
    lambda x, keep: x * keep,
    _dropout_vjp,
    ["{g} * {keep}", None],
    [r"\bar x = \bar y \odot \mathrm{keep}", None],
    inputs=("x", "keep"),
    note="keep = 1/(1-p) where kept, 0 where dropped",
)


# ---------------------------------------------------------------- reductions


def _expand_like(g, x, axis, keepdims):
    """Broadcast a reduced gradient back to the shape of the reduced input."""
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    # A copy, not a broadcast view: this may become a leaf's .grad.
    return np.broadcast_to(g, np.shape(x)).copy()


sum_ = _op(
    "sum",
    lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims),
    lambda g, ans, x, axis=None, keepdims=False: (_expand_like(g, x, axis, keepdims),),
    ["broadcast({g})"],
    [r"\bar x_i = \bar y"],
    example_params={"axis": -1, "keepdims": False},
)


def _mean_vjp(g, ans, x, axis=None, keepdims=False):
    count = np.size(x) // max(np.size(ans), 1)
    return (_expand_like(g, x, axis, keepdims) / count,)


mean = _op(
    "mean",
    lambda x, axis=None, keepdims=False: np.mean(x, axis=axis, keepdims=keepdims),
    _mean_vjp,
    ["broadcast({g}) / n"],
    [r"\bar x_i = \bar y / n"],
    example_params={"axis": 0, "keepdims": True},
)


def _max_vjp(g, ans, x, axis=None, keepdims=False):
    # The gradient goes to the arg-max; ties share it equally.
    peak = ans if (keepdims or axis is None) else np.expand_dims(ans, axis)
    winners = x == peak
    share = winners / np.sum(winners, axis=axis, keepdims=True, dtype=x.dtype)
    return (_expand_like(g, x, axis, keepdims) * share,)


max_ = _op(
    "max",
    lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
    _max_vjp,
    ["{g} at the arg-max of {x} (ties share), 0 elsewhere"],
    [r"\bar x_i = \bar y\,[x_i = \max x] / \#\mathrm{ties}"],
    example_params={"axis": -1, "keepdims": True},
)


def _softmax_forward(x, axis=-1):
    # Subtracting the row max changes nothing mathematically (it cancels in the
    # ratio) but keeps exp() from overflowing: the "numerically stable" softmax.
    with np.errstate(over="ignore"):  # [1.7e308, -1.7e308]: the gap overflows to -inf, whose exp is 0
        weights = np.asarray(x - np.max(x, axis=axis, keepdims=True))
    # exp and the division work in place: one score-sized array, not three.
    np.exp(weights, out=weights)
    weights /= np.sum(weights, axis=axis, keepdims=True)
    return weights


def _rowdot(a, b, axis):
    """``sum(a * b, axis, keepdims=True)`` without building ``a * b`` (einsum fuses it)."""
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    return np.expand_dims(np.einsum("...i,...i->...", a, b), axis)


def softmax_backward(g, p, axis=-1, row_sum=None):
    """``P ⊙ (dP − rowsum(dP ⊙ P))``: softmax's VJP, written once (the analytic chain and the tiled kernel call it).

    The Jacobian of softmax is diag(p) - p p^T; applied to g, row by row. A
    caller that already knows ``rowsum(dP ⊙ P)`` (the tiled kernel's ``D``,
    with its row axis kept) passes it as ``row_sum``. One new array.
    """
    grad_x = g - (_rowdot(g, p, axis) if row_sum is None else row_sum)
    grad_x *= p
    return grad_x


def _softmax_vjp(g, ans, x, axis=-1):
    return (softmax_backward(g, ans, axis),)


softmax = _op(
    "softmax",
    _softmax_forward,
    _softmax_vjp,
    ["{p} * ({g} - rowsum({g} * {p}))"],
    [r"\bar S = P \odot (\bar P - \mathrm{rowsum}(\bar P \odot P))"],
    output="p",
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


matmul = _op(
    "matmul",
    np.matmul,
    _matmul_vjp,
    ["{g} @ {b}^T", "{a}^T @ {g}"],
    [r"\bar A = \bar C B^{\top}", r"\bar B = A^{\top} \bar C"],
)


# ---------------------------------------------------------------- shape


cast = _op(
    "cast",
    lambda x, dtype: x.astype(dtype),
    # The gradient goes back in the input's own precision.
    lambda g, ans, x, dtype: (g.astype(x.dtype),),
    ["{g}, in the dtype of {x}"],
    [r"\bar x = \bar y"],
    example_params={"dtype": "float32"},
    label=lambda params: f"→{np.dtype(params['dtype']).name}" if "dtype" in params else "",
)


reshape = _op(
    "reshape",
    lambda x, shape: np.reshape(x, shape),
    lambda g, ans, x, shape: (np.reshape(g, np.shape(x)),),
    ["reshape({g}, shape of {x})"],
    [r"\bar x = \mathrm{reshape}(\bar y)"],
    example_params={"shape": (-1,)},
)


transpose = _op(
    "transpose",
    lambda x, axes: np.transpose(x, axes),
    # axes=None reverses the axes, and reversing is its own inverse.
    lambda g, ans, x, axes: (np.transpose(g, None if axes is None else np.argsort(axes)),),
    ["transpose({g}, inverse axes)"],
    [r"\bar x = \bar y^{\top}"],
    example_params={"axes": None},
)


# ---------------------------------------------------------------- for Transformer layers
#
# What LayerNorm, the feed-forward block, the embedding lookup and the
# cross-entropy loss are built from. Each is one primitive: forward, VJP and
# one formula per input, like the ops above.


def _sigmoid_forward(x):
    # 1 / (1 + e^-x) overflows for very negative x; with e = exp(-|x|) (never
    # more than 1) both branches are safe: 1/(1+e) for x >= 0, e/(1+e) below.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))[()]  # [()]: a float stays a number


sigmoid = _op(
    "sigmoid",
    _sigmoid_forward,
    lambda g, ans, x: (g * ans * (1.0 - ans),),
    ["{g} * s * (1 - s),  s = sigmoid({x})"],
    [r"\bar x = \bar y\, \sigma(x)\,(1 - \sigma(x))"],
)


def _sqrt_vjp(g, ans, x):
    # d√x/dx = 1 / (2√x): infinite at 0, said so rather than warned about.
    with np.errstate(divide="ignore", invalid="ignore"):
        return (0.5 * g / ans,)


sqrt = _op(
    "sqrt",
    np.sqrt,
    _sqrt_vjp,
    ["{g} / (2 * sqrt({x}))"],
    [r"\bar x = \bar y / (2\sqrt{x})"],
    domain="positive",
)


abs_ = _op(
    "abs",
    np.abs,
    # sign(0) = 0: at the kink no gradient passes (PyTorch's convention too).
    lambda g, ans, x: (g * np.sign(x),),
    ["{g} * sign({x})"],
    [r"\bar x = \bar y\, \mathrm{sign}(x)"],
)


def _winner_share(wins, ties, g):
    """1 where an operand won, 1/2 where it tied, 0 where it lost — in ``g``'s dtype (a float for Scalars)."""
    share = wins + 0.5 * ties
    if isinstance(share, np.ndarray):
        return share.astype(np.result_type(g), copy=False)
    return float(share)


def _maximum_vjp(g, ans, a, b):
    # The gradient goes to the larger operand; a tie shares it equally, as
    # max's does (and the central difference agrees: half of each side).
    share_a = _winner_share(a > b, a == b, g)
    return unbroadcast(g * share_a, a), unbroadcast(g * (1.0 - share_a), b)


maximum = _op(
    "maximum",
    np.maximum,
    _maximum_vjp,
    ["{g} where {a} > {b} (half at a tie)", "{g} where {b} > {a} (half at a tie)"],
    [r"\bar a = \bar y\,[a > b]", r"\bar b = \bar y\,[b > a]"],
)


def _minimum_vjp(g, ans, a, b):
    share_a = _winner_share(a < b, a == b, g)
    return unbroadcast(g * share_a, a), unbroadcast(g * (1.0 - share_a), b)


minimum = _op(
    "minimum",
    np.minimum,
    _minimum_vjp,
    ["{g} where {a} < {b} (half at a tie)", "{g} where {b} < {a} (half at a tie)"],
    [r"\bar a = \bar y\,[a < b]", r"\bar b = \bar y\,[b < a]"],
)


def _kept_axes(value, axis, keepdims):
    """A reduced result with its reduced axes back as size 1, so it broadcasts against the input."""
    if keepdims or axis is None:
        return value
    return np.expand_dims(value, axis)


def _logsumexp_forward(x, axis=None, keepdims=False):
    # log Σ exp(x) = m + log Σ exp(x − m) with m the max: no exp can overflow,
    # and the largest term is exp(0) = 1, so the log never sees 0.
    peak = np.max(x, axis=axis, keepdims=True)
    # Where the max is infinite it is the answer (a row of -inf gives -inf, a
    # row holding +inf gives +inf, as in PyTorch); shifting by it would make
    # inf - inf = NaN, so those rows are shifted by 0 and the exp/log say it.
    shift = np.where(np.isinf(peak), 0.0, peak)
    with np.errstate(over="ignore", divide="ignore"):  # exp(+inf) = inf, log(0) = -inf: the edge values
        total = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
    return total if keepdims else np.squeeze(total, axis=axis)


def _logsumexp_vjp(g, ans, x, axis=None, keepdims=False):
    # d/dx_i log Σ exp(x) = exp(x_i) / Σ exp(x) = softmax(x)_i = exp(x_i − y).
    result = _kept_axes(ans, axis, keepdims)
    with np.errstate(invalid="ignore"):  # inf - inf where the result is infinite: replaced below
        weights = np.exp(x - result)
    infinite = np.isinf(result)
    if np.any(infinite):
        # At an infinite result softmax's limit is max's gradient: the entries
        # equal to the max (the +inf ones; in a row of -inf, all) share it.
        # (PyTorch gives NaN there.)
        winners = x == result
        with np.errstate(invalid="ignore"):  # 0/0 in the finite rows, which keep their weights
            share = winners / np.sum(winners, axis=axis, keepdims=True, dtype=x.dtype)
        weights = np.where(infinite, share, weights)
    return (_kept_axes(g, axis, keepdims) * weights,)


logsumexp = _op(
    "logsumexp",
    _logsumexp_forward,
    _logsumexp_vjp,
    ["broadcast({g}) * softmax({x})"],
    [r"\bar x = \bar y\, \mathrm{softmax}(x)"],
    note="a row of -inf gives -inf and one holding +inf gives +inf, where the entries equal to the max share g",
    example_params={"axis": -1, "keepdims": False},
)


def _log_softmax_forward(x, axis=-1):
    # log softmax(x) = x − logsumexp(x), with the row max taken out first
    # (see logsumexp): finite for any finite x, even where softmax is 0.
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _log_softmax_vjp(g, ans, x, axis=-1):
    # y = x − logsumexp(x), so dx = g − softmax(x) · rowsum(g), and softmax(x) = exp(y).
    return (g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True),)


log_softmax = _op(
    "log_softmax",
    _log_softmax_forward,
    _log_softmax_vjp,
    ["{g} - exp({y}) * rowsum({g})"],
    [r"\bar x = \bar y - e^{y}\, \mathrm{rowsum}(\bar y)"],
    example_params={"axis": -1},
)


#: GELU's tanh approximation (Hendrycks & Gimpel; PyTorch's ``approximate="tanh"``):
#: gelu(x) = x/2 · (1 + tanh(c (x + k x³))),  c = √(2/π),  k = 0.044715.
GELU_C = math.sqrt(2.0 / math.pi)
GELU_K = 0.044715
# Beyond |x| = 20, tanh(c (x + k x³)) is exactly ±1 in float64 (and float32):
# the cube is taken of x clipped there, so it cannot overflow (x³ does above
# ~5.6e102) and the numbers inside the range are unchanged.
_GELU_SATURATED = 20.0


def _saturating(x):
    """``x`` clipped to ±20, where tanh(c (x + k x³)) is already exactly ±1: its cube cannot overflow."""
    return np.clip(x, -_GELU_SATURATED, _GELU_SATURATED)


def _gelu_forward(x):
    inner = _saturating(x)
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (inner + GELU_K * inner * inner * inner)))


def _gelu_vjp(g, ans, x):
    # Product rule on x/2 · (1 + t), t = tanh(u), u = c (x + k x³):
    #   d/dx = (1 + t)/2 + x/2 · (1 − t²) · c (1 + 3k x²)
    # (past the clip 1 − t² is exactly 0, so the clipped x changes nothing there)
    x = _saturating(x)
    t = np.tanh(GELU_C * (x + GELU_K * x * x * x))
    slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_K * x * x)
    return (g * slope,)


gelu = _op(
    "gelu",
    _gelu_forward,
    _gelu_vjp,
    ["{g} * ((1 + t)/2 + {x}/2 * (1 - t**2) * c * (1 + 3k {x}**2)),  t = tanh(c ({x} + k {x}**3))"],
    [r"\bar x = \bar y \left(\tfrac{1 + t}{2} + \tfrac{x}{2}(1 - t^2)\, c\,(1 + 3k x^2)\right)"],
    note="tanh approximation: c = sqrt(2/pi), k = 0.044715",
)


def _axis_index(ndim, axis, indices):
    """The numpy index that picks ``indices`` along ``axis`` (every other axis whole)."""
    return (slice(None),) * (axis % ndim) + (indices,)


def _take_vjp(g, ans, x, indices, axis=0):
    # Each output entry is a copy of one entry of x, so its gradient goes back
    # there; an index used twice collects both gradients (a scatter-add:
    # np.add.at adds repeated indices, where grad[idx] += g would keep one).
    grad = np.zeros(np.shape(x), dtype=np.result_type(g))
    np.add.at(grad, _axis_index(np.ndim(x), axis, indices), g)
    return (grad,)


take = _op(
    "take",
    lambda x, indices, axis=0: np.take(x, indices, axis=axis),
    _take_vjp,
    ["scatter-add of {g} into zeros at {indices} (repeated indices add up)"],
    [r"\bar x_{j} = \sum_{i:\ \mathrm{idx}_i = j} \bar y_i"],
    example_params={"indices": np.array([0, 0]), "axis": 0},
    label=lambda params: f"[{_index_text(params.get('indices'))}]",
)


def _index_text(indices):
    indices = np.asarray(indices)
    if indices.size <= 4:
        return ", ".join(str(i) for i in indices.ravel())
    return f"{indices.size} indices"


def _index_vjp(g, ans, x, key):
    # x[key] reads some entries of x (a slice, a row, a picked list): each
    # read entry gets its gradient back, the others get 0. An entry read
    # twice (a repeated integer index) collects both: np.add.at adds them.
    grad = np.zeros(np.shape(x), dtype=np.result_type(g))
    np.add.at(grad, key, g)
    return (grad,)


index = _op(
    "index",
    lambda x, key: x[key],
    _index_vjp,
    ["{g} put back where it was read from {x}, 0 elsewhere (repeated entries add up)"],
    [r"\bar x_{[\mathrm{key}]} \mathrel{+}= \bar y"],
    example_params={"key": (slice(None), np.array([0, 0]))},
    label=lambda params: f"[{_key_text(params.get('key', ()))}]",
)


def _key_text(key):
    """``x[...]``'s key as it was written: ``1:3, :, 0``, ``..., [0, 2]``, ``mask[2, 3]``."""
    parts = []
    for part in key:
        if isinstance(part, np.ndarray):
            parts.append(f"mask{list(part.shape)}" if part.dtype == np.bool_ else f"[{_index_text(part)}]")
        else:
            parts.append(index_part_text(part))
    return ", ".join(parts)


def _concatenate_vjp(g, ans, a, b, axis=0):
    # The output is a and b side by side: each takes back its own slice of g.
    grad_a, grad_b = np.split(g, [np.shape(a)[axis]], axis=axis)
    return grad_a, grad_b


concatenate = _op(
    "concatenate",
    lambda a, b, axis=0: np.concatenate((a, b), axis=axis),
    _concatenate_vjp,
    ["the part of {g} where {a} sits (along axis)", "the part of {g} where {b} sits (along axis)"],
    [r"\bar a = \bar y_{[:n_a]}", r"\bar b = \bar y_{[n_a:]}"],
    example_params={"axis": 0},
)
