"""The ops the Transformer layers need: hand-derived values, stability, and the Tensor methods' checks.

The registry tests (``test_ops.py``) already hold every op's VJP to central
finite differences; here are the facts worth stating by hand: GELU's values
and slope at known points, softmax-like ops at huge inputs, the scatter-add
of repeated indices, the split of a tie, and the errors a wrong call gets.
PyTorch's values for the same ops are in ``test_golden_layers.py``.
"""

import math

import numpy as np
import pytest

import microtape as mt
from microtape.ops import OPS


def test_registry_has_the_ops_the_issue_asks_for():
    required = {"sigmoid", "sqrt", "abs", "maximum", "minimum", "logsumexp", "log_softmax", "gelu", "take"}
    required |= {"concatenate", "index"}
    assert required <= set(OPS), sorted(required - set(OPS))


def _grad(fn, x, g=None):
    t = mt.Tensor(np.array(x, dtype=np.float64), requires_grad=True)
    y = fn(t)
    y.backward(np.ones(y.shape) if g is None else g)
    return y.data, t.grad


def test_gelu_by_hand():
    """gelu(0) = 0 with slope 1/2; it is x far right, 0 far left; gelu(1) by the formula."""
    values, slopes = _grad(lambda t: t.gelu(), [0.0, 1.0, 10.0, -10.0])
    c = math.sqrt(2 / math.pi)
    assert values[0] == 0.0 and slopes[0] == 0.5
    assert values[1] == pytest.approx(0.5 * (1 + math.tanh(c * (1 + 0.044715))), rel=1e-15)
    assert values[2] == pytest.approx(10.0) and slopes[2] == pytest.approx(1.0)
    assert abs(values[3]) < 1e-20 and abs(slopes[3]) < 1e-20


def test_sigmoid_is_stable_and_its_slope_is_s_times_one_minus_s():
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # exp(-1000) underflowing to 0 is fine
        values, slopes = _grad(lambda t: t.sigmoid(), [-1000.0, 0.0, 2.0, 1000.0])
    assert values[0] == 0.0 and values[3] == 1.0 and values[1] == 0.5
    s = 1 / (1 + math.exp(-2.0))
    assert values[2] == pytest.approx(s, rel=1e-15) and slopes[2] == pytest.approx(s * (1 - s), rel=1e-15)


def test_logsumexp_and_log_softmax_are_stable_for_huge_inputs():
    """Shifted by 1e4 (exp would overflow) they give the shifted answers, with softmax-shaped gradients."""
    offsets = np.array([[0.0, -1.0, 2.0], [3.0, 3.0, -4.0]])
    exact = np.log(np.exp(offsets).sum(axis=1))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        total, grad = _grad(lambda t: t.logsumexp(axis=1), offsets + 1e4)
        log_probs, log_grad = _grad(lambda t: t.log_softmax(-1), offsets + 1e4, g=np.eye(2, 3))
    np.testing.assert_allclose(total, exact + 1e4, rtol=1e-15)
    softmax = np.exp(offsets - exact[:, None])
    np.testing.assert_allclose(grad, softmax, rtol=1e-12)  # d logsumexp = softmax
    np.testing.assert_allclose(log_probs, offsets - exact[:, None], atol=1e-11)
    # d/dx of sum(g * log_softmax(x)) = g - softmax * rowsum(g), g one-hot per row here.
    np.testing.assert_allclose(log_grad, np.eye(2, 3) - softmax, atol=1e-12)


def test_log_softmax_is_finite_where_softmax_underflows():
    log_probs, _ = _grad(lambda t: t.log_softmax(-1), [[0.0, -2000.0]])
    assert log_probs[0, 1] == pytest.approx(-2000.0)  # log(softmax) would be log(0) = -inf


def test_take_adds_the_gradients_of_a_repeated_index():
    """y = x[[2, 0, 2, 2]]: x[2] was used three times, so it collects three gradients."""
    x = np.arange(8.0).reshape(4, 2)
    g = np.array([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0], [1000.0, 2000.0]])
    y, grad = _grad(lambda t: t[np.array([2, 0, 2, 2])], x, g)
    np.testing.assert_array_equal(y, x[[2, 0, 2, 2]])
    np.testing.assert_array_equal(grad, [[10.0, 20.0], [0.0, 0.0], [1101.0, 2202.0], [0.0, 0.0]])


def test_take_along_another_axis_and_negative_indices():
    x = np.arange(12.0).reshape(2, 3, 2)
    y, grad = _grad(lambda t: t.take([-1, 0, -1], axis=1), x)
    np.testing.assert_array_equal(y, np.take(x, [2, 0, 2], axis=1))
    np.testing.assert_array_equal(grad[0], [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]])
    scalar_row, _ = _grad(lambda t: t[1], x)
    np.testing.assert_array_equal(scalar_row, x[1])


def test_maximum_and_minimum_share_a_tie():
    a, b = np.array([1.0, 5.0, 3.0]), np.array([2.0, 5.0, 0.0])
    ta, tb = mt.Tensor(a, requires_grad=True), mt.Tensor(b, requires_grad=True)
    ta.maximum(tb).backward(np.ones(3))
    np.testing.assert_array_equal(ta.grad, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(tb.grad, [1.0, 0.5, 0.0])
    ta.grad = tb.grad = None
    ta.minimum(tb).backward(np.ones(3))
    np.testing.assert_array_equal(ta.grad, [1.0, 0.5, 0.0])


def test_sqrt_abs_and_var_by_hand():
    values, slopes = _grad(lambda t: t.sqrt(), [4.0, 0.25])
    np.testing.assert_array_equal(values, [2.0, 0.5])
    np.testing.assert_array_equal(slopes, [0.25, 1.0])  # 1 / (2 sqrt x)
    _, abs_slopes = _grad(lambda t: abs(t), [-3.0, 0.0, 2.0])
    np.testing.assert_array_equal(abs_slopes, [-1.0, 0.0, 1.0])
    x = np.array([[1.0, 2.0, 6.0], [0.0, 0.0, 3.0]])
    variance, var_grad = _grad(lambda t: t.var(axis=1), x)
    np.testing.assert_allclose(variance, np.var(x, axis=1))
    # d var / d x_i = 2 (x_i - mean) / n
    np.testing.assert_allclose(var_grad, 2 * (x - x.mean(axis=1, keepdims=True)) / 3)


def test_concatenate_and_stack_hand_back_each_slice():
    a = mt.Tensor(np.ones((2, 2)), requires_grad=True)
    b = mt.Tensor(np.zeros((2, 1)), requires_grad=True)
    with mt.Tape() as tape:
        joined = mt.concatenate([a, b, np.full((2, 3), 7.0)], axis=1, name="joined")
    assert [eq.op.name for eq in tape] == ["concatenate", "concatenate"]  # two at a time
    assert joined.shape == (2, 6) and joined.name == "joined"
    g = np.arange(12.0).reshape(2, 6)
    joined.backward(g)
    np.testing.assert_array_equal(a.grad, g[:, :2])
    np.testing.assert_array_equal(b.grad, g[:, 2:3])
    c = mt.Tensor(np.ones(3), requires_grad=True)
    stacked = mt.stack([c, c * 2], axis=1)
    np.testing.assert_array_equal(stacked.data, [[1, 2]] * 3)
    stacked.backward(np.ones((3, 2)))
    np.testing.assert_array_equal(c.grad, [3.0, 3.0, 3.0])  # 1 + 2


def test_float32_stays_float32():
    x = mt.Tensor(np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    for y in (x.gelu(), x.sigmoid(), x.log_softmax(), x.logsumexp(axis=0), x.take([1, 1]), x.abs(), x.var(axis=1)):
        assert y.dtype == np.float32
        y.backward(np.ones(y.shape, dtype=np.float32))
        assert x.grad.dtype == np.float32
        x.grad = None


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda t: t.take([0.5]), TypeError, "integers"),
        (lambda t: t.take(np.array([True, False])), TypeError, "integers"),
        (lambda t: t.take([0, 9]), IndexError, "index 9"),
        (lambda t: t.take([-5]), IndexError, "index -5"),
        (lambda t: t.take([0], axis=2), ValueError, "axis=2"),
        (lambda t: t[0, 1, 0], IndexError, r"shape \(3, 2\).*too many indices"),
        (lambda t: t[:, 2], IndexError, r"Tensor\[\(slice\(None, None, None\), 2\)\].*index 2 is out of bounds"),
        (lambda t: t[np.ones((2, 2), dtype=bool)], IndexError, "boolean index did not match"),
        (lambda t: t[0.5], TypeError, "expected integers, slices"),
        (lambda t: t[0:1.5], TypeError, "slice bounds must be integers"),
        (lambda t: t[True], TypeError, "True/False is not an index"),
        (lambda t: t[t], TypeError, "cannot be an index"),
        (lambda t: t.log_softmax(axis=True), ValueError, "expected an integer"),
        (lambda t: t.logsumexp(axis=5), ValueError, "axis out of range"),
        (lambda t: t.maximum(np.ones(4)), ValueError, "do not broadcast"),
        (lambda t: (t - 5).sqrt(), ValueError, "not real"),
        (lambda t: mt.concatenate([t, np.ones((2, 3))], axis=0), ValueError, "tensor 1 has shape"),
        (lambda t: mt.concatenate([], axis=0), ValueError, "at least one"),
        (lambda t: mt.stack([t, np.ones((2, 3))], axis=0), ValueError, "tensor 1 has shape"),
        (lambda t: mt.concatenate(t, axis=0), TypeError, "list of Tensors"),
    ],
)
def test_bad_calls_are_refused_and_record_nothing(call, error, words):
    t = mt.Tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    with mt.Tape() as tape:
        with pytest.raises(error, match=words):
            call(t)
    # A refused call records nothing (only the `t - 5` that runs before a refused sqrt).
    assert all(eq.op.name == "sub" for eq in tape)


def test_numpy_indexing_reads_like_numpy_and_sends_gradients_back_to_the_entries_read():
    """t[:, 0], t[1:, ..., ::-1], t[None, 2], t[[0, 0, 2], 1] and t[mask]: numpy's values, scatter-added gradients."""
    x = np.arange(24.0).reshape(3, 2, 4) / 7.0
    keys = [
        (slice(None), 0),
        (slice(1, None), Ellipsis, slice(None, None, -1)),
        (None, 2),
        ([0, 0, 2], 1),  # row 0 read twice: its gradient doubles
        (x > 2.0,),
        (Ellipsis, -1),
    ]
    for key in keys:
        t = mt.Tensor(x, requires_grad=True)
        with mt.Tape() as tape:
            y = t[key]
        np.testing.assert_array_equal(y.data, x[key])
        assert [eq.op.name for eq in tape] == ["index"]
        g = np.random.default_rng(0).standard_normal(y.shape)
        y.backward(g)
        expected = np.zeros_like(x)
        np.add.at(expected, tuple(np.asarray(k) if isinstance(k, list) else k for k in key), g)
        np.testing.assert_array_equal(t.grad, expected)
    t = mt.Tensor(x, requires_grad=True)
    t[[0, 0, 2], 1].backward(np.ones((3, 4)))
    np.testing.assert_array_equal(t.grad[:, 1], [[2.0] * 4, [0.0] * 4, [1.0] * 4])
    # An integer or integer list alone is still the embedding lookup (take) along the first axis.
    with mt.Tape() as tape:
        t[2], t[[0, 2]]
    assert [eq.op.name for eq in tape] == ["take", "take"]
    result = mt.check.gradcheck(lambda a: (a[1:, ..., ::2] * a[0, None, :, 1::2]).tanh(), x)
    assert result.ok, result


def test_index_keys_are_copied_and_drawn_as_written():
    rows = np.array([0, 2])
    t = mt.Tensor(np.arange(12.0).reshape(3, 4), requires_grad=True, name="t")
    with mt.Tape() as tape:
        y = t[rows, 1:3]
    rows[0] = 1
    y.backward(np.ones((2, 2)))
    np.testing.assert_array_equal(t.grad[:, 1:3], [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    assert "index(t; key=[array[2], 1:3])" in tape.listing()
    assert OPS["index"].describe(y.params) == "index [[0, 2], 1:3]"


def test_take_copies_its_indices():
    """Changing the index array afterwards changes nothing on the tape."""
    indices = np.array([0, 1])
    t = mt.Tensor(np.arange(4.0), requires_grad=True)
    y = t.take(indices)
    indices[0] = 3
    y.backward(np.ones(2))
    np.testing.assert_array_equal(t.grad, [1.0, 1.0, 0.0, 0.0])
