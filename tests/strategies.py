"""Hypothesis strategies: inputs and parameters for every primitive op.

``OP_CASES`` maps each op name in :data:`microtape.ops.OPS` to a strategy
that draws an :class:`OpCase` — float64 numpy inputs (one per operand) and
the op's keyword parameters. ``tests/ops/test_ops.py`` loops over the registry
and fails for any op that has no entry here, so a newly registered op cannot
slip through untested: add its strategy below.

The inputs are chosen so that central finite differences are a fair judge:

* "real" inputs have magnitudes in [0.25, 2]: far from relu's kink at 0 and
  from division's pole, and small enough that exp() stays tame;
* "positive" inputs (an op's ``domain``) lie in [0.5, 2.5], "above_one" inputs (arccosh) in [1.5, 3.5];
* inputs of ``max`` are distinct multiples of 1/8, so no two entries are
  within a finite-difference step of a tie; ``maximum``/``minimum`` get
  multiples of 1/8 too, so two operands are either tied exactly (the
  gradient is shared, and so is the central difference) or far apart;
* ``scatter_add`` and ``index_add`` (the VJPs of ``take`` and ``index``) get
  the cases of the op they undo; ``broadcast_to`` a shape its input broadcasts to;
* ``take`` gets integer indices with repeats and negative ones (the
  scatter-add must add a repeated index's gradients); ``index`` gets numpy
  keys: integers, slices with any step, ``...``, ``None``, an integer array
  with repeats, or a boolean mask.

Binary ops get shapes that broadcast (``mutually_broadcastable_shapes``),
including 0-d arrays and operands of different rank; elementwise ops (one
input or two) also get empty arrays (an axis of length 0). The tiled attention core
(``tiled_attention``) gets heads ``[N, T, D]`` with ``Tq`` and ``Tk`` free,
block sizes that divide ``T``, do not, or exceed it, causal or not, masks with
``-inf``, ``-1e9`` or small finite biases (every row keeps a key it may see,
sometimes only in a later block) and dropout. The convolutions get 1-D and 2-D
cases with strides and paddings where the last inputs fall outside every window;
max pooling gets entries 1/8 apart (no tie within a finite-difference step).
"""

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from microtape.nn.dropout_mask import DropoutMask
from microtape.ops import OPS

__all__ = [
    "OpCase",
    "OP_CASES",
    "CONSTANT_INPUTS",
    "real_arrays",
    "positive_arrays",
    "shapes",
    "broadcastable_pair",
    "axis_params",
]

MAX_SIDE = 4
MAX_DIMS = 3

# Inputs an op treats as constants (masks): their VJP entry must be None. Read
# from the ops themselves (each op says which inputs are not differentiable).
CONSTANT_INPUTS = {name: op.constant_inputs for name, op in OPS.items() if op.constant_inputs}


class OpCase(NamedTuple):
    """One drawn call of an op: its inputs (numpy arrays) and its parameters."""

    inputs: tuple
    params: dict


# ---------------------------------------------------------------- elements and arrays

REAL = st.one_of(
    st.floats(-2.0, -0.25, allow_nan=False, allow_infinity=False),
    st.floats(0.25, 2.0, allow_nan=False, allow_infinity=False),
)
POSITIVE = st.floats(0.5, 2.5, allow_nan=False, allow_infinity=False)
UNIT = st.floats(-0.9, 0.9, allow_nan=False, allow_infinity=False)
ABOVE_ONE = st.floats(1.5, 3.5, allow_nan=False, allow_infinity=False)


def shapes(min_dims=0, max_dims=MAX_DIMS, min_side=1):
    """Array shapes with up to ``max_dims`` axes of ``min_side``..MAX_SIDE entries (0: empty arrays too)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=MAX_SIDE)


def real_arrays(shape):
    return hnp.arrays(np.float64, shape, elements=REAL)


def positive_arrays(shape):
    return hnp.arrays(np.float64, shape, elements=POSITIVE)


def _domain_arrays(op, shape):
    if op.domain == "positive":
        return positive_arrays(shape)
    if op.domain == "real":
        return real_arrays(shape)
    if op.domain == "unit":
        return hnp.arrays(np.float64, shape, elements=UNIT)
    if op.domain == "above_one":
        return hnp.arrays(np.float64, shape, elements=ABOVE_ONE)
    raise ValueError(f"tests/strategies.py: unknown domain {op.domain!r} of op {op.name!r}")


@st.composite
def distinct_arrays(draw, shape):
    """Arrays whose entries are pairwise at least 1/8 apart (no near-ties)."""
    size = int(np.prod(shape, dtype=int))
    values = draw(st.lists(st.integers(-40, 40), min_size=size, max_size=size, unique=True))
    return np.array(values, dtype=np.float64).reshape(shape) / 8.0


def broadcastable_pair(min_dims=0, max_dims=MAX_DIMS, min_side=1):
    """Two shapes that broadcast against each other (ranks may differ; ``min_side=0``: empty ones too)."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=2, min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=MAX_SIDE
    ).map(lambda result: result.input_shapes)


@st.composite
def axis_params(draw, ndim, example):
    """``{"axis": ..., "keepdims": ...}``: the op's example, or None, an int or a tuple of axes."""
    choice = draw(st.sampled_from(["example", "none", "int", "tuple"]))
    keepdims = draw(st.booleans())
    if choice == "example":
        return dict(example)
    if choice == "none":
        return {"axis": None, "keepdims": keepdims}
    if choice == "int":
        return {"axis": draw(st.integers(-ndim, ndim - 1)), "keepdims": keepdims}
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return {"axis": tuple(axes), "keepdims": keepdims}


# ---------------------------------------------------------------- per-op cases


def _unary(op, params=None):
    """One input of any shape (0-d and empty included) from the op's domain."""
    params = st.just(dict(op.example_params)) if params is None else params
    return st.builds(
        lambda x, p: OpCase((x,), p),
        shapes(min_side=0).flatmap(lambda shape: _domain_arrays(op, shape)),
        params,
    )


@st.composite
def _binary(draw, op):
    shape_a, shape_b = draw(broadcastable_pair(min_side=0))
    return OpCase((draw(_domain_arrays(op, shape_a)), draw(_domain_arrays(op, shape_b))), {})


@st.composite
def _add_constant(draw):
    shape_x, shape_mask = draw(broadcastable_pair())
    return OpCase((draw(real_arrays(shape_x)), draw(real_arrays(shape_mask))), {})


@st.composite
def _dropout(draw):
    shape = draw(shapes())
    p = draw(st.sampled_from([0.25, 0.5]))
    kept = draw(hnp.arrays(np.bool_, shape))
    keep = kept / (1.0 - p)  # inverted dropout: the saved mask is pre-scaled
    return OpCase((draw(real_arrays(shape)), keep), {})


@st.composite
def _reduction(draw, op, distinct=False):
    shape = draw(shapes(min_dims=1))
    x = draw(distinct_arrays(shape) if distinct else _domain_arrays(op, shape))
    return OpCase((x,), draw(axis_params(len(shape), op.example_params)))


@st.composite
def _softmax(draw, op):
    """One axis (the example's or any), several (a tuple) or all (None, also of a 0-d array)."""
    shape = draw(shapes(min_dims=0))
    if not shape:
        return OpCase((draw(real_arrays(shape)),), {"axis": None})
    several = st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True).map(tuple)
    axis = draw(
        st.one_of(st.just(op.example_params["axis"]), st.integers(-len(shape), len(shape) - 1), st.none(), several)
    )
    return OpCase((draw(real_arrays(shape)),), {"axis": axis})


@st.composite
def _matmul(draw):
    """[..., n, k] @ [..., k, m] with broadcast batch axes, and the 1-D cases."""
    n, k, m = draw(st.integers(1, MAX_SIDE)), draw(st.integers(1, MAX_SIDE)), draw(st.integers(1, MAX_SIDE))
    batch_a, batch_b = draw(broadcastable_pair(max_dims=2))
    a_is_vector, b_is_vector = draw(st.booleans()), draw(st.booleans())
    shape_a = (k,) if a_is_vector else (*batch_a, n, k)
    shape_b = (k,) if b_is_vector else (*batch_b, k, m)
    return OpCase((draw(real_arrays(shape_a)), draw(real_arrays(shape_b))), {})


@st.composite
def _reshape(draw, op):
    shape = draw(shapes())
    size = int(np.prod(shape, dtype=int))
    target = draw(
        st.sampled_from(
            [
                tuple(op.example_params["shape"]),
                (size,),
                (1, size),
                (size, -1),
                tuple(reversed(shape)),
                (*shape, 1),
            ]
        )
    )
    return OpCase((draw(real_arrays(shape)),), {"shape": target})


@st.composite
def _transpose(draw, op):
    shape = draw(shapes())
    axes = draw(st.one_of(st.just(op.example_params["axes"]), st.permutations(range(len(shape))).map(tuple)))
    return OpCase((draw(real_arrays(shape)),), {"axes": axes})


@st.composite
def attention_mask(draw, q_len, k_len, causal):
    """None, or an additive ``[Tq, Tk]`` mask: suppressed with -inf or -1e9, or small finite biases.

    Every row keeps one key it may attend to (causally allowed, when causal),
    drawn anywhere in the row — so it may sit in a later block than all the
    row's other keys.
    """
    kind = draw(st.sampled_from([None, "-inf", "-1e9", "bias"]))
    if kind is None:
        return None
    if kind == "bias":
        return draw(hnp.arrays(np.float64, (q_len, k_len), elements=st.floats(-1.0, 1.0)))
    hidden = draw(hnp.arrays(np.bool_, (q_len, k_len)))
    for row in range(q_len):
        last = min(row, k_len - 1) if causal else k_len - 1
        hidden[row, draw(st.integers(0, last))] = False
    return np.where(hidden, -np.inf if kind == "-inf" else -1e9, 0.0)


@st.composite
def _tiled_attention(draw):
    """Q ``[N, Tq, D]``, K and V ``[N, Tk, D]``; block size, causal, mask and dropout as parameters."""
    heads, q_len, k_len, depth = (draw(st.integers(1, top)) for top in (2, 5, 5, 3))
    causal = draw(st.booleans())
    params = {"block_size": draw(st.integers(1, 6)), "causal": causal}
    mask = draw(attention_mask(q_len, k_len, causal))
    if mask is not None:
        params["mask"] = mask
    if draw(st.booleans()):
        params["dropout"] = DropoutMask(draw(st.sampled_from([0.25, 0.5])), draw(st.integers(0, 2**63)), 0)
    q = draw(real_arrays((heads, q_len, depth)))
    k, v = (draw(real_arrays((heads, k_len, depth))) for _ in range(2))
    return OpCase((q, k, v), params)


@st.composite
def _eighths_pair(draw):
    """Two broadcastable arrays of multiples of 1/8: exact ties or gaps far wider than a step."""
    shape_a, shape_b = draw(broadcastable_pair())
    eighths = st.integers(-16, 16).map(lambda n: n / 8.0)
    return OpCase(
        (
            draw(hnp.arrays(np.float64, shape_a, elements=eighths)),
            draw(hnp.arrays(np.float64, shape_b, elements=eighths)),
        ),
        {},
    )


@st.composite
def _take(draw):
    """An array, an axis and integer indices along it (repeats and negative indices included)."""
    shape = draw(shapes(min_dims=1))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    length = shape[axis]
    index_shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=5))
    indices = draw(hnp.arrays(np.intp, index_shape, elements=st.integers(-length, length - 1)))
    return OpCase((draw(real_arrays(shape)),), {"indices": indices, "axis": axis})


@st.composite
def _index(draw):
    """An array and a numpy key for it: ints, slices (any step), ``...``, ``None``, one integer array, or a mask."""
    shape = draw(shapes(min_dims=1))
    x = draw(real_arrays(shape))
    if draw(st.booleans()) and draw(st.booleans()):
        leading = draw(st.integers(1, len(shape)))
        return OpCase((x,), {"key": (draw(hnp.arrays(np.bool_, shape[:leading])),)})
    key, used_array = [], False
    for length in shape:
        kind = draw(st.sampled_from(["int", "slice", "array", "all"]))
        if kind == "int":
            key.append(draw(st.integers(-length, length - 1)))
        elif kind == "slice":
            ends = st.one_of(st.none(), st.integers(-length - 1, length + 1))
            key.append(slice(draw(ends), draw(ends), draw(st.sampled_from([None, 1, 2, -1, -2]))))
        elif kind == "array" and not used_array:  # two arrays would have to broadcast together
            used_array = True
            size = draw(st.integers(1, 4))
            key.append(draw(hnp.arrays(np.intp, (size,), elements=st.integers(-length, length - 1))))
        else:
            key.append(slice(None))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(key)))
        key = key[:cut] + [Ellipsis]
    return OpCase((x,), {"key": tuple(key)})


@st.composite
def _concatenate(draw):
    """Two arrays that differ only along the joining axis."""
    shape = draw(shapes(min_dims=1))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    other = list(shape)
    other[axis] = draw(st.integers(1, MAX_SIDE))
    return OpCase((draw(real_arrays(shape)), draw(real_arrays(tuple(other)))), {"axis": axis})


@st.composite
def _broadcast_to(draw):
    """An array and a shape it broadcasts to (new leading axes, stretched axes of size 1)."""
    shape, target = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=1, min_dims=0, max_dims=MAX_DIMS, max_side=MAX_SIDE).map(
            lambda result: (result.input_shapes[0], result.result_shape)
        )
    )
    extra = draw(st.lists(st.integers(1, 3), max_size=1))
    return OpCase((draw(real_arrays(shape)),), {"shape": (*extra, *target)})


@st.composite
def _scatter_add(draw):
    """What take's gradient scatters: values of take's output shape, put back into ``shape``."""
    (x,), params = draw(_take())
    taken = np.take(x, params["indices"], axis=params["axis"])
    return OpCase((draw(real_arrays(taken.shape)),), {**params, "shape": x.shape})


@st.composite
def _index_add(draw):
    """What index's gradient puts back: values of the read entries' shape, added into ``shape``."""
    (x,), params = draw(_index())
    read = x[params["key"]]
    return OpCase((draw(real_arrays(read.shape)),), {**params, "shape": x.shape})


@st.composite
def _tan(draw):
    """Away from tan's poles at ±π/2, where a central difference would straddle infinity."""
    shape = draw(shapes())
    return OpCase((draw(hnp.arrays(np.float64, shape, elements=st.floats(-1.2, 1.2))),), {})


@st.composite
def _power(draw):
    """A positive base (ln a is real) and an exponent of any sign, broadcasting."""
    shape_a, shape_b = draw(broadcastable_pair())
    return OpCase((draw(positive_arrays(shape_a)), draw(real_arrays(shape_b))), {})


@st.composite
def _clip(draw):
    """Entries on a grid of 1/8 shifted by 1/16: never within a step of the bounds (multiples of 1/2)."""
    shape = draw(shapes())
    off_grid = st.integers(-20, 19).map(lambda n: (n + 0.5) / 8.0)
    bound = st.sampled_from([None, -1.0, -0.5, 0.0, 0.5, 1.0])
    lower, upper = sorted((draw(bound), draw(bound)), key=lambda b: -np.inf if b is None else b)
    if lower is None and upper is None:
        lower = -0.5
    return OpCase((draw(hnp.arrays(np.float64, shape, elements=off_grid)),), {"lower": lower, "upper": upper})


@st.composite
def _where(draw):
    """A 0/1 condition (as a Tensor holds it) and two values, all three broadcasting together."""
    shapes_ = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=MAX_DIMS, max_side=MAX_SIDE)
    ).input_shapes
    condition = draw(hnp.arrays(np.bool_, shapes_[0])).astype(np.float64)
    return OpCase((condition, draw(real_arrays(shapes_[1])), draw(real_arrays(shapes_[2]))), {})


@st.composite
def _with_zeros(draw, op, scan=False):
    """Real entries, some exactly 0 (prod and cumprod are linear in each entry: differences stay exact)."""
    shape = draw(shapes(min_dims=1))
    x = draw(hnp.arrays(np.float64, shape, elements=st.one_of(REAL, st.just(0.0))))
    if scan:
        return OpCase((x,), {"axis": draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))})
    return OpCase((x,), draw(axis_params(len(shape), op.example_params)))


@st.composite
def _cumsum(draw):
    shape = draw(shapes(min_dims=1))
    axis = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    return OpCase((draw(real_arrays(shape)),), {"axis": axis})


# (subscripts, the letters' sizes drawn) — matmul, dot, outer, a batch, a trace-free transpose,
# sums of one operand (the 0-d second operand "" is the constant 1), a letter only one operand has.
EINSUM_PATTERNS = [
    "ij,jk->ik", "i,i->", "ij,j->i", "bij,bjk->bik", "i,j->ij", "ij,->ji", "ij,->", "ijk,ik->j",
    "ij,jk", "ij,ij->ij", "ij,k->i", "ij,->i",
]  # fmt: skip


@st.composite
def _einsum(draw):
    subscripts = draw(st.sampled_from(EINSUM_PATTERNS))
    letters = sorted(set(subscripts) - set(",->"))
    sizes = {c: draw(st.integers(1, 3)) for c in letters}
    left, right = subscripts.split("->")[0].split(",")
    a, b = (draw(real_arrays(tuple(sizes[c] for c in part))) for part in (left, right))
    return OpCase((a, b), {"subscripts": subscripts})


@st.composite
def _conv_geometry(draw):
    """1-D or 2-D: batch, channels, kernel, stride, padding and an input length every window fits."""
    n = draw(st.sampled_from([1, 2]))
    batch, c_in, c_out = (draw(st.integers(1, 2)) for _ in range(3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(n))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(n))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(n))
    spatial = tuple(draw(st.integers(max(1, k - 2 * p), max(1, k - 2 * p) + 3)) for k, p in zip(kernel, padding))
    out = tuple((length + 2 * p - k) // s + 1 for length, k, s, p in zip(spatial, kernel, stride, padding))
    params = {"stride": stride, "padding": padding}
    return (batch, c_in, *spatial), (c_out, c_in, *kernel), (batch, c_out, *out), params


@st.composite
def _conv(draw):
    """x ``[B, C_in, *spatial]`` and weight ``[C_out, C_in, *kernel]``, 1-D or 2-D, any stride and padding."""
    x_shape, w_shape, _, params = draw(_conv_geometry())
    return OpCase((draw(real_arrays(x_shape)), draw(real_arrays(w_shape))), params)


@st.composite
def _conv_transpose(draw):
    """A gradient z in a convolution's output layout and its weight; the input's shape as a parameter."""
    x_shape, w_shape, z_shape, params = draw(_conv_geometry())
    return OpCase((draw(real_arrays(z_shape)), draw(real_arrays(w_shape))), {"input_shape": x_shape, **params})


@st.composite
def _conv_weight_grad(draw):
    """An input x and a gradient z in the output layout; the kernel's size as a parameter."""
    x_shape, w_shape, z_shape, params = draw(_conv_geometry())
    return OpCase((draw(real_arrays(x_shape)), draw(real_arrays(z_shape))), {"kernel_size": w_shape[2:], **params})


@st.composite
def _pool(draw, distinct):
    """``[B, C, H, W]`` with a kernel that fits and any stride (max pooling: entries 1/8 apart, no ties)."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    channels = 1 if distinct else draw(st.integers(1, 2))  # distinct entries: at most 81 of them
    shape = (draw(st.integers(1, 2)), channels, *(draw(st.integers(k, k + 3)) for k in kernel))
    x = draw(distinct_arrays(shape) if distinct else real_arrays(shape))
    return OpCase((x,), {"kernel": kernel, "stride": stride})


def _build_cases():
    cases = {}
    for name in (
        "neg", "exp", "log", "tanh", "relu", "sigmoid", "sqrt", "abs", "gelu", "sin", "cos", "arcsin", "arccos",
        "arctan", "sinh", "cosh", "log1p", "expm1", "log2", "log10", "exp2", "cbrt", "square", "reciprocal",
        "arcsinh", "arccosh", "arctanh",
    ):  # fmt: skip
        cases[name] = _unary(OPS[name])
    cases["tan"] = _tan()
    cases["power"] = _power()
    cases["clip"] = _clip()
    cases["where"] = _where()
    cases["min"] = _reduction(OPS["min"], distinct=True)
    cases["norm"] = _reduction(OPS["norm"])
    cases["prod"] = _with_zeros(OPS["prod"])
    cases["cumprod"] = _with_zeros(OPS["cumprod"], scan=True)
    cases["cumsum"] = _cumsum()
    cases["einsum"] = _einsum()
    cases["maximum"] = _eighths_pair()
    cases["minimum"] = _eighths_pair()
    cases["logsumexp"] = _reduction(OPS["logsumexp"])
    cases["log_softmax"] = _softmax(OPS["log_softmax"])
    cases["take"] = _take()
    cases["index"] = _index()
    cases["scatter_add"] = _scatter_add()
    cases["index_add"] = _index_add()
    cases["broadcast_to"] = _broadcast_to()
    cases["concatenate"] = _concatenate()
    cases["pow"] = _unary(
        OPS["pow"],
        st.sampled_from([OPS["pow"].example_params, {"exponent": 2.0}, {"exponent": -1.5}, {"exponent": 3.0}]),
    )
    cases["scale"] = _unary(
        OPS["scale"],
        st.one_of(st.just(OPS["scale"].example_params), st.floats(-3, 3).map(lambda f: {"factor": f})),
    )
    cases["cast"] = _unary(
        OPS["cast"],
        st.sampled_from([OPS["cast"].example_params, {"dtype": "float64"}, {"dtype": np.dtype(np.float32)}]),
    )
    for name in ("add", "sub", "mul", "div", "logaddexp", "logaddexp2", "arctan2"):
        cases[name] = _binary(OPS[name])
    cases["add_constant"] = _add_constant()
    cases["dropout"] = _dropout()
    cases["sum"] = _reduction(OPS["sum"])
    cases["mean"] = _reduction(OPS["mean"])
    cases["max"] = _reduction(OPS["max"], distinct=True)
    cases["softmax"] = _softmax(OPS["softmax"])
    cases["matmul"] = _matmul()
    cases["reshape"] = _reshape(OPS["reshape"])
    cases["transpose"] = _transpose(OPS["transpose"])
    cases["tiled_attention"] = _tiled_attention()
    cases["conv"] = _conv()
    cases["conv_transpose"] = _conv_transpose()
    cases["conv_weight_grad"] = _conv_weight_grad()
    cases["max_pool2d"] = _pool(distinct=True)
    cases["avg_pool2d"] = _pool(distinct=False)
    return cases


OP_CASES = _build_cases()
