"""Structural properties the engine's speed and memory rest on (never timings).

The benchmarks (``python -m benchmarks``, results in ``benchmarks/RESULTS.md``)
measure time and memory by hand. These tests pin down the *shapes* behind
those numbers, so a change that quietly adds a score-sized array or a
reference cycle is caught on any machine:

* the attention tape holds exactly the score-sized arrays it shows (scores,
  scaled scores, weights — and a masked copy when there is a mask) and one
  gradient for each, nothing more;
* softmax's forward and VJP each allocate one output-sized array (no
  temporaries of that size);
* attention's backward allocates no score-sized array beyond the three
  gradients the tape keeps;
* the graph of a computation has no reference cycles, so Python frees it
  without the cyclic garbage collector.
"""

import gc
import tracemalloc

import numpy as np
import pytest

import microtape as mt
from microtape import ops

B, T, E, H = 1, 256, 8, 2
SCORE_VALUES = B * H * T * T  # 131,072: 64 times any [B, T, E] array (2,048)
SMALL = B * T * E * 8  # bytes of one float64 [B, T, E] array


def _attention(causal=False, seed=0):
    attn = mt.nn.MultiHeadAttention(E, H, causal=causal, seed=seed)
    rng = np.random.default_rng(seed)
    return attn, rng.standard_normal((B, T, E)), rng.standard_normal((B, T, E))


def _score_sized(nodes, field):
    return [node.name for node in nodes if getattr(getattr(node, field), "size", 0) == SCORE_VALUES]


@pytest.mark.parametrize(
    "causal, expected",
    [
        (False, ["scores", "scaled_scores", "weights"]),
        (True, ["scores", "scaled_scores", "causal_scores", "weights"]),
    ],
)
def test_attention_tape_keeps_one_score_sized_value_and_gradient_per_row(causal, expected):
    attn, x, grad = _attention(causal)
    attn(x)
    attn.backward(grad)
    nodes = attn.tape.nodes
    assert _score_sized(nodes, "data") == expected
    assert _score_sized(nodes, "grad") == expected
    # The leaves (inputs, parameters, the causal mask) are not score-sized
    # except the mask itself, which is [Tq, Tk], not [B·H, Tq, Tk].
    assert _score_sized(attn.tape.leaves(), "data") == []


def _peak_new_bytes(fn):
    """Bytes allocated at the peak of ``fn()`` beyond what was allocated before it."""
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before, result


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_forward_and_vjp_each_make_one_array(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 64, 64)).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    weights = ops.softmax.forward(x, axis=-1)  # warm-up: numpy's first-call caches are not ours
    ops.softmax.vjp(g, weights, x, axis=-1)
    # One new array, plus row maxima / row sums and bookkeeping: well under a second array.
    peak, weights = _peak_new_bytes(lambda: ops.softmax.forward(x, axis=-1))
    assert peak < 1.5 * x.nbytes, f"softmax forward peaked at {peak / x.nbytes:.2f} arrays"
    peak, (grad_x,) = _peak_new_bytes(lambda: ops.softmax.vjp(g, weights, x, axis=-1))
    assert peak < 1.5 * x.nbytes, f"softmax VJP peaked at {peak / x.nbytes:.2f} arrays"
    assert grad_x.dtype == dtype and weights.dtype == dtype


def test_attention_backward_makes_only_the_gradients_the_tape_keeps():
    """Peak new memory of backward: dP, dS, d(scores) — three score-sized arrays — plus small ones."""
    attn, x, grad = _attention()
    attn(x)
    attn.backward(grad)  # warm-up: first-call caches are not ours
    attn(x)
    score_bytes = SCORE_VALUES * 8
    small = 40 * SMALL + 64 * 1024  # ~30 [B, T, E]-sized gradients, the weights' gradients, bookkeeping
    peak, _ = _peak_new_bytes(lambda: attn.backward(grad))
    assert peak <= 3 * score_bytes + small, f"backward peaked at {peak / score_bytes:.2f} score arrays"


def test_attention_forward_makes_only_the_values_the_tape_keeps():
    """Peak new memory of forward: scores, scaled scores, weights — and no score-sized temporary."""
    attn, x, _ = _attention()
    attn(x)  # warm-up
    score_bytes = SCORE_VALUES * 8
    small = 20 * SMALL + 64 * 1024  # ~12 [B, T, E]-sized values (projections, heads, context, output)
    peak, _ = _peak_new_bytes(lambda: attn(x))
    assert peak <= 3 * score_bytes + small, f"forward peaked at {peak / score_bytes:.2f} score arrays"


def test_graphs_have_no_reference_cycles():
    """A dropped computation is freed by reference counting alone (no work for the cyclic GC)."""
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            a, b = mt.Scalar(0.5, name="a"), mt.Scalar(-1.5, name="b")
            with mt.Tape() as tape:
                y = ((a * b + 2.0) ** 2).tanh() - a / (b * b)
            tape.backward(y)
            y.backward()
            t = mt.Tensor(np.ones((3, 4)), requires_grad=True)
            (t @ t.T).softmax().sum().backward()
            del a, b, y, t, tape
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_self_attention_x_gradient_is_the_pass_own_sum_not_a_second_one():
    """dx of self-attention is the reverse pass's own sum over the three projections (bit for bit, no new array)."""
    attn, x, grad = _attention()
    attn(x)
    attn.backward(grad)
    grads = attn.last_gradients
    x_node = attn._last.inputs["query"]
    np.testing.assert_array_equal(grads["x"], grads["value"] + grads["key"] + grads["query"])
    assert np.shares_memory(grads["x"], x_node.grad)


def test_inside_a_larger_computation_the_x_gradient_leaves_out_the_other_uses():
    """In an encoder layer x also feeds the residual: its attention's dx is still only the three projections'."""
    layer = mt.nn.TransformerEncoderLayer(E, H, 16, seed=0)
    rng = np.random.default_rng(3)
    layer(rng.standard_normal((B, 8, E)))
    grads = layer.named_gradients(rng.standard_normal((B, 8, E)))
    three = grads["self_attn.value"] + grads["self_attn.key"] + grads["self_attn.query"]
    np.testing.assert_array_equal(grads["self_attn.x"], three)
    assert np.abs(grads["x"] - three).max() > 0.1  # the layer's own dx has the residual's part too
