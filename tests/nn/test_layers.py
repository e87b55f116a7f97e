"""LayerNorm, Embedding, PositionalEncoding and FeedForward: what they compute, both backward routes, bad input.

Values are checked against their definitions in numpy (PyTorch's are in
``test_golden_layers.py``), gradients against finite differences and between
the tape and the hand-derived route; every refusal names what was wrong and
leaves the layer as it was.
"""

import numpy as np
import pytest

import microtape as mt

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 6)) * 3 + 1


# ---------------------------------------------------------------- LayerNorm


def test_layernorm_makes_rows_of_mean_0_and_variance_1_then_scales_and_shifts():
    norm = mt.nn.LayerNorm(6)
    y = norm(X).data
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-14)
    np.testing.assert_allclose(y.var(axis=-1), 1.0 - 1e-5 / (X.var(axis=-1) + 1e-5), rtol=1e-12)
    norm.weight.data[...] = 2.0
    norm.bias.data[...] = np.arange(6.0)
    expected = 2.0 * (X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + 1e-5) + np.arange(6.0)
    np.testing.assert_allclose(norm(X).data, expected, rtol=1e-13)


def test_layernorm_over_two_axes():
    norm = mt.nn.LayerNorm((3, 6), eps=1e-3)
    y = norm(X).data
    flat = X.reshape(2, -1)
    expected = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(y.reshape(2, -1), expected, rtol=1e-12)


@pytest.mark.parametrize("shape", [6, (3, 6)])
def test_layernorm_routes_agree_and_match_finite_differences(shape):
    norm = mt.nn.LayerNorm(shape)
    norm.weight.data[...] = RNG.standard_normal(norm.weight.shape)
    g = RNG.standard_normal(X.shape)
    norm(X)
    taped, by_hand = norm.named_gradients(g), norm.named_gradients(g, "analytic")
    assert list(taped) == list(by_hand) == ["normalized", "weight", "bias", "x"]
    for name in taped:
        np.testing.assert_allclose(by_hand[name], taped[name], rtol=1e-12, atol=1e-12, err_msg=name)
    result = mt.check.gradcheck(lambda t: norm(t), X)
    assert result.ok, result


def test_layernorm_keeps_float32():
    norm = mt.nn.LayerNorm(6, dtype=np.float32)
    y = norm(X)  # float64 input: cast to the layer's dtype
    assert y.dtype == np.float32
    assert norm.backward(np.ones(X.shape), method="analytic").dtype == np.float32


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: mt.nn.LayerNorm(0), ValueError, "normalized_shape=0"),
        (lambda: mt.nn.LayerNorm((6, -1)), ValueError, "positive integer"),
        (lambda: mt.nn.LayerNorm(6, eps=0), ValueError, "eps=0"),
        (lambda: mt.nn.LayerNorm(6, dtype=np.int32), ValueError, "float32 or float64"),
    ],
)
def test_layernorm_bad_arguments(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_layernorm_bad_input_changes_nothing():
    norm = mt.nn.LayerNorm(6)
    norm(X)
    tape, output = norm.tape, norm.last_output
    bad = X.copy()
    bad[0, 1, 2] = np.nan
    for value, error, words in [
        (np.ones((2, 5)), ValueError, r"normalized_shape=\[6\]"),
        (bad, ValueError, r"nan at index \(0, 1, 2\)"),
        ([1.0] * 6, TypeError, "Tensor or numpy array"),
        (np.ones((0, 6)), ValueError, "no row"),
    ]:
        with pytest.raises(error, match=words):
            norm(value)
    assert norm.tape is tape and norm.last_output is output
    with pytest.raises(ValueError, match="grad_output has shape"):
        norm.backward(np.ones((2, 3)))
    with pytest.raises(ValueError, match="method='by hand'"):
        norm.backward(np.ones(X.shape), method="by hand")
    assert norm.weight.grad is None


def test_backward_before_forward_says_so():
    with pytest.raises(RuntimeError, match=r"call forward\(\) first"):
        mt.nn.LayerNorm(3).backward(np.ones(3))


# ---------------------------------------------------------------- Embedding and positions


def test_embedding_looks_rows_up_and_adds_the_gradients_of_repeats():
    embedding = mt.nn.Embedding(5, 3, seed=0)
    ids = np.array([[4, 1, 4], [4, 0, 2]])
    y = embedding(ids)
    np.testing.assert_array_equal(y.data, embedding.weight.data[ids])
    g = RNG.standard_normal((2, 3, 3))
    y.backward(g)
    expected = np.zeros((5, 3))
    for (b, t), token in np.ndenumerate(ids):
        expected[token] += g[b, t]
    np.testing.assert_allclose(embedding.weight.grad, expected, rtol=1e-15)
    np.testing.assert_array_equal(embedding.weight.grad[3], 0.0)  # never used
    by_tape = embedding.weight.grad
    embedding.weight.grad = None
    assert embedding.backward(g) is None  # integer ids have no gradient
    np.testing.assert_array_equal(embedding.weight.grad, by_tape)


def test_embedding_is_seeded_like_pytorch_standard_normal():
    a, b = mt.nn.Embedding(50, 40, seed=3), mt.nn.Embedding(50, 40, seed=3)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert abs(a.weight.data.std() - 1.0) < 0.05


@pytest.mark.parametrize(
    "ids, error, words",
    [
        (np.array([0.0, 1.0]), TypeError, "integers"),
        (np.array([0, 5]), IndexError, "token id 5"),
        (np.array([-1]), IndexError, "token id -1"),
        (mt.Tensor([1.0]), TypeError, "not a Tensor"),
    ],
)
def test_embedding_bad_ids(ids, error, words):
    with pytest.raises(error, match=words):
        mt.nn.Embedding(5, 2)(ids)


def test_sinusoidal_positions_by_hand():
    table = mt.nn.sinusoidal_positions(4, 6)
    np.testing.assert_array_equal(table[0], [0, 1, 0, 1, 0, 1])  # sin 0, cos 0
    for p in range(4):
        for i in range(3):
            angle = p / 10000 ** (2 * i / 6)
            assert table[p, 2 * i] == pytest.approx(np.sin(angle), abs=1e-15)
            assert table[p, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-15)
    assert mt.nn.sinusoidal_positions(3, 5).shape == (3, 5)  # an odd width: one sine more


def test_positional_encoding_adds_a_constant():
    positions = mt.nn.PositionalEncoding(6, max_len=10)
    x = mt.Tensor(X, requires_grad=True)
    y = positions(x)
    np.testing.assert_allclose(y.data, X + mt.nn.sinusoidal_positions(3, 6))
    y.backward(np.full(X.shape, 2.0))
    np.testing.assert_array_equal(x.grad, 2.0)  # the table takes no gradient
    assert positions.parameters() == []
    with pytest.raises(ValueError, match="max_len=2"):
        mt.nn.PositionalEncoding(6, max_len=2)(X)
    with pytest.raises(ValueError, match=r"expected \[B, T, 6\]"):
        positions(np.ones((2, 3, 4)))
    assert positions(X.astype(np.float32)).dtype == np.float64  # a plain array is cast to the table's dtype
    assert positions(mt.Tensor(X.astype(np.float32))).dtype == np.float32


# ---------------------------------------------------------------- FeedForward


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feedforward_computes_linear2_act_linear1(activation):
    ff = mt.nn.FeedForward(6, 10, activation, seed=1)
    hidden = X @ ff.linear1.weight.data.T + ff.linear1.bias.data
    if activation == "relu":
        hidden = np.maximum(hidden, 0)
    else:
        hidden = 0.5 * hidden * (1 + np.tanh(np.sqrt(2 / np.pi) * (hidden + 0.044715 * hidden**3)))
    expected = hidden @ ff.linear2.weight.data.T + ff.linear2.bias.data
    np.testing.assert_allclose(ff(X).data, expected, rtol=1e-12, atol=1e-14)
    assert [name for name, _ in ff.named_parameters()] == [
        "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
    ]  # fmt: skip


@pytest.mark.parametrize("dropout", [0.0, 0.4])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feedforward_routes_agree(activation, dropout):
    ff = mt.nn.FeedForward(6, 10, activation, dropout, seed=2)
    g = RNG.standard_normal(X.shape)
    ff(X)
    taped, by_hand = ff.named_gradients(g), ff.named_gradients(g, "analytic")
    assert list(taped) == list(by_hand)
    assert ("hidden_dropped" in taped) == (dropout > 0)
    for name in taped:
        np.testing.assert_allclose(by_hand[name], taped[name], rtol=1e-12, atol=1e-13, err_msg=name)


def test_feedforward_dropout_is_seeded_and_off_in_eval():
    a, b = mt.nn.FeedForward(6, 30, dropout=0.5, seed=4), mt.nn.FeedForward(6, 30, dropout=0.5, seed=4)
    np.testing.assert_array_equal(a(X).data, b(X).data)
    keep = a.analytic_cache()["keep"]
    assert set(np.unique(keep)) == {0.0, 2.0}  # inverted dropout: 1/(1-p) where kept
    a.eval()
    a(X)
    assert a.analytic_cache()["keep"] is None
    assert "hidden_dropped" not in a.gradient_names()
    result = mt.check.gradcheck(lambda t: a(t), X[:1, :2])
    assert result.ok, result


def test_feedforward_failed_forward_changes_nothing():
    """A refused call leaves the last forward and the dropout generator as they were."""
    ff = mt.nn.FeedForward(6, 8, dropout=0.5, seed=5)
    ff(X)
    last, state = ff.last_output, ff._rng.bit_generator.state
    with pytest.raises(ValueError, match=r"expected \[\.\.\., 6\]"):
        ff(np.ones((2, 5)))
    assert ff.last_output is last and ff._rng.bit_generator.state == state
    with pytest.raises(ValueError, match="activation='tanh'"):
        mt.nn.FeedForward(6, 8, "tanh")
    with pytest.raises(ValueError, match="dropout"):
        mt.nn.FeedForward(6, 8, dropout=1.0)


def test_float32_overflow_in_a_forward_is_refused_and_rewound():
    ff = mt.nn.FeedForward(6, 8, dropout=0.5, seed=6, dtype=np.float32)
    ff(X)
    last, state = ff.last_output, ff._rng.bit_generator.state
    ff.linear1.weight.data[...] = 1e38
    with pytest.raises(FloatingPointError, match="overflowed float32"):
        ff(X)
    assert ff.last_output is last and ff._rng.bit_generator.state == state


def test_named_gradients_write_nothing_and_backward_accumulates():
    ff = mt.nn.FeedForward(6, 8, seed=7)
    x = mt.Tensor(X, requires_grad=True)
    ff(x)
    g = RNG.standard_normal(X.shape)
    ff.named_gradients(g)
    ff.named_gradients(g, "analytic")
    assert all(p.grad is None for p in ff.parameters()) and x.grad is None
    dx = ff.backward(g, method="analytic")
    np.testing.assert_array_equal(x.grad, dx)  # a Tensor of yours receives its gradient
    first = ff.linear1.weight.grad.copy()
    ff.backward(g)
    np.testing.assert_allclose(ff.linear1.weight.grad, 2 * first, rtol=1e-12)
    assert set(ff.last_gradients) == set(ff.gradient_names())


# ---------------------------------------------------------------- masked arrays and ragged ids


def test_cross_entropy_refuses_masked_targets():
    logits = mt.Tensor(np.zeros((2, 3)), requires_grad=True)
    targets = np.ma.masked_array([0, 2], mask=[False, True])
    with pytest.raises(TypeError, match=r"cross_entropy: targets is a numpy masked array; its mask would be dropped"):
        mt.nn.cross_entropy(logits, targets)


def test_embedding_refuses_masked_and_ragged_ids():
    embed = mt.nn.Embedding(5, 2, seed=0)
    with pytest.raises(TypeError, match=r"Embedding.forward: ids is a numpy masked array"):
        embed(np.ma.masked_array([[1, 2]], mask=[[False, True]]))
    with pytest.raises(ValueError, match=r"Embedding.forward: ids is ragged \(rows of different lengths\)"):
        embed([[1, 2], [3]])
    assert embed._last_ids is None  # nothing was remembered


def test_cross_entropy_refuses_ragged_targets():
    with pytest.raises(ValueError, match=r"cross_entropy: targets is ragged"):
        mt.nn.cross_entropy(np.zeros((2, 3)), [[0, 1], [2]])


# ---------------------------------------------------------------- assigning over a parameter


def test_assigning_a_computed_tensor_over_a_parameter_is_refused():
    lin = mt.nn.Linear(2, 3, seed=0)
    weight = lin.weight
    with pytest.raises(
        TypeError, match=r"Linear\.weight = \.\.\.: 'weight' is a parameter and cannot be replaced by a computed Tensor"
    ):
        lin.weight = lin.weight * 2
    assert lin.weight is weight and [name for name, _ in lin.named_parameters()] == ["weight", "bias"]
    with pytest.raises(TypeError, match="a Tensor that does not require a gradient"):
        lin.bias = mt.Tensor(np.zeros(3))
    with pytest.raises(TypeError, match="cannot be replaced by a ndarray"):
        lin.bias = np.zeros(3)


def test_assigning_a_parameter_or_none_follows_pytorch():
    lin = mt.nn.Linear(2, 3, seed=0)
    fresh = mt.Tensor(lin.weight.data * 2, requires_grad=True)
    lin.weight = fresh
    assert lin.parameters()[0] is fresh and fresh.name == "weight"
    lin.bias = None
    assert [name for name, _ in lin.named_parameters()] == ["weight"]


def test_assigning_over_a_child_module_needs_a_module():
    attn = mt.nn.MultiHeadAttention(4, 2, seed=0)
    with pytest.raises(TypeError, match=r"'q_proj' is a child module and cannot be replaced by a Tensor"):
        attn.q_proj = mt.Tensor(np.zeros((4, 4)), requires_grad=True)
    assert isinstance(attn.q_proj, mt.nn.Linear) and len(attn.parameters()) == 8


# ---------------------------------------------------------------- a layer's backward: all or nothing


def test_linear_backward_writes_both_gradients_or_neither():
    lin = mt.nn.Linear(2, 3, seed=0)
    lin(np.ones((4, 2)))
    lin.bias.grad = "junk"
    with pytest.raises(TypeError, match=r"has \.grad = a str \('junk'\)"):
        lin.backward(np.ones((4, 3)))
    assert lin.weight.grad is None and lin.bias.grad == "junk"


def test_a_checked_layer_backward_writes_all_gradients_or_none():
    layer = mt.nn.TransformerEncoderLayer(4, 2, 8, seed=0)
    layer(np.ones((1, 3, 4)))
    layer.linear2.bias.grad = np.zeros(5)  # the wrong shape: cannot take the sum
    with pytest.raises(TypeError, match=r"cannot take a gradient"):
        layer.backward(np.ones((1, 3, 4)))
    assert all(p.grad is None for name, p in layer.named_parameters() if name != "linear2.bias")


def test_embedding_backward_checks_the_grad_it_adds_into():
    embed = mt.nn.Embedding(5, 2, seed=0)
    embed(np.array([1, 2]))
    embed.weight.grad = np.zeros((2, 2))
    with pytest.raises(TypeError, match=r"expected a real array of shape \(5, 2\)"):
        embed.backward(np.ones((2, 2)))
    assert embed.weight.grad.shape == (2, 2)
