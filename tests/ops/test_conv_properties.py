"""Convolution and pooling over random configurations: against loops from the definition, and differentiated twice.

The references here are plain Python loops over every window (no im2col, no
padding array, no dilation), so they share nothing with
:mod:`microtape.ops.convolution` but the definition::

    y[b, o, i] = Σ_c Σ_k x[b, c, i·s + k − p] · w[o, c, k]   (x is 0 outside itself)

A loop adds only the products that happen, so it is also PyTorch's answer
where a weight is NaN: the NaN reaches the inputs that weight met, no others.
The fixed PyTorch cases are in ``tests/golden`` (``test_golden_torch.py``);
the per-op finite differences in ``tests/ops/test_ops.py``.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtape as mt


@st.composite
def conv_configs(draw, batch_from=0):
    """1-D or 2-D: batch (0 too), channels, kernel, stride, padding, and a length every window fits."""
    n = draw(st.sampled_from([1, 2]))
    batch, c_in, c_out = draw(st.integers(batch_from, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(n))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(n))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(n))
    spatial = tuple(draw(st.integers(max(1, k - 2 * p), max(1, k - 2 * p) + 4)) for k, p in zip(kernel, padding))
    seed = draw(st.integers(0, 2**16))
    return (batch, c_in, *spatial), (c_out, c_in, *kernel), stride, padding, seed


def _positions(x_shape, w_shape, stride, padding):
    """Every (window i, kernel offset k, input position or None when it falls in the padding)."""
    out = [(n + 2 * p - k) // s + 1 for n, k, s, p in zip(x_shape[2:], w_shape[2:], stride, padding)]
    for i in itertools.product(*map(range, out)):
        for k in itertools.product(*map(range, w_shape[2:])):
            at = tuple(a * s + b - p for a, b, s, p in zip(i, k, stride, padding))
            inside = all(0 <= a < n for a, n in zip(at, x_shape[2:]))
            yield i, k, (at if inside else None)


def conv_by_loops(x, w, g, stride, padding):
    """``(y, x̄, w̄)`` of ``⟨g, conv(x, w)⟩``, adding only the products that happen."""
    positions = list(_positions(x.shape, w.shape, stride, padding))
    out = [(n + 2 * p - k) // s + 1 for n, k, s, p in zip(x.shape[2:], w.shape[2:], stride, padding)]
    y, grad_x, grad_w = np.zeros((x.shape[0], w.shape[0], *out)), np.zeros(x.shape), np.zeros(w.shape)
    for b, o, c in itertools.product(range(x.shape[0]), range(w.shape[0]), range(x.shape[1])):
        for i, k, at in positions:
            if at is None:
                continue
            y[(b, o, *i)] += x[(b, c, *at)] * w[(o, c, *k)]
            grad_x[(b, c, *at)] += g[(b, o, *i)] * w[(o, c, *k)]
            grad_w[(o, c, *k)] += g[(b, o, *i)] * x[(b, c, *at)]
    return y, grad_x, grad_w


def _run_conv(x, w, g, stride, padding):
    function = mt.conv1d if x.ndim == 3 else mt.conv2d
    tx, tw = mt.Tensor(x, requires_grad=True), mt.Tensor(w, requires_grad=True)
    y = function(tx, tw, stride=stride, padding=padding)
    y.backward(g)
    return y.data, tx.grad, tw.grad


@settings(max_examples=60, deadline=None)
@given(conv_configs())
def test_conv_value_and_gradients_are_the_loops(config):
    """Any stride, padding, kernel and batch (0 too): the output and both gradients are the loops' to 1e-12."""
    x_shape, w_shape, stride, padding, seed = config
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    out = [(n + 2 * p - k) // s + 1 for n, k, s, p in zip(x_shape[2:], w_shape[2:], stride, padding)]
    g = rng.standard_normal((x_shape[0], w_shape[0], *out))
    expected_y, expected_x, expected_w = conv_by_loops(x, w, g, stride, padding)
    y, grad_x, grad_w = _run_conv(x, w, g, stride, padding)
    for got, expected in ((y, expected_y), (grad_x, expected_x), (grad_w, expected_w)):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(conv_configs(batch_from=1), st.data())
def test_a_nan_weight_reaches_only_the_inputs_it_met(config, data):
    """A NaN in one weight entry: the input gradient is NaN exactly where that entry met the input (the loops').

    The zeros of the padding and of the stride's dilation are never
    multiplied by it, so entries it never touched stay finite — PyTorch's answer.
    """
    x_shape, w_shape, stride, padding, seed = config
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    w[data.draw(st.tuples(*(st.integers(0, n - 1) for n in w_shape)))] = np.nan
    out = [(n + 2 * p - k) // s + 1 for n, k, s, p in zip(x_shape[2:], w_shape[2:], stride, padding)]
    g = rng.standard_normal((x_shape[0], w_shape[0], *out))
    with np.errstate(invalid="ignore"):
        _, expected_x, _ = conv_by_loops(x, w, g, stride, padding)
        _, grad_x, _ = _run_conv(x, w, g, stride, padding)
    np.testing.assert_array_equal(np.isnan(grad_x), np.isnan(expected_x))
    np.testing.assert_allclose(grad_x, expected_x, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_a_nan_weight_matches_pytorchs_example():
    """PyTorch: ``conv1d(ones(1, 1, 6), [[[nan, 1, 2]]])`` sends ``[nan, nan, nan, nan, 3, 2]`` back to the input.

    The first weight meets inputs 0…3 (windows 0…3); inputs 4 and 5 are met
    only by the weights 1 and 2: 1 + 2 = 3 and 2.
    """
    x = mt.Tensor(np.ones((1, 1, 6)), requires_grad=True)
    with np.errstate(invalid="ignore"):
        mt.conv1d(x, np.array([[[np.nan, 1.0, 2.0]]])).sum().backward()
    np.testing.assert_array_equal(x.grad, [[[np.nan, np.nan, np.nan, np.nan, 3.0, 2.0]]])


@settings(max_examples=12, deadline=None)
@given(conv_configs(batch_from=1))
def test_second_derivatives_through_a_conv_match_finite_differences(config):
    """gradgradcheck of a nonlinear loss of a convolution, for both x and the weight, any geometry."""
    x_shape, w_shape, stride, padding, seed = config
    rng = np.random.default_rng(seed)
    function = mt.conv1d if len(x_shape) == 3 else mt.conv2d

    def loss(x, w):
        return (function(x, w, stride=stride, padding=padding).tanh() ** 2).sum()

    assert mt.check.gradgradcheck(loss, rng.standard_normal(x_shape), rng.standard_normal(w_shape)).ok


# ---------------------------------------------------------------- pooling


@st.composite
def pool_configs(draw, batch_from=0):
    """``[B, C, H, W]`` (B = 0 too), a kernel that fits, any stride; entries distinct multiples of 1/8."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    shape = (draw(st.integers(batch_from, 2)), draw(st.integers(1, 2)), *(draw(st.integers(k, k + 3)) for k in kernel))
    seed = draw(st.integers(0, 2**16))
    # Distinct entries 1/8 apart: no tie, and none within a finite-difference step of one.
    x = np.random.default_rng(seed).permutation(int(np.prod(shape))).reshape(shape) / 8.0 - 2.0
    return x, kernel, stride, seed


def pool_by_loops(x, g, kernel, stride, kind):
    """``(y, x̄)`` of ``⟨g, pool(x)⟩``: the mean of each window, or its first maximum row by row."""
    out = [(n - k) // s + 1 for n, k, s in zip(x.shape[2:], kernel, stride)]
    y, grad = np.zeros((*x.shape[:2], *out)), np.zeros(x.shape)
    for b, c, i, j in itertools.product(range(x.shape[0]), range(x.shape[1]), *map(range, out)):
        rows, columns = slice(i * stride[0], i * stride[0] + kernel[0]), slice(j * stride[1], j * stride[1] + kernel[1])
        window = x[b, c, rows, columns]
        if kind == "avg":
            y[b, c, i, j] = window.mean()
            grad[b, c, rows, columns] += g[b, c, i, j] / window.size
        else:
            p, q = divmod(int(np.argmax(window)), kernel[1])
            y[b, c, i, j] = window[p, q]
            grad[b, c, i * stride[0] + p, j * stride[1] + q] += g[b, c, i, j]
    return y, grad


@pytest.mark.parametrize("kind", ["max", "avg"])
@settings(max_examples=50, deadline=None)
@given(config=pool_configs())
def test_pooling_value_and_gradient_are_the_loops(kind, config):
    """Any kernel and stride, batch 0 too: the output and the input gradient are the loops' to 1e-12."""
    x, kernel, stride, seed = config
    function = mt.max_pool2d if kind == "max" else mt.avg_pool2d
    tx = mt.Tensor(x, requires_grad=True)
    y = function(tx, kernel, stride)
    g = np.random.default_rng(seed + 1).standard_normal(y.shape)
    y.backward(g)
    expected_y, expected_grad = pool_by_loops(x, g, kernel, stride, kind)
    assert y.shape == expected_y.shape and tx.grad.shape == x.shape
    np.testing.assert_allclose(y.data, expected_y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tx.grad, expected_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["max", "avg"])
@settings(max_examples=10, deadline=None)
@given(config=pool_configs(batch_from=1))
def test_second_derivatives_through_pooling_match_finite_differences(kind, config):
    """gradgradcheck of a nonlinear loss of a pooling (max: away from ties), any kernel and stride."""
    x, kernel, stride, _ = config
    function = mt.max_pool2d if kind == "max" else mt.avg_pool2d
    # (Cubed after the pooling: the entries stay distinct, 1/32 apart, so no tie moves under a step.)
    assert mt.check.gradgradcheck(lambda t: (function(t, kernel, stride) ** 3).sum(), x / 4.0).ok


# ---------------------------------------------------------------- an empty batch: zero gradients, as PyTorch


EMPTY_BATCH = [
    ("max_pool2d", lambda x: mt.max_pool2d(x, 2), (0, 3, 4, 4), None),
    ("avg_pool2d", lambda x: mt.avg_pool2d(x, 2, 1), (0, 3, 4, 4), None),
    ("conv2d", lambda x, w: mt.conv2d(x, w, stride=2, padding=1), (0, 3, 5, 4), (2, 3, 3, 2)),
    ("conv1d", lambda x, w: mt.conv1d(x, w, stride=3, padding=2), (0, 2, 7), (4, 2, 3)),
]


@pytest.mark.parametrize(("name", "call", "x_shape", "w_shape"), EMPTY_BATCH, ids=[case[0] for case in EMPTY_BATCH])
def test_an_empty_batch_gets_zero_gradients(name, call, x_shape, w_shape):
    """A batch of none: forward and backward run, every gradient is zeros of its input's shape (PyTorch's answer)."""
    x = mt.Tensor(np.zeros(x_shape), requires_grad=True)
    inputs = [x] if w_shape is None else [x, mt.Tensor(np.ones(w_shape), requires_grad=True)]
    y = call(*inputs)
    assert y.shape[0] == 0
    (y * 2.0).sum().backward()
    for tensor in inputs:
        assert tensor.grad.shape == tensor.shape, name
        assert not tensor.grad.any(), name
    # Second order too: the recorded reverse pass runs on no entries.
    again = [mt.Tensor(t.data, requires_grad=True) for t in inputs]
    grads = mt.gradients(call(*again).tanh().sum(), create_graph=True)
    assert grads[again[0]].shape == x_shape
