"""The new ops in pictures and step-by-step views: their formulas with the student's own names and numbers.

A graph of ``y = logaddexp(sin(a), b) + a ** b`` (Scalars) says on each
backward edge the formula of the op with the real names: ``cos(a)`` for
sin, ``exp(s - y)``-style for logaddexp, ``ln(a)`` for the tensor exponent.
``walk`` shows the same formulas step by step, and ``dot`` draws the picture.
"""

import numpy as np
import pytest
from pictures import edge_labels, needs_dot

pytest.importorskip("graphviz")

import microtape as mt  # noqa: E402


def _expression():
    a, b = mt.Scalar(0.5, name="a"), mt.Scalar(1.5, name="b")
    with mt.Tape() as tape:
        s = a.sin(name="s")
        y = s.logaddexp(b, name="l") + (a**b).reciprocal(name="r")
        y.name = "y"
    return tape, a, b, y


def test_backward_edges_carry_the_new_formulas_with_real_names_and_values():
    tape, a, b, y = _expression()
    labels = edge_labels(mt.viz.graph(tape, backward=True).source)
    # sin's VJP with the student's name and numbers; logaddexp's two operands; the tensor exponent's
    # d/db = a**b ln a; reciprocal's -g / x**2 (x is the unnamed a**b, %2).
    assert labels[("x0", "n0")] == ["∂y/∂a += g·cos(a) = 0.2649·cos(0.5) = 0.2325"]
    assert labels[("n0", "n1")] == ["∂y/∂s = g·exp(s - l) = 1·exp(0.4794 - 1.808) = 0.2649"]
    assert labels[("x1", "n1")] == ["∂y/∂b += g·exp(b - l) = 1·exp(1.5 - 1.808) = 0.7351"]
    assert labels[("x1", "n2")] == ["∂y/∂b += g·a**b·ln(a) = (-8)·0.5**1.5·ln(0.5) = 1.961"]
    assert labels[("n2", "n3")] == ["∂y/∂%2 = -g / %2**2 = -1 / 0.3536**2 = -8"]
    # The numbers are the gradients: cos(0.5) / (1 + e^(b - sin a)) by hand.
    assert np.cos(0.5) / (1 + np.exp(1.5 - np.sin(0.5))) == pytest.approx(0.2325, abs=5e-5)


def test_walk_shows_each_new_op_s_formula_and_what_it_sends():
    tape, a, b, y = _expression()
    steps = mt.check.walk(tape, y)
    by_op = {step.op: step for step in steps}
    assert {"sin", "logaddexp", "power", "reciprocal"} <= set(by_op)
    assert by_op["sin"].formula == "da = ds * cos(a)"  # the op's formula, in the student's names
    (sent,) = by_op["sin"].grad_inputs
    d_s = by_op["logaddexp"].grad_inputs[0]
    assert sent == pytest.approx(d_s * np.cos(0.5), rel=1e-15)


@needs_dot
def test_a_graph_of_tensor_ops_draws_with_dot():
    x = mt.Tensor(np.linspace(0.1, 0.6, 6).reshape(2, 3), requires_grad=True, name="x")
    with mt.Tape() as tape:
        z = mt.einsum("ij,kj->ik", x.cumsum(axis=1), x.clip(0.2, 0.5)).prod(name="z")
    svg = mt.viz.graph(tape, backward=True).pipe(format="svg").decode()
    for op in ("einsum", "cumsum", "clip", "prod"):
        assert op in svg, op
    assert z.data == pytest.approx(np.prod(np.cumsum(x.data, axis=1) @ np.clip(x.data, 0.2, 0.5).T), rel=1e-14)
