"""cross_entropy and the optimizers: hand algebra, stability, and refusals that change nothing.

PyTorch's values for the same (losses and gradients; 20-step SGD and Adam
trajectories) are in ``test_golden_layers.py``.
"""

import math

import numpy as np
import pytest

import microtape as mt

# ---------------------------------------------------------------- cross_entropy


def test_uniform_logits_cost_log_of_the_number_of_classes():
    logits = mt.Tensor(np.zeros((2, 3, 5)), requires_grad=True)
    loss = mt.nn.cross_entropy(logits, np.array([[1, 2, 0], [4, 4, 3]]))
    assert loss.shape == () and loss.item() == pytest.approx(math.log(5), rel=1e-15)


def test_gradient_is_softmax_minus_onehot_over_n():
    rng = np.random.default_rng(0)
    logits, targets = rng.standard_normal((4, 3)), np.array([2, 0, 0, 1])
    t = mt.Tensor(logits, requires_grad=True)
    loss = mt.nn.cross_entropy(t, targets)
    loss.backward()
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert loss.item() == pytest.approx(-np.mean(np.log(p[np.arange(4), targets])), rel=1e-14)
    onehot = np.eye(3)[targets]
    np.testing.assert_allclose(t.grad, (p - onehot) / 4, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(mt.nn.analytic_blocks.cross_entropy_backward(logits, targets), t.grad, rtol=1e-13)


def test_ignored_targets_count_neither_in_the_sum_nor_in_n():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((2, 3, 4))
    targets = np.array([[1, -100, 3], [-100, 0, 2]])
    t = mt.Tensor(logits, requires_grad=True)
    loss = mt.nn.cross_entropy(t, targets, ignore_index=-100)
    kept = mt.nn.cross_entropy(mt.Tensor(logits[targets != -100]), targets[targets != -100])
    assert loss.item() == pytest.approx(kept.item(), rel=1e-14)
    loss.backward()
    np.testing.assert_array_equal(t.grad[targets == -100], 0.0)


def test_huge_logits_stay_finite():
    logits = mt.Tensor(np.array([[1e4, 0.0, -1e4]]), requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = mt.nn.cross_entropy(logits, np.array([1]))
        loss.backward()
    assert loss.item() == pytest.approx(1e4)
    np.testing.assert_allclose(logits.grad, [[1.0, -1.0, 0.0]], atol=1e-12)


def test_float32_loss():
    loss = mt.nn.cross_entropy(mt.Tensor(np.zeros((2, 4), dtype=np.float32), requires_grad=True), np.array([0, 3]))
    assert loss.dtype == np.float32


@pytest.mark.parametrize(
    "targets, options, error, words",
    [
        (np.array([0.0, 1.0]), {}, TypeError, "integer class ids"),
        (np.array([0, 1, 2]), {}, ValueError, r"targets have shape \(3,\); expected .* \(2,\)"),
        (np.array([0, 4]), {}, ValueError, r"target 4 at \(1,\) is not a class 0..3"),
        (np.array([-1, 0]), {}, ValueError, "target -1"),
        (np.array([-100, -100]), {"ignore_index": -100}, ValueError, "nothing to average"),
        (np.array([0, 1]), {"ignore_index": True}, TypeError, "ignore_index=True"),
    ],
)
def test_cross_entropy_bad_targets(targets, options, error, words):
    logits = mt.Tensor(np.zeros((2, 4)), requires_grad=True)
    with mt.Tape() as tape, pytest.raises(error, match=words):
        mt.nn.cross_entropy(logits, targets, **options)
    assert len(tape) == 0


def test_cross_entropy_bad_logits():
    with pytest.raises(ValueError, match="logits contains nan"):
        mt.nn.cross_entropy(np.array([[np.nan, 0.0]]), np.array([0]))
    with pytest.raises(ValueError, match="at least one class"):
        mt.nn.cross_entropy(np.zeros((2, 0)), np.zeros(2, dtype=int))


# ---------------------------------------------------------------- optimizers


def _parameters():
    weight = mt.Tensor(np.array([[1.0, -2.0], [0.5, 0.0]]), requires_grad=True, name="weight")
    bias = mt.Tensor(np.array([0.1, -0.1]), requires_grad=True, name="bias")
    return weight, bias


def test_sgd_step_by_hand():
    weight, bias = _parameters()
    start = weight.data.copy()
    optimizer = mt.optim.SGD([weight, bias], lr=0.5)
    weight.grad = np.array([[1.0, 2.0], [3.0, 4.0]])
    optimizer.step()  # bias has no gradient: it is skipped
    np.testing.assert_array_equal(weight.data, start - 0.5 * weight.grad)
    np.testing.assert_array_equal(bias.data, [0.1, -0.1])


def test_sgd_momentum_by_hand():
    """v1 = g1, v2 = μ v1 + g2, v3 = μ v2 + g3 (PyTorch's heavy ball, no dampening)."""
    weight, _ = _parameters()
    start = weight.data.copy()
    optimizer = mt.optim.SGD([weight], lr=0.1, momentum=0.9)
    gradients = [np.full((2, 2), g) for g in (1.0, 2.0, -1.0)]
    velocity, expected = 0, start.copy()
    for step, g in enumerate(gradients):
        weight.grad = g
        optimizer.step()
        velocity = g if step == 0 else 0.9 * velocity + g
        expected = expected - 0.1 * velocity
        np.testing.assert_allclose(weight.data, expected, rtol=1e-15)


def test_adam_first_step_moves_each_entry_by_about_lr():
    """At t = 1 the bias corrections make m̂ = g and v̂ = g²: the step is lr · g / (|g| + eps)."""
    weight, _ = _parameters()
    start = weight.data.copy()
    g = np.array([[1e-3, -5.0], [2.0, 0.0]])
    optimizer = mt.optim.Adam([weight], lr=0.01)
    weight.grad = g
    optimizer.step()
    np.testing.assert_allclose(weight.data, start - 0.01 * g / (np.abs(g) + 1e-8), rtol=1e-12)


def test_adam_weight_decay_is_l2_added_to_the_gradient():
    a, b = _parameters()[0], _parameters()[0]
    decayed, plain = mt.optim.Adam([a], lr=0.01, weight_decay=0.5), mt.optim.Adam([b], lr=0.01)
    a.grad = np.ones((2, 2))
    b.grad = np.ones((2, 2)) + 0.5 * b.data  # what weight decay adds
    decayed.step()
    plain.step()
    np.testing.assert_allclose(a.data, b.data, rtol=1e-15)


def test_float32_parameters_stay_float32():
    p = mt.Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    for optimizer in (mt.optim.SGD([p], lr=0.1, momentum=0.5), mt.optim.Adam([p])):
        p.grad = np.ones(3, dtype=np.float32)
        optimizer.step()
        assert p.data.dtype == np.float32


def test_a_bad_gradient_moves_no_parameter():
    weight, bias = _parameters()
    before = weight.data.copy(), bias.data.copy()
    optimizer = mt.optim.Adam([weight, bias], lr=0.1)
    weight.grad = np.ones((2, 2))
    bias.grad = np.array([np.nan, 0.0])
    with pytest.raises(FloatingPointError, match=r"bias.grad is nan at \(0,\); no parameter was changed"):
        optimizer.step()
    bias.grad = np.ones(3)
    with pytest.raises(ValueError, match=r"bias.grad has shape \(3,\)"):
        optimizer.step()
    np.testing.assert_array_equal(weight.data, before[0])
    np.testing.assert_array_equal(bias.data, before[1])
    assert optimizer.state[0] == {}  # not even the step count moved
    optimizer.zero_grad()
    assert weight.grad is None and bias.grad is None


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda w: mt.optim.SGD(w, lr=0.1), TypeError, "single Tensor"),
        (lambda w: mt.optim.SGD(mt.nn.Linear(2, 2), lr=0.1), TypeError, r"model.parameters\(\)"),
        (lambda w: mt.optim.SGD([], lr=0.1), ValueError, "empty"),
        (lambda w: mt.optim.SGD([w, w], lr=0.1), ValueError, "listed twice"),
        (lambda w: mt.optim.SGD([w * 2], lr=0.1), ValueError, "not a parameter"),
        (lambda w: mt.optim.SGD([np.ones(2)], lr=0.1), TypeError, "expected a Tensor"),
        (lambda w: mt.optim.SGD([w], lr=0), ValueError, r"SGD\(lr\)"),
        (lambda w: mt.optim.SGD([w], lr=0.1, momentum=1.0), ValueError, "momentum"),
        (lambda w: mt.optim.Adam([w], betas=(0.9,)), ValueError, "two numbers"),
        (lambda w: mt.optim.Adam([w], betas=(0.9, 1.0)), ValueError, r"betas\[1\]"),
        (lambda w: mt.optim.Adam([w], eps=-1.0), ValueError, "eps"),
        (lambda w: mt.optim.Adam([w], weight_decay=-0.1), ValueError, "weight_decay"),
    ],
)
def test_optimizer_bad_arguments(make, error, words):
    weight, _ = _parameters()
    with pytest.raises(error, match=words):
        make(weight)


def test_optimizers_train_a_model():
    """Both optimizers bring a small regression's loss down by a large factor."""
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((32, 3)), rng.standard_normal((32, 1))
    for make in (lambda p: mt.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: mt.optim.Adam(p, lr=0.05)):
        model = mt.nn.Linear(3, 1, seed=0)
        optimizer = make(model.parameters())
        losses = []
        for _ in range(100):
            error = model(x) - y
            loss = (error * error).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        best = np.linalg.lstsq(np.c_[x, np.ones(32)], y, rcond=None)[1][0] / 32
        assert losses[-1] < 1.01 * best < losses[0]


# ---------------------------------------------------------------- optimizers


def _parameter():
    return mt.Tensor(np.array([1.0, 2.0]), requires_grad=True, name="w")


@pytest.mark.parametrize("optimizer", [mt.optim.SGD, mt.optim.Adam])
@pytest.mark.parametrize(
    "grad, words",
    [
        (np.array([1 + 1j, 2.0]), r"w\.grad is dtype complex128 \(its imaginary part would be lost\)"),
        ("zero", r"w\.grad is a str \('zero'\)"),
        (np.array(["a", "b"]), r"w\.grad is dtype <U1"),
        ([0.1, 0.2], r"w\.grad is a list"),
    ],
    ids=["complex", "str", "str-array", "list"],
)
def test_a_step_refuses_a_gradient_that_is_not_a_real_array_and_moves_nothing(optimizer, grad, words):
    w, v = _parameter(), mt.Tensor(np.array([3.0]), requires_grad=True, name="v")
    opt = optimizer([v, w], lr=0.1)
    v.grad, w.grad = np.array([1.0]), grad
    with pytest.raises(TypeError, match=words + r".*no parameter was changed"):
        opt.step()
    assert w.data.tolist() == [1.0, 2.0] and v.data.tolist() == [3.0]
    assert opt.state == [{}, {}]


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: mt.optim.Adam(p, weight_decay=math.inf), r"Adam\(weight_decay=inf\): expected a finite number >= 0"),
        (lambda p: mt.optim.Adam(p, weight_decay=math.nan), r"Adam\(weight_decay=nan\)"),
        (lambda p: mt.optim.Adam(p, lr=math.inf), r"Adam\(lr\): expected a finite positive number, got inf"),
        (lambda p: mt.optim.Adam(p, eps=math.inf), r"Adam\(eps\)"),
        (lambda p: mt.optim.SGD(p, lr=10**400), r"SGD\(lr\): expected a finite positive number, got 1000.*too large"),
        (lambda p: mt.optim.Adam(p, lr=10**400), r"Adam\(lr\): .*too large for a float"),
        (lambda p: mt.optim.SGD(p, lr=0.1, momentum=math.nan), r"SGD\(momentum\)"),
    ],
    ids=["decay-inf", "decay-nan", "lr-inf", "eps-inf", "sgd-lr-huge-int", "adam-lr-huge-int", "momentum-nan"],
)
def test_hyper_parameters_must_be_finite(make, words):
    with pytest.raises(ValueError, match=words):
        make([_parameter()])
