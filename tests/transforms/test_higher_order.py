"""Second order: the reverse pass recorded (create_graph=True) and differentiated again.

The references are finite differences of the *first-order* VJPs (plain
numpy, float64) and hand algebra; golden PyTorch values are in
tests/test_higher_order_torch.py. Every registered op that supports higher
order is looped over, so a new op is checked automatically.
"""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import OP_CASES

import microtape as mt
from microtape.engine import record
from microtape.ops import OPS

HIGHER = sorted(name for name, op in OPS.items() if op.higher_order)
EPS = 1e-6


def _first_order_along(op, inputs, params, cotangent, directions):
    """Σ_i ⟨vjp_i(u), w_i⟩ by the plain (numpy) VJP: the function whose gradient is the second derivative."""
    ans = op.forward(*inputs, **params)
    grads = op.vjp(cotangent, ans, *inputs, **params)
    return sum(float(np.sum(g * w)) for g, w in zip(grads, directions) if g is not None)


def _numeric_second(op, inputs, params, cotangent, directions, position):
    x = np.array(inputs[position], dtype=np.float64)
    out = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        values = []
        for step in (EPS, -EPS):
            shifted = x.copy()
            shifted[index] += step
            args = list(inputs)
            args[position] = shifted
            values.append(_first_order_along(op, args, params, cotangent, directions))
        out[index] = (values[0] - values[1]) / (2 * EPS)
    return out


@pytest.mark.parametrize("name", HIGHER)
def test_second_derivative_of_every_op_matches_differences_of_its_vjp(name):
    """d/dx Σ⟨vjp_i(u; x), w_i⟩ through the recorded VJP equals central differences of the plain VJP."""
    op = OPS[name]

    @settings(max_examples=8, deadline=None)
    @given(case=OP_CASES[name], seed=st.integers(0, 2**32 - 1))
    def check(case, seed):
        inputs, params = case
        if name == "cast":
            assume(np.dtype(params["dtype"]) == np.float64)  # float32 rounds to ~1e-7 (see the test below)
        if name in ("maximum", "minimum"):
            assume(not np.any(np.equal(*inputs)))  # at a tie the first derivative jumps: no difference quotient
        rng = np.random.default_rng(seed)
        ans = op.forward(*inputs, **params)
        cotangent = rng.standard_normal(np.shape(ans))
        differentiable = [op.grads[i] is not None for i in range(op.arity)]
        directions = [rng.standard_normal(np.shape(x)) if d else None for x, d in zip(inputs, differentiable)]
        tensors = tuple(mt.Tensor(x.copy(), requires_grad=d) for x, d in zip(inputs, differentiable))
        out = record(op, tensors, params)
        first = mt.gradients(out, cotangent, create_graph=True)
        plain = op.vjp(cotangent, ans, *inputs, **params)
        total = None
        for t, w, expected in zip(tensors, directions, plain):
            if w is None:
                continue
            got = first[t]
            assert isinstance(got, mt.Tensor), f"{name}: create_graph gave a {type(got).__name__}"
            np.testing.assert_allclose(got.data, expected, rtol=1e-12, atol=1e-12, err_msg=f"{name}: first order")
            term = (got * w).sum()
            total = term if total is None else total + term
        second = mt.gradients(total) if total.requires_grad else {}
        for position, t in enumerate(tensors):
            if directions[position] is None:
                continue
            expected = _numeric_second(op, inputs, params, cotangent, directions, position)
            got = second[t] if t in second else np.zeros_like(expected)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"{name} input {position} {params}")

    check()


def test_cast_has_second_derivative_zero_and_keeps_dtypes():
    x = mt.Tensor(np.array([0.5, -1.5]), requires_grad=True)
    y = (x.astype(np.float32) * x.astype(np.float32)).sum()
    g = mt.gradients(y, create_graph=True)[x]
    assert g.dtype == np.float64
    np.testing.assert_allclose(mt.gradients(g.sum())[x], [2.0, 2.0], rtol=1e-6)


def test_backward_with_create_graph_gives_tape_values_and_third_order_by_repetition():
    """tanh: f' = 1 - t², f'' = -2 t (1 - t²), f''' = (6t² - 2)(1 - t²)."""
    x = mt.Tensor(np.array([0.3, -1.2]), requires_grad=True)
    x.tanh().sum().backward(create_graph=True)
    first = x.grad
    assert isinstance(first, mt.Tensor) and first.requires_grad
    second = mt.gradients(first.sum(), create_graph=True)[x]
    third = mt.gradients(second.sum())[x]
    t = np.tanh(x.data)
    np.testing.assert_allclose(first.data, 1 - t**2, rtol=1e-14)
    np.testing.assert_allclose(second.data, -2 * t * (1 - t**2), rtol=1e-13)
    np.testing.assert_allclose(third, (6 * t**2 - 2) * (1 - t**2), rtol=1e-12)


def test_scalar_second_derivative_of_tanh_and_of_a_small_mlp_loss():
    a = mt.Scalar(0.7)
    y = a.tanh()
    y.backward(create_graph=True)
    assert isinstance(a.grad, mt.Scalar)
    second = mt.gradients(a.grad)[a]
    t = np.tanh(0.7)
    assert second == pytest.approx(-2 * t * (1 - t * t), rel=1e-14)

    def loss(w):
        # a 2-2-1 tanh MLP of one weight vector w (6 numbers), squared error
        hidden = [(w[0] * 0.5 + w[1] * -1.0).tanh(), (w[2] * 0.5 + w[3] * -1.0).tanh()]
        out = hidden[0] * w[4] + hidden[1] * w[5]
        return (out - 0.25) ** 2

    w0 = np.array([0.3, -0.2, 0.5, 0.1, -0.4, 0.8])
    scalars = [mt.Scalar(v) for v in w0]
    value = loss(scalars)
    grads = mt.gradients(value, create_graph=True)
    hessian = np.array(
        [[mt.gradients(grads[wi])[wj] if wj in mt.gradients(grads[wi]) else 0.0 for wj in scalars] for wi in scalars]
    )

    def plain_grad(values):
        ws = [mt.Scalar(v) for v in values]
        g = mt.gradients(loss(ws))
        return np.array([g[w] for w in ws])

    numeric = np.array([(plain_grad(w0 + EPS * e) - plain_grad(w0 - EPS * e)) / (2 * EPS) for e in np.eye(6)])
    np.testing.assert_allclose(hessian, numeric, atol=1e-8)
    np.testing.assert_allclose(hessian, hessian.T, atol=1e-14)


def test_hvp_and_hessian_agree_with_hand_algebra_and_each_other():
    f = lambda x: (x * x * x).sum() + (x[0] * x[1])  # noqa: E731
    x = np.array([1.0, 2.0, -0.5])
    expected = np.diag(6 * x) + np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(mt.hessian(f, x), expected, rtol=1e-14)
    v = np.array([0.2, -1.0, 3.0])
    np.testing.assert_allclose(mt.hvp(f, x, v), expected @ v, rtol=1e-14)
    assert mt.hessian(lambda s: s.tanh(), 0.5) == pytest.approx(-2 * np.tanh(0.5) * (1 - np.tanh(0.5) ** 2))


def test_hvp_of_a_linear_function_is_zero_and_of_a_constant_too():
    np.testing.assert_array_equal(mt.hvp(lambda x: (x * 3.0).sum(), np.ones(3), np.ones(3)), np.zeros(3))
    np.testing.assert_array_equal(mt.hessian(lambda x: x.sum() * 0.0 + 1.0, np.ones(2)), np.zeros((2, 2)))


def test_hvp_of_an_mlp_loss_matches_differences_of_its_gradient():
    rng = np.random.default_rng(3)
    w1, w2, data = rng.standard_normal((4, 3)), rng.standard_normal((3, 1)), rng.standard_normal((5, 4))

    def loss(flat):
        first = flat[:12].reshape(4, 3)
        second = flat[12:].reshape(3, 1)
        return ((mt.Tensor(data) @ first).gelu() @ second).softmax(axis=0).log().mean()

    x = np.concatenate([w1.ravel(), w2.ravel()])
    v = rng.standard_normal(x.shape)

    def grad(values):
        t = mt.Tensor(values, requires_grad=True)
        return mt.gradients(loss(t))[t]

    numeric = (grad(x + EPS * v) - grad(x - EPS * v)) / (2 * EPS)
    np.testing.assert_allclose(mt.hvp(loss, x, v), numeric, rtol=1e-6, atol=1e-9)


def test_gradgradcheck_passes_and_catches_a_vjp_whose_recorded_form_is_wrong():
    assert mt.check.gradgradcheck(lambda a, b: ((a @ b).tanh() * a.sum()).sum(), np.ones((2, 3)) * 0.3, np.eye(3))
    square = mt.ops.define(
        "square_frozen_x",
        forward=lambda x: x * x,
        # Right numbers at first order, but it reads x's value: the recorded
        # VJP treats x as a constant, so its derivative misses a term.
        vjp=lambda g, ans, x: (g * 2.0 * mt.ops.value_of(x),),
        formula="{g} * 2 * {x}",
        higher_order=True,
    )
    try:
        assert mt.check.gradcheck(lambda t: square(t).sum(), np.array([0.5, 1.5]))
        result = mt.check.gradgradcheck(lambda t: square(t).sum(), np.array([0.5, 1.5]), raise_exception=False)
        assert not result.ok and "gradgradcheck FAILED" in str(result)
    finally:
        OPS.pop("square_frozen_x")


def test_an_op_without_higher_order_is_refused_by_name_and_nothing_changes():
    logistic = mt.ops.define(
        "logistic_first_order",
        forward=lambda x: 1 / (1 + np.exp(-x)),
        vjp=lambda g, s, x: (g * s * (1 - s),),
        formula="{g} * s * (1 - s)",
    )
    try:
        x = mt.Tensor(np.array([0.5, -0.5]), requires_grad=True)
        with mt.Tape() as tape:
            y = logistic(x.tanh()).sum()
            before = len(tape)
            with pytest.raises(ValueError, match="op 'logistic_first_order' has no higher-order.*higher_order=True"):
                y.backward(create_graph=True)
            assert len(tape) == before
        assert x.grad is None
        y.backward()  # first order still works
        assert x.grad is not None
    finally:
        OPS.pop("logistic_first_order")


def test_the_recorded_pass_is_a_tape_grouped_by_forward_variable():
    x = mt.Tensor(np.array([[0.5, -1.0, 2.0]]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        scores = x.scale(0.5, name="S")
        weights = scores.softmax(name="P")
        squares = weights.__mul__(weights)
        squares.name = "Q"
        loss = squares.sum(name="loss")
        forward_length = len(tape)
        grads = mt.gradients(loss, create_graph=True)
    program = grads.program
    assert isinstance(program, mt.Tape) and len(program) > 0
    modules = {eq.module for eq in program}
    # (sum's VJP only spreads the constant seed: nothing to record for ∂loss.)
    assert modules == {"∂Q", "∂P", "∂S"}, modules
    assert len(tape) == forward_length + len(program), "the enclosing tape records the backward program too"
    assert program[len(program) - 1].output is grads[x] or grads[x] in program.nodes


def test_bad_input_to_hvp_hessian_and_create_graph():
    x = np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="single number.*shape \\(2,\\)"):
        mt.hvp(lambda t: t * t, x, x)
    with pytest.raises(ValueError, match=r"hvp\(v\): has shape \(3,\)"):
        mt.hvp(lambda t: t.sum(), x, np.ones(3))
    with pytest.raises(TypeError, match="f must return a Scalar or Tensor"):
        mt.hvp(lambda t: 3.0, x, x)
    with pytest.raises(TypeError, match="f must be callable"):
        mt.hessian("f", x)
    with pytest.raises(ValueError, match="at most 4096 entries"):
        mt.hessian(lambda t: t.sum(), np.zeros(5000))
    with pytest.raises(TypeError, match="create_graph='yes'"):
        mt.gradients(mt.Tensor(x, requires_grad=True).sum(), create_graph="yes")
    t = mt.Tensor(x, requires_grad=True)
    with pytest.raises(ValueError, match="grad is a Tensor of shape \\(3,\\)"):
        mt.gradients(t * 2.0, mt.Tensor(np.ones(3)), create_graph=True)


def test_hvp_leaves_the_callers_values_and_tapes_alone():
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    with mt.Tape() as tape:
        mt.hvp(lambda t: (t * t * t).sum(), x, np.ones(2))
        mt.jvp(lambda t: t * t, (x,), (np.ones(2),))
    assert len(tape) == 0 and x.grad is None


def test_every_builtin_op_is_registered_by_import_microtape_alone():
    """The set of ops does not depend on which subpackage was imported (the tiled kernel's included)."""
    code = "import microtape.ops as o; print(sorted(o.OPS))"
    alone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    after_nn = subprocess.run(
        [sys.executable, "-c", "import microtape.nn, microtape.check; " + code],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert alone == after_nn and "'tiled_attention'" in alone


def test_walk_shows_each_gradients_recorded_expression():
    x = mt.Tensor(np.array([[0.5, -1.0, 2.0]]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        weights = x.scale(2.0, name="S").softmax(name="P")
        loss = (weights * weights).sum(name="loss")
    steps = mt.check.walk(tape, loss, expressions=True)
    softmax_step = next(step for step in steps if step.name == "P")
    ops_used = [line.split(" = ")[1].split("(")[0] for line in softmax_step.expression]
    # P's gradient (the sum of its two uses), then softmax's VJP p * (g - rowsum(g * p)), in ops:
    assert ops_used == ["add", "mul", "sum", "sub", "mul"], softmax_step.expression
    assert "recorded as:" in str(softmax_step)
    assert all(step.expression == () for step in mt.check.walk(tape, loss)), "off unless asked for"
    assert x.grad is None


def test_the_backward_program_of_attention_draws_grouped_by_forward_variable():
    attn = mt.nn.MultiHeadAttention(4, 1, seed=0)
    x = mt.Tensor(np.random.default_rng(0).standard_normal((1, 3, 4)), requires_grad=True, name="x")
    grads = mt.gradients((attn(x) ** 2).sum(name="loss"), create_graph=True)
    source = mt.viz.graph(grads.program).source
    for group in ("∂weights", "∂scores", "∂context", "∂q_proj"):
        assert group in source, f"no box for {group}"
