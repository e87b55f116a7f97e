"""Edge cases the peers' suites found (micrograd, minitorch, MyGrad): each one answered or refused up front.

References are hand algebra and PyTorch's documented conventions (``x**0``
has gradient 0 everywhere, a comparison is elementwise and not
differentiable).
"""

import warnings

import numpy as np
import pytest

import microtape as mt


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
