"""numpy's functions at the edges (issue #37): einsum's other forms, axis=None and axis=(), the new ops.

Values are numpy's; gradients are checked with microtape.check.gradcheck
(central differences, float64).
"""

import math
import warnings

import numpy as np
import pytest

import microtape as mt
from microtape.check import gradcheck

RNG = np.random.default_rng(37)
A = RNG.normal(size=(3, 3))
B = RNG.normal(size=(2, 3, 4))
D = RNG.normal(size=(4, 5))
V = RNG.normal(size=3)


# -- einsum: a letter repeated in one operand, '...', the sublist form, optimize=

EINSUM_CASES = [
    ("ii->i", (A,)),  # the diagonal
    ("ii", (A,)),  # the trace (implicit output)
    ("ii->", (A,)),
    ("ij,jj->i", (A, A)),
    ("iij->ij", (RNG.normal(size=(3, 3, 2)),)),
    ("...j,jk->...k", (B, D)),
    ("...jk", (B,)),  # implicit output with '...'
    ("i...,i", (A, V)),
    ("...,...->...", (V, V)),
    ("b...,...->b...", (B, RNG.normal(size=(3, 4)))),
]


@pytest.mark.parametrize("subscripts, operands", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_forms_match_numpy_and_their_gradients_finite_differences(subscripts, operands):
    tensors = [mt.Tensor(x, requires_grad=True) for x in operands]
    np.testing.assert_allclose(mt.einsum(subscripts, *tensors).data, np.einsum(subscripts, *operands), rtol=1e-13)
    assert gradcheck(lambda *xs: mt.einsum(subscripts, *xs), *operands).ok


def test_einsum_trace_gradient_is_the_identity():
    a = mt.Tensor(A, requires_grad=True)
    mt.einsum("ii", a).backward()
    np.testing.assert_array_equal(a.grad, np.eye(3))


def test_einsum_sublist_form():
    a, v = mt.Tensor(A, requires_grad=True), mt.Tensor(V)
    np.testing.assert_allclose(mt.einsum(a, [0, 1], v, [1]).data, np.einsum(A, [0, 1], V, [1]), rtol=1e-14)
    np.testing.assert_allclose(mt.einsum(a, [0, 1], v, [1], [0]).data, A @ V, rtol=1e-14)
    np.testing.assert_allclose(mt.einsum(a, [0, 0]).data, np.trace(A), rtol=1e-14)
    np.testing.assert_allclose(mt.einsum(a, [Ellipsis, 1], v, [1]).data, A @ V, rtol=1e-14)
    np.testing.assert_allclose(np.einsum(a, [0, 1], v, [1]).data, A @ V, rtol=1e-14)  # numpy's call, recorded
    with pytest.raises(ValueError, match="einsum: axis -1 in a sublist"):
        mt.einsum(a, [0, -1])


@pytest.mark.parametrize("optimize", [True, False, "greedy", "optimal"])
def test_einsum_accepts_optimize(optimize):
    a, v = mt.Tensor(A, requires_grad=True), mt.Tensor(V)
    np.testing.assert_allclose(mt.einsum("ij,j->i", a, v, optimize=optimize).data, A @ V, rtol=1e-14)
    np.testing.assert_allclose(np.einsum("ij,j->i", a, v, optimize=optimize).data, A @ V, rtol=1e-14)


@pytest.mark.parametrize(
    "subscripts, shapes, message",
    [
        ("ii->i", [(2, 3)], "letter 'i' has length 2 and 3"),
        ("ij->ii", [(3, 3)], "output letter 'i' appears twice"),
        ("....i", [(3,)], "'...' at most once"),
        ("...ij", [(3,)], "names more axes"),
        ("b...->b", [(2, 3)], "must appear in the output"),
    ],
)
def test_einsum_refusals_name_the_rule(subscripts, shapes, message):
    with pytest.raises(ValueError, match=message):
        mt.einsum(subscripts, *[mt.Tensor(np.ones(s)) for s in shapes])


# -- concatenate(axis=None), softmax over axis=() of a 0-d tensor


def test_concatenate_axis_none_flattens_first_as_numpy():
    a, b = mt.Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True), mt.Tensor([7.0, 8.0], requires_grad=True)
    for joined in (mt.concatenate([a, b], axis=None), np.concatenate([a, b], axis=None)):
        np.testing.assert_array_equal(joined.data, np.concatenate([a.data, b.data], axis=None))
    (mt.concatenate([a, b], axis=None) * np.arange(8.0)).sum().backward()
    np.testing.assert_array_equal(a.grad, np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(b.grad, [6.0, 7.0])


@pytest.mark.parametrize("name, value", [("softmax", 1.0), ("log_softmax", 0.0)])
def test_softmax_over_no_axis_of_a_0d_tensor(name, value):
    x = mt.Tensor(2.5, requires_grad=True)
    y = getattr(mt, name)(x, axis=())
    assert y.data == value
    y.backward()
    assert x.grad == 0.0
    # As on every other shape: axis=() normalises each entry alone.
    np.testing.assert_array_equal(getattr(mt, name)(mt.Tensor([1.0, 2.0]), axis=()).data, [value, value])


# -- the new ops: arcsinh, arccosh, arctanh, logaddexp2


@pytest.mark.parametrize(
    "name, x, reference, slope",
    [
        ("arcsinh", 0.75, np.arcsinh, 1 / math.sqrt(1 + 0.75**2)),
        ("arccosh", 1.75, np.arccosh, 1 / math.sqrt(1.75**2 - 1)),
        ("arctanh", -0.5, np.arctanh, 1 / (1 - 0.25)),
    ],
)
def test_inverse_hyperbolic_functions_on_scalar_tensor_and_numpy(name, x, reference, slope):
    s = mt.Scalar(x)
    y = getattr(s, name)()
    assert y.data == pytest.approx(float(reference(x)), rel=1e-15)
    y.backward()
    assert s.grad == pytest.approx(slope, rel=1e-14)
    t = mt.Tensor([x, x], requires_grad=True)
    ufunc = getattr(np, name)
    for result in (getattr(mt, name)(t), ufunc(t)):
        assert isinstance(result, mt.Tensor)
        np.testing.assert_allclose(result.data, reference(np.array([x, x])), rtol=1e-15)


def test_logaddexp2_on_scalar_tensor_and_numpy():
    a, b = mt.Scalar(3.0), mt.Scalar(1.0)
    y = a.logaddexp2(b)
    assert y.data == pytest.approx(np.logaddexp2(3.0, 1.0), rel=1e-15)
    y.backward()
    assert a.grad == pytest.approx(0.8, rel=1e-14) and b.grad == pytest.approx(0.2, rel=1e-14)
    assert mt.Scalar(-math.inf).logaddexp2(mt.Scalar(-math.inf)).data == -math.inf
    assert mt.Scalar(1e308).logaddexp2(mt.Scalar(1e308)).data == 1e308 + 1.0  # no overflow
    t = mt.Tensor([3.0, -2.0], requires_grad=True)
    np.testing.assert_allclose(np.logaddexp2(t, 1.0).data, np.logaddexp2([3.0, -2.0], 1.0), rtol=1e-15)
    assert gradcheck(lambda p, q: mt.logaddexp2(p, q), np.array([3.0, -2.0]), np.array([1.0, 0.5])).ok


def test_the_new_ops_refuse_values_outside_their_domain():
    with pytest.raises(ValueError, match="arccosh"):
        mt.Scalar(0.5).arccosh()
    with pytest.raises(ValueError, match="arctanh"):
        mt.Tensor([0.0, 1.5]).arctanh()


def test_the_new_ops_at_the_ends_of_their_domain_give_infinite_slopes_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one = mt.Scalar(1.0)
        assert one.arctanh().data == math.inf
        x = mt.Scalar(1.0)
        x.arccosh().backward()
        assert x.grad == math.inf
        second = mt.hvp(lambda v: v.arcsinh(), 0.0, 1.0)  # arcsinh'' = -x / (1 + x²)^1.5
        assert second == 0.0
    assert mt.hvp(lambda v: v.arcsinh(), 1.0, 1.0) == pytest.approx(-(2**-1.5), rel=1e-14)


EINSUM_BROADCAST = [
    ("i,i", [(4,), (1,)]),
    ("i,i", [(1,), (4,)]),
    ("ia,i->a", [(1, 3), (4,)]),
    ("ki,jk->ij", [(1, 3), (4, 5)]),  # k: 1 in a, 5 in b
    ("ij,ij", [(3, 1), (1, 4)]),
    ("i,i,i", [(1,), (3,), (1,)]),
]


@pytest.mark.parametrize("subscripts, shapes", EINSUM_BROADCAST, ids=[f"{c[0]} {c[1]}" for c in EINSUM_BROADCAST])
def test_einsum_broadcasts_a_length_1_axis_as_numpy_and_its_gradient_sums_back(subscripts, shapes):
    """numpy broadcasts a letter of length 1 against a longer one: the same value, the gradient summed back."""
    operands = [RNG.normal(size=shape) for shape in shapes]
    tensors = [mt.Tensor(x, requires_grad=True) for x in operands]
    np.testing.assert_allclose(mt.einsum(subscripts, *tensors).data, np.einsum(subscripts, *operands), rtol=1e-13)
    np.testing.assert_allclose(np.einsum(subscripts, *tensors).data, np.einsum(subscripts, *operands), rtol=1e-13)
    assert gradcheck(lambda *xs: mt.einsum(subscripts, *xs), *operands).ok
    mt.einsum(subscripts, *tensors).sum().backward()
    assert all(t.grad.shape == x.shape for t, x in zip(tensors, operands))


def test_einsum_still_refuses_lengths_that_do_not_broadcast():
    with pytest.raises(ValueError, match="letter 'i' has length 4 and 3"):
        mt.einsum("i,i", np.ones(4), np.ones(3))
    with pytest.raises(ValueError, match="letter 'i' has length 1 and 4 in operand 0"):
        mt.einsum("ii->i", np.ones((1, 4)))  # a diagonal needs a square: numpy refuses it too


def test_einsum_sublists_with_a_number_first_and_their_gradients():
    """numpy's sublist form, also with a plain number as the first operand (MyGrad's case)."""
    c, a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))
    np.testing.assert_allclose(mt.einsum(3.0, [Ellipsis], c, [Ellipsis]).data, 3.0 * c, rtol=1e-15)
    np.testing.assert_allclose(mt.einsum(a, [0, 1], b, [1, 2]).data, a @ b, rtol=1e-13)
    np.testing.assert_allclose(np.einsum(mt.Tensor(a), [0, 1], b, [1, 2], [2, 0]).data, (a @ b).T, rtol=1e-13)
    assert gradcheck(lambda s, t: mt.einsum(s, [0, 1], t, [1, 2]), a, b).ok
    assert gradcheck(lambda s, t: np.einsum(s, [0, 1], t, [2, 0], [1, 2]), RNG.normal(size=(3, 2)), a.T).ok
