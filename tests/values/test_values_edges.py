"""Scalars and Tensors at the edges (issue #37): NaN kept, infinities said, numpy's meaning or a clear refusal.

Every expected value here is PyTorch's (float64) or numpy's, written as a
number; each test runs with warnings as errors ("no printed warning").
"""

import math
import warnings

import numpy as np
import pytest

import microtape as mt
from microtape.check import gradcheck, gradgradcheck

S = mt.Scalar
NAN, INF = math.nan, math.inf


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# -- NaN in, NaN out (as Tensor, numpy and PyTorch)


def test_scalar_relu_and_clip_keep_a_nan():
    assert math.isnan(S(NAN).relu().data)
    assert math.isnan(S(1.0).clip(lower=NAN, upper=2).data)
    assert math.isnan(S(1.0).clip(lower=0, upper=NAN).data)
    assert S(-1.0).relu().data == 0.0 and S(3.0).relu().data == 3.0
    assert S(5.0).clip(lower=0, upper=2).data == 2.0
    assert np.isnan(mt.Tensor([NAN]).relu().data).all()


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
@pytest.mark.parametrize("value", [INF, -INF])
def test_scalar_trig_at_infinity_is_nan_like_the_tensor(name, value):
    assert math.isnan(getattr(S(value), name)().data)
    with np.errstate(invalid="ignore"):  # numpy's own sin(inf) warns: so does the Tensor's, as numpy
        assert np.isnan(getattr(mt.Tensor([value]), name)().data).all()


def test_scalar_sqrt_of_nan_and_inf_is_numpys():
    assert math.isnan(S(NAN).sqrt().data)
    assert S(INF).sqrt().data == INF
    with pytest.raises(ValueError, match="overflows a float"):
        S(1e300) ** 3.0  # a finite value whose power is not: still refused


# -- norm: numpy's ord, or refused by name


def test_norm_ord_2_of_a_matrix_is_refused_not_answered_with_frobenius():
    m = mt.Tensor(np.arange(6.0).reshape(2, 3))
    for call in (lambda: mt.norm(m, ord=2), lambda: np.linalg.norm(m, ord=2), lambda: m.norm(axis=(0, 1), ord=2)):
        with pytest.raises(ValueError, match=r"ord=2\): on a matrix .*largest singular value"):
            call()


def test_norm_ords_that_mean_the_two_norm_agree_with_numpy():
    data = np.arange(6.0).reshape(2, 3)
    m, v = mt.Tensor(data), mt.Tensor([3.0, 4.0])
    np.testing.assert_allclose(m.norm(ord="fro").data, np.linalg.norm(data, "fro"), rtol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(m, ord="fro").data, np.linalg.norm(data, "fro"), rtol=1e-15)
    np.testing.assert_allclose(m.norm(axis=1, ord=2).data, np.linalg.norm(data, ord=2, axis=1), rtol=1e-15)
    assert v.norm(ord=2).data == 5.0 and v.norm(ord=2.0).data == 5.0


@pytest.mark.parametrize("ord_", [1, np.inf, -1, 0, "nuc", "fro", True])
def test_other_vector_ords_are_refused(ord_):
    with pytest.raises(ValueError, match=r"on a vector only ord=None or 2"):
        mt.Tensor([3.0, 4.0]).norm(ord=ord_)


def test_ord_over_three_axes_is_refused_as_numpy_does():
    with pytest.raises(ValueError, match="needs a vector or a matrix"):
        mt.Tensor(np.ones((2, 2, 2))).norm(ord=2)


# -- infinite first derivatives: ±inf (PyTorch's), a second derivative ±inf or NaN, never an error


@pytest.mark.parametrize(
    "name, value, first, second",
    [("arcsin", 1.0, INF, INF), ("arccos", 1.0, -INF, -INF), ("sqrt", 0.0, INF, -INF), ("cbrt", 0.0, INF, -INF)],
)
def test_second_order_where_the_slope_is_infinite(name, value, first, second):
    x = S(value)
    grad = mt.gradients(getattr(x, name)(), create_graph=True)[x]
    assert grad.data == first
    again = mt.gradients(grad)[x]
    assert again == second if second is not None else (math.isinf(again) or math.isnan(again))


def test_hvp_of_a_square_root_at_zero():
    assert mt.hvp(lambda x: x.sqrt(), 0.0, 1.0) == -INF


def test_arctan2_at_the_origin_has_pytorchs_slopes():
    a, b = S(0.0), S(0.0)
    grads = mt.gradients(a.arctan2(b))
    assert grads[a] == 0.0 and grads[b] == 0.0 and math.copysign(1.0, grads[b]) == -1.0
    ta, tb = mt.Tensor([0.0, 1.0], requires_grad=True), mt.Tensor([0.0, 1.0], requires_grad=True)
    mt.arctan2(ta, tb).sum().backward()
    np.testing.assert_array_equal(ta.grad, [0.0, 0.5])
    np.testing.assert_array_equal(tb.grad, [-0.0, -0.5])


# -- no warning for a legal input whose numpy forward is silent


def test_arctan_of_a_huge_value_has_slope_zero_silently():
    x = mt.Tensor([1e200], requires_grad=True)
    mt.arctan(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0])


def test_logaddexp_of_two_minus_infinities_is_nan_silently():
    a, b = mt.Tensor([-INF], requires_grad=True), mt.Tensor([-INF], requires_grad=True)
    y = mt.logaddexp(a, b)
    assert y.data[0] == -INF
    y.sum().backward()
    assert np.isnan(a.grad).all() and np.isnan(b.grad).all()  # PyTorch's NaN


def test_log_softmax_of_extreme_values_is_silent_like_softmax():
    np.testing.assert_array_equal(mt.log_softmax(mt.Tensor([1.7e308, -1.7e308])).data, [0.0, -INF])
    np.testing.assert_array_equal(mt.softmax(mt.Tensor([1.7e308, -1.7e308])).data, [1.0, 0.0])


# -- arguments named in the message


@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_gradgradcheck_names_a_bad_seed(seed):
    with pytest.raises(ValueError, match=r"gradgradcheck\(seed="):
        gradgradcheck(lambda x: (x * x * x).sum(), np.ones(3), seed=seed)


def test_split_takes_a_whole_float_as_numpy_does():
    x = mt.Tensor(np.arange(12.0).reshape(2, 6))
    pieces = mt.split(x, 3.0, axis=1)
    for piece, expected in zip(pieces, np.split(x.data, 3, axis=1)):
        np.testing.assert_array_equal(piece.data, expected)
    with pytest.raises(TypeError, match=r"split\(indices_or_sections=2.5\)"):
        mt.split(x, 2.5, axis=1)


# -- the checkers leave the caller's tape alone


@pytest.mark.parametrize("check", [gradcheck, gradgradcheck])
def test_checkers_record_nothing_on_an_open_tape(check):
    with mt.Tape() as tape:
        keep = mt.Tensor([1.0, 2.0], requires_grad=True) * 2.0
        before = len(tape)
        assert check(lambda x: (x * x * x).sum(), np.array([0.5, 1.5])).ok
        assert len(tape) == before
    assert keep.data.tolist() == [2.0, 4.0]
