"""Forward mode: every op's JVP, the transpose property ⟨u, J v⟩ = ⟨Jᵀ u, v⟩, and mt.jvp end to end.

Every registered op is looped over (an op added later is checked
automatically). The JVP is compared with central differences of the forward
(the definition of the directional derivative) and, through the transpose
property, with the op's own VJP — two independent references.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import OP_CASES

import microtape as mt
from microtape.ops import OPS

ALL_OPS = sorted(OPS)
EPS = 1e-6


def _draw_tangents(op, inputs, rng):
    return tuple(rng.standard_normal(np.shape(x)) if op.grads[i] is not None else None for i, x in enumerate(inputs))


def _jvp(op, inputs, params, tangents):
    ans = op.forward(*inputs, **params)
    out = np.asarray(op.jvp(tangents, ans, *inputs, **params), dtype=np.float64)
    return np.broadcast_to(out, np.shape(ans))


def test_every_op_has_a_jvp_rule():
    assert [name for name in ALL_OPS if OPS[name].jvp is None] == []


@pytest.mark.parametrize("name", ALL_OPS)
def test_jvp_matches_central_differences_and_the_vjp_transposed(name):
    op = OPS[name]

    @settings(max_examples=12, deadline=None)
    @given(case=OP_CASES[name], seed=st.integers(0, 2**32 - 1))
    def check(case, seed):
        inputs, params = case
        rng = np.random.default_rng(seed)
        tangents = _draw_tangents(op, inputs, rng)
        ans = op.forward(*inputs, **params)
        jv = _jvp(op, inputs, params, tangents)
        # Central differences along the tangent (constants stay put); a float32 output needs a wider step.
        loose = np.result_type(ans) != np.float64
        step = 1e-2 if loose else EPS
        plus = [x + step * t if t is not None else x for x, t in zip(inputs, tangents)]
        minus = [x - step * t if t is not None else x for x, t in zip(inputs, tangents)]
        difference = np.asarray(op.forward(*plus, **params), np.float64) - np.asarray(
            op.forward(*minus, **params), np.float64
        )
        numeric = difference / (2 * step)
        # Each forward is rounded to about |f|·eps, and the difference divides that by 2·step: a product of
        # a dozen entries (cumprod reaches 2²⁵) leaves |f|·1e-10 of pure rounding in `numeric` (float64).
        magnitude = float(np.max(np.abs(np.asarray(ans, np.float64)), initial=0.0))
        rounding = 4 * np.finfo(np.result_type(ans, np.float32)).eps * magnitude / (2 * step)
        np.testing.assert_allclose(
            jv, numeric, rtol=1e-3 if loose else 1e-6, atol=(1e-2 if loose else 1e-6) + rounding,
            err_msg=f"{name} {params}",
        )  # fmt: skip
        # ⟨u, J v⟩ = ⟨Jᵀ u, v⟩ with the op's own VJP.
        u = rng.standard_normal(np.shape(ans)).astype(np.result_type(ans))
        grads = op.vjp(u, ans, *inputs, **params)
        left = float(np.sum(u * jv))
        right = sum(float(np.sum(g * t)) for g, t in zip(grads, tangents) if t is not None)
        assert left == pytest.approx(right, rel=1e-5 if loose else 1e-10, abs=1e-5 if loose else 1e-10), name

    check()


def test_jvp_of_a_composition_equals_the_reverse_mode_directional_derivative():
    rng = np.random.default_rng(0)
    w, x0, v = rng.standard_normal((4, 3)), rng.standard_normal((5, 4)), rng.standard_normal((5, 4))

    def loss(x):
        return ((x @ mt.Tensor(w)).softmax() * (x[:, :3].gelu())).logsumexp(axis=-1).mean()

    value, forward = mt.jvp(loss, (x0,), (v,))
    t = mt.Tensor(x0, requires_grad=True)
    reverse = float(np.sum(mt.gradients(loss(t))[t] * v))
    assert isinstance(value, mt.Tensor) and value.data == pytest.approx(loss(mt.Tensor(x0)).data)
    assert float(forward) == pytest.approx(reverse, rel=1e-12)


def test_jvp_of_scalars_several_inputs_and_several_outputs():
    outputs, tangents = mt.jvp(lambda a, b: (a * b, (a * b).tanh()), (2.0, 0.25), (1.0, 0.0))
    assert isinstance(outputs, tuple) and isinstance(outputs[0], mt.Scalar)
    assert tangents[0] == pytest.approx(0.25)  # d(ab)/da · 1
    assert tangents[1] == pytest.approx(0.25 * (1 - np.tanh(0.5) ** 2))


def test_jvp_through_attention_matches_finite_differences():
    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=0)
    rng = np.random.default_rng(1)
    x, v = rng.standard_normal((1, 4, 8)), rng.standard_normal((1, 4, 8))
    _, tangent = mt.jvp(lambda t: attn(t), (x,), (v,))
    numeric = (attn(x + EPS * v).data - attn(x - EPS * v).data) / (2 * EPS)
    np.testing.assert_allclose(tangent, numeric, rtol=1e-6, atol=1e-8)


def test_bad_input_to_jvp():
    x = np.ones(3)
    with pytest.raises(ValueError, match=r"jvp\(tangents\[0\]\): has shape \(2,\)"):
        mt.jvp(lambda t: t.sum(), (x,), (np.ones(2),))
    with pytest.raises(TypeError, match=r"jvp\(tangents\[0\]\): has dtype float32"):
        mt.jvp(lambda t: t.sum(), (x,), (np.ones(3, dtype=np.float32),))
    with pytest.raises(TypeError, match="expected a tuple"):
        mt.jvp(lambda t: t.sum(), x, x)
    with pytest.raises(ValueError, match="1 primals but 2 tangents"):
        mt.jvp(lambda t: t.sum(), (x,), (x, x))
    with pytest.raises(TypeError, match="f must return a Scalar or Tensor.*got float"):
        mt.jvp(lambda t: 1.0, (x,), (x,))
    no_forward_mode = mt.ops.define(
        "no_jvp_here", forward=lambda x: 2 * x, vjp=lambda g, ans, x: (2 * g,), formula="2 * {g}"
    )
    try:
        with pytest.raises(ValueError, match="op 'no_jvp_here' has no JVP rule"):
            mt.jvp(lambda t: no_forward_mode(t), (x,), (x,))
    finally:
        OPS.pop("no_jvp_here")


def test_a_users_jvp_passes_the_transpose_property():
    """The notebook's exercise: write a JVP for an op, and check ⟨u, J v⟩ = ⟨Jᵀ u, v⟩."""
    cube = mt.ops.define(
        "cube_user",
        forward=lambda x: x**3,
        vjp=lambda g, ans, x: (3 * g * x * x,),
        formula="3 * {g} * {x}**2",
        jvp=lambda tangents, ans, x: 3 * x * x * tangents[0],
    )
    wrong = mt.ops.define(
        "cube_wrong_jvp",
        forward=lambda x: x**3,
        vjp=lambda g, ans, x: (3 * g * x * x,),
        formula="3 * {g} * {x}**2",
        jvp=lambda tangents, ans, x: 3 * x * tangents[0],  # forgot one x
    )
    try:
        rng = np.random.default_rng(2)
        x, v, u = rng.standard_normal((3, 4))
        for op, holds in ((cube, True), (wrong, False)):
            _, jv = mt.jvp(lambda t, op=op: op(t), (x,), (v,))
            t = mt.Tensor(x, requires_grad=True)
            vjp = mt.gradients(op(t), u)[t]
            assert bool(abs(np.dot(u, jv) - np.dot(vjp, v)) < 1e-12) is holds
    finally:
        OPS.pop("cube_user")
        OPS.pop("cube_wrong_jvp")
