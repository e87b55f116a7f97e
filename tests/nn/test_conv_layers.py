"""Conv1d, Conv2d, BatchNorm, RNNCell and GRUCell: PyTorch's answers, names and layout; bad input refused.

The PyTorch cross-check reads ``tests/golden/convolution.npz`` (made by
``tests/golden/make_golden_conv.py``, torch 2.13.0, float64) and, with
``-m torch``, computes the same answers live: each layer's output and the
gradients of its input and every parameter; batch norm over two train steps
(its running statistics, PyTorch's unbiased running variance) and then in
eval mode; the cells unrolled over T steps (backpropagation through time,
the initial hidden state's gradient included).
"""

import numpy as np
import pytest
from golden.conv_cases import LAYER_CASES, load
from golden.conv_check import assert_matches_fixture, assert_matches_torch_live, live_torch

import microtape as mt

STORED = load()
NAMES = [config["name"] for config in LAYER_CASES]
RNG = np.random.default_rng(7)


def test_fixture_holds_every_layer_case():
    assert [STORED[name]["config"] for name in NAMES] == LAYER_CASES


@pytest.mark.parametrize("name", NAMES)
def test_matches_torch_fixture(name):
    assert_matches_fixture(mt, STORED[name], name)


@pytest.mark.torch
@pytest.mark.parametrize("name", NAMES)
def test_matches_torch_live(name):
    assert_matches_torch_live(mt, STORED[name], name)


@pytest.mark.torch
def test_parameter_names_and_shapes_match_torch():
    torch = live_torch()
    pairs = [
        (mt.nn.Conv1d(3, 4, 5, seed=0), torch.nn.Conv1d(3, 4, 5)),
        (mt.nn.Conv2d(2, 3, (3, 2), seed=0), torch.nn.Conv2d(2, 3, (3, 2))),
        (mt.nn.BatchNorm(3), torch.nn.BatchNorm2d(3)),
        (mt.nn.RNNCell(3, 4, seed=0), torch.nn.RNNCell(3, 4)),
        (mt.nn.GRUCell(3, 4, seed=0), torch.nn.GRUCell(3, 4)),
    ]
    for ours, theirs in pairs:
        expected = [(name, tuple(p.shape)) for name, p in theirs.named_parameters()]
        assert [(name, p.shape) for name, p in ours.named_parameters()] == expected, type(ours).__name__
    norm, torch_norm = pairs[2]
    for buffer in ("running_mean", "running_var"):
        np.testing.assert_array_equal(getattr(norm, buffer), getattr(torch_norm, buffer).numpy())


# ---------------------------------------------------------------- behaviour


def test_conv_layers_have_pytorch_layout_and_initialisation_bound():
    conv = mt.nn.Conv2d(2, 5, (3, 2), stride=(2, 1), padding=1, seed=3)
    assert conv.weight.shape == (5, 2, 3, 2) and conv.bias.shape == (5,)
    bound = 1 / np.sqrt(2 * 3 * 2)
    assert np.abs(conv.weight.data).max() <= bound and np.abs(conv.bias.data).max() <= bound
    assert [name for name, _ in conv.named_parameters()] == ["weight", "bias"]
    y = conv(RNG.standard_normal((2, 2, 7, 5)))
    assert y.shape == (2, 5, 4, 6)
    np.testing.assert_array_equal(mt.nn.Conv2d(2, 5, 3, seed=3).weight.data, mt.nn.Conv2d(2, 5, 3, seed=3).weight.data)
    assert mt.nn.Conv1d(2, 3, 3, bias=False).bias is None


def test_batchnorm_eval_uses_running_statistics_and_leaves_them_alone():
    norm = mt.nn.BatchNorm(2, momentum=0.5)
    x = 3 + 2 * RNG.standard_normal((5, 2, 3))
    norm(x)
    mean, var = norm.running_mean.copy(), norm.running_var.copy()
    n = 5 * 3
    np.testing.assert_allclose(mean, 0.5 * x.mean(axis=(0, 2)), rtol=1e-12)
    np.testing.assert_allclose(var, 0.5 + 0.5 * x.var(axis=(0, 2)) * n / (n - 1), rtol=1e-12)
    norm.eval()
    z = RNG.standard_normal((1, 2, 3))  # a batch of one is fine in eval mode
    y = norm(z)
    np.testing.assert_allclose(y.data, (z - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5), rtol=1e-12)
    np.testing.assert_array_equal(norm.running_mean, mean)
    assert norm.num_batches_tracked == 1


def test_batchnorm_train_tape_has_the_derivation_steps():
    norm = mt.nn.BatchNorm(3)
    x = mt.Tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    with mt.Tape() as tape:
        y = norm(x)
    names = [equation.name for equation in tape]
    for step in ("mean", "centered", "var", "std", "xhat"):
        assert any(name is not None and name.endswith(step) for name in names), (step, names)
    assert mt.check.gradcheck(lambda t: (norm(t) * np.arange(12.0).reshape(4, 3)).sum(), x).ok
    assert y.shape == (4, 3)


def test_rnn_unrolled_gradients_match_finite_differences():
    cell = mt.nn.RNNCell(2, 3, seed=1)
    gru = mt.nn.GRUCell(2, 3, seed=2)
    xs = RNG.standard_normal((3, 2, 2))

    def unrolled(layer):
        def loss(x0):
            h = layer(x0)
            for x in xs[1:]:
                h = layer(x, h)
            return (h * h).sum()

        return loss

    for layer in (cell, gru):
        assert mt.check.gradcheck(unrolled(layer), mt.Tensor(xs[0], requires_grad=True)).ok


def test_a_small_cnn_draws_with_readable_labels():
    conv = mt.nn.Conv2d(1, 2, 3, padding=1, seed=0)
    norm = mt.nn.BatchNorm(2)
    with mt.Tape() as tape:
        h = mt.max_pool2d(norm(conv(RNG.standard_normal((2, 1, 4, 4)))).relu(), 2)
        loss = h.sum()
    source = mt.viz.graph(tape).source
    assert "conv 2-D pad 1" in source and "max_pool2d 2×2" in source
    assert "weight" in source and "xhat" in source
    loss.backward()
    assert conv.weight.grad.shape == (2, 1, 3, 3)


BAD_LAYERS = [
    (lambda: mt.nn.Conv2d(0, 2, 3), ValueError, r"Conv2d\(in_channels\)"),
    (lambda: mt.nn.Conv2d(1, 2, (3, 3, 3)), ValueError, r"Conv2d\(kernel_size\)=\(3, 3, 3\): expected"),
    (lambda: mt.nn.Conv1d(1, 2, 3, stride=0), ValueError, r"Conv1d\(stride\)=0"),
    (lambda: mt.nn.Conv1d(1, 2, 3, padding=-1), ValueError, r"Conv1d\(padding\)=-1: .*non-negative"),
    (lambda: mt.nn.Conv1d(1, 2, 3, bias="yes"), TypeError, r"Conv1d\(bias='yes'\)"),
    (lambda: mt.nn.BatchNorm(3, eps=0), ValueError, r"BatchNorm\(eps=0\)"),
    (lambda: mt.nn.BatchNorm(3, momentum=2), ValueError, r"BatchNorm\(momentum=2\)"),
    (lambda: mt.nn.RNNCell(3, 4, nonlinearity="sigmoid"), ValueError, r"RNNCell\(nonlinearity='sigmoid'\)"),
    (lambda: mt.nn.GRUCell(3, -1), ValueError, r"GRUCell\(hidden_size\)"),
]


@pytest.mark.parametrize("make, error, message", BAD_LAYERS)
def test_bad_construction_is_refused_by_name(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_bad_forward_input_is_refused_and_nothing_changes():
    conv, norm, gru = mt.nn.Conv2d(2, 3, 3, seed=0), mt.nn.BatchNorm(3), mt.nn.GRUCell(2, 3, seed=0)
    before = (conv.weight.data.copy(), norm.running_mean.copy(), norm.running_var.copy())
    with mt.Tape() as tape:
        with pytest.raises(ValueError, match=r"Conv2d.forward: x has shape \(1, 3, 5, 5\); expected \[B, C_in, H, W\]"):
            conv(np.zeros((1, 3, 5, 5)))
        with pytest.raises(ValueError, match=r"kernel \(3\) is larger than the padded input along H"):
            conv(np.zeros((1, 2, 2, 5)))
        with pytest.raises(ValueError, match=r"BatchNorm.forward: x has shape \(4, 2\); expected \[B, 3, ...\]"):
            norm(np.zeros((4, 2)))
        with pytest.raises(ValueError, match=r"one value per channel"):
            norm(np.zeros((1, 3)))
        with pytest.raises(ValueError, match=r"GRUCell.forward: h has shape \(2, 3\); expected \[1, 3\]"):
            gru(np.zeros((1, 2)), np.zeros((2, 3)))
        with pytest.raises(TypeError, match=r"x must hold real numbers"):
            gru(np.array([["a", "b"]]))
    assert len(tape) == 0
    np.testing.assert_array_equal(conv.weight.data, before[0])
    np.testing.assert_array_equal(norm.running_mean, before[1])
    np.testing.assert_array_equal(norm.running_var, before[2])
    assert norm.num_batches_tracked == 0
