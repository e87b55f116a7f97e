"""numpy's own functions on Tensors record on the tape, or refuse by name; comparisons stay plain.

References: numpy's functions on the same plain arrays (values) and central
finite differences (gradients, ``mt.check.gradcheck``). Every entry of the
protocol's tables is called at least once (``test_every_listed_function_is_exercised``).
"""

import numpy as np
import pytest

import microtape as mt
from microtape.check import gradcheck
from microtape.numpy_api.protocol import FUNCTIONS, UFUNCS, numpy_name

RNG = np.random.default_rng(13)
X = RNG.uniform(0.5, 0.9, (2, 3))
Y = RNG.uniform(0.5, 0.9, (2, 3))


def _unary(ufunc):
    return lambda a: ufunc(a)


# A call of numpy's function as a student writes it, on one or two inputs of X's shape.
NUMPY_CALLS = {
    np.add: lambda a, b: np.add(a, b),
    np.subtract: lambda a, b: np.subtract(a, b),
    np.multiply: lambda a, b: np.multiply(a, b),
    np.divide: lambda a, b: np.divide(a, b),
    np.power: lambda a, b: np.power(a, b),
    np.matmul: lambda a, b: np.matmul(a, b.T),
    np.negative: lambda a: np.negative(a),
    np.positive: lambda a: np.positive(a) * 2.0,
    np.maximum: lambda a, b: np.maximum(a, b),
    np.minimum: lambda a, b: np.minimum(a, b),
    np.logaddexp: lambda a, b: np.logaddexp(a, b),
    np.logaddexp2: lambda a, b: np.logaddexp2(a, b),
    np.arccosh: lambda a: np.arccosh(a + 1.0),  # its domain is x >= 1
    np.arctan2: lambda a, b: np.arctan2(a, b),
    np.absolute: lambda a: np.abs(a - 0.7),
    **{getattr(np, name): _unary(getattr(np, name)) for name in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "square", "reciprocal",
        "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arctanh",
    )},
    np.sum: lambda a: np.sum(a, axis=1),
    np.mean: lambda a: np.mean(a, axis=0, keepdims=True),
    np.max: lambda a: np.max(a, axis=1),
    np.amax: lambda a: np.amax(a),
    np.min: lambda a: np.min(a, 0),
    np.amin: lambda a: np.amin(a, axis=(0, 1)),
    np.prod: lambda a: np.prod(a, axis=1),
    np.var: lambda a: np.var(a, axis=1, ddof=1),
    np.std: lambda a: np.std(a, ddof=1, axis=0),
    np.cumsum: lambda a: np.cumsum(a, axis=1),
    np.cumprod: lambda a: np.cumprod(a),
    np.clip: lambda a: np.clip(a, 0.6, 0.8),
    np.where: lambda a, b: np.where(np.array([True, False, True]), a, b),
    np.einsum: lambda a, b: np.einsum("ij,kj->ik", a, b, optimize=True),
    np.dot: lambda a, b: np.dot(a, b.T),
    np.outer: lambda a, b: np.outer(a, b),
    np.linalg.norm: lambda a: np.linalg.norm(a, axis=1),
    np.reshape: lambda a: np.reshape(a, (3, 2)),
    np.transpose: lambda a: np.transpose(a),
    np.squeeze: lambda a: np.squeeze(np.expand_dims(a, 0)),
    np.expand_dims: lambda a: np.expand_dims(a, 1),
    np.broadcast_to: lambda a: np.broadcast_to(a, (4, 2, 3)),
    np.flip: lambda a: np.flip(a, axis=0),
    np.repeat: lambda a: np.repeat(a, 2, axis=1),
    np.tile: lambda a: np.tile(a, 2),
    np.concatenate: lambda a, b: np.concatenate([a, b], axis=1),
    np.stack: lambda a, b: np.stack([a, b]),
    np.split: lambda a: np.split(a, 3, axis=1)[1],
    np.pad: lambda a: np.pad(a, 1, mode="constant", constant_values=0.25),
}  # fmt: skip


def _arity(call):
    return call.__code__.co_argcount - len(call.__defaults__ or ())


@pytest.mark.parametrize("func", list(NUMPY_CALLS), ids=lambda f: f.__name__)
def test_numpy_function_on_tensors_records_its_value_and_gradient(func):
    call = NUMPY_CALLS[func]
    arrays = (X, Y)[: _arity(call)]
    tensors = [mt.Tensor(a.copy(), requires_grad=True) for a in arrays]
    with mt.Tape() as tape:
        out = call(*tensors)
    assert isinstance(out, mt.Tensor) and out.requires_grad and len(tape) > 0, func.__name__
    np.testing.assert_allclose(out.data, call(*arrays), rtol=1e-13, atol=1e-15)
    result = gradcheck(call, *arrays, atol=1e-7, rtol=1e-6)
    assert result, f"{func.__name__}: {result}"


def test_every_listed_function_is_exercised():
    assert set(UFUNCS) | set(FUNCTIONS) <= set(NUMPY_CALLS)


def test_an_array_on_the_left_of_an_operator_records_too():
    t = mt.Tensor(X.copy(), requires_grad=True)
    for out in (Y + t, Y - t, Y * t, Y / t, Y @ t.T):
        assert isinstance(out, mt.Tensor) and out.requires_grad
    (Y * t).sum().backward()
    np.testing.assert_array_equal(t.grad, Y)


def test_comparisons_and_questions_stay_plain():
    """np.less(t, 0.7), np.isfinite(t), np.shape(t), np.allclose(t, X): plain numpy answers, no gradient."""
    t = mt.Tensor(X.copy(), requires_grad=True)
    with mt.Tape() as tape:
        less = np.less(t, 0.7)
        finite = np.isfinite(t)
        assert np.shape(t) == (2, 3) and np.ndim(t) == 2 and np.allclose(t, X) and np.argmax(t) == np.argmax(X)
    assert len(tape) == 0
    assert type(less) is np.ndarray and less.dtype == bool
    np.testing.assert_array_equal(less, X < 0.7)
    assert finite.all()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda t: np.floor(t), r"numpy\.floor is not supported.*t\.data"),
        (lambda t: np.add.reduce(t), r"numpy\.add\.reduce is not supported"),
        (lambda t: np.exp(t, out=np.empty((2, 3))), r"numpy\.exp on a Tensor: keyword\(s\) out"),
        (lambda t: np.sort(t), r"numpy\.sort is not supported.*numpy\.sum"),
        (lambda t: np.copy(t), r"numpy\.copy is not supported.*drop the tape"),
        (lambda t: np.linalg.inv(t[:, :2]), r"numpy\.linalg\.inv is not supported"),
        (lambda t: np.sum(t, dtype=np.float32), r"numpy\.sum on a Tensor: the argument dtype=.* not supported"),
        (lambda t: np.mean(t, where=t.data > 0), r"numpy\.mean on a Tensor: the argument where=<ndarray> is not"),
        (lambda t: np.where(t), r"numpy\.where\(condition\) with one argument .* np\.nonzero\(t\.data\)"),
    ],
)
def test_unsupported_numpy_functions_are_refused_by_name(call, words):
    t = mt.Tensor(X.copy(), requires_grad=True)
    with mt.Tape() as tape, pytest.raises(TypeError, match=words):
        call(t)
    assert len(tape) <= 1  # (the inv case records its index t[:, :2] before numpy is asked)


def test_an_integer_array_becomes_a_float_tensor_that_takes_a_gradient():
    t = mt.Tensor(np.array([1, 2, 3]), requires_grad=True)
    assert t.dtype == np.float64
    np.sum(np.square(t)).backward()
    np.testing.assert_array_equal(t.grad, [2.0, 4.0, 6.0])


def test_numpy_ufuncs_on_a_scalar_call_its_methods():
    """numpy's object path calls the Scalar's method of the ufunc's name: np.sin(a) is a.sin(), recorded."""
    a = mt.Scalar(0.5)
    y = np.sin(a) * np.exp(a)
    assert isinstance(y, mt.Scalar)
    y.backward()
    assert a.grad == pytest.approx(np.exp(0.5) * (np.cos(0.5) + np.sin(0.5)), rel=1e-15)


def test_an_unsupported_function_of_a_numpy_submodule_is_named_in_full():
    # np.fft.fft was once named "numpy.fft" (the module's last part mistaken for the function).
    t = mt.Tensor(np.arange(4.0), requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.fft\.fft is not supported"):
        np.fft.fft(t)
    assert numpy_name(np.linalg.norm) == "numpy.linalg.norm"
    assert numpy_name(np.sum) == "numpy.sum"


def test_a_list_of_tensors_is_stacked_first_and_its_gradient_flows():
    """docs/trust.md: numpy on a list sees only values; the documented way, mt.stack, records."""
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = mt.Tensor(np.array([3.0, 4.0]), requires_grad=True)
    np.exp(mt.stack([x, y])).sum().backward()
    np.testing.assert_allclose(x.grad, np.exp([1.0, 2.0]), rtol=1e-15)
    np.testing.assert_allclose(y.grad, np.exp([3.0, 4.0]), rtol=1e-15)
    x.grad = y.grad = None
    total = mt.stack([(x * x).sum(), (y * y).sum()]).sum()
    assert isinstance(total, mt.Tensor) and float(total.data) == 30.0
    total.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])
    np.testing.assert_array_equal(y.grad, [6.0, 8.0])


@pytest.mark.parametrize("combine", [np.sum, np.mean])
def test_numpy_on_a_list_of_0d_losses_sees_their_values(combine):
    """np.sum/np.mean of a list of 0-d losses is the plain number (numpy sees values, as for any list of Tensors).

    It used to fail with numpy's "setting an array element with a sequence"; a
    list of 1-d Tensors already gave plain values. The gradient still flows only
    through mt.stack, the documented way.
    """
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    losses = [(x * x).sum(), (x * 3.0).sum()]
    value = combine(losses)
    assert not isinstance(value, mt.Tensor) and value == combine([5.0, 9.0])
    assert float(losses[0]) == 5.0 and float(mt.Tensor(np.array([[7.0]]))) == 7.0
    kept = mt.stack(losses).sum() if combine is np.sum else mt.stack(losses).mean()
    assert float(kept) == value
    kept.backward()
    np.testing.assert_allclose(x.grad, [5.0, 7.0] if combine is np.sum else [2.5, 3.5], rtol=1e-15)


def test_float_of_a_tensor_of_several_numbers_points_to_stack():
    with pytest.raises(TypeError, match=r"float\(Tensor of shape \(2,\)\).*mt.stack"):
        float(mt.Tensor(np.array([1.0, 2.0])))
