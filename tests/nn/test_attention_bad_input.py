"""MultiHeadAttention refuses bad input clearly, and a refused call changes nothing.

Each case checks the exception type *and* that the message names the
argument and the offending value or shape. The state tests then replay every
refused call on a layer that has already run a good forward and backward,
and check that its weights, gradients, tape, attention weights and dropout
random stream are exactly as they were.
"""

import math
import re

import numpy as np
import pytest

import microtape as mt

E, H = 8, 2


def ones(*shape):
    return np.ones(shape)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def with_entry(array, index, value):
    array = array.copy()
    array[index] = value
    return array


# ---------------------------------------------------------------- constructor


@pytest.mark.parametrize(
    "kwargs, argument, shown",
    [
        (dict(num_heads=0), "num_heads", "0"),
        (dict(num_heads=-1), "num_heads", "-1"),
        (dict(num_heads=3), "num_heads", "3"),  # does not divide 8
        (dict(num_heads=True), "num_heads", "True"),
        (dict(num_heads=2.0), "num_heads", "2.0"),
        (dict(embed=0), "embed", "0"),
        (dict(embed=-8), "embed", "-8"),
        (dict(embed=True), "embed", "True"),
        (dict(dropout=-0.1), "dropout", "-0.1"),
        (dict(dropout=1.0), "dropout", "1.0"),
        (dict(dropout=1.5), "dropout", "1.5"),
        (dict(dropout=math.nan), "dropout", "nan"),
        (dict(causal="yes"), "causal", "yes"),
        (dict(dtype=np.int32), "dtype", "int32"),
    ],
    ids=lambda v: repr(v) if not isinstance(v, dict) else ",".join(f"{k}={v[k]!r}" for k in v),
)
def test_constructor_refuses(kwargs, argument, shown):
    """Every bad constructor argument: ValueError naming the argument and its value."""
    arguments = dict(embed=E, num_heads=H) | kwargs
    with pytest.raises(ValueError) as info:
        mt.nn.MultiHeadAttention(**arguments)
    message = str(info.value)
    assert argument in message and shown in message, message


def test_non_dividing_heads_message_names_embed():
    """``num_heads`` that does not divide ``embed``: the message gives both numbers."""
    with pytest.raises(ValueError, match=r"num_heads=3.*embed=8"):
        mt.nn.MultiHeadAttention(8, 3)


def test_zero_heads_does_not_divide_by_zero():
    """The C++ original divides before checking; here ``num_heads=0`` is a ValueError."""
    with pytest.raises(ValueError, match="num_heads=0"):
        mt.nn.MultiHeadAttention(8, 0)


# ---------------------------------------------------------------- forward
#
# Each case: (id, layer kwargs, call, exception type, patterns the message must contain).

X = rand(2, 4, E)
K5 = rand(2, 5, E, seed=1)
V5 = rand(2, 5, E, seed=2)

FORWARD_CASES = [
    ("query_rank_2", {}, lambda a: a(ones(4, E)), ValueError, ["query", r"\(4, 8\)", "rank 3"]),
    ("query_rank_4", {}, lambda a: a(ones(1, 2, 4, E)), ValueError, ["query", r"\(1, 2, 4, 8\)"]),
    ("key_rank_2", {}, lambda a: a(X, ones(5, E), V5), ValueError, ["key", r"\(5, 8\)"]),
    ("value_rank_4", {}, lambda a: a(X, K5, ones(1, 2, 5, E)), ValueError, ["value", r"\(1, 2, 5, 8\)"]),
    ("batch_mismatch", {}, lambda a: a(X, rand(3, 5, E), rand(3, 5, E)), ValueError, ["batch 2", "3"]),
    (
        "tk_mismatch",
        {},
        lambda a: a(X, K5, rand(2, 6, E)),
        ValueError,
        ["key", "value", r"\(2, 5, 8\)", r"\(2, 6, 8\)"],
    ),
    ("query_embed", {}, lambda a: a(ones(2, 4, 6)), ValueError, ["query", r"\(2, 4, 6\)", "embed=8"]),
    (
        "key_embed",
        {},
        lambda a: a(X, ones(2, 5, 6), ones(2, 5, 6)),
        ValueError,
        ["key", r"\(2, 5, 6\)", "embed=8"],
    ),
    ("value_embed", {}, lambda a: a(X, K5, ones(2, 5, 6)), ValueError, ["value", r"\(2, 5, 6\)", "embed=8"]),
    ("empty_axis", {}, lambda a: a(ones(2, 0, E)), ValueError, ["query", r"\(2, 0, 8\)", "empty"]),
    ("key_without_value", {}, lambda a: a(X, K5), ValueError, ["key", "value"]),
    ("list_input", {}, lambda a: a(X.tolist()), TypeError, ["query", "list"]),
    ("complex_input", {}, lambda a: a(X.astype(complex)), TypeError, ["query", "complex"]),
    (
        "causal_tq_ne_tk",
        dict(causal=True),
        lambda a: a(rand(2, 3, E), K5, V5),
        ValueError,
        ["causal", "Tq=3", "Tk=5"],
    ),
    (
        "bool_mask",
        {},
        lambda a: a(X, mask=np.ones((4, 4), bool)),
        TypeError,
        ["bool", "from_bool", "additive"],
    ),
    ("mask_shape", {}, lambda a: a(X, mask=np.zeros((3, 4))), ValueError, ["mask", r"\(3, 4\)", r"\[4, 4\]"]),
    ("mask_rank_3", {}, lambda a: a(X, mask=np.zeros((2, 4, 4))), ValueError, ["mask", r"\(2, 4, 4\)"]),
    (
        "mask_cross_shape",
        {},
        lambda a: a(X, K5, V5, mask=np.zeros((4, 4))),
        ValueError,
        ["mask", r"\(4, 4\)", r"\[4, 5\]"],
    ),
    (
        "mask_nan",
        {},
        lambda a: a(X, mask=with_entry(np.zeros((4, 4)), (1, 2), np.nan)),
        ValueError,
        ["mask", "NaN"],
    ),
    (
        "mask_plus_inf",
        {},
        lambda a: a(X, mask=with_entry(np.zeros((4, 4)), (1, 2), np.inf)),
        ValueError,
        ["mask", r"\+inf"],
    ),
    ("mask_string", {}, lambda a: a(X, mask=np.full((4, 4), "0")), TypeError, ["mask", "dtype"]),
    (
        "blocked_row_2",
        {},
        lambda a: a(X, mask=with_entry(np.zeros((4, 4)), 2, -1e9)),
        ValueError,
        ["row 2", "no valid key"],
    ),
    (
        "blocked_row_neg_inf",
        {},
        lambda a: a(X, mask=with_entry(np.zeros((4, 4)), 3, -np.inf)),
        ValueError,
        ["row 3"],
    ),
    (
        "blocked_cross_row",
        {},
        lambda a: a(X, K5, V5, mask=with_entry(np.zeros((4, 5)), 1, -1e9)),
        ValueError,
        ["row 1"],
    ),
    # Causal leaves row 0 only key 0; the user mask takes that away.
    (
        "causal_plus_mask_blocks_row_0",
        dict(causal=True),
        lambda a: a(X, mask=with_entry(np.zeros((4, 4)), (slice(None), 0), -1e9)),
        ValueError,
        ["row 0", "causal"],
    ),  # fmt: skip
    (
        "nan_query",
        {},
        lambda a: a(with_entry(X, (1, 2, 3), np.nan)),
        ValueError,
        ["query", "nan", r"\(1, 2, 3\)"],
    ),
    (
        "inf_key",
        {},
        lambda a: a(X, with_entry(K5, (0, 4, 0), np.inf), V5),
        ValueError,
        ["key", "inf", r"\(0, 4, 0\)"],
    ),
    (
        "neg_inf_value",
        {},
        lambda a: a(X, K5, with_entry(V5, (1, 0, 7), -np.inf)),
        ValueError,
        ["value", "-inf"],
    ),
    (
        "nan_in_tensor",
        {},
        lambda a: a(mt.Tensor(with_entry(X, (0, 0, 0), np.nan))),
        ValueError,
        ["query", "nan"],
    ),
]
FORWARD_IDS = [case[0] for case in FORWARD_CASES]


@pytest.mark.parametrize("name, kwargs, call, exception, patterns", FORWARD_CASES, ids=FORWARD_IDS)
def test_forward_refuses(name, kwargs, call, exception, patterns):
    """The exception type, and a message naming the argument and the value or shape."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0, **kwargs)
    with pytest.raises(exception) as info:
        call(attn)
    message = str(info.value)
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in: {message}"


def test_partly_suppressed_rows_are_fine():
    """Rows with at least one allowed key pass, even with -inf and large biases elsewhere."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    mask = np.full((4, 4), -np.inf)
    mask[np.arange(4), [3, 0, 2, 1]] = 0.0
    attn(X, mask=mask)
    np.testing.assert_array_equal(attn.attention_weights[0, 0], (mask == 0).astype(float))


# ---------------------------------------------------------------- memory


def test_score_memory_limit_gives_an_estimate():
    """Over ``max_score_bytes``: refused up front, the message gives the byte estimate and the limit."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    attn.max_score_bytes = 1000
    with pytest.raises(MemoryError) as info:
        attn(rand(2, 6, E))
    message = str(info.value)
    found = re.search(r"([\d,]+) bytes", message)
    assert found, message
    estimate = int(found.group(1).replace(",", ""))
    # At least the scores themselves: B·H·Tq·Tk float64 values.
    assert estimate >= 2 * H * 6 * 6 * 8
    assert estimate > 1000
    assert "1,000" in message and "max_score_bytes" in message
    attn.max_score_bytes = estimate  # exactly the estimate is allowed
    attn(rand(2, 6, E))


def test_huge_sequence_refused_by_default_limit():
    """The default limit refuses quadratic scores over a huge T before allocating them."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    with pytest.raises(MemoryError, match="bytes") as info:
        attn(np.zeros((1, 200_000, E)))
    assert "200000" in str(info.value).replace(",", "")


def test_memory_estimate_scales_with_itemsize():
    """A float32 layer's estimate is half a float64 layer's."""
    a64 = mt.nn.MultiHeadAttention(E, H, seed=0)
    a32 = mt.nn.MultiHeadAttention(E, H, seed=0, dtype=np.float32)
    assert a32.score_bytes(2, 7, 9) * 2 == a64.score_bytes(2, 7, 9)


# ---------------------------------------------------------------- backward and getters


def test_backward_before_forward():
    """``backward`` with no forward yet: RuntimeError saying to call forward."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    with pytest.raises(RuntimeError, match="forward"):
        attn.backward(ones(2, 4, E))
    for getter in (attn.grad_key_input, attn.grad_value_input, attn.grad_scores, attn.grad_weights):
        with pytest.raises(RuntimeError, match="forward"):
            getter()
    with pytest.raises(RuntimeError, match="forward"):
        attn.attention_weights  # noqa: B018
    assert attn.tape is None and attn.dropout_keep is None


def test_gradient_getters_before_backward():
    """After a forward but before backward: RuntimeError saying to call backward."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    attn(X, K5, V5)
    for getter in (attn.grad_key_input, attn.grad_value_input, attn.grad_scores, attn.grad_weights):
        with pytest.raises(RuntimeError, match="backward"):
            getter()


@pytest.mark.parametrize(
    "grad, exception, patterns",
    [
        (ones(2, 4, E + 1), ValueError, [r"\(2, 4, 9\)", r"\(2, 4, 8\)"]),
        (ones(4, E), ValueError, [r"\(4, 8\)", r"\(2, 4, 8\)"]),
        (with_entry(ones(2, 4, E), (0, 0, 0), np.nan), ValueError, ["finite"]),
        (with_entry(ones(2, 4, E), (0, 0, 0), np.inf), ValueError, ["finite"]),
    ],
    ids=["wrong_embed", "wrong_rank", "nan", "inf"],
)
def test_backward_refuses_bad_grad(grad, exception, patterns):
    """A wrongly shaped or non-finite grad_output: a clear error with both shapes."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    attn(X)
    with pytest.raises(exception) as info:
        attn.backward(grad)
    for pattern in patterns:
        assert re.search(pattern, str(info.value)), str(info.value)


def test_backward_refuses_unknown_method():
    """``method`` must be "tape" or "analytic"; the message quotes what was given."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    attn(X)
    with pytest.raises(ValueError, match=r"method='adjoint'"):
        attn.backward(ones(2, 4, E), method="adjoint")


# ---------------------------------------------------------------- a refused call changes nothing


def snapshot(attn):
    """Everything a refused call must leave alone (objects and copies of values)."""
    return {
        "tape": attn.tape,
        "tape_length": len(attn.tape),
        "weights": attn.attention_weights.copy(),
        "dropped": attn.dropped_attention_weights.copy(),
        "keep": None if attn.dropout_keep is None else attn.dropout_keep.copy(),
        "mask": None if attn.last_mask is None else attn.last_mask.copy(),
        "params": [(name, tensor, tensor.data.copy()) for name, tensor in attn.named_parameters()],
        "grads": [None if t.grad is None else t.grad.copy() for t in attn.parameters()],
        "last_gradients": {k: v.copy() for k, v in attn.last_gradients.items()},
        "training": attn.training,
    }


def assert_unchanged(attn, before):
    after = snapshot(attn)
    assert after["tape"] is before["tape"], "attn.tape was replaced"
    assert after["tape_length"] == before["tape_length"], "the last tape grew"
    np.testing.assert_array_equal(after["weights"], before["weights"])
    np.testing.assert_array_equal(after["dropped"], before["dropped"])
    np.testing.assert_array_equal(after["keep"], before["keep"])
    np.testing.assert_array_equal(after["mask"], before["mask"])
    for (name, tensor, data), (name2, tensor2, data2) in zip(before["params"], after["params"], strict=True):
        assert name == name2 and tensor2 is tensor, f"{name} was replaced"
        np.testing.assert_array_equal(data2, data, err_msg=name)
    for (name, *_), grad, grad2 in zip(before["params"], before["grads"], after["grads"], strict=True):
        np.testing.assert_array_equal(grad2, grad, err_msg=f"{name}.grad")
    assert after["last_gradients"].keys() == before["last_gradients"].keys()
    for name, grad in before["last_gradients"].items():
        np.testing.assert_array_equal(after["last_gradients"][name], grad, err_msg=name)
    assert after["training"] == before["training"]


def trained_layer(kwargs):
    """A layer with dropout that has run one good forward (with a mask) and backward."""
    attn = mt.nn.MultiHeadAttention(E, H, dropout=0.3, seed=3, **kwargs)
    good_mask = np.zeros((4, 4))
    good_mask[:, 1] = -0.5
    attn(X, mask=good_mask)
    attn.backward(rand(2, 4, E, seed=9))
    return attn


@pytest.mark.parametrize("name, kwargs, call, exception, patterns", FORWARD_CASES, ids=FORWARD_IDS)
def test_refused_forward_changes_nothing(name, kwargs, call, exception, patterns):
    """Weights, grads, tape, attention weights and the dropout stream survive a refused forward."""
    attn = trained_layer(kwargs)
    twin = trained_layer(kwargs)  # never sees the bad call
    before = snapshot(attn)
    with pytest.raises(exception):
        call(attn)
    assert_unchanged(attn, before)
    # No dropout mask was drawn for the refused call: the next masks match the twin's.
    np.testing.assert_array_equal(attn(X).data, twin(X).data)
    np.testing.assert_array_equal(attn.dropout_keep, twin.dropout_keep)


def test_refused_memory_forward_changes_nothing():
    """A forward refused for memory leaves the last good state."""
    attn = trained_layer({})
    before = snapshot(attn)
    attn.max_score_bytes = 100
    with pytest.raises(MemoryError):
        attn(X)
    assert_unchanged(attn, before)


@pytest.mark.parametrize(
    "grad, method",
    [
        (ones(2, 4, E + 1), "tape"),
        (ones(2, 4, E + 1), "analytic"),
        (with_entry(ones(2, 4, E), 0, np.nan), "tape"),
        (ones(2, 4, E), "adjoint"),
    ],
    ids=["shape_tape", "shape_analytic", "nan", "method"],
)
def test_refused_backward_changes_nothing(grad, method):
    """A refused backward adds nothing to the parameter grads and keeps the last gradients."""
    attn = trained_layer({})
    before = snapshot(attn)
    with pytest.raises(ValueError):
        attn.backward(grad, method=method)
    assert_unchanged(attn, before)


def test_refused_forward_records_nothing_on_an_enclosing_tape():
    """Inside ``mt.Tape()``, a refused forward adds no equation to the enclosing tape."""
    attn = mt.nn.MultiHeadAttention(E, H, seed=0)
    x = mt.Tensor(X, requires_grad=True)
    with mt.Tape() as outer:
        attn(x)
        recorded = len(outer)
        with pytest.raises(ValueError, match="row 0"):
            attn(x, mask=with_entry(np.zeros((4, 4)), 0, -1e9))
    assert len(outer) == recorded
