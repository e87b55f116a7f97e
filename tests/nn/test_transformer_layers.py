"""The post-norm encoder and decoder layers: names, structure, both backward routes, masks, dropout, bad input.

PyTorch's numbers for the same layers are in ``test_golden_layers.py``; here
the properties: PyTorch's attribute and parameter names, a causal mask that
really hides the future, finite differences for dx and d memory, the two
backward routes agreeing with and without dropout, and a failed call that
changes nothing — not even in the attention sublayers.
"""

import numpy as np
import pytest

import microtape as mt

RNG = np.random.default_rng(11)
X = RNG.standard_normal((2, 5, 8))
MEMORY = RNG.standard_normal((2, 3, 8))
CAUSAL = mt.nn.masks.causal_mask(5)


def encoder(**options):
    return mt.nn.TransformerEncoderLayer(8, 2, 12, seed=options.pop("seed", 0), **options)


def decoder(**options):
    return mt.nn.TransformerDecoderLayer(8, 2, 12, seed=options.pop("seed", 0), **options)


def test_parameter_names_are_pytorchs():
    names = [name for name, _ in decoder().named_parameters()]
    assert names[:2] == ["self_attn.q_proj.weight", "self_attn.q_proj.bias"]
    assert "multihead_attn.out_proj.bias" in names
    assert [n for n in names if not n.startswith(("self_attn", "multihead_attn"))] == [
        "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
        "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias",
    ]  # fmt: skip
    assert [name for name, _ in encoder().named_modules()][1:] == [
        "self_attn", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
        "linear1", "linear2", "norm1", "norm2",
    ]  # fmt: skip


def test_encoder_is_post_norm_by_its_own_pieces():
    """y = norm2(h + ff(h)), h = norm1(x + self_attn(x)) — rebuilt from the layer's own sublayers."""
    layer = encoder()
    y = layer(X, CAUSAL).data
    attn = mt.nn.MultiHeadAttention(8, 2)
    for (_, ours), (_, theirs) in zip(attn.named_parameters(), layer.self_attn.named_parameters(), strict=True):
        ours.data[...] = theirs.data
    norm = mt.nn.LayerNorm(8)
    h = norm(X + attn(X, mask=CAUSAL).data).data
    ff = np.maximum(h @ layer.linear1.weight.data.T + layer.linear1.bias.data, 0)
    ff = ff @ layer.linear2.weight.data.T + layer.linear2.bias.data
    np.testing.assert_allclose(y, norm(h + ff).data, rtol=1e-12, atol=1e-13)


def test_causal_mask_hides_the_future():
    """With a causal mask, changing token 3 changes no output before position 3."""
    layer = decoder()
    mask = mt.nn.masks.causal_mask(5)
    before = layer(X, MEMORY, tgt_mask=mask).data
    changed = X.copy()
    changed[:, 3] += 5.0
    after = layer(changed, MEMORY, tgt_mask=mask).data
    np.testing.assert_allclose(after[:, :3], before[:, :3], rtol=1e-14, atol=1e-14)
    assert np.abs(after[:, 3:] - before[:, 3:]).max() > 1e-3


@pytest.mark.parametrize("dropout", [0.0, 0.3])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("make", [encoder, decoder], ids=["encoder", "decoder"])
def test_the_two_routes_agree_on_every_named_gradient(make, activation, dropout):
    layer = make(activation=activation, dropout=dropout)
    g = RNG.standard_normal(X.shape)
    if layer.input_roles == ("x",):
        layer(X, CAUSAL)
    else:
        layer(X, MEMORY, tgt_mask=CAUSAL, memory_mask=np.where(RNG.random((5, 3)) < 0.3, -1e9, 0.0) * [0, 1, 1])
    taped, by_hand = layer.named_gradients(g), layer.named_gradients(g, "analytic")
    assert list(taped) == list(by_hand) == layer.gradient_names()
    assert ("ff_dropped" in taped) == (dropout > 0) == ("self_attn.dropped_weights" in taped)
    for name in taped:
        np.testing.assert_allclose(by_hand[name], taped[name], rtol=1e-11, atol=1e-12, err_msg=name)


def test_dx_and_d_memory_match_finite_differences():
    layer = decoder(activation="gelu")
    result = mt.check.gradcheck(lambda x, m: layer(x, m, tgt_mask=CAUSAL), X[:1], MEMORY[:1])
    assert result.ok, result
    enc = encoder()
    assert mt.check.gradcheck(lambda x: enc(x), X[:1]).ok


def test_decoder_backward_gives_dx_and_d_memory():
    layer = decoder()
    layer(X, MEMORY)
    g = RNG.standard_normal(X.shape)
    with pytest.raises(RuntimeError, match=r"call backward\(\) first"):
        layer.grad_memory_input()
    dx = layer.backward(g, method="analytic")
    d_memory = np.array(layer.grad_memory_input())
    layer.zero_grad()
    np.testing.assert_allclose(layer.backward(g), dx, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(layer.grad_memory_input(), d_memory, rtol=1e-11, atol=1e-12)
    assert d_memory.shape == MEMORY.shape and not layer.grad_memory_input().flags.writeable
    grads = layer.named_gradients(g, "analytic")
    np.testing.assert_allclose(grads["memory"], grads["multihead_attn.key"] + grads["multihead_attn.value"])


def test_layers_stack_on_one_tape_and_train_together():
    """Two encoder layers and a loss on one tape: backward reaches both layers' parameters and the input."""
    first, second = encoder(seed=1), encoder(seed=2)
    x = mt.Tensor(X, requires_grad=True)
    with mt.Tape() as tape:
        y = second(first(x))
        loss = (y * y).mean()
    tape.backward(loss)
    assert first.linear1.weight.grad is not None and second.norm2.weight.grad is not None
    assert x.grad.shape == X.shape
    names = set(tape.variable_names().values())
    assert {"residual1#1", "residual1#2"} <= names  # both layers' steps, told apart


def test_float32_layer():
    layer = encoder(dtype=np.float32)
    y = layer(X)
    assert y.dtype == np.float32
    assert layer.backward(np.ones(X.shape), method="analytic").dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in layer.parameters())


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda layer: layer(np.ones((2, 5, 7))), ValueError, "embed=8"),
        (lambda layer: layer(np.ones((5, 8))), ValueError, r"rank 3 \[B, T, E\]"),
        (lambda layer: layer(X, np.zeros((4, 4))), ValueError, r"mask has shape \(4, 4\)"),
        (lambda layer: layer(X, CAUSAL == 0), TypeError, "boolean"),
        (lambda layer: layer(X, np.full((5, 5), -1e9)), ValueError, "query row 0 has no valid key"),
        (lambda layer: layer(X.tolist()), TypeError, "Tensor or numpy array"),
    ],
)
def test_encoder_bad_input_changes_nothing(call, error, words):
    layer = encoder(dropout=0.2)
    layer(X)
    state = (layer.last_output, layer.self_attn.last_output, layer._rng.bit_generator.state)
    with pytest.raises(error, match=words):
        call(layer)
    assert (layer.last_output, layer.self_attn.last_output, layer._rng.bit_generator.state) == state


def test_decoder_bad_memory():
    layer = decoder()
    with pytest.raises(ValueError, match="x has batch 2 but memory has 1"):
        layer(X, MEMORY[:1])
    with pytest.raises(ValueError, match=r"memory has shape \(2, 3, 4\)"):
        layer(X, np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match=r"mask has shape \(5, 5\); expected \[Tq, Tk\] = \[5, 3\]"):
        layer(X, MEMORY, memory_mask=CAUSAL)


def test_an_overflow_midway_puts_every_sublayer_back():
    """A float32 forward that overflows after the attention ran leaves the attention's last forward too."""
    layer = encoder(dtype=np.float32, dropout=0.2)
    layer(X)
    state = (layer.last_output, layer.self_attn.last_output, layer._rng.bit_generator.state)
    attention_calls = layer.self_attn._dropout_calls  # the counter of its dropout masks
    layer.linear1.bias.data[...] = 10.0  # every hidden unit on, so that ...
    layer.linear2.weight.data[...] = 1e38  # ... the feed-forward's output overflows
    with pytest.raises(FloatingPointError, match="overflowed float32"):
        layer(X)
    assert (layer.last_output, layer.self_attn.last_output, layer._rng.bit_generator.state) == state
    assert layer.self_attn._dropout_calls == attention_calls


def test_constructor_checks():
    with pytest.raises(ValueError, match="num_heads=3.*must divide embed=8"):
        mt.nn.TransformerEncoderLayer(8, 3, 16)
    with pytest.raises(ValueError, match="activation='swish'"):
        mt.nn.TransformerDecoderLayer(8, 2, 16, activation="swish")
    with pytest.raises(ValueError, match=r"ff_dim\): expected a positive integer"):
        mt.nn.TransformerEncoderLayer(8, 2, 0)
    with pytest.raises(ValueError, match="eps"):
        mt.nn.TransformerEncoderLayer(8, 2, 16, layer_norm_eps=-1.0)


def test_same_seed_same_layer_and_dropout():
    a, b = encoder(dropout=0.3, seed=9), encoder(dropout=0.3, seed=9)
    np.testing.assert_array_equal(a(X).data, b(X).data)
    assert not np.array_equal(a(X).data, encoder(dropout=0.3, seed=10)(X).data)


def test_a_sublayer_used_on_its_own_since_is_noticed():
    layer = encoder()
    layer(X)
    layer.self_attn(X[:1])  # the attention's last forward is now another one
    with pytest.raises(RuntimeError, match="self_attn ran another forward"):
        layer.backward(np.ones(X.shape), method="analytic")


def test_step_values_and_forward_plain():
    layer = decoder(dropout=0.2)
    y = layer(X, MEMORY, tgt_mask=CAUSAL)
    params = {name: p.data for name, p in layer.named_parameters()}
    inputs = {role: np.array(value) for role, value in layer.last_inputs.items()}
    np.testing.assert_array_equal(layer.forward_plain(inputs, params), y.data)
    weights = layer.step_value("multihead_attn.weights")
    np.testing.assert_array_equal(weights.reshape(2, 2, 5, 3), layer.multihead_attn.attention_weights)
    # Replacing a step changes only what follows it.
    replaced = layer.forward_plain(inputs, params, {"norm2": np.zeros(X.shape)})
    ff_only = layer.forward_plain(inputs, params, {"norm2": np.zeros(X.shape), "residual1": np.ones(X.shape)})
    np.testing.assert_array_equal(replaced, ff_only)
    with pytest.raises(KeyError, match="not a step"):
        layer.step_value("nonsense")


def test_named_modules_have_no_trailing_dot():
    """A child's own entry is 'self_attn', not 'self_attn.' (fixed in Module's name joining)."""
    names = [name for name, _ in mt.nn.MultiHeadAttention(4, 2).named_modules()]
    assert names == ["", "q_proj", "k_proj", "v_proj", "out_proj"]


# ---------------------------------------------------------------- structure behind the benchmarks (no timings)


def test_an_encoder_forward_records_exactly_its_steps():
    """56 equations: attention's 29, 9 per LayerNorm, 7 for the feed-forward, 2 residual sums.

    benchmarks/ measures the layer against a hand-written numpy layer; this
    pins the work it does, so a step added by accident is caught anywhere.
    """
    layer = encoder()
    layer(X)
    counts = {}
    for equation in layer.tape:
        part = equation.module.split(".")[0]
        counts[part] = counts.get(part, 0) + 1
    assert len(layer.tape) == 56
    # "" is the layer itself: the two residual sums and the activation between linear1 and linear2.
    assert counts == {"self_attn": 29, "": 3, "norm1": 9, "linear1": 3, "linear2": 3, "norm2": 9}


def test_a_dropped_layer_is_freed_without_the_cyclic_collector():
    import gc

    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            layer = decoder(dropout=0.2)
            layer(X, MEMORY, tgt_mask=CAUSAL)
            layer.backward(np.ones(X.shape))
            layer.named_gradients(np.ones(X.shape), "analytic")
            mt.check.layer_report(encoder(), X)
            del layer
        assert gc.collect() == 0
    finally:
        gc.enable()


# ---------------------------------------------------------------- decoder masks are named


@pytest.mark.parametrize(
    "masks, words",
    [
        (
            {"tgt_mask": np.zeros((3, 5))},
            r"TransformerDecoderLayer\.forward: tgt_mask has shape \(3, 5\); expected \[Tq, Tk\] = \[3, 3\]",
        ),
        (
            {"memory_mask": np.zeros((3, 3))},
            r"TransformerDecoderLayer\.forward: memory_mask has shape \(3, 3\); expected \[Tq, Tk\] = \[3, 5\]",
        ),
        ({"memory_mask": np.zeros((3, 5), bool)}, r"memory_mask is boolean"),
        ({"tgt_mask": np.full((3, 3), -np.inf)}, r"every entry of tgt_mask row 0"),
        ({"memory_mask": np.full((3, 5), np.nan)}, r"memory_mask contains NaN"),
    ],
    ids=["tgt-shape", "memory-shape", "memory-bool", "tgt-row", "memory-nan"],
)
def test_decoder_mask_errors_say_which_mask(masks, words):
    layer = mt.nn.TransformerDecoderLayer(4, 2, 8, seed=0)
    with pytest.raises((ValueError, TypeError), match=words):
        layer(np.ones((1, 3, 4)), np.ones((1, 5, 4)), **masks)
    assert layer.last_output is None


def test_encoder_mask_errors_name_the_encoder():
    layer = mt.nn.TransformerEncoderLayer(4, 2, 8, seed=0)
    with pytest.raises(ValueError, match=r"TransformerEncoderLayer\.forward: mask has shape"):
        layer(np.ones((1, 3, 4)), mask=np.zeros((3, 4)))
