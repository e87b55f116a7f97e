"""Bad input, drawn by hypothesis: every refusal names the argument and changes nothing.

For each refused call we take a snapshot of every piece of state a user could
see — the weights, their gradients, the layer's last tape and last attention
weights, an enclosing tape, the train/eval flag — and check it is identical
afterwards. The dropout generator is checked by behaviour: after the refused
call, the next forward must draw the same mask as a twin layer that never saw
the bad call.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import microtape as mt

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
REFUSALS = (ValueError, TypeError, MemoryError, FloatingPointError)
EMBED, HEADS = 8, 2


# ---------------------------------------------------------------- state


def snapshot(layer):
    """Everything a user can observe about a layer, as plain copies."""
    state = {
        "training": layer.training,
        "params": [(name, t.data.copy(), None if t.grad is None else np.array(t.grad)) for name, t in
                   layer.named_parameters()],
    }  # fmt: skip
    tape = getattr(layer, "tape", None)
    state["tape"] = (id(tape), None if tape is None else len(tape))
    if isinstance(layer, mt.nn.MultiHeadAttention) and layer.tape is not None:
        state["weights"] = np.array(layer.attention_weights)
        state["last_gradients"] = {name: np.array(g) for name, g in layer.last_gradients.items()}
    return state


def assert_same(before, after):
    assert before["training"] == after["training"]
    assert before["tape"] == after["tape"]
    for (name, data, grad), (_, data2, grad2) in zip(before["params"], after["params"], strict=True):
        np.testing.assert_array_equal(data, data2, err_msg=name)
        assert (grad is None) == (grad2 is None), name
        if grad is not None:
            np.testing.assert_array_equal(grad, grad2, err_msg=name)
    if "weights" in before:
        np.testing.assert_array_equal(before["weights"], after["weights"])
        assert before["last_gradients"].keys() == after["last_gradients"].keys()
        for name, grad in before["last_gradients"].items():
            np.testing.assert_array_equal(grad, after["last_gradients"][name], err_msg=name)


def refused(layer, call, *names):
    """Run ``call`` inside an enclosing tape: it must raise naming one of ``names`` and change nothing."""
    before = snapshot(layer)
    with mt.Tape() as outer:
        with pytest.raises(REFUSALS) as info:
            call()
    message = str(info.value)
    assert any(name in message for name in names), f"{message!r} names none of {names}"
    assert len(outer) == 0, "a refused call left equations on the enclosing tape"
    assert_same(before, snapshot(layer))
    return message


def attention(dropout=0.3, dtype=np.float64, causal=False, seed=7):
    """A layer after one good forward and backward (so there is state to protect)."""
    attn = mt.nn.MultiHeadAttention(EMBED, HEADS, dropout=dropout, causal=causal, seed=seed, dtype=dtype)
    x = np.random.default_rng(seed).standard_normal((2, 4, EMBED))
    attn(x)
    attn.backward(np.ones((2, 4, EMBED)))
    return attn, x


def assert_rng_untouched(attn, x):
    """The next forward draws the mask a twin (same seed, same history, no bad call) draws."""
    twin, _ = attention(dropout=attn.dropout, dtype=attn.dtype, causal=attn.causal)
    attn(x)
    twin(x)
    np.testing.assert_array_equal(attn.dropout_keep, twin.dropout_keep)


# ---------------------------------------------------------------- strategies


def _array(shape, dtype=np.float64):
    return hnp.arrays(dtype, shape, elements=st.floats(-2, 2, width=64 if dtype == np.float64 else 32))


BAD_KIND = st.sampled_from(
    [
        [[1.0] * EMBED] * 4,
        (1.0, 2.0),
        "x",
        None,
        {"x": 1},
        3.0,
        np.ones((2, 4, EMBED), dtype=complex),
        np.ones((2, 4, EMBED), dtype=bool),
        np.full((2, 4, EMBED), "a"),
        np.ma.masked_invalid(np.where(np.eye(EMBED)[:4][None].repeat(2, 0) > 0, np.nan, 1.0)),
        np.ones((2, 4, EMBED)).view(np.recarray),
    ]
)

BAD_SHAPE = st.one_of(
    hnp.array_shapes(min_dims=1, max_dims=2, max_side=5),
    hnp.array_shapes(min_dims=4, max_dims=4, max_side=3),
    st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 12).filter(lambda n: n != EMBED)),
    st.sampled_from([(0, 4, EMBED), (2, 0, EMBED)]),
)


@st.composite
def poisoned(draw, shape=(2, 4, EMBED)):
    """A finite array with one NaN or ±inf at a drawn position."""
    array = draw(_array(shape))
    index = tuple(draw(st.integers(0, n - 1)) for n in shape)
    array[index] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return array


# ---------------------------------------------------------------- MultiHeadAttention.forward


@SETTINGS
@given(bad=BAD_KIND, role=st.sampled_from(["query", "key", "value"]))
def test_attention_refuses_wrong_kinds_naming_the_role(bad, role):
    attn, x = attention()
    args = {"query": x, "key": x.copy(), "value": x.copy(), role: bad}
    refused(attn, lambda: attn(args["query"], args["key"], args["value"]), role)
    assert_rng_untouched(attn, x)


@SETTINGS
@given(shape=BAD_SHAPE)
def test_attention_refuses_wrong_shapes(shape):
    attn, x = attention()
    refused(attn, lambda: attn(np.zeros(shape)), "query", "shape")


@SETTINGS
@given(bad=poisoned(), role=st.sampled_from(["query", "key", "value"]))
def test_attention_refuses_nan_and_inf(bad, role):
    attn, x = attention()
    args = {"query": x, "key": x.copy(), "value": x.copy(), role: bad}
    message = refused(attn, lambda: attn(args["query"], args["key"], args["value"]), role)
    assert "finite" in message
    assert_rng_untouched(attn, x)


@SETTINGS
@given(value=st.sampled_from([1e39, -1e39, 3.5e38]), tensor=st.booleans())
def test_float32_layer_checks_values_after_the_cast(value, tensor):
    """A float64 1e39 becomes inf in float32: refused (not silently inf), naming the input."""
    attn, x = attention(dtype=np.float32)
    bad = np.random.default_rng(0).standard_normal((2, 4, EMBED))
    bad[1, 2, 3] = value
    message = refused(attn, lambda: attn(mt.Tensor(bad) if tensor else bad), "query")
    assert "float32" in message or "finite" in message


@SETTINGS
@given(scale=st.sampled_from([1e200, 1e160]), dtype=st.just(np.float64))
def test_overflow_in_the_forward_is_named_by_step(scale, dtype):
    """Finite but extreme inputs: the first step that overflows is named; nothing is recorded."""
    attn, x = attention(dtype=dtype)
    message = refused(attn, lambda: attn(x * scale), "overflowed")
    assert "scores" in message or "Q" in message or "K" in message
    assert_rng_untouched(attn, x)


def test_float32_overflow_names_the_scores_row():
    attn, x = attention(dtype=np.float32, dropout=0.0)
    big = x.astype(np.float32) * np.float32(1e20)
    message = refused(attn, lambda: attn(big), "overflowed float32")
    assert "row" in message


@SETTINGS
@given(
    mask=st.one_of(
        st.just(np.zeros((4, 4), dtype=bool)),
        hnp.array_shapes(min_dims=1, max_dims=3, max_side=5).filter(lambda s: s != (4, 4)).map(np.zeros),
        st.just(np.full((4, 4), np.nan)),
        st.just(np.full((4, 4), np.inf)),
        st.just(np.where(np.arange(4)[:, None] == 2, -1e9, 0.0) + np.zeros((4, 4))),
        st.just(np.zeros((4, 4), dtype=complex)),
        st.just("mask"),
        st.just(np.ma.masked_equal(np.zeros((4, 4)), 1.0)),
    )
)
def test_attention_refuses_bad_masks(mask):
    attn, x = attention()
    refused(attn, lambda: attn(x, mask=mask), "mask")
    assert_rng_untouched(attn, x)


def test_huge_sizes_are_refused_from_shapes_before_any_allocation():
    """A causal T=10⁶ or a [10⁶, 10⁶] mask view is refused by the memory guard, not numpy."""
    attn = mt.nn.MultiHeadAttention(EMBED, HEADS, causal=True, seed=0)
    long_input = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(1, 10**6, EMBED), strides=(0, 0, 0))
    refused(attn, lambda: attn(long_input), "refused")
    huge_mask = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(10**6, 10**6), strides=(0, 0))
    plain = mt.nn.MultiHeadAttention(EMBED, HEADS, seed=0)
    refused(plain, lambda: plain(long_input, mask=huge_mask), "refused")
    refused(attn, lambda: attn.trace_scalars(long_input), "scalar ops")
    with pytest.raises(MemoryError, match="embed"):
        mt.nn.MultiHeadAttention(10**6, 1)
    for bad in (float("nan"), -1, 0, float("inf"), "4GB"):
        with pytest.raises(ValueError, match="max_score_bytes"):
            attn.max_score_bytes = bad
    assert attn.max_score_bytes == 4 * 1024**3


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"embed": 0}, "embed"),
        ({"embed": 8.0}, "embed"),
        ({"num_heads": 3}, "num_heads"),
        ({"num_heads": True}, "num_heads"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": "0.1"}, "dropout"),
        ({"causal": "yes"}, "causal"),
        ({"seed": "abc"}, "seed"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"dtype": "garbage"}, "dtype"),
        ({"dtype": np.int32}, "dtype"),
    ],
)
def test_constructor_refusals_name_the_argument(kwargs, name):
    args = {"embed": 8, "num_heads": 2, **kwargs}
    with pytest.raises(REFUSALS, match=name):
        mt.nn.MultiHeadAttention(args.pop("embed"), args.pop("num_heads"), **args)


def test_train_takes_only_a_bool():
    attn, x = attention()
    for bad in ("False", 0, None):
        with pytest.raises(TypeError, match="train"):
            attn.train(bad)
    assert attn.training is True and attn.q_proj.training is True
    attn.eval()
    assert attn.training is False and attn.out_proj.training is False


# ---------------------------------------------------------------- MultiHeadAttention.backward


@SETTINGS
@given(
    grad=st.one_of(
        poisoned(),
        hnp.array_shapes(max_dims=3, max_side=5).filter(lambda s: s != (2, 4, EMBED)).map(np.ones),
        st.just(np.ones((2, 4, EMBED), dtype=complex)),
        st.just(np.ma.masked_invalid(np.ones((2, 4, EMBED)))),
        st.just([[1.0]]),
    ),
    method=st.sampled_from(["tape", "analytic"]),
)
def test_backward_refuses_bad_gradients_naming_grad_output(grad, method):
    attn, x = attention()
    refused(attn, lambda: attn.backward(grad, method=method), "grad_output")


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_backward_overflow_is_named_and_changes_nothing(method, dtype):
    """grad_output of 1e308 (float64) or 1e38 (float32) overflows inside the chain: named, nothing changed."""
    attn, x = attention(dtype=dtype)
    huge = np.full((2, 4, EMBED), 1e308 if dtype == np.float64 else 3e38)
    message = refused(attn, lambda: attn.backward(huge, method=method), "overflowed")
    assert "No gradient was changed" in message


# ---------------------------------------------------------------- Linear


@SETTINGS
@given(bad=st.one_of(BAD_KIND, poisoned(shape=(3, 4)), st.just(np.ones((3, 5)))))
def test_linear_forward_refusals(bad):
    layer = mt.nn.Linear(4, 2, seed=0)
    layer(np.ones((3, 4)))
    refused(layer, lambda: layer(bad), "x", "Linear")


@SETTINGS
@given(
    grad=st.one_of(
        poisoned(shape=(3, 2)),
        st.just(np.ones((3, 2), dtype=complex)),
        st.just(np.ones((2, 3))),
        st.just(np.full((3, 2), 1e308)),
    )
)
def test_linear_backward_refusals(grad):
    """NaN, complex (the imaginary part would be lost), wrong shape, overflow: refused, grads untouched."""
    layer = mt.nn.Linear(4, 2, seed=0)
    layer(np.full((3, 4), 1e10))
    layer.backward(np.ones((3, 2)))
    refused(layer, lambda: layer.backward(grad), "grad_output", "overflowed")


def test_linear_forward_overflow_is_refused():
    layer = mt.nn.Linear(4, 2, seed=0, dtype=np.float32)
    layer.weight.data[...] = 1.0  # four terms of 3e38 each: more than float32 holds (3.4e38)
    refused(layer, lambda: layer(np.full((3, 4), 3e38, dtype=np.float32)), "overflowed")


# ---------------------------------------------------------------- pictures


def test_heatmaps_refuse_complex_and_non_numbers():
    for bad in (np.ones((2, 3, 3), dtype=complex), np.full((3, 3), "a"), np.zeros((3, 3), dtype=bool)):
        with pytest.raises(TypeError, match="real numbers"):
            mt.viz.attention_heatmaps(bad)


def test_node_names_with_control_characters_still_draw():
    """A newline, a NUL-like control character or a quote in a name: DOT that dot accepts, shown visibly."""
    a = mt.Scalar(1.0, name='a\x01b\nc"d')
    with mt.Tape() as tape:
        with mt.module_scope("mod\x02ule"):
            (a * a).tanh(name="out\x07")
    for picture in (mt.viz.graph(tape), mt.viz.graph(tape, backward=True)):
        source = picture.source
        assert "\x01" not in source and "\x07" not in source and "\x02" not in source
        assert "␁" in source and "␇" in source and "␂" in source
        if _has_dot():
            assert "<svg" in mt.viz.svg(picture)


def _has_dot():
    import shutil

    return shutil.which("dot") is not None


def test_a_graph_whose_every_op_has_a_module_still_collapses():
    """1,000 ops, each in a module of its own: the summary is a handful of boxes, not 2,001."""
    x = mt.Scalar(0.5, name="x")
    with mt.Tape() as tape:
        y = x
        for i in range(1000):
            with mt.module_scope(f"m{i}"):
                y = y * 1.0001
    with pytest.warns(mt.viz.GraphCollapsedWarning):
        picture = mt.viz.graph(tape)
    assert picture.source.count("->") < 60
    with pytest.warns(mt.viz.GraphCollapsedWarning):
        frames = mt.viz.backward_frames(tape)
    assert len(frames) < 40  # one frame per summary box the pass finishes, not one per op


# ---------------------------------------------------------------- reading changes nothing


def test_arrays_handed_out_for_reading_are_read_only():
    """Writing into attention_weights (or any array the layer hands out) cannot change a later backward."""
    attn, x = attention(dropout=0.3)
    upstream = np.random.default_rng(5).standard_normal((2, 4, EMBED))
    before = attn.backward(upstream)
    readable = [
        attn.attention_weights,
        attn.dropped_attention_weights,
        attn.dropout_keep,
        attn.grad_scores(),
        attn.grad_weights(),
        *attn.last_gradients.values(),
        *attn.analytic_cache()["params"].values(),
    ]
    for array in readable:
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0.0
    attn.zero_grad()
    np.testing.assert_array_equal(attn.backward(upstream), before)
    np.testing.assert_allclose(attn.backward(upstream, method="analytic"), before, rtol=1e-12, atol=1e-14)


def test_a_forward_failing_midway_is_all_or_nothing():
    """Under np.errstate(over="raise") an overflow midway records nothing anywhere and draws no dropout mask."""
    attn, x = attention(dropout=0.3)
    message = None
    with np.errstate(over="raise"):
        message = refused(attn, lambda: attn(x * 1e200), "overflowed")
    assert "Nothing was recorded" in message
    assert_rng_untouched(attn, x)
