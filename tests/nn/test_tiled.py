"""The tiled (flash) attention path against the standard chain, and its contract.

The reference is always computed independently of the tiled kernel: the
standard chain's tape (one VJP per primitive), the hand-derived formulas, or
plain numpy written here. The PyTorch fixtures are in test_golden_torch.py;
the op's VJP against finite differences in test_ops.py (the registry).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_mask

import microtape as mt
from microtape.nn.attention import tiled
from microtape.nn.dropout_mask import DropoutMask
from microtape.ops import tiled_attention as tiled_kernel

EXACT = {"rtol": 1e-10, "atol": 1e-10}


def pair(embed, heads, *, seed=0, block_size=3, **options):
    """The same layer twice from one seed: the standard chain, and the tiled kernel."""
    standard = mt.nn.MultiHeadAttention(embed, heads, seed=seed, **options)
    tiled_layer = mt.nn.MultiHeadAttention(embed, heads, seed=seed, block_size=block_size, **options)
    return standard, tiled_layer


def run_both(standard, tiled_layer, inputs, mask, upstream):
    """Forward both layers on ``inputs``; return their outputs and tape-route named gradients."""
    outputs = [layer(*inputs, mask=mask) for layer in (standard, tiled_layer)]
    grads = [layer.named_gradients(upstream) for layer in (standard, tiled_layer)]
    return outputs, grads


def assert_gradients_agree(expected, actual, names, what):
    for name in names:
        np.testing.assert_allclose(actual[name], expected[name], **EXACT, err_msg=f"{what}: {name}")


# ---------------------------------------------------------------- tiled against standard, drawn


@st.composite
def layer_cases(draw):
    heads, depth = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    cross = draw(st.booleans())
    q_len = draw(st.integers(1, 7))
    k_len = draw(st.integers(1, 7)) if cross else q_len
    causal = q_len == k_len and draw(st.booleans())
    return {
        "batch": draw(st.integers(1, 2)),
        "heads": heads,
        "embed": heads * depth,
        "cross": cross,
        "q_len": q_len,
        "k_len": k_len,
        "causal": causal,
        "block_size": draw(st.integers(1, 9)),  # divides T, does not, or exceeds it
        "mask": draw(attention_mask(q_len, k_len, causal)),
        "dropout": draw(st.sampled_from([0.0, 0.3])),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(max_examples=40, deadline=None)
@given(case=layer_cases())
def test_tiled_equals_standard_forward_and_every_gradient(case):
    """Output, weights, dropout mask and every named gradient (inputs and parameters) agree to 1e-10.

    Both layers come from the same seed: the same weights and — counter-based
    dropout — the same mask, on two forwards in a row.
    """
    standard, tiled_layer = pair(
        case["embed"], case["heads"], seed=case["seed"], block_size=case["block_size"],
        dropout=case["dropout"], causal=case["causal"],
    )  # fmt: skip
    rng = np.random.default_rng(case["seed"])
    batch, embed = case["batch"], case["embed"]
    if case["cross"]:
        inputs = (rng.standard_normal((batch, case["q_len"], embed)),)
        inputs += tuple(rng.standard_normal((batch, case["k_len"], embed)) for _ in range(2))
    else:
        inputs = (rng.standard_normal((batch, case["q_len"], embed)),)
    upstream = rng.standard_normal((batch, case["q_len"], embed))
    for _ in range(2):
        (expected, actual), (expected_grads, actual_grads) = run_both(
            standard, tiled_layer, inputs, case["mask"], upstream
        )
        np.testing.assert_allclose(actual.data, expected.data, **EXACT)
        np.testing.assert_allclose(tiled_layer.attention_weights, standard.attention_weights, **EXACT)
        if case["dropout"]:
            np.testing.assert_array_equal(tiled_layer.dropout_keep, standard.dropout_keep)
        names = tiled_layer.gradient_names()
        assert set(names) <= set(standard.gradient_names())
        assert_gradients_agree(expected_grads, actual_grads, names, "tape route")
        by_hand = tiled_layer.named_gradients(upstream, "analytic")
        assert_gradients_agree(expected_grads, by_hand, names, "analytic route on recomputed weights")


# ---------------------------------------------------------------- hand-picked cases


def test_a_row_whose_keys_all_sit_in_a_later_block():
    """Rows that may see only keys of the last block: the running max starts at -inf, no NaN, exact result.

    Row 0 sees only key 7 (-inf elsewhere), row 1 only key 6 (-1e9 elsewhere): for
    three key blocks of 2 the row has nothing but suppressed keys.
    """
    q_len = k_len = 8
    mask = np.zeros((q_len, k_len))
    mask[0, :7] = -np.inf
    mask[1, :] = -1e9
    mask[1, 6] = 0.0
    standard, tiled_layer = pair(4, 1, seed=3, block_size=2)
    rng = np.random.default_rng(3)
    x, upstream = rng.standard_normal((1, q_len, 4)), rng.standard_normal((1, q_len, 4))
    (expected, actual), (expected_grads, actual_grads) = run_both(standard, tiled_layer, (x,), mask, upstream)
    np.testing.assert_allclose(actual.data, expected.data, **EXACT)
    assert_gradients_agree(expected_grads, actual_grads, tiled_layer.gradient_names(), "later-block rows")
    weights = tiled_layer.attention_weights[0, 0]
    assert weights[0, 7] == 1.0 and weights[1, 6] == 1.0

    # The walk itself: nothing finite for row 0 until key block 3, then exactly the one key.
    node = tiled_layer.tape.find("context").output
    q, k, v = (x.data for x in node.inputs)
    schedule = tiled.TileSchedule(q_len, k_len, 2)
    states = list(tiled.online_softmax(q, k, v, schedule, 0, mask))
    for state in states[:3]:
        assert state.m[0, 0] == -np.inf and state.l[0, 0] == 0.0 and not state.acc[0, 0].any()
        assert np.isfinite(state.m[0, 1]) and state.m[0, 1] < -1e8  # row 1: only -1e9 keys so far
    last = states[-1]
    np.testing.assert_allclose(last.l[0], 1.0)  # one key left: exp(S - m) = 1
    np.testing.assert_allclose(last.acc[0, 0], v[0, 7])


def test_online_softmax_by_hand_on_one_row():
    """One row of scores in blocks of 2, done by hand: m, l after each block, then O and L."""
    scores = np.array([[[1.0, 3.0, -2.0, 4.0, 0.5]]])  # [N=1, Tq=1, Tk=5]
    depth = 1
    q = np.ones((1, 1, depth)) * math.sqrt(depth)  # q · k / √d = k: the keys *are* the scores
    k = scores.reshape(1, 5, depth)
    v = np.arange(5.0).reshape(1, 5, 1)
    states = list(tiled.online_softmax(q, k, v, tiled.TileSchedule(1, 5, 2), 0))
    # Blocks [1, 3], [-2, 4], [0.5]: the max moves from 3 to 4 in the second block, so the first
    # block's sum is rescaled by exp(3 - 4) there.
    assert [s.m[0, 0] for s in states] == [3.0, 4.0, 4.0]
    first = math.exp(1 - 3) + math.exp(3 - 3)
    second = first * math.exp(3 - 4) + math.exp(-2 - 4) + math.exp(4 - 4)
    expected_l = [first, second, second + math.exp(0.5 - 4)]
    np.testing.assert_allclose([s.l[0, 0] for s in states], expected_l, rtol=1e-14)
    out, lse = tiled.tiled_forward(q, k, v, tiled.TileSchedule(1, 5, 2))
    e = np.exp(scores[0, 0] - scores.max())
    np.testing.assert_allclose(out[0, 0, 0], (e / e.sum()) @ np.arange(5.0), rtol=1e-14)
    np.testing.assert_allclose(lse[0, 0], np.log(np.exp(scores).sum()), rtol=1e-14)


def test_causal_tiles_above_the_diagonal_are_skipped_not_masked(monkeypatch):
    """T=8 in blocks of 2: 10 tiles computed and 6 skipped; no score is ever computed for a skipped one."""
    schedule = tiled.TileSchedule(8, 8, 2, causal=True)
    assert len(schedule.forward_order()) == 10 and len(schedule.skipped()) == 6
    assert all(tile.cols.start >= tile.rows.stop for tile in schedule.skipped())
    assert str(schedule) == "8×8 scores in tiles of 2: 10 of 16 computed, 6 skipped (causal)"
    computed = []
    original = tiled_kernel.score_tile

    def counting(q, k, tile, *rest):
        computed.append(tile)
        return original(q, k, tile, *rest)

    monkeypatch.setattr(tiled_kernel, "score_tile", counting)
    attn = mt.nn.MultiHeadAttention(4, 2, causal=True, block_size=2, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 8, 4))
    attn(x)
    assert computed == schedule.forward_order()
    computed.clear()
    attn.backward(np.ones((1, 8, 4)))
    assert computed == schedule.backward_order()
    assert [(t.k_block, t.q_block) for t in computed] == sorted((t.k_block, t.q_block) for t in computed)


def test_block_sizes_that_do_not_divide_or_exceed_the_length():
    schedule = tiled.TileSchedule(7, 5, 3)
    assert schedule.query_blocks == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert schedule.key_blocks == [slice(0, 3), slice(3, 5)]
    assert tiled.TileSchedule(7, 5, 50).query_blocks == [slice(0, 7)]


# ---------------------------------------------------------------- one op on the tape, O(T) memory


def test_the_core_is_one_row_and_nothing_score_sized_is_kept():
    """One tiled_attention row; every value and every gradient on the tape is O(B·T·E), none B·H·T·T."""
    batch, length, embed, heads = 1, 64, 8, 2
    attn = mt.nn.MultiHeadAttention(embed, heads, causal=True, block_size=16, seed=0)
    x = np.random.default_rng(0).standard_normal((batch, length, embed))
    attn(x)
    ops = [equation.op.name for equation in attn.tape]
    assert ops.count("tiled_attention") == 1
    assert not {"softmax", "add_constant", "dropout", "scale"} & set(ops)
    row = attn.tape.find("context")
    assert row.params["block_size"] == 16 and row.params["causal"] is True
    score_values = batch * heads * length * length
    assert max(node.data.size for node in attn.tape.nodes) < score_values / 4
    result = mt.gradients(attn.last_output, np.ones((batch, length, embed)), tape=attn.tape)
    assert max(np.size(g) for g in result.values()) < score_values / 4


def test_a_graph_shows_the_core_as_one_box_with_a_formula_per_input():
    """mt.viz.graph of a tiled tape: one tiled_attention box; each backward edge carries its input's formula."""
    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, block_size=2, seed=0)
    attn(np.random.default_rng(0).standard_normal((1, 5, 8)))
    attn.backward(np.ones((1, 5, 8)))
    source = mt.viz.graph(attn.tape, backward=True, expand="attention").source
    # One box, with its block size and the skipped tiles (the op's label, as data).
    assert source.count("tiled_attention tiles of 2, causal") == 1
    op = tiled.TILED_ATTENTION
    for position, name in enumerate(("Q_heads", "K_heads", "V_heads")):
        # Each edge: that input's formula, written with the tape's own names.
        names = {"g": "dcontext", **{operand: f"{operand}_heads" for operand in op.inputs}}
        assert f'label="d{name} = {op.formula_for(position, names)}' in source, name


def test_a_tiled_step_never_allocates_a_score_sized_array():
    """tracemalloc over forward + backward: the peak stays below ONE [B·H, T, T] array (the chain keeps ~6)."""
    import tracemalloc

    batch, length, embed, heads = 1, 512, 8, 2
    attn = mt.nn.MultiHeadAttention(embed, heads, causal=True, block_size=64, seed=0)
    x = np.random.default_rng(0).standard_normal((batch, length, embed))
    score_bytes = batch * heads * length * length * 8  # 4 MiB; every [B, T, E] array is 32 KiB
    tracemalloc.start()
    attn(x)
    attn.backward(np.ones((batch, length, embed)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < score_bytes / 2, f"peak {peak:,} bytes"


def test_backward_reads_the_saved_lse_and_never_reruns_the_forward(monkeypatch):
    """L is kept in the node's residuals slot; the VJP recomputes P from Q, K and L — not by another forward."""
    attn = mt.nn.MultiHeadAttention(8, 2, block_size=2, seed=0)
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    attn(x)
    node = attn.tape.find("context").output
    q, k, _ = (x.data for x in node.inputs)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    np.testing.assert_allclose(node.residuals, np.log(np.exp(scores).sum(-1)), **EXACT)
    assert node.data.base is None, "O is an array of its own (no log-sum-exp hidden behind it)"
    expected = attn.twin(None)
    expected(x)
    for module in (tiled, tiled_kernel):  # the op, and the kernel it calls
        monkeypatch.setattr(module, "tiled_forward", lambda *args, **kwargs: pytest.fail("the backward ran a forward"))
    grads = attn.named_gradients(np.ones((2, 5, 8)))
    assert_gradients_agree(expected.named_gradients(np.ones((2, 5, 8))), grads, ["Q_heads", "K_heads", "x"], "")


def test_a_vjp_called_without_residuals_recomputes_them():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 5, 3)) for _ in range(3))
    out, lse = tiled.TILED_ATTENTION.forward_saving(q, k, v, block_size=2)
    np.testing.assert_array_equal(out, tiled.TILED_ATTENTION.forward(q, k, v, block_size=2))
    g = rng.standard_normal(out.shape)
    for got, expected in zip(
        tiled.TILED_ATTENTION.vjp(g, out, q, k, v, block_size=2),
        tiled.TILED_ATTENTION.vjp(g, out, q, k, v, block_size=2, residuals=lse),
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)


def test_the_tiled_op_refuses_create_graph_by_name():
    attn = mt.nn.MultiHeadAttention(8, 2, block_size=2, seed=0)
    x = mt.Tensor(np.random.default_rng(0).standard_normal((1, 4, 8)), requires_grad=True)
    y = attn(x).sum()
    with pytest.raises(ValueError, match="op 'tiled_attention'.*no higher-order derivative"):
        mt.gradients(y, create_graph=True)
    assert x.grad is None


def test_the_op_runs_on_plain_arrays_through_the_chain():
    """attention_chain with the tiled core on Plain arrays (what finite differences run) equals the Tensor run."""
    from microtape.values.plain import Plain

    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, block_size=2, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 5, 8))
    expected = attn(x).data
    params = {name: Plain(t.data) for name, t in attn.named_parameters()}
    plain = mt.nn.attention_chain(Plain(x), Plain(x), Plain(x), params, 2, core=tiled.tiled_core(2, causal=True))
    np.testing.assert_array_equal(plain.data, expected)


# ---------------------------------------------------------------- counter-based dropout


def test_dropout_mask_is_a_pure_function_of_seed_call_and_position():
    mask = DropoutMask(0.4, key=123, call=5)
    whole = mask.keep(6, slice(0, 9), slice(0, 11), np.float64)
    assert set(np.unique(whole)) == {0.0, 1 / 0.6}
    for rows, cols in [(slice(0, 1), slice(0, 11)), (slice(3, 9), slice(4, 7)), (slice(8, 9), slice(10, 11))]:
        np.testing.assert_array_equal(mask.keep(6, rows, cols, np.float64), whole[:, rows, cols])
    np.testing.assert_array_equal(DropoutMask(0.4, 123, 5).keep(6, slice(0, 9), slice(0, 11), np.float64), whole)
    for other in (DropoutMask(0.4, 124, 5), DropoutMask(0.4, 123, 6)):
        assert np.mean(other.keep(6, slice(0, 9), slice(0, 11), np.float64) != whole) > 0.3
    assert mask.keep(2, slice(0, 3), slice(0, 3), np.float32).dtype == np.float32


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_mask_keeps_the_right_fraction_independently(p):
    """About 1-p kept (40,000 draws: sd < 0.0025), and neighbouring entries are uncorrelated."""
    kept = DropoutMask(p, key=9, call=0).keep(4, slice(0, 100), slice(0, 100), np.float64) > 0
    assert np.mean(kept) == pytest.approx(1 - p, abs=0.015)
    along_keys = np.corrcoef(kept[..., :-1].ravel(), kept[..., 1:].ravel())[0, 1]
    along_rows = np.corrcoef(kept[:, :-1].ravel(), kept[:, 1:].ravel())[0, 1]
    assert abs(along_keys) < 0.03 and abs(along_rows) < 0.03


def test_the_dropout_counter_advances_only_when_a_forward_succeeds():
    """A refused forward leaves the next mask as it would have been; both paths follow the same counter."""
    standard, tiled_layer = pair(8, 2, seed=4, block_size=2, dropout=0.5)
    x = np.random.default_rng(0).standard_normal((1, 5, 8))
    hides_row = np.zeros((5, 5))
    hides_row[2] = -np.inf
    with pytest.raises(ValueError, match="query row 2 has no valid key"):
        tiled_layer(x, mask=hides_row)
    with pytest.raises(FloatingPointError):
        standard(x * 1e300)  # fails inside the chain, after the mask was drawn
    standard(x)
    tiled_layer(x)
    np.testing.assert_array_equal(tiled_layer.dropout_keep, standard.dropout_keep)
    first = standard.dropout_keep.copy()
    standard(x)
    tiled_layer(x)
    np.testing.assert_array_equal(tiled_layer.dropout_keep, standard.dropout_keep)
    assert not np.array_equal(first, standard.dropout_keep)


def test_eval_turns_dropout_off_on_the_tiled_path():
    standard, tiled_layer = pair(8, 2, seed=4, block_size=3, dropout=0.5)
    standard.eval(), tiled_layer.eval()
    x = np.random.default_rng(0).standard_normal((2, 6, 8))
    np.testing.assert_allclose(tiled_layer(x).data, standard(x).data, **EXACT)
    assert tiled_layer.dropout_keep is None and tiled_layer.tape.find("context").params.get("dropout") is None
    tiled_layer.train()
    tiled_layer(x)
    assert tiled_layer.dropout_keep is not None


# ---------------------------------------------------------------- the rest of the contract


def test_float32_tiled_matches_float32_standard_and_stays_float32():
    standard, tiled_layer = pair(16, 4, seed=2, block_size=4, causal=True, dtype=np.float32)
    rng = np.random.default_rng(2)
    x, upstream = rng.standard_normal((2, 9, 16)), rng.standard_normal((2, 9, 16))
    (expected, actual), (expected_grads, actual_grads) = run_both(standard, tiled_layer, (x,), None, upstream)
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual.data, expected.data, rtol=1e-5, atol=1e-5)
    for name in tiled_layer.gradient_names():
        assert actual_grads[name].dtype == np.float32, name
        np.testing.assert_allclose(actual_grads[name], expected_grads[name], rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_cross_attention_key_and_value_gradients(method):
    standard, tiled_layer = pair(6, 3, seed=5, block_size=2)
    rng = np.random.default_rng(5)
    query, key_value = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 7, 6))
    upstream = rng.standard_normal((2, 3, 6))
    for layer in (standard, tiled_layer):
        layer(query, key_value, key_value)
        layer.backward(upstream, method=method)
    np.testing.assert_allclose(tiled_layer.grad_key_input(), standard.grad_key_input(), **EXACT)
    np.testing.assert_allclose(tiled_layer.grad_value_input(), standard.grad_value_input(), **EXACT)
    for (name, mine), (_, theirs) in zip(tiled_layer.named_parameters(), standard.named_parameters()):
        np.testing.assert_allclose(mine.grad, theirs.grad, **EXACT, err_msg=name)


def test_score_sized_views_are_recomputed_on_request():
    """attention_weights, the dropped weights, dS, dP and the total mask, recomputed: equal to the chain's."""
    standard, tiled_layer = pair(8, 2, seed=6, block_size=2, causal=True, dropout=0.3)
    rng = np.random.default_rng(6)
    x, upstream = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    mask = np.where(rng.random((5, 5)) < 0.3, -1e9, 0.0)
    mask[:, 0] = 0.0
    for layer in (standard, tiled_layer):
        layer(x, mask=mask)
        layer.backward(upstream)
    for view in ("attention_weights", "dropped_attention_weights", "last_mask"):
        np.testing.assert_allclose(getattr(tiled_layer, view), getattr(standard, view), **EXACT, err_msg=view)
    np.testing.assert_allclose(tiled_layer.grad_scores(), standard.grad_scores(), **EXACT)
    np.testing.assert_allclose(tiled_layer.grad_weights(), standard.grad_weights(), **EXACT)
    assert not tiled_layer.attention_weights.flags.writeable


def test_scalar_trace_of_a_tiled_causal_layer_is_the_standard_chain():
    attn = mt.nn.MultiHeadAttention(4, 2, causal=True, block_size=2, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 3, 4))
    attn(x)
    dx = attn.backward(np.ones((1, 3, 4)))
    trace = attn.trace_scalars(x)
    trace.backward(np.ones((1, 3, 4)))
    np.testing.assert_allclose(trace.gradients()["x"], dx, **EXACT)


def test_twin_copies_weights_and_dropout_stream_but_shares_nothing():
    attn = mt.nn.MultiHeadAttention(8, 2, dropout=0.5, seed=1, block_size=4)
    x = np.random.default_rng(0).standard_normal((1, 6, 8))
    attn(x)
    twin = attn.twin(None)
    assert twin.block_size is None and attn.block_size == 4
    for (_, mine), (_, theirs) in zip(attn.named_parameters(), twin.named_parameters()):
        np.testing.assert_array_equal(mine.data, theirs.data)
        assert not np.shares_memory(mine.data, theirs.data)
    twin(x), attn(x)
    np.testing.assert_array_equal(twin.dropout_keep, attn.dropout_keep)
    assert twin.eval().training is False and attn.training is True


# ---------------------------------------------------------------- memory guard and bad input


def test_a_size_the_standard_path_refuses_runs_tiled():
    """With a 1 MB limit the standard chain refuses B=1, T=256, H=2 (score arrays); the tiled path runs it."""
    standard, tiled_layer = pair(8, 2, seed=0, block_size=32)
    standard.max_score_bytes = tiled_layer.max_score_bytes = 2**20
    x = np.random.default_rng(0).standard_normal((1, 256, 8))
    with pytest.raises(MemoryError, match="the scores hold B·H·Tq·Tk"):
        standard(x)
    y = tiled_layer(x)
    assert y.shape == (1, 256, 8) and tiled_layer.tiled_bytes(1, 256, 256) < 2**20 < standard.score_bytes(1, 256, 256)
    with pytest.raises(MemoryError, match="recomputing this one needs 2 of B·H·Tq·Tk = 131,072 values"):
        _ = tiled_layer.attention_weights
    tiled_layer.backward(np.ones((1, 256, 8)))  # the tape route stays O(T)
    with pytest.raises(MemoryError, match="method='analytic'"):
        tiled_layer.backward(np.ones((1, 256, 8)), method="analytic")


def test_the_tiled_estimate_refuses_with_its_own_message():
    attn = mt.nn.MultiHeadAttention(8, 2, block_size=16, seed=0)
    attn.max_score_bytes = 10_000
    x = np.random.default_rng(0).standard_normal((1, 64, 8))
    with pytest.raises(MemoryError, match=r"tiled core keeps O\(B·H·T·D\) values .* one 16×16 tile"):
        attn(x)
    assert attn.tape is None


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "16", np.float64(4.0)])
def test_block_size_must_be_none_or_a_positive_integer(bad):
    with pytest.raises(ValueError, match=r"block_size\) = .*expected None \(the standard chain\) or a positive"):
        mt.nn.MultiHeadAttention(8, 2, block_size=bad)
    attn = mt.nn.MultiHeadAttention(8, 2, block_size=4)
    with pytest.raises(ValueError, match=r"MultiHeadAttention.block_size = "):
        attn.block_size = bad
    assert attn.block_size == 4
    attn.block_size = np.int64(8)
    assert attn.block_size == 8 and type(attn.block_size) is int
    attn.block_size = None
    assert "block_size" not in repr(attn)


def test_a_causal_and_user_mask_hiding_a_row_is_refused_before_anything_changes():
    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, block_size=2, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 4, 8))
    mask = np.zeros((4, 4))
    mask[2, :3] = -1e9  # row 2 may only see key 3, which causality hides
    with pytest.raises(ValueError, match="query row 2 has no valid key"):
        attn(x, mask=mask)
    assert attn.tape is None


@pytest.mark.parametrize(
    "shapes, block, match",
    [
        (((2, 3, 4), (2, 5, 4), (2, 5, 4)), 0, r"block_size=0"),
        (((2, 3, 4), (2, 5, 4), (3, 5, 4)), 2, r"must share N"),
        (((2, 3, 4), (2, 5, 3), (2, 5, 4)), 2, r"must share D"),
        (((3, 4), (2, 5, 4), (2, 5, 4)), 2, r"Q has shape \(3, 4\)"),
    ],
)
def test_the_op_refuses_bad_shapes_with_clear_messages(shapes, block, match):
    q, k, v = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=match):
        tiled.TILED_ATTENTION.forward(q, k, v, block_size=block)
