"""compare(): hand-derived gradients of any taped computation, lined up by name.

The scenarios are the ones a classroom exercise uses: a softmax and a Linear
layer derived by hand. compare() must agree when the derivation is right,
point at the wrong gradient when it is not, explain misuse (unknown names,
wrong shapes) and leave every ``.grad`` alone.
"""

import json

import numpy as np
import pytest

import microtape as mt
from microtape.check import NameNotOnTape, compare, walk


def softmax_example(values=(1.0, 2.0, 0.5, -1.0)):
    x = mt.Tensor(np.array([values, values[::-1]]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        p = x.softmax(-1, name="p")
        loss = (p * p).sum(name="loss")
    return tape, x, p, loss


def softmax_by_hand(p):
    P = p.data
    dP = 2 * P  # d(sum p²)/dp
    dx = P * (dP - (dP * P).sum(-1, keepdims=True))  # softmax's VJP
    return {"p": dP, "x": dx}


def linear_example(seed=0):
    layer = mt.nn.Linear(3, 2, seed=seed)
    x = mt.Tensor(np.random.default_rng(seed).standard_normal((4, 3)), requires_grad=True, name="x")
    with mt.Tape() as tape:
        y = layer(x)
    g = np.random.default_rng(seed + 1).standard_normal((4, 2))
    return tape, layer, x, y, g


def test_softmax_by_hand_agrees():
    tape, x, p, loss = softmax_example()
    report = compare(tape, loss, softmax_by_hand(p))
    assert report.ok, str(report)
    assert [row.label for row in report.rows] == ["p", "x"]  # backward order
    assert report.atol == report.rtol == 1e-10
    assert "softmax" in report["x"].formula


def test_linear_by_hand_agrees_with_a_given_upstream_gradient():
    tape, layer, x, y, g = linear_example()
    W = layer.weight.data
    by_hand = {"weight": g.T @ x.data, "bias": g.sum(axis=0), "x": g @ W}
    report = compare(tape, y, by_hand, grad=g)
    assert report.ok, str(report)
    assert set(row.name for row in report.rows) == set(by_hand)
    assert "given" in str(report)


def test_a_wrong_derivation_fails_at_its_row():
    tape, layer, x, y, g = linear_example()
    W = layer.weight.data
    wrong = {"weight": g.T @ x.data, "bias": g.mean(axis=0), "x": g @ W}  # mean, not sum
    report = compare(tape, y, wrong, grad=g)
    assert not report.ok
    assert report.first_failure == "bias"
    assert report["weight"].passed and report["x"].passed
    assert "<-- first failure" in str(report)


def test_forgetting_the_rowsum_in_softmax_is_caught():
    tape, x, p, loss = softmax_example()
    by_hand = softmax_by_hand(p)
    by_hand["x"] = p.data * by_hand["p"]  # the classic mistake
    report = compare(tape, loss, by_hand)
    assert report.first_failure == "x"


def test_unknown_name_lists_the_names_that_exist():
    tape, x, p, loss = softmax_example()
    with pytest.raises(NameNotOnTape) as caught:
        compare(tape, loss, {"probs": np.zeros((2, 4))})
    message = str(caught.value)
    assert "'probs'" in message and "x, p, loss" in message
    # Catchable as either kind of error.
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)


def test_wrong_shape_names_both_shapes():
    tape, x, p, loss = softmax_example()
    with pytest.raises(ValueError, match=r"shape \(4, 2\).*shape \(2, 4\)"):
        compare(tape, loss, {"p": np.zeros((4, 2))})


def test_bad_arguments():
    tape, x, p, loss = softmax_example()
    with pytest.raises(TypeError, match="dict"):
        compare(tape, loss, [("p", np.zeros((2, 4)))])
    with pytest.raises(TypeError, match="Tape"):
        compare("tape", loss, {})
    with pytest.raises(TypeError, match="real numbers"):
        compare(tape, loss, {"p": np.array([["a"] * 4] * 2)})
    with pytest.raises(ValueError, match="atol"):
        compare(tape, loss, {}, atol=-1)


def test_compare_changes_no_gradients():
    tape, layer, x, y, g = linear_example()
    layer.weight.grad = np.ones((2, 3))
    compare(tape, y, {"x": g @ layer.weight.data}, grad=g)
    np.testing.assert_array_equal(layer.weight.grad, np.ones((2, 3)))
    assert layer.bias.grad is None and x.grad is None
    assert all(node.grad is None for node in tape.nodes)


def test_scalar_tape():
    a = mt.Scalar(0.7, name="a")
    with mt.Tape() as tape:
        y = (a * a).tanh()
        y.name = "y"
    t = np.tanh(0.49)
    report = compare(tape, y, {"a": (1 - t * t) * 2 * 0.7, "y": 1.0})
    assert report.ok, str(report)
    assert report["a"].shape == ()
    assert "scalar" in str(report)


def test_a_node_the_output_does_not_reach():
    x = mt.Tensor(np.ones(3), requires_grad=True, name="x")
    with mt.Tape() as tape:
        unused = x.exp(name="unused")
        y = (x * x).sum(name="y")
    report = compare(tape, y, {"unused": np.zeros(3), "x": 2 * np.ones(3)})
    assert report.ok
    assert "no gradient reaches" in report["unused"].note
    assert unused.grad is None


def test_float32_default_tolerance():
    x = mt.Tensor(np.array([[0.1, 0.2, 0.3]], dtype=np.float32), requires_grad=True, name="x")
    with mt.Tape() as tape:
        p = x.softmax(-1, name="p")
    report = compare(tape, p, {"x": np.zeros((1, 3))})
    assert report.atol == 1e-4


def test_report_renders_and_serialises():
    tape, x, p, loss = softmax_example()
    report = compare(tape, loss, softmax_by_hand(p))
    assert "<table" in report._repr_html_()
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] and [row["name"] for row in data["rows"]] == ["p", "x"]


def test_walk_a_plain_tape():
    tape, x, p, loss = softmax_example()
    steps = walk(tape, loss)
    assert [s.index for s in steps] == [2, 1, 0]
    assert [s.op for s in steps] == ["sum", "mul", "softmax"]
    assert float(steps[0].grad_output) == 1.0
    np.testing.assert_allclose(steps[2].grad_output, 2 * p.data)  # d(sum p²)/dp arrives at p
    assert all(s.rows == [] for s in steps)
    checked = walk(tape, loss, softmax_by_hand(p))
    assert [row.label for row in checked[2].rows] == ["p", "x"]
    assert checked[2].passed
    assert x.grad is None
