"""Convolution and pooling: ``mt.conv1d``, ``mt.conv2d``, ``mt.max_pool2d``, ``mt.avg_pool2d``.

The registry-looped tests (tests/ops/test_ops.py, test_ops_forward.py,
transforms/) already hold the ops to finite differences, a loop reference,
their second derivatives and forward mode. Here: what those do not say — the
input gradient *is* the full correlation with the flipped kernel, the tie rule
of max pooling, the bias, the recorded tape and its picture, and every bad
input refused by name with nothing changed. PyTorch's values:
tests/ops/test_conv_golden.py.
"""

import numpy as np
import pytest

import microtape as mt
from microtape.ops import OPS

RNG = np.random.default_rng(36)


def _correlate_full_flipped_1d(g, kernel):
    """numpy's own full convolution: ``np.convolve`` flips the kernel, which is the point."""
    return np.convolve(g, kernel, mode="full")


def test_input_gradient_is_full_correlation_with_the_flipped_kernel_1d():
    """One channel, stride 1, no padding: x̄ = g ⋆_full flip(w), i.e. numpy's full convolution of g with w."""
    x = mt.Tensor(RNG.standard_normal((1, 1, 9)), requires_grad=True)
    w = RNG.standard_normal((1, 1, 4))
    g = RNG.standard_normal((1, 1, 6))
    y = mt.conv1d(x, w)
    y.backward(g)
    np.testing.assert_allclose(x.grad[0, 0], _correlate_full_flipped_1d(g[0, 0], w[0, 0]), rtol=1e-12, atol=1e-12)
    # And the forward is a correlation (no flip): numpy's "valid" correlate.
    np.testing.assert_allclose(y.data[0, 0], np.correlate(x.data[0, 0], w[0, 0], mode="valid"), rtol=1e-12)


def test_input_gradient_with_stride_dilates_the_gradient_first():
    """Stride 2: the gradient gets zeros between its entries, then the same full correlation."""
    x = mt.Tensor(RNG.standard_normal((1, 1, 10)), requires_grad=True)
    w = RNG.standard_normal((1, 1, 3))
    y = mt.conv1d(x, w, stride=2)  # windows at 0, 2, 4, 6: the last input (9) is in none of them
    g = RNG.standard_normal(y.shape)
    y.backward(g)
    dilated = np.zeros(7)
    dilated[::2] = g[0, 0]
    expected = np.zeros(10)
    expected[:9] = _correlate_full_flipped_1d(dilated, w[0, 0])
    np.testing.assert_allclose(x.grad[0, 0], expected, rtol=1e-12, atol=1e-12)
    assert x.grad[0, 0, 9] == 0.0


def test_the_formula_says_correlation_with_the_flipped_kernel():
    assert "flipped" in OPS["conv"].formula_for(0) and "correlation" in OPS["conv"].formula_for(0)
    assert "flip" in OPS["conv"].latex
    for function in (mt.conv1d, mt.conv2d):
        assert "with the flipped kernel" in " ".join(function.__doc__.split())


def test_bias_is_added_per_output_channel_and_gets_the_summed_gradient():
    x = mt.Tensor(RNG.standard_normal((2, 3, 5, 4)), requires_grad=True)
    w = mt.Tensor(RNG.standard_normal((4, 3, 2, 2)), requires_grad=True)
    b = mt.Tensor(RNG.standard_normal(4), requires_grad=True)
    y = mt.conv2d(x, w, b, stride=(1, 2), padding=1)
    no_bias = mt.conv2d(x.data, w.data, stride=(1, 2), padding=1)
    np.testing.assert_allclose(y.data, no_bias.data + b.data[None, :, None, None], rtol=1e-12)
    g = RNG.standard_normal(y.shape)
    y.backward(g)
    np.testing.assert_allclose(b.grad, g.sum(axis=(0, 2, 3)), rtol=1e-12)


def test_output_sizes_follow_pytorch():
    x = np.zeros((1, 2, 7, 8))
    w = np.zeros((3, 2, 3, 2))
    assert mt.conv2d(x, w).shape == (1, 3, 5, 7)
    assert mt.conv2d(x, w, stride=2, padding=1).shape == (1, 3, 4, 5)
    assert mt.conv2d(x, w, stride=(3, 1), padding=(0, 2)).shape == (1, 3, 2, 11)
    assert mt.conv1d(np.zeros((2, 1, 5)), np.zeros((4, 1, 5))).shape == (2, 4, 1)
    assert mt.max_pool2d(x, 2).shape == (1, 2, 3, 4)  # stride defaults to the kernel
    assert mt.avg_pool2d(x, (3, 2), stride=1).shape == (1, 2, 5, 7)


def test_max_pool_tie_goes_to_the_first_maximum_row_by_row():
    """A window of equal entries: the top-left one takes the whole gradient (PyTorch's rule)."""
    x = mt.Tensor(np.array([[[[1.0, 1.0, 0.0, 2.0], [1.0, 1.0, 2.0, 2.0]]]]), requires_grad=True)
    y = mt.max_pool2d(x, 2)
    np.testing.assert_array_equal(y.data, [[[[1.0, 2.0]]]])
    y.backward(np.array([[[[10.0, 20.0]]]]))
    np.testing.assert_array_equal(x.grad, [[[[10.0, 0.0, 0.0, 20.0], [0.0, 0.0, 0.0, 0.0]]]])


def test_overlapping_pool_windows_add_their_gradients():
    x = mt.Tensor(np.array([[[[0.0, 5.0, 1.0]]]]), requires_grad=True)
    y = mt.max_pool2d(x, (1, 2), stride=1)  # both windows pick the 5
    y.backward(np.array([[[[1.0, 2.0]]]]))
    np.testing.assert_array_equal(x.grad, [[[[0.0, 3.0, 0.0]]]])
    z = mt.Tensor(np.zeros((1, 1, 1, 3)), requires_grad=True)
    mt.avg_pool2d(z, (1, 2), stride=1).backward(np.array([[[[1.0, 2.0]]]]))
    np.testing.assert_allclose(z.grad, [[[[0.5, 1.5, 1.0]]]])


def test_a_small_conv_net_is_recorded_and_drawn_with_readable_labels():
    x = mt.Tensor(RNG.standard_normal((1, 1, 6, 6)), name="image")
    w = mt.Tensor(RNG.standard_normal((2, 1, 3, 3)), requires_grad=True, name="kernel")
    with mt.Tape() as tape:
        h = mt.conv2d(x, w, stride=1, padding=1, name="features").relu()
        pooled = mt.max_pool2d(h, 2, name="pooled")
        loss = mt.avg_pool2d(pooled, 3).sum()
    names = [equation.op.name for equation in tape]
    assert names[:3] == ["conv", "relu", "max_pool2d"] and "avg_pool2d" in names
    assert OPS["conv"].describe({"stride": (1, 1), "padding": (1, 1)}) == "conv 2-D pad 1"
    assert OPS["conv"].describe({"stride": (2, 1), "padding": (0, 0)}) == "conv 2-D stride 2×1"
    assert OPS["max_pool2d"].describe({"kernel": (2, 2), "stride": (2, 2)}) == "max_pool2d 2×2"
    source = mt.viz.graph(tape).source
    assert "conv 2-D pad 1" in source and "max_pool2d 2×2" in source and "avg_pool2d 3×3" in source
    assert "features" in source and "kernel" in source
    tape.backward(loss)
    assert w.grad.shape == (2, 1, 3, 3) and np.any(w.grad != 0)


def test_second_derivative_through_a_conv_net_matches_finite_differences():
    x = RNG.standard_normal((1, 2, 5, 5))
    w = RNG.standard_normal((2, 2, 3, 3))

    def loss(weight):
        h = mt.conv2d(x, weight, stride=2, padding=1)
        return (mt.avg_pool2d(h.tanh(), 3, stride=1) ** 2).sum() + mt.max_pool2d(h * h, 1).sum()

    assert mt.check.gradgradcheck(loss, mt.Tensor(w, requires_grad=True)).ok


# ---------------------------------------------------------------- bad input: refused by name, nothing changed


def _good():
    return (
        mt.Tensor(RNG.standard_normal((2, 3, 6, 6)), requires_grad=True),
        mt.Tensor(RNG.standard_normal((4, 3, 3, 3)), requires_grad=True),
    )


BAD_CONV = [
    (lambda x, w: mt.conv2d(x.data[0], w), ValueError, r"conv2d\(x\): expected \[B, C_in, H, W\], got shape"),
    (lambda x, w: mt.conv2d(x, w.data[0]), ValueError, r"conv2d\(weight\): expected \[C_out, C_in, kH, kW\]"),
    (lambda x, w: mt.conv2d(x, w.data[:, :2]), ValueError, r"x has 3 input channels .* weight expects 2"),
    (lambda x, w: mt.conv2d(x, w, stride=0), ValueError, r"conv2d\(stride=0\): must be positive"),
    (lambda x, w: mt.conv2d(x, w, stride=(1, -2)), ValueError, r"conv2d\(stride=\(1, -2\)\): must be positive"),
    (lambda x, w: mt.conv2d(x, w, stride=(1, 2, 3)), TypeError, r"conv2d\(stride=.*an int or a pair of ints"),
    (lambda x, w: mt.conv2d(x, w, stride=1.5), TypeError, r"conv2d\(stride=1.5\)"),
    (lambda x, w: mt.conv2d(x, w, padding=-1), ValueError, r"conv2d\(padding=-1\): must be non-negative"),
    (lambda x, w: mt.conv2d(x, np.zeros((4, 3, 9, 3))), ValueError, r"kernel \(9\) is larger than .* along H \(6\)"),
    (lambda x, w: mt.conv2d(x, np.zeros((4, 3, 3, 9)), padding=1), ValueError, r"along W \(6 \+ 2·1 = 8\)"),
    (lambda x, w: mt.conv2d(x, w, np.zeros(3)), ValueError, r"conv2d\(bias\): expected shape \(4,\)"),
    (lambda x, w: mt.conv2d(x, "w"), TypeError, r"conv2d\(weight=...\): expected real numbers"),
    (lambda x, w: mt.conv2d(mt.Scalar(1.0), w), TypeError, r"conv2d\(x=...\): expected a Tensor or a numpy array"),
    (lambda x, w: mt.conv1d(x, w), ValueError, r"conv1d\(x\): expected \[B, C_in, L\]"),
    (lambda x, w: mt.conv1d(x.data[:, :, 0], w.data[:, :, 0], stride=(1, 1)), TypeError, r"conv1d\(stride=.*an int"),
    (lambda x, w: mt.max_pool2d(x, 0), ValueError, r"max_pool2d\(kernel=0\): must be positive"),
    (lambda x, w: mt.max_pool2d(x, 7), ValueError, r"max_pool2d: the kernel \(7\) is larger than .* along H"),
    (lambda x, w: mt.avg_pool2d(x, 2, stride=0), ValueError, r"avg_pool2d\(stride=0\): must be positive"),
    (lambda x, w: mt.avg_pool2d(x.data[0], 2), ValueError, r"avg_pool2d\(x\): expected \[B, C, H, W\]"),
]  # fmt: skip


@pytest.mark.parametrize("call, error, message", BAD_CONV)
def test_bad_input_is_refused_by_name_and_nothing_changes(call, error, message):
    x, w = _good()
    before = (x.data.copy(), w.data.copy())
    with mt.Tape() as tape, pytest.raises(error, match=message):
        call(x, w)
    assert len(tape) == 0
    np.testing.assert_array_equal(x.data, before[0])
    np.testing.assert_array_equal(w.data, before[1])
    assert x.grad is None and w.grad is None


def test_absurd_window_memory_is_refused_up_front_with_the_estimate():
    # A broadcast view: 16 × 64 × 512 × 512 entries cost nothing until the windows are laid out as rows.
    x = mt.Tensor(np.broadcast_to(np.zeros(1), (16, 64, 512, 512)))
    with pytest.raises(MemoryError, match=r"conv2d: laying out the windows of x .* about 18.0 GiB \(limit 4 GiB\)"):
        mt.conv2d(x, np.zeros((1, 64, 3, 3)), padding=1)
    with pytest.raises(MemoryError, match=r"max_pool2d: .* GiB"):
        mt.max_pool2d(x, 3, stride=1)


def test_the_names_are_public():
    for name in ("conv1d", "conv2d", "max_pool2d", "avg_pool2d"):
        assert name in mt.__all__ and callable(getattr(mt, name))
