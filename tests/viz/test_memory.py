"""What backward keeps: the memory timeline, the saved-values graph, the scaling law, second order.

The computed figures (microtape.viz.lifetimes: shapes × itemsizes and each
array's lifetime) are checked against tracemalloc — within ±15 % for a full
and a lean tape, ±35 % for the tiled op (its VJP's block-sized scratch tiles
are on no tape) — and the hand-written numpy reference's peak, counted from
shapes, against tracemalloc on the reference itself. Reading memory must
change nothing.
"""

import tracemalloc

import numpy as np
import pytest

import microtape as mt
from microtape.viz.lifetimes import lifetimes
from microtape.viz.memory import numpy_reference_peak


def _attention(length=64, embed=16, heads=2, **options):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, length, embed))
    g = rng.standard_normal((1, length, embed))
    return mt.nn.MultiHeadAttention(embed, heads, seed=0, **options), x, g


def _measured_peak(options, length):
    attn, x, g = _attention(length, **options)
    attn(x)
    attn.backward(g)  # warm every code path (first calls allocate caches of their own)
    attn, x, g = _attention(length, **options)
    tracemalloc.start()
    try:
        attn(x)
        attn.backward(g)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return attn, g, peak


@pytest.mark.parametrize(
    ("options", "tolerance"),
    [({}, 0.15), ({"lean": True}, 0.15), ({"block_size": 64}, 0.35)],
    ids=["full", "lean", "tiled"],
)
def test_computed_peak_agrees_with_tracemalloc(options, tolerance):
    attn, g, measured = _measured_peak(options, 512)
    computed = lifetimes(attn, g).peak_bytes
    assert abs(computed - measured) <= tolerance * measured, (computed, measured)


def test_numpy_reference_peak_agrees_with_tracemalloc():
    from benchmarks import numpy_attention as reference

    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((1, 512, 16)), rng.standard_normal((1, 512, 16))
    layer = reference.Layer(reference.init_params(16), 2)
    tracemalloc.start()
    try:
        layer.forward(x)
        layer.backward(g)
        _, measured = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert abs(numpy_reference_peak(1, 512, 16, 2) - measured) <= 0.05 * measured


def test_peak_is_named_and_table_rows_cover_forward_and_backward():
    attn, x, g = _attention(64)
    attn(x)
    fig = mt.viz.memory(attn, grad=g)
    table = fig.table
    forward = [row for row in table.rows if row.phase == "forward"]
    backward = [row for row in table.rows if row.phase == "backward"]
    assert len(forward) == len(attn.tape)
    assert backward and backward[0].step == "∂output"
    peak = table.peak
    assert peak.live_bytes == max(row.live_bytes for row in table.rows)
    # The full tape's peak holds the score-sized arrays, each [B·H, T, T] float64.
    assert {"scores", "scaled_scores", "weights"} <= set(peak.alive)
    square = 2 * 64 * 64 * 8
    assert peak.live_bytes >= 3 * square
    assert "peak" in table.table() and "← peak" in table.table()
    # The figure names the peak.
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert peak.step in texts and "weights" in texts


def test_lean_tape_frees_scores_and_intermediate_gradients():
    full, x, g = _attention(128)
    lean, _, _ = _attention(128, lean=True)
    full(x)
    lean(x)
    full_ledger, lean_ledger = lifetimes(full, g), lifetimes(lean, g)
    assert lean_ledger.peak_bytes < 0.6 * full_ledger.peak_bytes
    dropped = {a.name for a in lean_ledger.arrays if a.kind == "value" and a.freed is not None}
    assert {"scores", "scaled_scores"} <= dropped
    grads_freed = {a.name for a in lean_ledger.arrays if a.kind == "gradient" and a.freed is not None}
    assert "∂weights" in grads_freed
    assert all(a.freed is None for a in full_ledger.arrays if a.kind == "value")


def test_tiled_op_keeps_only_row_statistics():
    attn, x, g = _attention(128, block_size=32)
    attn(x)
    ledger = lifetimes(attn, g)
    saved = [a for a in ledger.arrays if a.kind == "saved"]
    assert saved and all(a.shape == (2, 128) for a in saved)
    assert not any(a.shape[-2:] == (128, 128) for a in ledger.arrays)


def test_reading_memory_changes_nothing():
    attn, x, g = _attention(32)
    attn(x)
    attn.backward(g)
    tape = attn.tape
    before = [(node, node.data, None if node.grad is None else np.array(node.grad)) for node in tape.nodes]
    params = [(p, np.array(p.data), np.array(p.grad)) for p in attn.parameters()]
    length = len(tape)
    mt.viz.memory(attn)
    mt.viz.graph(attn, saved=True)
    assert attn.tape is tape and len(tape) == length
    for node, data, grad in before:
        assert node.data is data
        assert (grad is None and node.grad is None) or np.array_equal(node.grad, grad)
    for p, data, grad in params:
        assert np.array_equal(p.data, data) and np.array_equal(p.grad, grad)


def test_bad_input_is_refused_clearly():
    with pytest.raises(TypeError, match="memory"):
        mt.viz.memory("a tape")
    never_run = mt.nn.MultiHeadAttention(8, 2, seed=0)
    with pytest.raises(ValueError, match="forward"):
        mt.viz.memory(never_run)
    with mt.Tape() as tape:
        a = mt.Scalar(2.0, name="a")
        _ = (a * a).tanh()
    with pytest.raises(ValueError, match="Scalars"):
        mt.viz.memory(tape)
    # A value freed: the output of a lean tape's forward dropped by another lean recording.
    attn, x, _ = _attention(16, lean=True)
    attn(x)
    attn.tape.nodes[-1].data = mt.engine.lean.NotKept((1, 16, 16), np.float64, "output")
    with pytest.raises(ValueError, match="freed"):
        mt.viz.memory(attn)
