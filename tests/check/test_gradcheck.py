"""gradcheck: it must pass correct derivatives and catch wrong ones.

A checker that always says "ok" is worse than none, so most tests here feed
it a deliberately wrong VJP — a private ``Op`` applied with ``_apply`` (never
registered), or a registry entry swapped by pytest's ``monkeypatch`` (restored
after the test).
"""

import dataclasses
import math

import numpy as np
import pytest

import microtape as mt
from microtape import ops
from microtape.check import GradcheckError, GradcheckResult, gradcheck, gradgradcheck, numeric_gradient
from microtape.engine import record as _apply
from microtape.ops import OPS, Op

# sin, with a correct and a wrong VJP. The wrong one uses sin where cos belongs.
SIN = Op(
    name="sin",
    forward=np.sin,
    vjp=lambda g, ans, x: (g * np.cos(x),),
    inputs=("x",),
    grads=("{g} * cos({x})",),
    grads_latex=(r"\bar x = \bar y \cos x",),
)
WRONG_SIN = dataclasses.replace(SIN, vjp=lambda g, ans, x: (g * np.sin(x),))


def gradcheck_result(fn, *inputs, **options):
    """The check's result whatever it says (a failure returned, not raised), to read its details."""
    return gradcheck(fn, *inputs, raise_exception=False, **options)


# Off by a relative 1%: small, but far above finite-difference error.
SLIGHTLY_WRONG_SIN = dataclasses.replace(SIN, vjp=lambda g, ans, x: (1.01 * g * np.cos(x),))


def _sin(op):
    return lambda t: _apply(op, (t,))


def test_private_ops_are_not_registered():
    """The test ops above stay private: the registry's own sin is not replaced by them."""
    assert OPS["sin"] is not SIN and OPS["sin"].builtin


def test_passes_on_correct_functions():
    """Correct derivatives pass: tensor expressions, broadcasting, several inputs, Scalars, a custom Op."""
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(2)
    cases = [
        (lambda t: (t * t).tanh().sum(), (x,)),
        (lambda t, u, v: (t @ u + v).softmax(axis=-1), (x, w, b)),
        (lambda t, v: t.sum(axis=0, keepdims=True).T * v, (x, b)),
        (lambda a, c: (a * c + a.exp()).tanh() / (1.0 + c * c), (0.3, -1.2)),
        (_sin(SIN), (x,)),
    ]
    for fn, inputs in cases:
        result = gradcheck(fn, *inputs)
        assert isinstance(result, GradcheckResult)
        assert result.ok and bool(result), str(result)
        assert result.checked == sum(np.size(a) for a in inputs)
        assert result.max_abs_error < 1e-6
        assert len(result.per_input) == len(inputs)


def test_fails_on_a_wrong_vjp():
    """A VJP that uses sin instead of cos fails, and the worst entry shows both opinions."""
    x = np.array([[0.3, -1.1, 2.0], [0.7, 1.5, -0.4]])
    result = gradcheck_result(lambda t: _apply(WRONG_SIN, (t,)).sum(), x)
    assert not result.ok and not bool(result)
    worst = result.worst
    assert worst.input == 0
    # With a single-number output the upstream gradient is 1, so the numbers are sin and cos.
    assert worst.taped == pytest.approx(np.sin(x[worst.index]), rel=1e-12)
    assert worst.numeric == pytest.approx(np.cos(x[worst.index]), rel=1e-6)
    expected_worst = np.max(np.abs(np.sin(x) - np.cos(x)))
    assert result.max_abs_error == pytest.approx(expected_worst, rel=1e-6)
    assert worst.abs_error == pytest.approx(expected_worst, rel=1e-6)


def test_fails_on_a_slightly_wrong_vjp_and_tolerances_matter():
    """A VJP 1% off fails at the default rtol (1e-3) but passes when rtol allows 5%."""
    x = np.linspace(-1.0, 1.0, 7)
    assert not gradcheck_result(_sin(SLIGHTLY_WRONG_SIN), x).ok
    assert gradcheck(_sin(SLIGHTLY_WRONG_SIN), x, rtol=0.05).ok
    assert gradcheck(_sin(SLIGHTLY_WRONG_SIN), x, atol=0.05, rtol=0.0).ok
    assert not gradcheck_result(_sin(SLIGHTLY_WRONG_SIN), x, atol=1e-4, rtol=0.0).ok


def test_fails_when_a_registered_op_is_broken(monkeypatch):
    """Swapping tanh's VJP for a wrong one (restored after the test) makes gradcheck fail."""
    wrong = dataclasses.replace(OPS["tanh"], vjp=lambda g, ans, x: (g * (1.0 - ans),))
    monkeypatch.setattr(ops, "tanh", wrong)
    monkeypatch.setitem(OPS, "tanh", wrong)
    x = np.array([0.5, -1.0, 2.0])
    assert not gradcheck_result(lambda t: t.tanh(), x).ok
    assert not gradcheck_result(lambda a: a.tanh() * 2.0, 0.5).ok  # the Scalar route too


def test_registered_tanh_passes_again_after_monkeypatch():
    """The real tanh passes (after the test above, this shows monkeypatch restored it)."""
    assert OPS["tanh"].vjp(np.ones(1), np.tanh(np.ones(1)), np.ones(1))[0] == pytest.approx(1 - np.tanh(1) ** 2)
    assert gradcheck(lambda t: t.tanh(), np.array([0.5, -1.0, 2.0])).ok


def test_fails_for_a_wrong_gradient_of_the_second_input():
    """The check covers every input, and reports which input is wrong."""
    wrong_mul = dataclasses.replace(OPS["mul"], vjp=lambda g, ans, a, b: (g * b, g * b))
    x, y = np.array([1.0, 2.0, 3.0]), np.array([-0.5, 0.5, 4.0])
    result = gradcheck_result(lambda a, c: _apply(wrong_mul, (a, c)), x, y)
    assert not result.ok
    assert result.worst.input == 1
    assert result.per_input[0] < 1e-6 < result.per_input[1]


def test_readable_string():
    """str(result) says passed/FAILED, how many entries, the max error, and where the worst entry is."""
    x = np.array([[0.3, -1.1, 2.0], [0.7, 1.5, -0.4]])
    good = str(gradcheck(_sin(SIN), x))
    assert "passed" in good and "6 entries" in good
    bad = str(gradcheck_result(lambda t: _apply(WRONG_SIN, (t,)).sum(), x))
    assert "FAILED" in bad and "worst" in bad and "input 0" in bad
    result = gradcheck_result(lambda t: _apply(WRONG_SIN, (t,)).sum(), x)
    assert str(result.worst.index) in bad
    assert f"{result.max_abs_error:.3e}" in bad


def test_max_entries_limits_the_work():
    """max_entries checks only that many entries per input (seeded, so reproducible)."""
    x = np.random.default_rng(1).standard_normal((10, 10))
    result = gradcheck(lambda t: t.exp().sum(), x, max_entries=5)
    assert result.ok and result.checked == 5
    wrong = gradcheck_result(lambda t: _apply(WRONG_SIN, (t,)).sum(), x, max_entries=5)
    assert not wrong.ok and wrong.checked == 5


def test_inputs_are_not_modified():
    """gradcheck perturbs copies: the caller's arrays are unchanged afterwards."""
    x = np.array([0.5, -1.0, 2.0])
    before = x.copy()
    gradcheck(lambda t: t.exp().sum(), x)
    np.testing.assert_array_equal(x, before)
    t = mt.Tensor(x.copy(), requires_grad=True)
    gradcheck(lambda u: u.exp().sum(), t)
    np.testing.assert_array_equal(t.data, before)
    assert t.grad is None


def test_numeric_gradient_is_a_central_difference():
    """numeric_gradient gives (f(x+eps) - f(x-eps)) / 2eps for one entry, by hand for x³."""
    arrays = [np.array([2.0, 3.0])]
    value = numeric_gradient(lambda t: t * t * t, arrays, [False], np.array([1.0, 0.0]), 0, (0,), 1e-3)
    assert value == pytest.approx(((2.001) ** 3 - (1.999) ** 3) / 2e-3, rel=1e-12)
    assert value == pytest.approx(3 * 2.0**2, rel=1e-5)
    assert arrays[0][0] == 2.0


def test_scalar_inputs():
    """Plain numbers and Scalars are checked as Scalars."""
    assert gradcheck(lambda a, b: a * b.exp() - a / b, 1.5, mt.Scalar(0.5)).ok
    assert gradcheck(lambda a: a.log(), 2.0).ok
    assert math.isfinite(gradcheck(lambda a: a**3, 2.0).max_abs_error)


# ---------------------------------------------------------------- argument validation


def test_validates_fn():
    """A non-callable fn is a TypeError naming fn; a fn returning a non-value is a TypeError."""
    with pytest.raises(TypeError, match="fn"):
        gradcheck(3, np.ones(2))
    with pytest.raises(TypeError, match="float"):
        gradcheck(lambda t: 3.0, np.ones(2))


def test_validates_inputs():
    """No inputs, NaN/inf entries, booleans and strings are refused, naming the input."""
    with pytest.raises(ValueError, match="input"):
        gradcheck(lambda t: t.sum())
    with pytest.raises(ValueError, match="input 1"):
        gradcheck(lambda a, b: (a * b).sum(), np.ones(2), np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="input 0"):
        gradcheck(lambda a: a.sum(), np.array([np.inf]))
    with pytest.raises(TypeError, match="bool"):
        gradcheck(lambda a: a * 2.0, True)


def test_string_input_is_a_type_error_naming_the_input():
    """A string input is refused with a TypeError naming the input (not numpy's conversion error)."""
    with pytest.raises(TypeError, match="input 0"):
        gradcheck(lambda a: a * 2.0, "a")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"eps": -1e-6}, "eps"),
        ({"eps": 0.0}, "eps"),
        ({"eps": float("nan")}, "eps"),
        ({"atol": -1.0}, "atol"),
        ({"rtol": float("inf")}, "rtol"),
        ({"atol": "big"}, "atol"),
    ],
)
def test_validates_tolerances(kwargs, name):
    """eps must be positive, atol and rtol non-negative finite numbers: ValueError naming which."""
    with pytest.raises(ValueError, match=name):
        gradcheck(lambda t: t.sum(), np.ones(2), **kwargs)


# ---------------------------------------------------------------- it cannot be fooled by NaN or inf


@pytest.mark.parametrize(
    ("fn", "x", "said"),
    [
        (lambda t: ((t * t) ** 0.5).sum(), np.array([0.0, 1.0]), "taped gradient of input 0 is nan"),
        (lambda t: t * np.nan, np.array([0.0, 1.0]), "value is nan"),
        (lambda t: t * np.inf, np.array([0.5, 1.0]), "value is inf"),
        (lambda t: (t * np.inf).sum(), np.array([0.5, 1.0]), "taped gradient of input 0 is inf"),
    ],
)
def test_non_finite_values_or_gradients_fail_and_say_so(fn, x, said):
    """NaN/inf on either side is a failure named in the result, never a pass (|nan - x| > tol is False)."""
    result = gradcheck_result(fn, x)
    assert not result.ok and not bool(result)
    assert any(said in text for text in result.not_finite), result.not_finite
    assert "not finite" in str(result) and "FAILED" in str(result)


def test_a_gradient_wrong_in_one_element_fails():
    """A VJP right everywhere but one entry is caught, at that entry."""

    def vjp(g, ans, x):
        grad = g * np.cos(x)
        grad.flat[3] += 0.01
        return (grad,)

    almost_sin = dataclasses.replace(SIN, vjp=vjp)
    x = np.linspace(-1.0, 1.0, 8).reshape(2, 4)
    result = gradcheck_result(lambda t: _apply(almost_sin, (t,)).sum(), x)
    assert not result.ok and result.worst.index == (0, 3)
    assert result.max_abs_error == pytest.approx(0.01, rel=1e-4)


def test_numpy_number_arguments_are_accepted_and_bad_counts_refused():
    """eps=np.float32(1e-6) is a number; max_entries=-1 and seed=-1 are refused naming the argument."""
    assert gradcheck(lambda t: t.exp().sum(), np.array([1.0, 2.0]), eps=np.float32(1e-6)).ok
    for kwargs, name in (({"max_entries": -1}, "max_entries"), ({"max_entries": 0}, "max_entries"),
                         ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            gradcheck(lambda t: t.sum(), np.ones(2), **kwargs)


# ---------------------------------------------------------------- a failure raises, as PyTorch's does


def test_a_failure_raises_naming_the_worst_entry():
    """By default a failing gradcheck raises GradcheckError whose message names the worst entry (PyTorch's rule)."""
    x = np.array([[0.3, -1.1, 2.0], [0.7, 1.5, -0.4]])
    with pytest.raises(GradcheckError) as caught:
        gradcheck(lambda t: _apply(WRONG_SIN, (t,)).sum(), x)
    result = caught.value.result
    assert isinstance(caught.value, RuntimeError) and not result.ok
    assert f"worst: input 0 at {result.worst.index}" in str(caught.value)
    assert "FAILED" in str(caught.value)
    # A pass returns the result, whatever the keyword says.
    assert gradcheck(_sin(SIN), x).ok and gradcheck(_sin(SIN), x, raise_exception=False).ok


def test_gradgradcheck_raises_on_a_wrong_second_derivative(monkeypatch):
    """tanh's VJP made wrong: gradgradcheck raises by default, and returns the failure with raise_exception=False."""
    wrong = dataclasses.replace(OPS["tanh"], vjp=lambda g, ans, x: (g * (1.0 - ans),))
    monkeypatch.setattr(ops, "tanh", wrong)
    monkeypatch.setitem(OPS, "tanh", wrong)
    x = np.array([0.5, -1.0, 2.0])
    with pytest.raises(GradcheckError, match="gradgradcheck FAILED"):
        gradgradcheck(lambda t: (t * t).tanh().sum(), x)
    assert not gradgradcheck(lambda t: (t * t).tanh().sum(), x, raise_exception=False).ok


@pytest.mark.parametrize("check", [gradcheck, gradgradcheck])
def test_raise_exception_must_be_a_bool(check):
    """raise_exception="no" is refused naming the argument, before anything runs."""
    with pytest.raises(TypeError, match="raise_exception='no'"):
        check(lambda t: t.sum(), np.ones(2), raise_exception="no")
