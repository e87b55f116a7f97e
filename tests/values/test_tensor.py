"""Tensor: dtypes, numpy interop, constructors, shape ops, reductions and matmul.

Values are checked against numpy; gradients against central finite
differences of the same computation written in plain numpy.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import broadcastable_pair, real_arrays

import microtape as mt

EPS = 1e-6


def _numeric_grads(numpy_fn, arrays, g):
    """Central differences of sum(g * numpy_fn(*arrays)) with respect to each array."""
    grads = []
    for position, array in enumerate(arrays):
        grad = np.zeros_like(array, dtype=np.float64)
        for index in np.ndindex(array.shape):
            values = []
            for step in (EPS, -EPS):
                shifted = [a.astype(np.float64, copy=True) for a in arrays]
                shifted[position][index] += step
                values.append(np.sum(g * numpy_fn(*shifted)))
            grad[index] = (values[0] - values[1]) / (2 * EPS)
        grads.append(grad)
    return grads


def check_against_numpy(tensor_fn, numpy_fn, *arrays, seed=0):
    """tensor_fn on Tensors gives numpy_fn's value, and backward(g) gives its finite-difference gradient."""
    tensors = [mt.Tensor(a.copy(), requires_grad=True) for a in arrays]
    out = tensor_fn(*tensors)
    expected = numpy_fn(*arrays)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-13)
    g = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(g)
    for tensor, numeric in zip(tensors, _numeric_grads(numpy_fn, arrays, g), strict=True):
        assert tensor.grad.shape == tensor.shape
        np.testing.assert_allclose(tensor.grad, numeric, rtol=1e-6, atol=1e-7)


def _arrays(*shapes, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


# ---------------------------------------------------------------- construction and dtypes


def test_default_dtype_and_ints_become_float64():
    """Lists of floats, ints and int arrays all become float64 Tensors."""
    assert mt.Tensor([1.5, 2.0]).dtype == np.float64
    assert mt.Tensor([1, 2, 3]).dtype == np.float64
    assert mt.Tensor(np.arange(4, dtype=np.int32)).dtype == np.float64
    assert mt.Tensor(7).dtype == np.float64 and mt.Tensor(7).shape == ()
    np.testing.assert_array_equal(mt.Tensor([1, 2, 3]).data, [1.0, 2.0, 3.0])


def test_float32_is_kept():
    """A float32 array stays float32."""
    t = mt.Tensor(np.ones(3, dtype=np.float32))
    assert t.dtype == np.float32 and t.data.dtype == np.float32


FLOAT32_EXPRESSIONS = {
    "add/sub/mul/div with numbers": lambda x, y: ((2.0 - x) * 3 + x / 2.0 - 1) / (x + 4.0),
    "binary with a float32 tensor": lambda x, y: x * y + y - x / (y + 3.0),
    "neg, pow": lambda x, y: -(x**2) + (x + 3.0) ** 1.5,
    "exp, log, tanh, relu": lambda x, y: x.exp() + (x + 3.0).log() + x.tanh() + x.relu(),
    "scale by a float": lambda x, y: x.scale(0.5),
    "sum": lambda x, y: x.sum(axis=0) + x.sum(),
    "mean": lambda x, y: x.mean(axis=0, keepdims=True) + x.mean(),
    "max": lambda x, y: x.max(axis=0) + x.max(),
    "softmax": lambda x, y: x.softmax(axis=-1),
    "matmul, T": lambda x, y: x @ y.T,
    "reshape, transpose, swapaxes": lambda x, y: x.reshape(-1).reshape(3, 2).transpose() + x.swapaxes(0, 1).T,
    "add_constant, dropout": lambda x, y: x.add_constant(np.float32(-1.0)).dropout(np.full((2, 3), 2.0, np.float32)),
}


@pytest.mark.parametrize("name", sorted(FLOAT32_EXPRESSIONS))
def test_float32_stays_float32_through_ops_and_grads(name):
    """Every op on float32 Tensors (with Python numbers mixed in) gives float32 outputs and float32 grads."""
    fn = FLOAT32_EXPRESSIONS[name]
    x = mt.Tensor(np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32), requires_grad=True)
    y = mt.Tensor(np.array([[1.0, 2.0, -0.5], [0.5, 1.5, 2.5]], dtype=np.float32), requires_grad=True)
    out = fn(x, y)
    assert out.dtype == np.float32, f"{name}: output is {out.dtype}"
    out.sum().backward()
    assert x.grad.dtype == np.float32, f"{name}: x.grad is {x.grad.dtype}"
    if y.grad is not None:
        assert y.grad.dtype == np.float32


def test_float32_scale_by_numpy_float64_stays_float32():
    """scale(1 / np.sqrt(d)) — a numpy float64 factor, as attention uses — keeps a float32 tensor float32."""
    x = mt.Tensor(np.ones((2, 3), dtype=np.float32), requires_grad=True)
    out = x.scale(1 / np.sqrt(4.0))
    assert out.dtype == np.float32
    out.sum().backward()
    assert x.grad.dtype == np.float32


def test_float32_backward_with_float64_seed():
    """A float64 gradient passed to backward on a float32 output is cast: grads stay float32."""
    x = mt.Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    y = x * 2.0
    y.backward(np.array([1.0, 2.0, 3.0]))
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])


def test_numpy_interop():
    """np.asarray(t) gives the values (with a dtype too); t.data is the array; numpy on the left works."""
    data = np.array([[1.0, 2.0], [3.0, 4.0]])
    t = mt.Tensor(data, requires_grad=True, name="t")
    np.testing.assert_array_equal(np.asarray(t), data)
    assert np.asarray(t).dtype == np.float64
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(np.array(t), data)
    assert t.data is data  # no copy, like torch.from_numpy
    assert t.shape == (2, 2) and t.ndim == 2 and t.size == 4 and len(t) == 2
    assert mt.Tensor(3.5).item() == 3.5
    # An ndarray on the left defers to Tensor's reflected operators.
    for result in (np.ones(2) + t, np.ones(2) - t, np.ones(2) * t, np.ones(2) / t, np.eye(2) @ t):
        assert isinstance(result, mt.Tensor) and result.requires_grad
    left = np.array([2.0, 5.0])
    y = left - t
    y.backward(np.ones((2, 2)))
    np.testing.assert_array_equal(y.data, left - data)
    np.testing.assert_array_equal(t.grad, -np.ones((2, 2)))


def test_zeros_and_full():
    """Tensor.zeros and Tensor.full make the shape, value and dtype asked for."""
    z = mt.Tensor.zeros((2, 3))
    assert z.shape == (2, 3) and z.dtype == np.float64 and not z.data.any() and not z.requires_grad
    f = mt.Tensor.full((4,), 2.5)
    np.testing.assert_array_equal(f.data, [2.5] * 4)
    assert f.dtype == np.float64
    f32 = mt.Tensor.full((2, 2), -1.0, dtype=np.float32, requires_grad=True, name="w")
    assert f32.dtype == np.float32 and f32.requires_grad and f32.name == "w"
    assert mt.Tensor.zeros(3).shape == (3,)


def test_repr_mentions_name_and_op():
    """repr shows the values, the name and the op that made it."""
    x = mt.Tensor([1.0, 2.0], requires_grad=True, name="x")
    assert "x" in repr(x) and "requires_grad" in repr(x)
    assert "exp" in repr(x.exp())


# ---------------------------------------------------------------- shape ops, reductions, matmul


def test_transpose_T_and_swapaxes():
    """.T, transpose(axes) and swapaxes match numpy and backpropagate the inverse permutation."""
    (a,) = _arrays((2, 3, 4))
    check_against_numpy(lambda t: t.T, lambda x: x.T, a)
    check_against_numpy(lambda t: t.transpose(1, 2, 0), lambda x: np.transpose(x, (1, 2, 0)), a)
    check_against_numpy(lambda t: t.transpose((2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)), a)
    check_against_numpy(lambda t: t.transpose(), lambda x: np.transpose(x), a)
    check_against_numpy(lambda t: t.swapaxes(0, 2), lambda x: np.swapaxes(x, 0, 2), a)
    check_against_numpy(lambda t: t.swapaxes(-1, -2), lambda x: np.swapaxes(x, -1, -2), a)
    check_against_numpy(lambda t: t.transpose(-1, 0, 1), lambda x: np.transpose(x, (2, 0, 1)), a)


@pytest.mark.parametrize(
    "shape",
    [(6, 4), (-1,), (24,), (2, -1), (-1, 3, 2), (4, 3, 2, 1), (1, 24)],
)
def test_reshape(shape):
    """reshape (with -1 and as separate arguments or a tuple) matches numpy; its gradient is reshaped back."""
    (a,) = _arrays((2, 3, 4))
    check_against_numpy(lambda t: t.reshape(shape), lambda x: x.reshape(shape), a)
    check_against_numpy(lambda t: t.reshape(*shape), lambda x: x.reshape(shape), a)


@pytest.mark.parametrize("method", ["sum", "mean", "max"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (1,)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(method, axis, keepdims):
    """sum, mean and max with axis (None, int, negative, tuple) and keepdims: numpy values, FD grads."""
    (a,) = _arrays((2, 3, 4))
    check_against_numpy(
        lambda t: getattr(t, method)(axis=axis, keepdims=keepdims),
        lambda x: getattr(np, method)(x, axis=axis, keepdims=keepdims),
        a,
    )


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)),
        ((3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 5)),
        ((4,), (4,)),
    ],
    ids=str,
)
def test_matmul(shape_a, shape_b):
    """a @ b (batched, broadcast batch axes and 1-D operands) matches numpy and finite differences."""
    a, b = _arrays(shape_a, shape_b)
    check_against_numpy(lambda x, y: x @ y, np.matmul, a, b)
    check_against_numpy(lambda x, y: x.matmul(y), np.matmul, a, b)


def test_matmul_with_constant_operand():
    """x @ W where W is a numpy array: the gradient reaches x only."""
    x = mt.Tensor(_arrays((2, 3, 4))[0], requires_grad=True)
    w = _arrays((4, 5), seed=2)[0]
    y = x @ w
    g = np.ones(y.shape)
    y.backward(g)
    np.testing.assert_allclose(x.grad, g @ w.T, rtol=1e-14)


@settings(max_examples=30, deadline=None)
@given(shapes=broadcastable_pair(), data=st.data())
def test_broadcasting_binary_ops(shapes, data):
    """+, -, *, / on shapes that broadcast: values match numpy; grads match finite differences."""
    shape_a, shape_b = shapes
    a = data.draw(real_arrays(shape_a), label="a")
    b = data.draw(real_arrays(shape_b), label="b")
    check_against_numpy(
        lambda x, y: (x + y) * (x - y) / (y * y + 0.5), lambda x, y: (x + y) * (x - y) / (y * y + 0.5), a, b
    )


def test_elementwise_functions():
    """exp, log, tanh, relu, pow, scale, softmax, add_constant, dropout match numpy and finite differences."""
    (a,) = _arrays((3, 4))
    positive = np.abs(a) + 0.5
    check_against_numpy(lambda t: t.exp(), np.exp, a)
    check_against_numpy(lambda t: t.log(), np.log, positive)
    check_against_numpy(lambda t: t.tanh(), np.tanh, a)
    check_against_numpy(lambda t: t.relu(), lambda x: np.maximum(x, 0.0), a)
    check_against_numpy(lambda t: t**3, lambda x: x**3, a)
    check_against_numpy(lambda t: t**-0.5, lambda x: x**-0.5, positive)
    check_against_numpy(lambda t: t.scale(-0.25), lambda x: -0.25 * x, a)
    mask = np.triu(np.full((3, 4), -1e9), k=1)
    check_against_numpy(lambda t: t.add_constant(mask).softmax(), lambda x: _np_softmax(x + mask), a)
    keep = (np.arange(12).reshape(3, 4) % 3 != 0) / (1 - 1 / 3)
    check_against_numpy(lambda t: t.dropout(keep), lambda x: x * keep, a)


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_add_constant_and_dropout_give_the_constant_no_gradient():
    """The mask of add_constant and the keep mask of dropout are constants: no .grad on them."""
    x = mt.Tensor(np.ones((2, 2)), requires_grad=True)
    mask = mt.Tensor(np.array([[0.0, -1e9], [0.0, 0.0]]))
    keep = mt.Tensor(np.array([[2.0, 0.0], [2.0, 2.0]]))
    y = x.add_constant(mask).dropout(keep)
    y.sum().backward()
    assert mask.grad is None and keep.grad is None
    np.testing.assert_array_equal(x.grad, keep.data)


def test_grads_accumulate_across_backward_calls():
    """Two backward calls add into a leaf's .grad (like PyTorch); zero_grad resets it."""
    (a,) = _arrays((3, 2))
    x = mt.Tensor(a, requires_grad=True)
    w = mt.Tensor(np.array([0.5, -2.0]), requires_grad=True)
    (x * w).tanh().sum().backward()
    first_x, first_w = x.grad.copy(), w.grad.copy()
    np.testing.assert_allclose(first_x, (1 - np.tanh(a * w.data) ** 2) * w.data, rtol=1e-14)
    (x * w).tanh().sum().backward()
    np.testing.assert_allclose(x.grad, 2 * first_x, rtol=1e-14)
    np.testing.assert_allclose(w.grad, 2 * first_w, rtol=1e-14)
    x.zero_grad()
    assert x.grad is None


def test_leaf_can_be_the_output():
    """backward on a leaf sets its gradient to the seed (dy/dy = 1)."""
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    x.backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])


def test_tensor_from_tensor_shares_data():
    """Tensor(tensor) wraps the same data as a new leaf."""
    x = mt.Tensor(np.ones(2), requires_grad=True)
    y = mt.Tensor(x)
    assert y.data is x.data and y.is_leaf and not y.requires_grad


# ---------------------------------------------------------------- small but user-visible


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_indexing_with_an_empty_list_picks_nothing_as_numpy_does():
    data = np.arange(6.0).reshape(3, 2)
    x = mt.Tensor(data, requires_grad=True)
    picked = x[[]]
    assert picked.shape == data[[]].shape == (0, 2)
    picked.sum().backward()
    np.testing.assert_array_equal(x.grad, np.zeros((3, 2)))


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_masked_index_arrays_are_refused():
    x = mt.Tensor(np.ones((3, 2)), requires_grad=True)
    masked = np.ma.masked_array([0, 1], mask=[False, True])
    with pytest.raises(TypeError, match="masked array"):
        x[masked]
    with pytest.raises(TypeError, match="masked array"):
        x[:, masked]
    with pytest.raises(TypeError, match="masked array"):
        x.take(masked)


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_concatenate_of_one_tensor_takes_the_name_and_leaves_the_input_alone():
    x = mt.Tensor(np.ones(2), requires_grad=True, name="x")
    joined = mt.concatenate([x], name="joined")
    assert joined.name == "joined" and x.name == "x" and joined is not x
    np.testing.assert_array_equal(mt.gradients((joined * 3.0).sum())[x], [3.0, 3.0])
    assert mt.stack([x], name="stacked").name == "stacked"


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b),
    "matmul": lambda a, b: a @ b,
    "concatenate": lambda a, b: mt.concatenate([a, b]),
}


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize("name", BINARY)
def test_the_dtype_rule_a_gradient_has_the_dtype_of_its_value(name):
    """float32 with float64 computes in float64 (numpy's and PyTorch's promotion); each gradient keeps its own dtype."""
    rng = np.random.default_rng(0)
    small = mt.Tensor(rng.uniform(1, 2, (2, 2)).astype(np.float32), requires_grad=True)
    big = mt.Tensor(rng.uniform(1, 2, (2, 2)), requires_grad=True)
    result = BINARY[name](small, big)
    assert result.dtype == np.float64
    grads = mt.gradients(result.sum())
    assert grads[small].dtype == np.float32 and grads[big].dtype == np.float64
    # The same numbers as the all-float64 computation, rounded once.
    wide = mt.Tensor(small.data.astype(np.float64), requires_grad=True)
    expected = mt.gradients(BINARY[name](wide, big).sum())[wide]
    np.testing.assert_allclose(grads[small], expected, rtol=1e-7)
    result.sum().backward()
    assert small.grad.dtype == np.float32


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_a_zero_dimensional_tensor_gets_an_array_gradient():
    x = mt.Tensor(np.array(2.0, dtype=np.float32), requires_grad=True)
    y = x * np.array(3.0) + x
    assert isinstance(mt.gradients(y)[x], np.ndarray)
    y.backward()
    assert isinstance(x.grad, np.ndarray) and x.grad.dtype == np.float32 and x.grad == 4.0


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_far_out_is_x_or_zero_without_warnings(dtype):
    huge = [1e104, -1e104, 1e200, -1e300, 1.7e308] if dtype == np.float64 else [1e13, -1e13, 3e38, -3e38]
    data = np.array([*huge, 25.0, -25.0], dtype=dtype)
    x = mt.Tensor(data, requires_grad=True)
    y = x.gelu()
    np.testing.assert_array_equal(y.data, np.where(data > 0, data, 0.0))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, (data > 0).astype(dtype))
    big = mt.Scalar(1e200)
    out = big.gelu()
    out.backward()
    assert out.data == 1e200 and big.grad == 1.0 and big.grad.__class__ is float


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_gelu_inside_the_clip_is_the_formula_unchanged():
    data = np.linspace(-19.5, 19.5, 41)
    x = mt.Tensor(data, requires_grad=True)
    c, k = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(c * (data + k * data**3))
    np.testing.assert_allclose(x.gelu().data, 0.5 * data * (1 + t), rtol=1e-15, atol=1e-300)
    result = mt.check.gradcheck(lambda v: v.gelu().sum(), data[::4] / 4)
    assert result.ok


# ---------------------------------------------------------------- unsupported types


@pytest.mark.parametrize(
    "data, named",
    [
        (["a", "b"], "<U1"),
        ([object(), object()], "object"),
        (None, "object"),
        (np.array([1 + 2j]), "complex"),
    ],
    ids=["strings", "objects", "None", "complex"],
)
def test_tensor_of_non_numbers(data, named):
    """Tensor(strings / objects / None / complex) is a TypeError naming the dtype it got."""
    with pytest.raises(TypeError, match="Tensor") as info:
        mt.Tensor(data)
    assert named in str(info.value)


def test_tensor_bad_arguments():
    """requires_grad must be a bool; a Scalar is not array data."""
    with pytest.raises(TypeError, match="requires_grad"):
        mt.Tensor([1.0], requires_grad="yes")
    with pytest.raises(TypeError, match="Scalar"):
        mt.Tensor(mt.Scalar(1.0))


@pytest.mark.parametrize("value, named", [("a", "str"), (True, "bool"), ([1.0], "list"), (None, "NoneType")])
def test_scalar_of_non_numbers(value, named):
    """Scalar(non-number) is a TypeError naming the type."""
    with pytest.raises(TypeError, match="Scalar") as info:
        mt.Scalar(value)
    assert named in str(info.value)


def test_tensor_arithmetic_with_unsupported_types():
    """Tensor + "x", "x" + Tensor, Tensor * None, Tensor + Scalar: TypeError naming the other type."""
    t = mt.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match="str"):
        t + "x"
    with pytest.raises(TypeError, match="str"):
        "x" + t
    with pytest.raises(TypeError, match="NoneType"):
        t * None
    with pytest.raises(TypeError, match="Scalar"):
        t + mt.Scalar(1.0)
    with pytest.raises(TypeError, match="str"):
        t ** "2"  # (a Tensor exponent is an op of its own: power)
    with pytest.raises(TypeError, match="str"):
        t.scale("2")
    with pytest.raises(TypeError, match="dtype"):
        t + ["a", "b", "c"]


def test_scalar_arithmetic_with_unsupported_types():
    """Scalar + "x", Scalar + Tensor, Scalar ** "2": TypeError naming what was wrong."""
    a = mt.Scalar(1.0)
    with pytest.raises(TypeError, match="str"):
        a + "x"
    with pytest.raises(TypeError, match="str"):
        "x" * a
    with pytest.raises(TypeError, match="Tensor"):
        a + mt.Tensor(np.ones(2))
    with pytest.raises(TypeError, match="exponent"):
        a ** "2"  # (a Scalar exponent is the power op: tests/numpy_api/test_numpy_surface.py)


# ---------------------------------------------------------------- shapes


def test_shape_mismatch_in_add():
    """(2, 3) + (4,) is a ValueError naming both shapes, either way round."""
    a = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    b = mt.Tensor(np.ones(4), requires_grad=True)
    for fn in (lambda: a + b, lambda: b + a, lambda: a * np.ones(4), lambda: np.ones(4) - a):
        with pytest.raises(ValueError) as info:
            fn()
        message = str(info.value)
        assert "(2, 3)" in message and "(4,)" in message


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((2, 3), (2, 3)), ((2, 3, 4), (3, 5)), ((4,), (3,)), ((2, 3, 4), (3, 4, 5)), ((), (3,))],
    ids=str,
)
def test_shape_mismatch_in_matmul(shape_a, shape_b):
    """a @ b with incompatible shapes is a ValueError naming both shapes."""
    a = mt.Tensor(np.ones(shape_a), requires_grad=True)
    b = mt.Tensor(np.ones(shape_b), requires_grad=True)
    with pytest.raises(ValueError) as info:
        a @ b
    message = str(info.value)
    assert str(shape_a) in message and str(shape_b) in message


def test_constant_shape_mismatch():
    """add_constant and dropout with a constant of the wrong shape: ValueError naming both shapes."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as info:
        x.add_constant(np.zeros((4, 4)))
    assert "(4, 4)" in str(info.value) and "(2, 3)" in str(info.value)
    with pytest.raises(ValueError) as info:
        x.dropout(np.ones(3))
    assert "(3,)" in str(info.value) and "(2, 3)" in str(info.value)


def test_add_constant_mask_must_not_require_grad():
    """The mask of add_constant must be a constant: ValueError up front."""
    x = mt.Tensor(np.ones(3), requires_grad=True)
    mask = mt.Tensor(np.zeros(3), requires_grad=True)
    with pytest.raises(ValueError, match="constant"):
        x.add_constant(mask)


def test_dropout_keep_mask_must_not_require_grad():
    """The keep mask of dropout must be a constant: ValueError up front, as for add_constant.

    (Otherwise the call succeeds and the error only surfaces later, inside backward.)
    """
    x = mt.Tensor(np.ones(3), requires_grad=True)
    keep = mt.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match="keep"):
        x.dropout(keep)


@pytest.mark.parametrize("shape", [(4, -1), (5,), (-1, -1), (2, -2), (7, 1)], ids=str)
def test_reshape_to_an_impossible_shape(shape):
    """reshape to a shape that cannot hold the values is a ValueError naming both shapes."""
    t = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as info:
        t.reshape(shape)
    message = str(info.value)
    assert "(2, 3)" in message and str(shape[0]) in message


def test_reshape_with_a_non_integer_size():
    """reshape(2.5, 2) is a TypeError naming the bad size (not silently rounded to (2, 2))."""
    t = mt.Tensor(np.ones(4), requires_grad=True)
    with pytest.raises(TypeError, match="2.5"):
        t.reshape(2.5, 2)


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda t: t.sum(axis=2), "axis=2"),
        (lambda t: t.mean(axis=-3), "axis=-3"),
        (lambda t: t.max(axis=(0, 5)), "(0, 5)"),
        (lambda t: t.softmax(axis=2), "axis=2"),
        (lambda t: t.swapaxes(0, 2), "2"),
        (lambda t: t.transpose(0, 2), "(0, 2)"),
        (lambda t: t.transpose(0, 3), "(0, 3)"),
        (lambda t: t.transpose(0, -3), "(0, -3)"),
        (lambda t: t.transpose(1, 1), "(1, 1)"),
        (lambda t: t.transpose(0), "(0,)"),
    ],
    ids=[
        "sum",
        "mean",
        "max",
        "softmax",
        "swapaxes",
        "transpose-2",
        "transpose-3",
        "transpose-neg3",
        "transpose-dup",
        "transpose-short",
    ],
)
def test_bad_axis(call, named):
    """An axis out of range (or not a permutation) is a ValueError naming the axis and the shape."""
    t = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as info:
        call(t)
    message = str(info.value)
    assert named in message and "(2, 3)" in message


# ---------------------------------------------------------------- values outside the domain


def test_scalar_values_outside_the_domain():
    """Scalar.log(0) and (-1) ** 0.5 are ValueErrors naming the value, not NaN."""
    with pytest.raises(ValueError, match="0.0"):
        mt.Scalar(0.0).log()
    with pytest.raises(ValueError, match="-1.0"):
        mt.Scalar(-1.0) ** 0.5


def test_tensor_log_of_non_positive_values():
    """Tensor.log of an array with a non-positive entry is a ValueError, not NaNs passed on silently."""
    t = mt.Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    with pytest.raises(ValueError, match="log"):
        t.log()


def test_tensor_fractional_power_of_negative_values():
    """Tensor ** 0.5 of an array with a negative entry is a ValueError, like Scalar's."""
    t = mt.Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    with pytest.raises(ValueError, match="0.5"):
        t**0.5


# ---------------------------------------------------------------- edges the peers' suites found (micrograd, MyGrad…)


def test_x_to_the_zero_has_gradient_zero_even_at_zero():
    """d/dx x**0 = 0 everywhere (torch and MyGrad agree); 0 * 0**-1 would give NaN."""
    x = mt.Tensor(np.array([0.0, 2.0]), requires_grad=True)
    assert np.array_equal(mt.gradients((x**0).sum())[x], [0.0, 0.0])
    a = mt.Scalar(0.0)
    (a**0).backward()
    assert a.grad == 0.0


def test_scalar_and_tensor_agree_on_powers_of_zero():
    """0 ** 0.5 is a real number (0) for both kinds; its gradient is +inf for both; 0 ** -1 is refused by both."""
    assert mt.Scalar(0.0).sqrt().data == 0.0 and (mt.Scalar(0.0) ** 0.5).data == 0.0
    assert mt.Tensor(0.0).sqrt().data == 0.0
    a = mt.Scalar(0.0)
    a.sqrt().backward()
    t = mt.Tensor(np.array(0.0), requires_grad=True)
    assert a.grad == np.inf and mt.gradients(t.sqrt())[t] == np.inf
    for zero in (mt.Scalar(0.0), mt.Tensor(np.zeros(2))):
        with pytest.raises(ValueError, match="negative power of 0"):
            zero**-1.0


@pytest.mark.parametrize("axis", [True, 2.0, (0, 0), 2])
def test_softmax_refuses_a_bad_axis_before_recording(axis):
    """A bool, a float, a repeated axis or one out of range is refused before anything is recorded."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with mt.Tape() as tape, pytest.raises((ValueError, TypeError), match="axis"):
        x.softmax(axis=axis)
    assert len(tape) == 0


@pytest.mark.parametrize("method", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [None, (0, 1), (1, 0), (-1,)])
def test_softmax_over_several_axes_or_all(method, axis):
    """Over a tuple of axes or None: normalised over all those entries together (numpy by the definition)."""
    x0 = np.random.default_rng(3).standard_normal((2, 3, 2))[:, :, 0]
    got = getattr(mt.Tensor(x0), method)(axis=axis).data
    e = np.exp(x0 - x0.max(axis=axis, keepdims=True))
    expected = e / e.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(got, expected if method == "softmax" else np.log(expected), rtol=1e-12)


def test_softmax_of_a_0d_tensor_is_one_with_gradient_zero():
    x = mt.Tensor(np.array(2.5), requires_grad=True)
    for axis in (-1, 0, None):
        assert x.softmax(axis=axis).data == 1.0 and x.log_softmax(axis=axis).data == 0.0
    x.softmax().backward()
    assert x.grad == 0.0
    with pytest.raises(ValueError, match="axis"):
        x.softmax(axis=1)


def test_empty_reductions_are_refused_by_name():
    empty = mt.Tensor(np.zeros((2, 0)), requires_grad=True)
    for call in (lambda: empty.softmax(-1), lambda: empty.max(), lambda: empty.mean(axis=1)):
        with pytest.raises(ValueError, match="empty"):
            call()
    assert empty.sum(axis=1).data.tolist() == [0.0, 0.0]  # a sum over nothing is 0: allowed


@pytest.mark.parametrize(
    ("axis", "error"), [((0, 0), ValueError), (True, TypeError), (2.0, TypeError), (5, ValueError)]
)
def test_bad_axes_are_named(axis, error):
    x = mt.Tensor(np.ones((2, 3)))
    with pytest.raises(error, match="axis"):
        x.sum(axis=axis)


def test_keepdims_must_be_a_bool():
    with pytest.raises(TypeError, match="keepdims"):
        mt.Tensor(np.ones(3)).sum(keepdims="yes")


def test_comparisons_are_elementwise_and_not_recorded():
    x = mt.Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = mt.Tensor(np.array([1.0, 0.0, 3.0]))
    with mt.Tape() as tape:
        equal, less, greater = x == y, x < 2.5, x >= y
    assert len(tape) == 0
    assert equal.tolist() == [True, False, True] and less.tolist() == [True, True, False]
    assert greater.dtype == np.bool_ and greater.all()
    assert (x != y).tolist() == [False, True, False]
    assert len({x, y}) == 2  # hashing stays by identity


def test_numbers_too_large_and_ragged_lists_are_named():
    with pytest.raises(ValueError, match="too large"):
        mt.Scalar(10**400)
    with pytest.raises(ValueError, match="rectangular"):
        mt.Tensor([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="masked"):
        mt.Tensor(np.ma.masked_invalid([1.0, np.nan]))


def test_no_runtime_warning_leaks():
    """softmax over [1.7e308, -1.7e308] (the gap overflows) gives [1, 0] quietly."""
    x = mt.Tensor(np.array([1.7e308, -1.7e308]), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = x.softmax()
        grad = mt.gradients(weights, np.array([1.0, 0.0]))[x]
    assert weights.data.tolist() == [1.0, 0.0] and np.all(np.isfinite(grad))
