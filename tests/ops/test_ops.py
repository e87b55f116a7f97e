"""Every primitive in the registry: its VJP against central finite differences.

The tests loop over :data:`microtape.ops.OPS`, so an op added to the registry
is checked automatically — and ``test_every_op_has_a_strategy`` fails until it
gets an input strategy in ``tests/strategies.py``. The reference is the
definition of the derivative (central differences in float64), never numbers
produced by microtape itself.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import CONSTANT_INPUTS, OP_CASES, real_arrays, shapes

import microtape as mt
from microtape.engine import record as _apply
from microtape.ops import OPS, Op, unbroadcast

# Finite-difference step and tolerances for float64 outputs. An op whose output
# is float32 (``cast``) rounds each value to ~1e-7, so it needs a wider step
# and looser tolerances (see _fd_settings).
EPS = 1e-6
ATOL = 1e-6
RTOL = 1e-6
OP_NAMES = sorted(OPS)
SETTINGS = settings(max_examples=25, deadline=None)


def _upstream(ans, seed):
    """A random gradient of the output's shape (the cotangent ``g``)."""
    return np.random.default_rng(seed).standard_normal(np.shape(ans))


def _fd_settings(ans):
    """(step, atol, rtol): tight for a float64 output, loose for a lower-precision one."""
    if np.result_type(ans) == np.float64:
        return EPS, ATOL, RTOL
    return 1e-2, 1e-3, 1e-3


def _numeric_vjp(op, inputs, params, g, position):
    """d/dx sum(g * op(inputs)) for input ``position``, entry by entry, by central differences."""
    step_size = _fd_settings(op.forward(*inputs, **params))[0]
    x = np.array(inputs[position], dtype=np.float64)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        values = []
        for step in (step_size, -step_size):
            shifted = x.copy()
            shifted[index] += step
            args = list(inputs)
            args[position] = shifted
            values.append(np.sum(g * np.asarray(op.forward(*args, **params), dtype=np.float64)))
        grad[index] = (values[0] - values[1]) / (2 * step_size)
    return grad


def _case_strategy(name):
    if name not in OP_CASES:
        pytest.fail(f"op {name!r} has no input strategy: add one to OP_CASES in tests/strategies.py")
    return OP_CASES[name]


def test_every_op_has_a_strategy():
    """Each registered op has an input strategy (and no strategy names a missing op)."""
    assert set(OPS) - set(OP_CASES) == set(), "ops without a strategy in tests/strategies.py"
    assert set(OP_CASES) - set(OPS) == set(), "strategies for ops that are not registered"


def test_registry_has_the_required_ops():
    """The ops the engine's issue lists are all registered."""
    required = {
        "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "tanh", "relu", "sum", "mean",
        "max", "matmul", "reshape", "transpose", "softmax", "add_constant",
    }  # fmt: skip
    assert required <= set(OPS), f"missing: {sorted(required - set(OPS))}"


@pytest.mark.parametrize("name", OP_NAMES)
def test_op_is_documented(name):
    """Every op has a name matching its key, a non-empty formula and LaTeX, a valid arity and domain."""
    op = OPS[name]
    assert isinstance(op, Op)
    assert op.name == name
    assert isinstance(op.formula, str) and op.formula.strip(), f"{name}: empty formula"
    assert isinstance(op.latex, str) and op.latex.strip(), f"{name}: empty latex"
    assert op.arity in (1, 2, 3)
    assert op.domain in ("real", "positive", "unit", "above_one")
    assert isinstance(op.example_params, dict)
    assert name in repr(op)


@pytest.mark.parametrize("name", OP_NAMES)
def test_vjp_matches_finite_differences(name):
    """op.vjp(g, ans, *inputs) equals the central difference of sum(g * op(inputs)) for every input.

    Constant inputs (the mask of add_constant and dropout) must get None.
    """
    op = OPS[name]
    constants = CONSTANT_INPUTS.get(name, ())

    @SETTINGS
    @given(case=_case_strategy(name), seed=st.integers(0, 2**32 - 1))
    def check(case, seed):
        inputs, params = case
        assert len(inputs) == op.arity
        ans = op.forward(*inputs, **params)
        g = _upstream(ans, seed)
        grads = op.vjp(g, ans, *inputs, **params)
        assert len(grads) == op.arity, f"{name}: VJP returned {len(grads)} gradients for {op.arity} inputs"
        for position, grad in enumerate(grads):
            if position in constants:
                assert grad is None, f"{name}: constant input {position} got a gradient"
                continue
            expected = _numeric_vjp(op, inputs, params, g, position)
            assert grad is not None, f"{name}: no gradient for input {position}"
            _, atol, rtol = _fd_settings(ans)
            np.testing.assert_allclose(
                grad, expected, rtol=rtol, atol=atol, err_msg=f"{name} input {position}, params {params}"
            )

    check()


@pytest.mark.parametrize("name", OP_NAMES)
def test_vjp_shapes_and_purity(name):
    """Each VJP output has its input's shape, and neither forward nor VJP modifies its arguments."""
    op = OPS[name]
    constants = CONSTANT_INPUTS.get(name, ())

    @SETTINGS
    @given(case=_case_strategy(name), seed=st.integers(0, 2**32 - 1))
    def check(case, seed):
        inputs, params = case
        originals = [x.copy() for x in inputs]
        ans = op.forward(*inputs, **params)
        g = _upstream(ans, seed)
        g_copy, ans_copy = g.copy(), np.copy(ans)
        grads = op.vjp(g, ans, *inputs, **params)
        for position, grad in enumerate(grads):
            if position in constants and grad is None:
                continue
            assert np.shape(grad) == np.shape(inputs[position]), (
                f"{name}: gradient of input {position} has shape {np.shape(grad)}, "
                f"input has {np.shape(inputs[position])}"
            )
        for x, original in zip(inputs, originals, strict=True):
            np.testing.assert_array_equal(x, original, err_msg=f"{name} modified an input")
        np.testing.assert_array_equal(g, g_copy, err_msg=f"{name} modified g")
        np.testing.assert_array_equal(ans, ans_copy, err_msg=f"{name} modified ans")

    check()


@pytest.mark.parametrize("name", OP_NAMES)
def test_taped_op_gives_the_vjp(name):
    """Running an op on Tensors through the tape and calling backward(g) gives its VJP in .grad."""
    op = OPS[name]
    constants = CONSTANT_INPUTS.get(name, ())

    @settings(max_examples=10, deadline=None)
    @given(case=_case_strategy(name), seed=st.integers(0, 2**32 - 1))
    def check(case, seed):
        inputs, params = case
        tensors = tuple(mt.Tensor(x.copy(), requires_grad=i not in constants) for i, x in enumerate(inputs))
        with mt.Tape() as tape:
            out = _apply(op, tensors, params)
        assert len(tape) == 1 and tape[0].op is op
        np.testing.assert_array_equal(out.data, op.forward(*inputs, **params))
        g = _upstream(out.data, seed).astype(out.dtype)
        tape.backward(out, g)
        expected = op.vjp(g, op.forward(*inputs, **params), *inputs, **params)
        for i, (tensor, grad) in enumerate(zip(tensors, expected, strict=True)):
            if i in constants:
                assert tensor.grad is None
            else:
                np.testing.assert_allclose(tensor.grad, grad, rtol=1e-12, atol=1e-12)

    check()


@pytest.mark.parametrize("name", OP_NAMES)
def test_vjp_keeps_float32(name):
    """With float32 inputs (and a g of the output's dtype) every gradient comes back in its input's dtype."""
    op = OPS[name]

    @settings(max_examples=10, deadline=None)
    @given(case=_case_strategy(name), seed=st.integers(0, 2**32 - 1))
    def check(case, seed):
        inputs = tuple(x.astype(np.float32) for x in case.inputs)
        ans = op.forward(*inputs, **case.params)
        g = _upstream(ans, seed).astype(np.result_type(ans))
        for position, grad in enumerate(op.vjp(g, ans, *inputs, **case.params)):
            if grad is not None:
                assert grad.dtype == inputs[position].dtype, (
                    f"{name}: gradient of float32 input {position} is {grad.dtype} (params {case.params})"
                )

    check()


# Ops that Scalar uses: they must also work on plain Python floats.
SCALAR_OPS = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1, "pow": 1, "exp": 1, "log": 1, "tanh": 1, "relu": 1,
    "sigmoid": 1, "gelu": 1, "abs": 1, "maximum": 2, "minimum": 2, "sin": 1, "cos": 1, "tan": 1, "arcsin": 1,
    "arccos": 1, "arctan": 1, "sinh": 1, "cosh": 1, "log1p": 1, "expm1": 1, "log2": 1, "log10": 1, "exp2": 1,
    "cbrt": 1, "square": 1, "reciprocal": 1, "logaddexp": 2, "arctan2": 2, "power": 2, "clip": 1,
    "arcsinh": 1, "arccosh": 1, "arctanh": 1, "logaddexp2": 2,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCALAR_OPS))
@pytest.mark.parametrize("x", [0.7, -1.3])
def test_scalar_path_matches_array_path(name, x):
    """On Python floats an elementwise op returns floats equal to its result on 0-d arrays."""
    op = OPS[name]
    if op.domain == "positive":
        x = abs(x)
    if op.domain == "unit":
        x = x / 2
    if op.domain == "above_one":
        x = 1 + abs(x)
    inputs = (x, 1.9)[: op.arity]
    params = op.example_params
    ans = op.forward(*inputs, **params)
    assert isinstance(ans, float), f"{name}: forward on floats gave {type(ans).__name__}"
    grads = op.vjp(0.8, ans, *inputs, **params)
    array_inputs = [np.array(v) for v in inputs]
    array_ans = op.forward(*array_inputs, **params)
    array_grads = op.vjp(np.array(0.8), array_ans, *array_inputs, **params)
    assert ans == pytest.approx(float(array_ans), rel=1e-15)
    for grad, array_grad in zip(grads, array_grads, strict=True):
        assert isinstance(grad, float), f"{name}: VJP on floats gave {type(grad).__name__}"
        assert grad == pytest.approx(float(array_grad), rel=1e-15)


# ---------------------------------------------------------------- hand-derived values


def test_max_vjp_shares_gradient_between_ties():
    """At a tie the max's gradient is split equally between the tied entries (hand algebra)."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    ans = OPS["max"].forward(x, axis=-1, keepdims=True)
    (grad,) = OPS["max"].vjp(np.array([[2.0], [5.0]]), ans, x, axis=-1, keepdims=True)
    np.testing.assert_array_equal(grad, [[0.0, 1.0, 1.0], [5.0, 0.0, 0.0]])


def test_relu_gradient_at_zero_is_zero():
    """At exactly x = 0 relu passes no gradient: the formula's [x > 0] (PyTorch's convention too)."""
    x = np.array([-1.0, 0.0, 2.0])
    (grad,) = OPS["relu"].vjp(np.ones(3), OPS["relu"].forward(x), x)
    np.testing.assert_array_equal(grad, [0.0, 0.0, 1.0])
    assert OPS["relu"].vjp(1.0, 0.0, 0.0)[0] == 0.0


def test_unbroadcast_sums_over_broadcast_axes():
    """unbroadcast sums prepended axes and stretched size-1 axes, keeping the input's shape."""
    grad = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(unbroadcast(grad, np.zeros((3, 1))), grad.sum(axis=(0, 2))[:, None])
    np.testing.assert_array_equal(unbroadcast(grad, np.zeros(4)), grad.sum(axis=(0, 1)))
    assert unbroadcast(grad, np.zeros(())) == grad.sum()
    assert unbroadcast(grad, np.zeros((2, 3, 4))) is grad


# ---------------------------------------------------------------- softmax


def _composed_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = shifted.exp()
    return e / e.sum(axis=axis, keepdims=True)


@settings(max_examples=25, deadline=None)
@given(
    x=shapes(min_dims=1).flatmap(real_arrays),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_composed_softmax_equals_fused(x, seed, data):
    """(x - max).exp() / sum, built from primitives, equals Tensor.softmax in value and gradient."""
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    g = np.random.default_rng(seed).standard_normal(x.shape)

    fused_in = mt.Tensor(x.copy(), requires_grad=True)
    fused = fused_in.softmax(axis=axis)
    fused.backward(g)

    composed_in = mt.Tensor(x.copy(), requires_grad=True)
    composed = _composed_softmax(composed_in, axis)
    composed.backward(g)

    np.testing.assert_allclose(fused.data, composed.data, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fused_in.grad, composed_in.grad, rtol=1e-9, atol=1e-12)
    # Independent reference for the value: numpy by the definition.
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(fused.data, e / e.sum(axis=axis, keepdims=True), rtol=1e-12)


def test_softmax_is_stable_for_large_inputs():
    """Softmax of inputs near 1e4 neither overflows nor gives NaN, fused or composed.

    exp(1e4) is inf in float64; the stable form subtracts the row max first.
    Reference: the softmax of x - 1e4 (mathematically identical), by numpy.
    """
    offsets = np.array([[0.0, -1.0, -2.0, 0.5], [3.0, 3.0, -4.0, 1.0]])
    x = 1e4 + offsets
    e = np.exp(offsets - offsets.max(axis=-1, keepdims=True))
    expected = e / e.sum(axis=-1, keepdims=True)
    g = np.array([[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, 2.0, -1.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        fused_in = mt.Tensor(x, requires_grad=True)
        fused = fused_in.softmax(axis=-1)
        fused.backward(g)
        composed_in = mt.Tensor(x, requires_grad=True)
        composed = _composed_softmax(composed_in, -1)
        composed.backward(g)
    for value in (fused.data, composed.data, fused_in.grad, composed_in.grad):
        assert np.all(np.isfinite(value))
    np.testing.assert_allclose(fused.data, expected, rtol=1e-12)
    np.testing.assert_allclose(composed.data, expected, rtol=1e-12)
    # Softmax's Jacobian is diag(p) - p p^T: grad = p * (g - sum(g * p)) row-wise, by hand.
    hand = expected * (g - np.sum(g * expected, axis=-1, keepdims=True))
    np.testing.assert_allclose(fused_in.grad, hand, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(composed_in.grad, hand, rtol=1e-9, atol=1e-12)


def test_softmax_rows_sum_to_one_for_extreme_inputs():
    """Rows with a huge spread (1e4 vs -1e4) are one-hot, and rows sum to 1."""
    x = mt.Tensor(np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4]]))
    with np.errstate(over="raise", invalid="raise"):
        p = x.softmax().data
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(p[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(p[1], [1 / 3] * 3)
    assert math.isclose(p[1].sum(), 1.0)


# ---------------------------------------------------------------- logsumexp at its infinite edges


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize(
    "row, value",
    [
        # What torch.logsumexp gives (PyTorch 2.13, float64).
        ([-np.inf, -np.inf], -np.inf),
        ([np.inf, 1.0], np.inf),
        ([np.inf, -np.inf], np.inf),
        ([np.inf, np.inf], np.inf),
        ([-np.inf, 1.0], 1.0),
        ([np.nan, 1.0], np.nan),
    ],
)
def test_logsumexp_edge_values_are_pytorchs(row, value):
    x = mt.Tensor(np.array(row), requires_grad=True)
    result = x.logsumexp(axis=-1)
    np.testing.assert_array_equal(result.data, value)


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_logsumexp_gradient_at_an_infinite_result_goes_to_the_max_entries():
    """Softmax's limit there: the entries equal to the max share g (PyTorch gives NaN; we say what it is)."""
    rows = np.array([[np.inf, 1.0, np.inf], [-np.inf, -np.inf, -np.inf], [0.5, -np.inf, 2.0]])
    x = mt.Tensor(rows, requires_grad=True)
    g = np.array([2.0, 3.0, 1.0])
    grads = mt.gradients(x.logsumexp(axis=1), g)[x]
    np.testing.assert_array_equal(grads[0], [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(grads[1], [1.0, 1.0, 1.0])
    finite = np.exp(rows[2] - np.log(np.exp(0.5) + np.exp(2.0)))  # the ordinary softmax, -inf gets 0
    np.testing.assert_allclose(grads[2], finite, rtol=1e-15)
    assert grads[2][1] == 0.0


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_logsumexp_recorded_gradient_at_an_infinite_result_is_the_plain_one_and_differentiates():
    """create_graph=True gives the same max-share (not NaN), and a second derivative that is finite everywhere."""
    rows = np.array([[np.inf, 1.0, np.inf], [-np.inf, -np.inf, -np.inf], [0.5, -np.inf, 2.0]])
    x = mt.Tensor(rows, requires_grad=True)
    g = np.array([2.0, 3.0, 1.0])
    plain = mt.gradients(x.logsumexp(axis=1), g)[x]
    with np.errstate(all="raise"):  # not even an intermediate inf - inf on the tape
        recorded = mt.gradients(x.logsumexp(axis=1), g, create_graph=True)[x]
        np.testing.assert_array_equal(recorded.data, plain)
        v = np.array([[1.0, 2.0, 3.0]] * 3)
        second = mt.gradients((recorded * v).sum())[x]
    # The share is a constant of x in the infinite rows; the finite row is g · (diag(p) − p pᵀ) v.
    np.testing.assert_array_equal(second[:2], 0.0)
    p = plain[2] / g[2]
    np.testing.assert_allclose(second[2], g[2] * (p * v[2] - p * (p @ v[2])), rtol=1e-13, atol=1e-15)
    assert second[2][1] == 0.0


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_logsumexp_edges_in_float32_keep_the_dtype_and_stay_quiet():
    x = mt.Tensor(np.array([[-np.inf, -np.inf], [np.inf, 3.0], [1.0, 2.0]], dtype=np.float32), requires_grad=True)
    y = x.logsumexp(axis=-1, keepdims=True)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data[:2, 0], [-np.inf, np.inf])
    y.backward(np.ones((3, 1)))
    assert x.grad.dtype == np.float32 and np.all(np.isfinite(x.grad))


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_logsumexp_keepdims_must_be_a_bool():
    x = mt.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"logsumexp\(keepdims='x'\)"):
        x.logsumexp(keepdims="x")


def test_clip_passes_the_gradient_at_both_bounds_as_pytorch():
    """The docstring's ``lower <= x <= upper``: at a bound x is let through, so its gradient is g (PyTorch's clamp).

    Tensor and Scalar alike; only entries strictly outside get 0.
    """
    x = mt.Tensor(np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), requires_grad=True)
    x.clip(-1.0, 1.0).backward(np.array([10.0, 20.0, 30.0, 40.0, 50.0]))
    np.testing.assert_array_equal(x.grad, [0.0, 20.0, 30.0, 40.0, 0.0])
    for value in (-1.0, 1.0):
        s = mt.Scalar(value)
        s.clip(-1.0, 1.0).backward()
        assert s.grad == 1.0, value
    only_lower = mt.Tensor(np.array([0.0, 0.5]), requires_grad=True)
    only_lower.clip(lower=0.0).sum().backward()
    np.testing.assert_array_equal(only_lower.grad, [1.0, 1.0])
