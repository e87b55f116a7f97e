"""Scalar: micrograd-style expressions, reflected operators, and agreement with Tensor.

Expected gradients are derived by hand (the algebra is in the docstrings and
comments), never copied from microtape's output.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtape as mt


def test_scalar_holds_a_float():
    """Scalar(value) stores a Python float; ints and numpy numbers are converted."""
    for value in (3, 2.5, np.float32(1.5), np.float64(-0.25), np.int64(7)):
        s = mt.Scalar(value, name="s")
        assert type(s.data) is float and s.data == float(value)
        assert s.grad is None and s.is_leaf and s.name == "s"
    assert float(mt.Scalar(2.5)) == 2.5
    copy = mt.Scalar(mt.Scalar(4.0))
    assert copy.data == 4.0


def test_repr_shows_name_value_and_grad():
    """repr(Scalar) names the variable, its value and (after backward) its gradient."""
    a = mt.Scalar(2.0, name="a")
    assert "a" in repr(a) and "2" in repr(a)
    (a * a).backward()
    assert "grad=4" in repr(a)


def test_micrograd_sanity_expression():
    """micrograd's first sanity check, with the derivative worked out by hand.

    z = 2x + 2 + x = 3x + 2;  q = relu(z) + z x;  h = relu(z z);  y = h + q + q x.
    At x = -4: z = -10 < 0, so relu(z) = 0 (zero gradient) and q = z x = 40;
    z z = 100 > 0, so h = z². Then y = z² + q (1 + x) and
    dy/dx = 2 z · 3 + (3x + z)(1 + x) + q.
    """
    x = mt.Scalar(-4.0)
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    xv = -4.0
    zv = 3 * xv + 2
    qv = zv * xv
    assert y.data == pytest.approx(zv * zv + qv + qv * xv, rel=1e-15)
    assert x.grad == pytest.approx(2 * zv * 3 + (3 * xv + zv) * (1 + xv) + qv, rel=1e-15)


@pytest.mark.parametrize("av, bv", [(-4.0, 2.0), (0.5, -1.5), (1.25, 0.75)])
def test_micrograd_more_ops(av, bv):
    """micrograd's second sanity check, simplified by hand.

    c = 3a + 4b + 3;  d = 12(ab + b³) + 4 relu(a + b) + relu(b - a);  e = c - d;
    f = e²;  g = f / 2 + 10 / f,  so  dg/de = e - 20 / e³  and
    de/da = 3 - 12 b - 4[a + b > 0] + [b - a > 0],
    de/db = 4 - 12(a + 3b²) - 4[a + b > 0] - [b - a > 0].
    """
    a, b = mt.Scalar(av), mt.Scalar(bv)
    c = a + b
    d = a * b + b**3
    c = c + c + 1
    c = c + 1 + c + (-a)
    d = d + d * 2 + (b + a).relu()
    d = d + 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g = g + 10.0 / f
    g.backward()

    pos, neg = float(av + bv > 0), float(bv - av > 0)
    ev = (3 * av + 4 * bv + 3) - (12 * (av * bv + bv**3) + 4 * max(av + bv, 0) + max(bv - av, 0))
    dg_de = ev - 20 / ev**3
    assert g.data == pytest.approx(ev**2 / 2 + 10 / ev**2, rel=1e-13)
    assert a.grad == pytest.approx(dg_de * (3 - 12 * bv - 4 * pos + neg), rel=1e-12)
    assert b.grad == pytest.approx(dg_de * (4 - 12 * (av + 3 * bv**2) - 4 * pos - neg), rel=1e-12)


@pytest.mark.parametrize(
    "expr, value, derivative",
    [
        (lambda a: 2 - a, lambda x: 2 - x, lambda x: -1.0),
        (lambda a: 1 / a, lambda x: 1 / x, lambda x: -1 / x**2),
        (lambda a: 3 * a, lambda x: 3 * x, lambda x: 3.0),
        (lambda a: a**2, lambda x: x**2, lambda x: 2 * x),
        (lambda a: 2 + a, lambda x: 2 + x, lambda x: 1.0),
        (lambda a: a - 2, lambda x: x - 2, lambda x: 1.0),
        (lambda a: a / 4, lambda x: x / 4, lambda x: 0.25),
        (lambda a: a * 5, lambda x: 5 * x, lambda x: 5.0),
        (lambda a: a + 7, lambda x: x + 7, lambda x: 1.0),
        (lambda a: -a, lambda x: -x, lambda x: -1.0),
        (lambda a: a**-1.5, lambda x: x**-1.5, lambda x: -1.5 * x**-2.5),
        (lambda a: a.sqrt(), lambda x: math.sqrt(x), lambda x: 0.5 / math.sqrt(x)),
        (lambda a: 2.0 / a - a / 3.0, lambda x: 2 / x - x / 3, lambda x: -2 / x**2 - 1 / 3),
    ],
    ids=["2-a", "1/a", "3*a", "a**2", "2+a", "a-2", "a/4", "a*5", "a+7", "-a", "a**-1.5", "sqrt", "mixed"],
)
def test_operators_including_reflected(expr, value, derivative):
    """Each operator, plain and reflected (number on the left), has the right value and derivative."""
    for x in (0.7, 2.5):
        a = mt.Scalar(x)
        y = expr(a)
        assert isinstance(y, mt.Scalar)
        y.backward()
        assert y.data == pytest.approx(value(x), rel=1e-15)
        assert a.grad == pytest.approx(derivative(x), rel=1e-14)


@pytest.mark.parametrize(
    "method, derivative",
    [
        ("exp", math.exp),
        ("log", lambda x: 1 / x),
        ("tanh", lambda x: 1 - math.tanh(x) ** 2),
        ("relu", lambda x: 1.0 if x > 0 else 0.0),
    ],
)
@pytest.mark.parametrize("x", [0.3, 1.7, -0.8])
def test_unary_functions(method, derivative, x):
    """exp, log, tanh and relu have the textbook derivatives (relu: 0 for x < 0)."""
    if method == "log" and x <= 0:
        x = -x
    a = mt.Scalar(x)
    y = getattr(a, method)()
    y.backward()
    reference = {"exp": math.exp, "log": math.log, "tanh": math.tanh, "relu": lambda v: max(v, 0.0)}[method]
    assert y.data == pytest.approx(reference(x), rel=1e-15)
    assert a.grad == pytest.approx(derivative(x), rel=1e-14)


def test_python_sum_of_scalars():
    """sum([...]) of Scalars works (0 + a uses the reflected add) and each term gets gradient 1."""
    terms = [mt.Scalar(float(i)) for i in range(5)]
    total = sum(terms)
    total.backward()
    assert total.data == 10.0
    assert [t.grad for t in terms] == [1.0] * 5


def test_backward_with_seed_and_accumulation():
    """backward(grad) scales every gradient; two backward calls add up on the leaves."""
    a = mt.Scalar(3.0)
    y = a * a
    y.backward(0.5)
    assert a.grad == pytest.approx(0.5 * 2 * 3.0)
    y.backward()
    assert a.grad == pytest.approx(0.5 * 6.0 + 6.0)
    a.zero_grad()
    assert a.grad is None


def test_constants_get_no_gradient():
    """Numbers mixed into an expression are constants: they are not leaves requiring a gradient."""
    a = mt.Scalar(2.0)
    y = a * 3.0
    assert y.requires_grad
    constant = y.inputs[1]
    assert constant.data == 3.0 and not constant.requires_grad
    y.backward()
    assert constant.grad is None


def test_comparisons_compare_values_and_hashing_is_identity():
    """<, >, ==, != compare values (plain bools, not recorded); hashing is by identity.

    The convention numpy and PyTorch use for comparisons; equal-valued Scalars
    stay distinct dictionary keys (the reverse pass keys its gradients by node).
    """
    a, b = mt.Scalar(1.0), mt.Scalar(2.0)
    assert a < b and b > a and a <= 1.0 and b >= 2.0
    c = mt.Scalar(1.0)
    assert (a == c) is True and (a != b) is True and (a == 1.0) is True and (a != c) is False
    assert len({a, c}) == 2 and {a: 1, c: 2}[c] == 2
    with mt.Tape() as tape:
        a < b  # noqa: B015 - a comparison records nothing
    assert len(tape) == 0
    assert (a == "1") is False  # not a number: never equal


# ---------------------------------------------------------------- Scalar vs Tensor


def _expression(a, b):
    """An expression written once, run on Scalars and on Tensors."""
    c = a * b + a / b - 2.0 * b
    d = (c.tanh() + (a * a).exp() * 0.1) ** 2
    e = (b * b + 1.0).log() + (a - b).relu() + (1.0 - a) * d
    return e / (1.0 + d)


@settings(max_examples=30, deadline=None)
@given(
    av=st.floats(-1.5, 1.5),
    bv=st.one_of(st.floats(-2.0, -0.3), st.floats(0.3, 2.0)),
    shape=st.sampled_from([(), (1,), (1, 1)]),
)
def test_scalar_and_tensor_agree(av, bv, shape):
    """The same expression on Scalars and on 0-d / 1-element Tensors gives the same value and grads."""
    if abs(av - bv) < 1e-6:
        return  # relu's kink: both sides may legitimately pick a different subgradient
    a, b = mt.Scalar(av), mt.Scalar(bv)
    y = _expression(a, b)
    y.backward()

    ta = mt.Tensor(np.full(shape, av), requires_grad=True)
    tb = mt.Tensor(np.full(shape, bv), requires_grad=True)
    ty = _expression(ta, tb)
    assert ty.shape == shape
    ty.backward()

    assert ty.data.item() == pytest.approx(y.data, rel=1e-12, abs=1e-14)
    assert ta.grad.shape == shape and tb.grad.shape == shape
    assert ta.grad.item() == pytest.approx(a.grad, rel=1e-12, abs=1e-14)
    assert tb.grad.item() == pytest.approx(b.grad, rel=1e-12, abs=1e-14)


def test_scalar_and_tensor_tapes_have_the_same_ops():
    """Scalar and Tensor record the same equations (same ops in the same order) for one expression."""
    with mt.Tape() as scalar_tape:
        _expression(mt.Scalar(0.4), mt.Scalar(1.2))
    with mt.Tape() as tensor_tape:
        _expression(mt.Tensor(0.4, requires_grad=True), mt.Tensor(1.2, requires_grad=True))
    assert [eq.op.name for eq in scalar_tape] == [eq.op.name for eq in tensor_tape]
    assert len(scalar_tape) > 10


def test_scalar_expression_against_finite_differences():
    """A composite Scalar expression's gradients match central differences of the plain formula."""

    def plain(x, y):
        c = x * y + x / y - 2.0 * y
        d = (math.tanh(c) + math.exp(x * x) * 0.1) ** 2
        e = math.log(y * y + 1.0) + max(x - y, 0.0) + (1.0 - x) * d
        return e / (1.0 + d)

    av, bv, eps = 0.3, -0.9, 1e-6
    a, b = mt.Scalar(av), mt.Scalar(bv)
    y = _expression(a, b)
    y.backward()
    assert y.data == pytest.approx(plain(av, bv), rel=1e-14)
    assert a.grad == pytest.approx((plain(av + eps, bv) - plain(av - eps, bv)) / (2 * eps), rel=1e-7)
    assert b.grad == pytest.approx((plain(av, bv + eps) - plain(av, bv - eps)) / (2 * eps), rel=1e-7)


@pytest.mark.parametrize("method", ["sigmoid", "gelu", "abs", "sqrt"])
@pytest.mark.parametrize("x", [0.3, 1.7, -0.8, 0.0])
def test_the_transformer_ops_on_scalars_match_tensors_and_finite_differences(method, x):
    """sigmoid, gelu, abs (and sqrt) as Scalar methods: the Tensor's value and gradient, and the definition's."""
    if method == "sqrt" and x <= 0:
        x = abs(x) + 0.5
    a = mt.Scalar(x)
    y = getattr(a, method)()
    assert isinstance(y, mt.Scalar) and isinstance(y.data, float)
    y.backward()
    t = mt.Tensor(np.array(x), requires_grad=True)
    ty = getattr(t, method)()
    ty.backward()
    assert y.data == pytest.approx(ty.data.item(), rel=1e-15, abs=1e-300)
    assert a.grad == pytest.approx(t.grad.item(), rel=1e-14, abs=1e-300)
    if method == "abs" and x == 0.0:
        assert a.grad == 0.0  # the kink passes no gradient (PyTorch's convention)
        return

    def value(v):
        return getattr(mt.Scalar(v), method)().data

    eps = 1e-6
    assert a.grad == pytest.approx((value(x + eps) - value(x - eps)) / (2 * eps), rel=1e-7, abs=1e-9)


def test_maximum_and_minimum_of_scalars_share_a_tie_and_take_numbers():
    """max/min of two Scalars send the gradient to the winner, half each at a tie; a number is a constant."""
    cases = [
        (1.0, 2.0, (0.0, 1.0), (1.0, 0.0)),
        (3.0, 3.0, (0.5, 0.5), (0.5, 0.5)),
        (4.0, -1.0, (1.0, 0.0), (0.0, 1.0)),
    ]
    for av, bv, max_grads, min_grads in cases:
        for method, grads in (("maximum", max_grads), ("minimum", min_grads)):
            a, b = mt.Scalar(av), mt.Scalar(bv)
            y = getattr(a, method)(b)
            assert y.data == (max if method == "maximum" else min)(av, bv)
            y.backward()
            assert (a.grad, b.grad) == grads, (av, bv, method)
    a = mt.Scalar(-2.0)
    y = a.maximum(0.0) + abs(a)  # relu(a) + |a|
    y.backward()
    assert y.data == 2.0 and a.grad == -1.0
