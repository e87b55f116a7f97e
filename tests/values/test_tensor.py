"""Tensor: dtypes, numpy interop, constructors, shape ops, reductions and matmul.

Values are checked against numpy; gradients against central finite
differences of the same computation written in plain numpy.
"""

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
