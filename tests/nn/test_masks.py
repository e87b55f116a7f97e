"""microtape.nn.masks: additive masks (0 allows, -1e9 suppresses) and their helpers."""

import numpy as np
import pytest

import microtape as mt
from microtape.nn.masks import NEG_INF, SUPPRESSED_BELOW, causal_mask, from_bool, padding_allowed, suppressed


@pytest.mark.parametrize("T", [1, 2, 5])
def test_causal_mask_values(T):
    """Entry ``[i, j]`` is 0 when ``j <= i`` (past and present), -1e9 when ``j > i`` (future)."""
    mask = causal_mask(T)
    assert mask.shape == (T, T) and mask.dtype == np.float64
    for i in range(T):
        for j in range(T):
            assert mask[i, j] == (0.0 if j <= i else -1e9), (i, j)


def test_causal_mask_dtype_and_numpy_int():
    """``dtype`` is honoured; a numpy integer length works."""
    mask = causal_mask(np.int64(3), dtype=np.float32)
    assert mask.dtype == np.float32
    assert mask[0, 2] == np.float32(-1e9)


@pytest.mark.parametrize("T", [0, -1, 2.5, True, "3", None])
def test_causal_mask_bad_length(T):
    """Anything but a positive integer: ValueError naming T and the value."""
    with pytest.raises(ValueError, match="T=") as info:
        causal_mask(T)
    assert repr(T) in str(info.value)


def test_from_bool_convention():
    """True = may attend -> 0; False -> NEG_INF (-1e9). Shape kept."""
    allowed = np.array([[True, False, True], [False, False, True]])
    mask = from_bool(allowed)
    assert mask.shape == (2, 3) and mask.dtype == np.float64
    np.testing.assert_array_equal(mask, [[0.0, -1e9, 0.0], [-1e9, -1e9, 0.0]])
    assert NEG_INF == -1e9
    assert from_bool([[True, False]], dtype=np.float32).dtype == np.float32


def test_from_bool_of_lower_triangle_is_causal():
    """``from_bool(tril(ones))`` is exactly ``causal_mask``."""
    np.testing.assert_array_equal(from_bool(np.tril(np.ones((4, 4), dtype=bool))), causal_mask(4))


def test_from_bool_pytorch_convention_is_inverted():
    """PyTorch's boolean mask (True = masked out) converts with ``from_bool(~m)``."""
    torch_style = np.array([[False, True], [False, False]])
    np.testing.assert_array_equal(from_bool(~torch_style), [[0.0, -1e9], [0.0, 0.0]])
    assert "opposite" in from_bool.__doc__


@pytest.mark.parametrize(
    "value", [np.ones((2, 2)), np.zeros((2, 2), dtype=int), [[1, 0]]], ids=["float", "int", "list"]
)
def test_from_bool_refuses_non_boolean(value):
    """Only booleans: a float or 0/1 integer array is a TypeError naming the dtype."""
    with pytest.raises(TypeError, match="boolean") as info:
        from_bool(value)
    assert str(np.asarray(value).dtype) in str(info.value)


def test_from_bool_mask_in_attention_zeroes_the_disallowed_weights():
    """Weights are exactly 0 wherever ``allowed`` is False, and the rest still sum to 1."""
    allowed = np.array([[True, False, True], [True, True, False], [False, True, True]])
    attn = mt.nn.MultiHeadAttention(4, 2, seed=0)
    attn(np.random.default_rng(0).standard_normal((2, 3, 4)), mask=from_bool(allowed))
    weights = attn.attention_weights
    assert np.all(weights[..., ~allowed] == 0.0)
    assert np.all(weights[..., allowed] > 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-13)


def test_constant_row_bias_does_not_change_the_weights():
    """Adding the same number to a whole row (here -5: a bias, not suppression) leaves softmax unchanged."""
    attn = mt.nn.MultiHeadAttention(4, 2, seed=0)
    x = np.random.default_rng(1).standard_normal((1, 3, 4))
    attn(x)
    plain = attn.attention_weights.copy()
    attn(x, mask=np.full((3, 3), -5.0))  # no row is "suppressed": -5 > SUPPRESSED_BELOW
    np.testing.assert_allclose(attn.attention_weights, plain, rtol=1e-12)


def test_padding_allowed():
    """``[B, T]``: True for the first ``lengths[b]`` positions."""
    np.testing.assert_array_equal(
        padding_allowed([2, 4, 1], 4),
        [[True, True, False, False], [True, True, True, True], [True, False, False, False]],
    )


@pytest.mark.parametrize("lengths", [[0, 2], [2, 5], [[1, 2]], [1.5, 2.0], [-1]], ids=str)
def test_padding_allowed_bad_lengths(lengths):
    """Lengths outside 1..T, not 1-D, or not integers: ValueError naming lengths and T."""
    with pytest.raises(ValueError, match="lengths") as info:
        padding_allowed(lengths, 4)
    assert "T=4" in str(info.value)


def test_padding_mask_per_sequence_in_attention():
    """A per-sequence padding mask built as the docstring says: padded keys get weight 0."""
    allowed = padding_allowed([2], 3)[0]
    mask = from_bool(np.repeat(allowed[None, :], 3, axis=0))
    attn = mt.nn.MultiHeadAttention(4, 1, seed=0)
    attn(np.random.default_rng(0).standard_normal((1, 3, 4)), mask=mask)
    assert np.all(attn.attention_weights[..., 2] == 0.0)


def test_suppressed_threshold():
    """At or below -1e4 counts as suppressed; moderate negatives are biases."""
    values = np.array([-np.inf, -1e9, SUPPRESSED_BELOW, -9999.0, -100.0, 0.0, 3.0])
    np.testing.assert_array_equal(suppressed(values), [True, True, True, False, False, False, False])
    assert SUPPRESSED_BELOW == -1e4
