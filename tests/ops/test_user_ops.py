"""Ops a student can add: mt.ops.define, end to end (tape, listing, graph, gradients, gradcheck).

References are hand algebra (the logistic's derivative s(1-s)) and finite
differences; a wrong VJP must be caught.
"""

import re

import numpy as np
import pytest

import microtape as mt
from microtape.ops import OPS


def _logistic(define, vjp=None, name="logistic"):
    return define(
        name,
        forward=lambda x: 1 / (1 + np.exp(-x)),
        vjp=vjp or (lambda g, s, x: (g * s * (1 - s),)),
        formula="{g} * s * (1 - s)",
    )


def test_a_defined_op_records_and_differentiates_on_tensors_and_scalars(define):
    logistic = _logistic(define)
    x = mt.Tensor(np.array([-1.0, 0.0, 2.0]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        s = logistic(x, name="s")
        loss = s.sum(name="loss")
    assert isinstance(s, mt.Tensor) and tape[0].op is logistic and tape[0].output is s
    assert re.search(r"\bs +  = logistic\(x\)", str(tape)) or re.search(r"\bs += logistic\(x\)", str(tape))
    expected = 1 / (1 + np.exp(-x.data))
    np.testing.assert_allclose(mt.gradients(loss)[x], expected * (1 - expected), rtol=1e-15)
    a = mt.Scalar(0.5, name="a")
    b = logistic(a)
    assert isinstance(b, mt.Scalar)
    b.backward()
    assert a.grad == pytest.approx(b.data * (1 - b.data), rel=1e-15)


def test_gradcheck_passes_it_and_catches_a_wrong_vjp(define):
    logistic = _logistic(define)
    wrong = _logistic(define, vjp=lambda g, s, x: (g * s,), name="wrong_logistic")  # forgot (1 - s)
    x = np.array([[-1.5, 0.2], [0.7, 3.0]])
    assert mt.check.gradcheck(lambda t: logistic(t).sum(), x).ok
    assert mt.check.gradcheck(lambda t: logistic(t) * t, x).ok
    assert not mt.check.gradcheck(lambda t: wrong(t).sum(), x).ok
    assert not mt.check.gradcheck(lambda a: wrong(a) * 2.0, 0.3).ok  # the Scalar route too


def test_the_graph_draws_it_with_its_name_and_formula(define):
    logistic = _logistic(define)
    x = mt.Tensor(np.array([-1.0, 2.0]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        logistic(x, name="s").sum(name="loss")
    forward = mt.viz.graph(tape).source
    backward = mt.viz.graph(tape, backward=True).source
    assert "logistic" in forward and "s" in forward
    assert "s * (1 - s)" in backward  # the formula is on the edge into x


def test_two_inputs_constants_and_a_non_differentiable_input(define):
    """A two-input op with a constant second input (a mask-like operand): numbers lift to constants."""
    gate = define(
        "gate",
        forward=lambda x, m: x * m,
        vjp=lambda g, ans, x, m: (g * m, None),
        formula=["{g} * {m}", None],
        inputs=("x", "m"),
    )
    assert gate.constant_inputs == (1,) and gate.arity == 2
    x = mt.Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    y = gate(x, np.array([1.0, 0.0, 2.0]))  # the array becomes a constant input
    np.testing.assert_allclose(mt.gradients(y.sum())[x], [1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="'m' is not differentiable"):
        gate(x, mt.Tensor(np.ones(3), requires_grad=True))
    assert "m: constant" in gate.formula


def test_refusals_are_clear(define):
    with pytest.raises(ValueError, match="built-in"):
        define("exp", forward=np.exp, vjp=lambda g, ans, x: (g * ans,), formula="{g} * exp({x})")
    with pytest.raises(TypeError, match="vjp"):
        define("bad", forward=np.exp, vjp="no", formula="g")
    with pytest.raises(TypeError, match="formula"):
        define("bad", forward=np.exp, vjp=lambda g, a, x: (g,), formula=3)
    with pytest.raises(ValueError, match="name"):
        define("two words", forward=np.exp, vjp=lambda g, a, x: (g,), formula="g")
    logistic = _logistic(define)
    with pytest.raises(TypeError, match="takes 1 input"):
        logistic(mt.Tensor(np.ones(2)), mt.Tensor(np.ones(2)))
    with pytest.raises(TypeError, match="Scalar or Tensor"):
        logistic(np.ones(2))
    assert OPS["exp"].builtin  # the built-in is untouched


def test_a_vjp_of_the_wrong_shape_or_count_is_named(define):
    flat = define("flat", forward=lambda x: x * 2.0, vjp=lambda g, ans, x: (g.sum(),), formula="2 {g}")
    loose = define("loose", forward=lambda x: x * 2.0, vjp=lambda g, ans, x: g * 2.0, formula="2 {g}")
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError, match="'flat'.*shape"):
        mt.gradients(flat(x).sum())
    with pytest.raises(TypeError, match="'loose'.*tuple"):
        mt.gradients(loose(x).sum())
    assert x.grad is None


def test_redefining_your_own_op_replaces_it(define):
    """A notebook cell run twice: the second definition wins (built-ins stay protected)."""
    first = _logistic(define)
    second = _logistic(define, vjp=lambda g, s, x: (g * s * (1 - s) * 1.0,))
    assert OPS["logistic"] is second and first is not second
