"""Random small graphs of registered ops, drawn by hypothesis (issue 21's property suite).

A graph is drawn as a *plan*: leaves of one random shape (and, where it
matters, random float dtypes), then a few steps, each one registered op (or a
short round trip of them, like ``reshape`` there and back) on nodes drawn from
what exists so far, with random axes and parameters. Every step keeps the
leaves' shape (a reduction meets its input again), so any node can meet any
other. Replaying the plan on arrays gives the graph; three properties:

* the taped gradient of ``sum(w * out)`` agrees with float64 central finite
  differences for every leaf;
* every gradient has its leaf's dtype (float32 leaves mixed with float64 ones),
  and no warning escapes, forward or backward;
* a refused call on the finished graph (a NaN or misshapen seed, a ``.grad``
  that cannot take the sum, a bad axis) leaves every leaf's data and gradient,
  and the enclosing tape, as they were.

``test_every_registered_op_appears_in_some_step`` keeps the table honest: a
new built-in op must get a step here (or a reason it cannot).
"""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import microtape as mt
from microtape.ops import OPS

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Built-in ops that no step below uses, and why.
NOT_IN_GRAPHS = {
    "tiled_attention": "needs heads [N, T, D] and a block schedule; tests/ops/test_ops.py, nn/test_tiled.py draw it",
}


def _axis(shape, value):
    return value % len(shape)


# Each step: (inputs it takes, function of (nodes, params, shape) -> node, params strategy of the shape).
# The functions run on Tensors only through their methods and microtape's functions: each is one registered
# op, or a short chain of them that comes back to the leaves' shape.
def _matmul_step(a, b, shape):
    """``a @ (bᵀ b) / n`` keeps a's shape (batched over leading axes); for vectors ``a * (b · b) / n``."""
    if len(shape) == 1:
        return a * (b @ b).scale(1 / shape[0])
    return a @ (b.swapaxes(-1, -2) @ b).scale(1 / shape[-2])


def _concatenate_step(a, b, axis, shape):
    """``a`` and ``b`` joined along ``axis``, then the second half read back (``b``'s part) and doubled."""
    axis = axis % len(shape)
    joined = mt.concatenate([a, b], axis=axis)
    return joined[(slice(None),) * axis + (slice(shape[axis], None),)] * 2.0


def _letters(shape):
    """One einsum letter per axis: ``"xy"`` for a matrix."""
    return "xyz"[: len(shape)]


def _pick(shape):
    """Integer indices along axis 0 (repeats allowed) keeping its length: the take and index ops."""
    return st.lists(st.integers(0, shape[0] - 1), min_size=shape[0], max_size=shape[0]).map(np.array)


def _row(x, *lead):
    """A node of any shape as one row ``[*lead, N]`` (the layout a convolution or a pooling reads)."""
    return x.reshape(*lead, x.size)


def _conv_step(a, b, shape):
    """``a`` correlated with the kernel ``b``, zero-padded so every shift is seen; the first N outputs kept."""
    size = a.size
    full = mt.conv1d(_row(a, 1, 1), _row(b, 1, 1), padding=size - 1)  # [1, 1, 2N - 1]
    return full[0, 0, :size].reshape(shape)


def _conv_transpose_step(a, b, shape):
    """``a`` sent back through the kernel ``b`` to an input of length 2N − 1 (the first N entries kept)."""
    size = a.size
    params = {"input_shape": (1, 1, 2 * size - 1), "stride": (1,), "padding": (0,)}
    full = mt.ops.conv_transpose(_row(a, 1, 1), _row(b, 1, 1), **params)
    return full[0, 0, :size].reshape(shape)


def _conv_weight_grad_step(a, b, shape):
    """The weight gradient of a 1×1 convolution (``Σ a·b``), scaling ``a``."""
    params = {"kernel_size": (1,), "stride": (1,), "padding": (0,)}
    return a * mt.ops.conv_weight_grad(_row(a, 1, 1), _row(b, 1, 1), **params).reshape(())


STEPS = {
    "conv": (2, lambda n, p, s: _conv_step(n[0], n[1], s), None),
    "conv_transpose": (2, lambda n, p, s: _conv_transpose_step(n[0], n[1], s), None),
    "conv_weight_grad": (2, lambda n, p, s: _conv_weight_grad_step(n[0], n[1], s), None),
    # 1×1 windows: no two entries share a window, so no tie for finite differences to trip on.
    "max_pool2d": (1, lambda n, p, s: mt.max_pool2d(_row(n[0], 1, 1, 1), 1).reshape(s), None),
    "avg_pool2d": (1, lambda n, p, s: n[0] - mt.avg_pool2d(_row(n[0], 1, 1, 1), (1, n[0].size)).reshape(()), None),
    "add": (2, lambda n, p, s: n[0] + n[1], None),
    "sub": (2, lambda n, p, s: n[0] - n[1], None),
    "mul": (2, lambda n, p, s: n[0] * n[1], None),
    "div": (2, lambda n, p, s: n[0] / (n[1].sigmoid() + 0.5), None),
    "maximum": (2, lambda n, p, s: n[0].maximum(n[1]), None),
    "minimum": (2, lambda n, p, s: n[0].minimum(n[1]), None),
    "matmul": (2, lambda n, p, s: _matmul_step(n[0], n[1], s), None),
    "concatenate": (2, lambda n, p, s: _concatenate_step(n[0], n[1], p, s), "axis"),
    "neg": (1, lambda n, p, s: -n[0], None),
    "scale": (1, lambda n, p, s: n[0].scale(p), st.sampled_from([-1.5, 0.5, 2.0])),
    "tanh": (1, lambda n, p, s: n[0].tanh(), None),
    "sigmoid": (1, lambda n, p, s: n[0].sigmoid(), None),
    "gelu": (1, lambda n, p, s: n[0].gelu(), None),
    "relu": (1, lambda n, p, s: n[0].relu(), None),
    "abs": (1, lambda n, p, s: abs(n[0]), None),
    "exp": (1, lambda n, p, s: n[0].tanh().exp(), None),
    "log": (1, lambda n, p, s: (n[0].sigmoid() + 0.5).log(), None),
    "sqrt": (1, lambda n, p, s: (n[0] * n[0] + 1.0).sqrt(), None),
    "pow": (1, lambda n, p, s: (n[0].sigmoid() + 0.5) ** p, st.sampled_from([-2.0, 0.5, 1.5, 3.0])),
    # Reductions keep their axis and meet their input again, so every node has the leaves' shape.
    "sum": (1, lambda n, p, s: n[0] + n[0].sum(axis=p, keepdims=True).scale(0.25), "axis"),
    "mean": (1, lambda n, p, s: n[0] - n[0].mean(axis=p, keepdims=True), "axis"),
    "max": (1, lambda n, p, s: n[0] - n[0].max(axis=p, keepdims=True), "axis"),
    "logsumexp": (1, lambda n, p, s: n[0] - n[0].logsumexp(axis=p, keepdims=True), "axis"),
    "softmax": (1, lambda n, p, s: n[0].softmax(axis=p), "axis"),
    "log_softmax": (1, lambda n, p, s: n[0].log_softmax(axis=p), "axis"),
    "var": (1, lambda n, p, s: n[0] * n[0].var(axis=p, keepdims=True), "axis"),
    "reshape": (1, lambda n, p, s: n[0].reshape(-1).reshape(s), None),
    "transpose": (1, lambda n, p, s: n[0].T.T, None),
    "take": (1, lambda n, p, s: n[0].take(p, axis=0), _pick),
    "index": (1, lambda n, p, s: n[0][p, ...], _pick),
    "broadcast_to": (1, lambda n, p, s: mt.ops.broadcast_to(n[0].mean(axis=p, keepdims=True), shape=s) * n[0], "axis"),
    "scatter_add": (1, lambda n, p, s: mt.ops.scatter_add(n[0], shape=s, indices=p, axis=0), _pick),
    "index_add": (1, lambda n, p, s: mt.ops.index_add(n[0], shape=s, key=(p, ...)), _pick),
    "add_constant": (1, lambda n, p, s: n[0].add_constant(np.full(s, -0.75)), None),
    "dropout": (1, lambda n, p, s: n[0].dropout(np.where(np.arange(np.prod(s)).reshape(s) % 2, 2.0, 0.0)), None),
    # The numpy surface: inputs squashed into each op's domain first (tanh, sigmoid + 0.5).
    "sin": (1, lambda n, p, s: n[0].sin(), None),
    "cos": (1, lambda n, p, s: n[0].cos(), None),
    "tan": (1, lambda n, p, s: n[0].tanh().tan(), None),
    "arcsin": (1, lambda n, p, s: n[0].tanh().scale(0.9).arcsin(), None),
    "arccos": (1, lambda n, p, s: n[0].tanh().scale(0.9).arccos(), None),
    "arctan": (1, lambda n, p, s: n[0].arctan(), None),
    "sinh": (1, lambda n, p, s: n[0].tanh().sinh(), None),
    "cosh": (1, lambda n, p, s: n[0].tanh().cosh(), None),
    "log1p": (1, lambda n, p, s: n[0].sigmoid().log1p(), None),
    "expm1": (1, lambda n, p, s: n[0].tanh().expm1(), None),
    "log2": (1, lambda n, p, s: (n[0].sigmoid() + 0.5).log2(), None),
    "log10": (1, lambda n, p, s: (n[0].sigmoid() + 0.5).log10(), None),
    "exp2": (1, lambda n, p, s: n[0].tanh().exp2(), None),
    "cbrt": (1, lambda n, p, s: (n[0].sigmoid() + 0.5).cbrt(), None),
    "square": (1, lambda n, p, s: n[0].square(), None),
    "reciprocal": (1, lambda n, p, s: (n[0].sigmoid() + 0.5).reciprocal(), None),
    "clip": (1, lambda n, p, s: n[0].clip(-0.6, 0.6), None),
    "logaddexp": (2, lambda n, p, s: n[0].logaddexp(n[1]), None),
    "logaddexp2": (2, lambda n, p, s: n[0].logaddexp2(n[1]), None),
    "arcsinh": (1, lambda n, p, s: n[0].arcsinh(), None),
    "arccosh": (1, lambda n, p, s: (n[0].sigmoid() + 1.5).arccosh(), None),
    "arctanh": (1, lambda n, p, s: n[0].tanh().scale(0.9).arctanh(), None),
    "arctan2": (2, lambda n, p, s: n[0].arctan2(n[1].sigmoid() + 0.5), None),
    "power": (2, lambda n, p, s: (n[0].sigmoid() + 0.5) ** n[1].tanh(), None),
    "where": (2, lambda n, p, s: mt.where(np.arange(np.prod(s)).reshape(s) % 2 == 0, n[0], n[1]), None),
    "min": (1, lambda n, p, s: n[0] - n[0].min(axis=p, keepdims=True), "axis"),
    "prod": (1, lambda n, p, s: n[0] * n[0].tanh().prod(axis=p, keepdims=True), "axis"),
    "cumsum": (1, lambda n, p, s: n[0].cumsum(axis=p), "axis"),
    "cumprod": (1, lambda n, p, s: n[0].tanh().cumprod(axis=p), "axis"),
    "norm": (1, lambda n, p, s: n[0] / (n[0].norm(axis=p, keepdims=True) + 1.0), "axis"),
    "einsum": (2, lambda n, p, s: mt.einsum(_letters(s) + "," + _letters(s) + "->" + _letters(s), n[0], n[1]), None),
}
# Steps that change the dtype cannot be judged by float64 differences; they join the dtype property.
DTYPE_STEPS = {
    "cast": (1, lambda n, p, s: n[0].astype(np.float32).astype(n[0].dtype) + n[0], None),
}


def _params(name, shape):
    spec = {**STEPS, **DTYPE_STEPS}[name][2]
    if spec is None:
        return st.none()
    if spec == "axis":
        return st.integers(-len(shape), len(shape) - 1)
    return spec(shape) if callable(spec) else spec


@st.composite
def plans(draw, steps=STEPS, dtypes=(np.float64,), min_leaves=1):
    """``(leaves, plan)``: leaf arrays of one shape, and ``[(step name, operand positions, params)]``."""
    shape = draw(st.sampled_from([(3,), (2, 3), (3, 2), (2, 2), (1, 3), (2, 1, 2)]))
    count = draw(st.integers(min_leaves, 3))
    # Magnitudes in [0.25, 2] (multiples of 1/16): far from relu's and abs's kink at 0.
    values = st.integers(4, 32).map(lambda k: k / 16) | st.integers(-32, -4).map(lambda k: k / 16)
    leaves = [
        np.array(draw(st.lists(values, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))))
        .reshape(shape)
        .astype(draw(st.sampled_from(dtypes)))
        for _ in range(count)
    ]
    plan = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(sorted(steps)))
        arity = steps[name][0]
        available = count + len(plan)
        operands = tuple(draw(st.integers(0, available - 1)) for _ in range(arity))
        plan.append((name, operands, draw(_params(name, shape))))
    return leaves, plan


def replay(leaves, plan, every_leaf=False):
    """The graph of ``plan`` on ``leaves`` (Tensors): returns ``sum(w * last node)`` with fixed weights ``w``.

    ``every_leaf``: plus ``sum(leaf)`` of each leaf, so every leaf is on the path.
    """
    nodes = list(leaves)
    shape = leaves[0].shape
    table = {**STEPS, **DTYPE_STEPS}
    for name, operands, params in plan:
        out = table[name][1]([nodes[i] for i in operands], params, shape)
        nodes.append(out)
    last = nodes[-1]
    weights = np.linspace(-1.0, 1.5, last.size).reshape(last.shape)
    loss = (last * weights).sum()
    for leaf in leaves if every_leaf else ():
        loss = loss + leaf.sum()
    return loss


def _tensors(arrays):
    return [mt.Tensor(a.copy(), requires_grad=True, name=f"x{i}") for i, a in enumerate(arrays)]


def _finite_differences(arrays, plan, h=1e-6):
    grads = []
    for position, array in enumerate(arrays):
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            values = []
            for sign in (1, -1):
                moved = [a.copy() for a in arrays]
                moved[position][index] += sign * h
                values.append(float(replay([mt.Tensor(a) for a in moved], plan).data))
            grad[index] = (values[0] - values[1]) / (2 * h)
        grads.append(grad)
    return grads


@SETTINGS
@given(plans())
def test_random_graphs_agree_with_finite_differences(drawn):
    arrays, plan = drawn
    leaves = _tensors(arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mt.Tape():
            loss = replay(leaves, plan)
        grads = mt.gradients(loss)
    expected = _finite_differences(arrays, plan)
    for leaf, reference in zip(leaves, expected):
        taped = grads[leaf] if leaf in grads else np.zeros_like(leaf.data)
        np.testing.assert_allclose(taped, reference, rtol=1e-6, atol=1e-8, err_msg=f"{leaf.name} in {plan}")


@SETTINGS
@given(plans(steps={**STEPS, **DTYPE_STEPS}, dtypes=(np.float32, np.float64)))
def test_every_gradient_has_its_leafs_dtype_and_no_warning_escapes(drawn):
    arrays, plan = drawn
    leaves = _tensors(arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = replay(leaves, plan)
        loss.backward()
    for leaf in leaves:
        if leaf.grad is not None:
            assert isinstance(leaf.grad, np.ndarray) and leaf.grad.dtype == leaf.dtype, (leaf.name, plan)
            assert leaf.grad.shape == leaf.shape and np.all(np.isfinite(leaf.grad))


# Each refusal gets the loss, the leaves and a list where it notes a leaf whose .grad it set by hand.
def _bad_seed_nan(loss, leaves, touched):
    loss.backward(np.nan)


def _bad_seed_shape(loss, leaves, touched):
    mt.gradients(loss, np.ones(2))


def _junk_grad(junk):
    def refusal(loss, leaves, touched):
        # The last leaf the pass reaches: a backward that wrote as it went would have written the others.
        ids = {id(leaf) for leaf in leaves}
        leaf = [node for node in mt.gradients(loss) if id(node) in ids][-1]
        touched.append(leaf)
        leaf.grad = junk(leaf)
        loss.backward()

    return refusal


_junk_grad_string = _junk_grad(lambda leaf: "not a gradient")
_junk_grad_shape = _junk_grad(lambda leaf: np.zeros(leaf.shape + (2,)))


def _bad_axis(loss, leaves, touched):
    leaves[0].sum(axis=7)


def _bad_keepdims(loss, leaves, touched):
    leaves[0].logsumexp(axis=0, keepdims="yes")


REFUSALS = [_bad_seed_nan, _bad_seed_shape, _junk_grad_string, _junk_grad_shape, _bad_axis, _bad_keepdims]


@settings(SETTINGS, max_examples=60)
@given(plans(min_leaves=2), st.sampled_from(REFUSALS), st.booleans())
def test_a_refused_call_leaves_every_object_unchanged(drawn, refusal, earlier_backward):
    arrays, plan = drawn
    leaves = _tensors(arrays)
    with mt.Tape() as tape:
        loss = replay(leaves, plan, every_leaf=True)
    if earlier_backward:
        tape.backward(loss)  # some leaves already hold a gradient the refusal must not touch
    recorded = len(tape)
    data = [leaf.data.copy() for leaf in leaves]
    grads = [None if leaf.grad is None else leaf.grad.copy() for leaf in leaves]
    touched = []
    with mt.Tape() as outer:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises((ValueError, TypeError, IndexError)):
                refusal(loss, leaves, touched)
    assert len(outer) == 0 and len(tape) == recorded
    for leaf, before, grad in zip(leaves, data, grads):
        np.testing.assert_array_equal(leaf.data, before)
        if any(leaf is t for t in touched):
            continue  # its .grad is the junk the refusal set (the user's doing); every other one is unchanged
        if grad is None:
            assert leaf.grad is None
        else:
            np.testing.assert_array_equal(leaf.grad, grad)


def _ops_of(name):
    shape = (2, 3)
    arity, step, params = {**STEPS, **DTYPE_STEPS}[name]
    if params is None or params == "axis":
        example = -1
    elif callable(params) and not isinstance(params, st.SearchStrategy):
        example = np.array([1, 0])  # indices
    else:
        example = 2.0  # a factor or an exponent
    nodes = [mt.Tensor(np.full(shape, 0.5 + i), requires_grad=True) for i in range(arity)]
    with mt.Tape() as tape:
        step(nodes, example, shape)
    return {equation.op.name for equation in tape}


def test_every_registered_op_appears_in_some_step():
    used = set().union(*(_ops_of(name) for name in {**STEPS, **DTYPE_STEPS}))
    builtin = {name for name, op in OPS.items() if op.builtin}
    missing = builtin - used - set(NOT_IN_GRAPHS)
    assert not missing, f"built-in ops no graph step uses: {sorted(missing)}; add a step to STEPS"
