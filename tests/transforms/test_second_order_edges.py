"""Second order at the edges (issue #37): no silent wrong answer, no error from deep inside.

A recorded reverse pass (``create_graph=True``) refuses what the plain pass
refuses, keeps the dtype rule, and where no second derivative exists it says
so with NaN (PyTorch's values, written here as numbers: NaN, ±inf, 0).
"""

import math
import warnings

import numpy as np
import pytest

import microtape as mt


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    # "Without a printed warning": any RuntimeWarning from numpy fails the test.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# -- .grad that cannot take the sum: refused as the plain pass refuses it, nothing changed


@pytest.mark.parametrize("shape", [(3, 1), (1,)])
@pytest.mark.parametrize("create_graph", [False, True])
def test_a_grad_of_the_wrong_shape_is_refused_not_broadcast(shape, create_graph):
    x = mt.Tensor([1.0, 2.0, 3.0], requires_grad=True)
    old = np.zeros(shape)
    x.grad = old
    with pytest.raises(TypeError, match=rf"\.grad = an ndarray of dtype float64 and shape \({shape[0]},"):
        (x * x).sum().backward(create_graph=create_graph)
    assert x.grad is old and old.shape == shape


def test_a_recorded_grad_of_the_wrong_shape_is_refused_too():
    x = mt.Tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.grad = mt.Tensor(np.zeros((3, 1)))
    with pytest.raises(TypeError, match=r"\.grad = a Tensor of shape \(3, 1\)"):
        (x * x).sum().backward(create_graph=True)


def test_a_scalar_whose_grad_is_an_array_is_refused_under_create_graph():
    x = mt.Scalar(2.0)
    x.grad = np.zeros(3)
    with pytest.raises(TypeError, match=r"\.grad = an ndarray .* expected a real number"):
        (x * x).backward(create_graph=True)
    assert isinstance(x.grad, np.ndarray) and x.grad.dtype == np.float64


def test_junk_grad_is_named_under_create_graph():
    x = mt.Tensor([1.0, 2.0], requires_grad=True)
    x.grad = "junk"
    with pytest.raises(TypeError, match=r"has \.grad = a str \('junk'\)"):
        (x * x).sum().backward(create_graph=True)
    assert x.grad == "junk"


def test_a_good_grad_still_accumulates_under_create_graph():
    x = mt.Tensor([1.0, 2.0], requires_grad=True)
    x.grad = np.array([10.0, 20.0])
    (x * x).sum().backward(create_graph=True)
    np.testing.assert_array_equal(x.grad.data, [12.0, 24.0])


# -- the dtype rule and the seed, as in the plain pass


def test_create_graph_keeps_the_dtype_rule():
    for create_graph in (False, True):
        x = mt.Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
        (x * np.array([2.0, 3.0])).sum().backward(create_graph=create_graph)
        grad = x.grad.data if create_graph else x.grad
        assert grad.dtype == np.float32, create_graph
        np.testing.assert_array_equal(grad, [2.0, 3.0])


def test_the_float32_gradient_still_differentiates():
    x = mt.Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = (x * x * np.array([2.0, 3.0])).sum()
    (grad,) = [mt.gradients(y, create_graph=True)[x]]
    assert grad.dtype == np.float32
    second = mt.gradients(grad.sum())[x]
    np.testing.assert_array_equal(second, [4.0, 6.0])


@pytest.mark.parametrize("kind", ["tensor", "array"])
def test_a_nan_seed_is_refused_whatever_its_kind(kind):
    x = mt.Tensor([1.0, 2.0], requires_grad=True)
    seed = np.array([np.nan, 1.0])
    with pytest.raises(ValueError, match="seed gradient must be finite"):
        mt.gradients(x * 2, mt.Tensor(seed) if kind == "tensor" else seed, create_graph=True)


def test_an_infinite_scalar_seed_is_refused_under_create_graph():
    a = mt.Scalar(2.0)
    with pytest.raises(ValueError, match="must be finite"):
        mt.gradients(a * a, mt.Scalar(math.inf), create_graph=True)


# -- no second derivative: NaN (PyTorch's), not the derivative of a chosen branch


def test_hessian_of_the_norm_at_zero_is_nan_and_its_gradient_zero():
    assert np.isnan(mt.hessian(lambda v: v.norm(), np.zeros(3))).all()
    x = mt.Tensor(np.zeros(3), requires_grad=True)
    np.testing.assert_array_equal(mt.gradients(x.norm(), create_graph=True)[x].data, np.zeros(3))
    # Away from the kink nothing changes: H = (I - u uᵀ) / ‖x‖.
    x0 = np.array([3.0, 4.0, 0.0])
    u = x0 / 5.0
    np.testing.assert_allclose(mt.hessian(lambda v: v.norm(), x0), (np.eye(3) - np.outer(u, u)) / 5.0, atol=1e-12)


def test_hessian_of_a_norm_over_an_axis_is_nan_only_for_the_zero_row():
    x0 = np.array([[0.0, 0.0], [3.0, 4.0]])
    h = mt.hessian(lambda v: v.norm(axis=1).sum(), x0).reshape(4, 4)
    assert np.isnan(h[:2, :2]).all()
    np.testing.assert_allclose(h[2:, 2:], (np.eye(2) - np.outer([0.6, 0.8], [0.6, 0.8])) / 5.0, atol=1e-12)


def test_hessian_of_power_at_zero_to_the_zero_is_nan():
    h = mt.hessian(lambda z: z[0] ** z[1], np.zeros(2))
    assert np.isnan(h[0, 1]) and np.isnan(h[1, 0])
    # At (0, 2) a**b = a**2 is smooth in a: d²/da² = 2, as before.
    np.testing.assert_allclose(mt.hessian(lambda z: z[0] ** z[1], np.array([0.0, 2.0]))[0, 0], 2.0)


# -- std and norm: one rule at the kink (PyTorch's): gradient 0, second derivative NaN


@pytest.mark.parametrize(
    "values, options",
    [([1.0, 1.0, 1.0], {}), ([5.0], {}), ([1.0, 2.0], {"axis": ()}), ([[2.0, 2.0], [1.0, 3.0]], {"axis": 1})],
)
def test_std_at_zero_variance_has_gradient_zero_like_the_norm(values, options):
    x = mt.Tensor(values, requires_grad=True)
    x.std(**options).sum().backward()
    data = np.array(values)
    expected = np.zeros_like(data)
    if options.get("axis") == 1:  # the second row has a spread: (x - mean) / (n std)
        expected[1] = [-0.5, 0.5]
    np.testing.assert_allclose(x.grad, expected, atol=1e-15)
    assert np.isfinite(x.grad).all()


def test_std_away_from_the_kink_matches_numpy_and_its_gradient():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(3, 4))
    for ddof in (0, 1):
        x = mt.Tensor(data, requires_grad=True)
        y = x.std(axis=1, ddof=ddof)
        np.testing.assert_allclose(y.data, data.std(axis=1, ddof=ddof), rtol=1e-14)
        y.sum().backward()
        centered = data - data.mean(axis=1, keepdims=True)
        expected = centered / ((data.shape[1] - ddof) * data.std(axis=1, ddof=ddof, keepdims=True))
        np.testing.assert_allclose(x.grad, expected, atol=1e-12)


# -- second order where the first derivative is infinite: ±inf or NaN, no error, no warning


def test_second_order_of_a_square_root_at_zero():
    h = mt.hessian(lambda x: (x**0.5).sum(), np.zeros(2))
    assert h[0, 0] == -math.inf and h[1, 1] == -math.inf
    assert np.isnan(h[0, 1]) and np.isnan(h[1, 0])
    np.testing.assert_array_equal(mt.hvp(lambda x: (x**0.5).sum(), np.zeros(2), np.ones(2)), [-math.inf, -math.inf])
    x = mt.Scalar(0.0)
    grad = mt.gradients(x.sqrt(), create_graph=True)[x]
    assert grad.data == math.inf
    assert mt.gradients(grad)[x] == -math.inf


# -- std at zero variance and cbrt at 0: PyTorch's second derivatives, and no numpy warning


def test_hessian_of_std_at_zero_variance_is_zero_as_pytorch():
    """PyTorch's std_backward masks where the result is 0, so its second derivative there is 0 (the norm's is NaN)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning on the way
        np.testing.assert_array_equal(mt.hessian(lambda v: v.std(), np.full(3, 2.0)), np.zeros((3, 3)))
        rows = mt.hessian(lambda v: v.std(axis=1, ddof=1).sum(), np.array([[1.0, 1.0], [1.0, 3.0]])).reshape(4, 4)
    np.testing.assert_array_equal(rows[:2, :2], np.zeros((2, 2)))  # the constant row
    # The moving row: std = |a - b| / √2, so its Hessian there is 0 too (a line), and the gradient ±1/√2.
    np.testing.assert_allclose(rows[2:, 2:], np.zeros((2, 2)), atol=1e-12)
    x = mt.Tensor(np.array([1.0, 2.0, 4.0]), requires_grad=True)
    assert mt.check.gradgradcheck(lambda v: v.std() * v.sum(), x.data).ok  # away from the kink: unchanged


def test_second_derivative_of_cbrt_at_zero_is_minus_inf_as_pytorch():
    """(x^(1/3))'' = −2/9 · x^(−5/3): −inf at 0 (PyTorch's x.pow(1/3)), not NaN, and numpy stays quiet."""
    import warnings

    x = mt.Tensor(np.array([0.0, 1.0, -8.0]), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = mt.gradients(mt.cbrt(x).sum(), create_graph=True)[x]
        second = mt.gradients(first.sum(), create_graph=True)[x]
    assert first.data[0] == np.inf and second.data[0] == -np.inf
    np.testing.assert_allclose(first.data[1:], [1 / 3, 1 / 12], rtol=1e-14)
    np.testing.assert_allclose(second.data[1:], [-2 / 9, -2 / 9 / (-2.0) ** 5], rtol=1e-14)
