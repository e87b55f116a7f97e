"""conv1d, conv2d, max_pool2d and avg_pool2d against PyTorch: committed fixtures, and live (``-m torch``).

``tests/golden/convolution.npz`` was made by ``tests/golden/make_golden_conv.py``
(torch 2.13.0, float64): outputs and every input's gradient, with strides,
paddings, inputs the stride leaves outside every window, overlapping pooling
windows and ties inside max-pooling windows (integer inputs). microtape must
agree to 1e-10. The layers' cases are in tests/nn/test_conv_layers.py.
"""

import numpy as np
import pytest
from golden.conv_cases import CONV_FILE, OP_CASES, load
from golden.conv_check import assert_matches_fixture, assert_matches_torch_live, live_torch

import microtape as mt

STORED = load()
NAMES = [config["name"] for config in OP_CASES]


def test_fixture_is_small_and_holds_every_case():
    assert CONV_FILE.stat().st_size < 25_000
    assert [STORED[name]["config"] for name in NAMES] == OP_CASES


def test_ties_are_really_in_the_tie_case():
    """The tie case is worth having: some max-pooling window holds its maximum twice."""
    stored = STORED["max_pool2d_overlap_ties"]
    from golden.conv_cases import draw_inputs

    x = draw_inputs(stored["config"])["x"]
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 2), axis=(2, 3))[:, :, :, ::2]
    top = windows.max(axis=(-2, -1), keepdims=True)
    assert np.any((windows == top).sum(axis=(-2, -1)) > 1)


@pytest.mark.parametrize("name", NAMES)
def test_matches_torch_fixture(name):
    assert_matches_fixture(mt, STORED[name], name)


@pytest.mark.torch
@pytest.mark.parametrize("name", NAMES)
def test_matches_torch_live(name):
    assert_matches_torch_live(mt, STORED[name], name)


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(6))
def test_random_geometries_match_torch_live(seed):
    """Random sizes, strides and paddings (1-D and 2-D), computed by torch now."""
    torch = live_torch()
    import torch.nn.functional as F

    rng = np.random.default_rng(seed)
    n = 1 + seed % 2
    kernel = tuple(int(k) for k in rng.integers(1, 4, n))
    stride = tuple(int(s) for s in rng.integers(1, 4, n))
    padding = tuple(int(p) for p in rng.integers(0, 3, n))
    spatial = tuple(int(k + rng.integers(0, 5)) for k in kernel)
    x = rng.standard_normal((2, 2, *spatial))
    w = rng.standard_normal((3, 2, *kernel))
    xt, wt = (torch.tensor(a, requires_grad=True) for a in (x, w))
    yt = (F.conv1d if n == 1 else F.conv2d)(xt, wt, stride=stride, padding=padding)
    g = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    xm, wm = (mt.Tensor(a, requires_grad=True) for a in (x, w))
    ym = (mt.conv1d if n == 1 else mt.conv2d)(xm, wm, stride=stride, padding=padding)
    ym.backward(g)
    for got, expected in ((ym.data, yt), (xm.grad, xt.grad), (wm.grad, wt.grad)):
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-10, atol=1e-10)
