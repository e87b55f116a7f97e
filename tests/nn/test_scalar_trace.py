"""Zoom to scalars: ``attn.trace_scalars`` runs the same forward one Scalar per number.

The scalar trace must give the tensor trace's output and gradients (1e-12),
its tape must hold only scalar arithmetic, and the operation counts must
match what the formulas say (one ``exp`` per attention score, …).
"""

from collections import Counter

import numpy as np
import pytest

import microtape as mt

E, H, T, B = 4, 2, 3, 1
D = E // H
EXACT = dict(rtol=1e-12, atol=1e-12)
SCALAR_OPS = {"add", "sub", "mul", "div", "exp", "neg"}


def tiny(causal=False, dropout=0.0, seed=0):
    return mt.nn.MultiHeadAttention(E, H, dropout=dropout, causal=causal, seed=seed)


def tensor_route(attn, upstream, *args, mask=None):
    """Forward + taped backward; returns (output, {name: gradient}) like ``trace.gradients()``."""
    output = attn(*args, mask=mask)
    attn.zero_grad()
    returned = attn.backward(upstream)
    grads = {name: tensor.grad.copy() for name, tensor in attn.named_parameters()}
    if len(args) == 1:
        grads["x"] = returned
    else:
        grads["query"] = returned
        grads["key"] = attn.grad_key_input()
        grads["value"] = attn.grad_value_input()
    return output.data, grads


def assert_same_gradients(scalar_grads, tensor_grads):
    assert scalar_grads.keys() == tensor_grads.keys()
    for name, grad in tensor_grads.items():
        assert scalar_grads[name].shape == grad.shape, name
        np.testing.assert_allclose(scalar_grads[name], grad, **EXACT, err_msg=name)


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_self_attention_scalar_trace_matches_tensor_trace(causal):
    """E=4, H=2, T=3, B=1: same output, same dx and parameter gradients."""
    attn = tiny(causal=causal)
    rng = np.random.default_rng(0)
    x, upstream = rng.standard_normal((B, T, E)), rng.standard_normal((B, T, E))
    output, tensor_grads = tensor_route(attn, upstream, x)
    trace = attn.trace_scalars(x)
    np.testing.assert_allclose(trace.output.data, output, **EXACT)
    trace.backward(upstream)
    assert_same_gradients(trace.gradients(), tensor_grads)


def test_cross_attention_with_mask_scalar_trace():
    """Cross (Tq=2, Tk=3) with an additive mask: query, key, value and parameter gradients agree."""
    attn = tiny(seed=1)
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((B, 2, E)), rng.standard_normal((B, 3, E)), rng.standard_normal((B, 3, E))
    mask = np.array([[0.0, -1e9, 0.5], [-0.25, 0.0, -1e9]])
    upstream = rng.standard_normal((B, 2, E))
    output, tensor_grads = tensor_route(attn, upstream, q, k, v, mask=mask)
    trace = attn.trace_scalars(q, k, v, mask=mask)
    np.testing.assert_allclose(trace.output.data, output, **EXACT)
    trace.backward(upstream)
    assert_same_gradients(trace.gradients(), tensor_grads)


def test_dropout_scalar_trace_reuses_the_forward_mask():
    """With dropout active, the trace uses the last forward's saved mask and agrees."""
    attn = tiny(causal=True, dropout=0.5, seed=2)
    rng = np.random.default_rng(2)
    x, upstream = rng.standard_normal((B, T, E)), rng.standard_normal((B, T, E))
    output, tensor_grads = tensor_route(attn, upstream, x)
    assert np.any(attn.dropout_keep == 0)
    trace = attn.trace_scalars(x)
    np.testing.assert_allclose(trace.output.data, output, **EXACT)
    trace.backward(upstream)
    assert_same_gradients(trace.gradients(), tensor_grads)


def test_default_upstream_is_ones():
    """``trace.backward()`` differentiates ``sum(output)``."""
    attn = tiny(seed=3)
    x = np.random.default_rng(3).standard_normal((B, T, E))
    _, tensor_grads = tensor_route(attn, np.ones((B, T, E)), x)
    trace = attn.trace_scalars(mt.Tensor(x))
    trace.backward()
    assert_same_gradients(trace.gradients(), tensor_grads)


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_tape_holds_only_scalar_arithmetic(causal):
    """Every equation is a Scalar op (add/sub/mul/div/exp); counts follow the formulas."""
    attn = tiny(causal=causal)
    trace = attn.trace_scalars(np.random.default_rng(0).standard_normal((B, T, E)))
    ops = Counter(eq.op.name for eq in trace.tape)
    assert set(ops) <= SCALAR_OPS, f"non-scalar ops on the scalar tape: {set(ops) - SCALAR_OPS}"
    assert all(isinstance(eq.output, mt.Scalar) for eq in trace.tape)
    scores = B * H * T * T
    assert ops["exp"] == scores  # one exp per score
    assert ops["sub"] == scores  # shift each score by its row max
    assert ops["div"] == scores  # normalise each weight
    # Four projections: one multiply per weight per output number; Q Kᵀ and P V: D and Tk per entry;
    # plus the 1/√D scaling of each score.
    assert ops["mul"] >= 4 * B * T * E * E + 2 * scores * D + scores
    assert ops["add"] >= 4 * B * T * E * (E - 1)
    assert len(trace.tape) > 500


def test_trace_leaves_the_layer_state_alone():
    """Tracing does not replace the layer's tape, weights or gradients."""
    attn = tiny()
    x = np.random.default_rng(0).standard_normal((B, T, E))
    attn(x)
    attn.backward(np.ones((B, T, E)))
    tape, weights = attn.tape, attn.attention_weights.copy()
    grads = [t.grad.copy() for t in attn.parameters()]
    trace = attn.trace_scalars(x)
    trace.backward()
    assert attn.tape is tape
    np.testing.assert_array_equal(attn.attention_weights, weights)
    for before, tensor in zip(grads, attn.parameters(), strict=True):
        np.testing.assert_array_equal(tensor.grad, before)


def test_refuses_large_sizes():
    """Too many scalar ops: ValueError giving the estimate, the sizes and the limit."""
    attn = mt.nn.MultiHeadAttention(32, 4, seed=0)
    with pytest.raises(ValueError, match="max_ops") as info:
        attn.trace_scalars(np.zeros((1, 16, 32)))
    message = str(info.value)
    assert "E=32" in message and "Tq=16" in message
    small = tiny()
    with pytest.raises(ValueError, match="max_ops=100"):
        small.trace_scalars(np.zeros((B, T, E)), max_ops=100)


def test_refuses_bad_input_like_forward():
    """The scalar trace validates its arguments as forward does."""
    attn = tiny()
    with pytest.raises(TypeError, match="from_bool"):
        attn.trace_scalars(np.zeros((B, T, E)), mask=np.ones((T, T), bool))
    with pytest.raises(ValueError, match="query"):
        attn.trace_scalars(np.zeros((T, E)))


def test_dropout_trace_needs_a_forward_first():
    """Dropout active and no forward of these sizes yet: a clear ValueError (use eval() or forward)."""
    attn = tiny(dropout=0.3)
    with pytest.raises(ValueError, match="forward"):
        attn.trace_scalars(np.zeros((B, T, E)))
    attn.eval()
    attn.trace_scalars(np.zeros((B, T, E)))  # fine without dropout


def test_scalar_trace_groups_the_attention_core_by_head():
    """Every scalar op of the attention core lands in its head's module, with equal work per head,
    and the projections stay in their own modules; the graph then clusters by head."""
    attn = mt.nn.MultiHeadAttention(4, 2, seed=0, causal=True).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 4))
    trace = attn.trace_scalars(x)
    modules = Counter(node.module for node in trace.tape.nodes)
    assert set(modules) == {"q_proj", "k_proj", "v_proj", "out_proj", "attention.head0", "attention.head1"}
    assert modules["attention.head0"] == modules["attention.head1"] > 0
    # A head's ops read only its own head's numbers: follow one head's exps back to Q.
    for node in trace.tape.nodes:
        if node.module.startswith("attention.head"):
            for x_in in node.inputs:
                assert not x_in.module.startswith("attention.head") or x_in.module == node.module

    two = mt.nn.MultiHeadAttention(4, 2, seed=0).eval()
    batched = two.trace_scalars(np.random.default_rng(1).standard_normal((2, 2, 4)))
    assert {n.module for n in batched.tape.nodes if n.module.startswith("attention")} == {
        f"attention.batch{b}.head{h}" for b in range(2) for h in range(2)
    }
