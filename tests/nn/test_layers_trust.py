"""Trust, round 3 (issue 21), above the engine: layers, losses, optimizers, training.

Masked arrays and ragged ids refused at the entry points; optimizers that
refuse complex or non-real gradients and non-finite hyper-parameters without
moving anything; PyTorch's rule for assigning over a parameter; a layer's
backward that writes all its gradients or none; decoder mask errors that name
the mask; `microtape train` ranges checked before any work and a diverging run
stopped with the step it diverged at.
"""

import math

import numpy as np
import pytest

import microtape as mt
from microtape.cli.main import main as cli_main
from microtape.train import loop
from microtape.train.loop import ConfigError, Diverged, TrainConfig, train

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


# ---------------------------------------------------------------- optimizers


def _parameter():
    return mt.Tensor(np.array([1.0, 2.0]), requires_grad=True, name="w")


@pytest.mark.parametrize("optimizer", [mt.optim.SGD, mt.optim.Adam])
@pytest.mark.parametrize(
    "grad, words",
    [
        (np.array([1 + 1j, 2.0]), r"w\.grad is dtype complex128 \(its imaginary part would be lost\)"),
        ("zero", r"w\.grad is a str \('zero'\)"),
        (np.array(["a", "b"]), r"w\.grad is dtype <U1"),
        ([0.1, 0.2], r"w\.grad is a list"),
    ],
    ids=["complex", "str", "str-array", "list"],
)
def test_a_step_refuses_a_gradient_that_is_not_a_real_array_and_moves_nothing(optimizer, grad, words):
    w, v = _parameter(), mt.Tensor(np.array([3.0]), requires_grad=True, name="v")
    opt = optimizer([v, w], lr=0.1)
    v.grad, w.grad = np.array([1.0]), grad
    with pytest.raises(TypeError, match=words + r".*no parameter was changed"):
        opt.step()
    assert w.data.tolist() == [1.0, 2.0] and v.data.tolist() == [3.0]
    assert opt.state == [{}, {}]


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: mt.optim.Adam(p, weight_decay=math.inf), r"Adam\(weight_decay=inf\): expected a finite number >= 0"),
        (lambda p: mt.optim.Adam(p, weight_decay=math.nan), r"Adam\(weight_decay=nan\)"),
        (lambda p: mt.optim.Adam(p, lr=math.inf), r"Adam\(lr\): expected a finite positive number, got inf"),
        (lambda p: mt.optim.Adam(p, eps=math.inf), r"Adam\(eps\)"),
        (lambda p: mt.optim.SGD(p, lr=10**400), r"SGD\(lr\): expected a finite positive number, got 1000.*too large"),
        (lambda p: mt.optim.Adam(p, lr=10**400), r"Adam\(lr\): .*too large for a float"),
        (lambda p: mt.optim.SGD(p, lr=0.1, momentum=math.nan), r"SGD\(momentum\)"),
    ],
    ids=["decay-inf", "decay-nan", "lr-inf", "eps-inf", "sgd-lr-huge-int", "adam-lr-huge-int", "momentum-nan"],
)
def test_hyper_parameters_must_be_finite(make, words):
    with pytest.raises(ValueError, match=words):
        make([_parameter()])


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


# ---------------------------------------------------------------- microtape train


TINY = {"steps": 6, "length": 4, "embed": 8, "heads": 2, "ff_dim": 8, "batch": 4, "held_out": 20, "eval_every": 3}


@pytest.mark.parametrize(
    "field, value",
    [("length", 100_000_000), ("steps", 10**9), ("embed", 10**6), ("batch", 10**7), ("lr", 1e30), ("lr", math.nan)],
)
def test_train_config_ranges_are_checked_before_any_work(field, value):
    with pytest.raises(ConfigError, match=rf"TrainConfig\({field}=") as caught:
        TrainConfig(**{**TINY, field: value})
    assert caught.value.field == field


@pytest.mark.parametrize(
    "args, words",
    [
        (["--lr", "1e30"], "--lr 1e+30: expected a learning rate with 0 < lr <= 1"),
        (["--length", "100000000"], "--length 100000000: expected a positive integer, at most 256"),
        (["--held-out", "1000000"], "--held-out 1000000: expected a positive integer, at most 100000"),
    ],
)
def test_train_command_refuses_out_of_range_options_at_once(args, words, tmp_path, capsys):
    assert cli_main(["train", "--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "history.json").exists()


def _diverging_loss(monkeypatch, at_step):
    """cross_entropy that turns NaN at one step (the run must stop there, naming it)."""
    calls = []
    real = loop.nn.cross_entropy

    def loss(logits, targets):
        calls.append(1)
        value = real(logits, targets)
        return value * np.nan if len(calls) == at_step else value

    monkeypatch.setattr(loop.nn, "cross_entropy", loss)


def test_a_diverging_run_stops_saying_at_which_step(monkeypatch):
    _diverging_loss(monkeypatch, at_step=4)
    with pytest.raises(Diverged, match=r"training diverged at step 4 of 6: the loss is nan; try a smaller") as caught:
        train(TrainConfig(**TINY))
    assert caught.value.step == 4


def test_the_train_command_reports_divergence_in_one_line(monkeypatch, tmp_path, capsys):
    _diverging_loss(monkeypatch, at_step=2)
    args = [f"--{name.replace('_', '-')}={value}" for name, value in TINY.items()]
    assert cli_main(["train", "--out", str(tmp_path), *args]) == 1
    err = capsys.readouterr().err
    assert "microtape train: training diverged at step 2 of 6: the loss is nan" in err and "Traceback" not in err
    assert not (tmp_path / "history.json").exists()


def test_an_overflow_inside_the_model_is_a_divergence_too(monkeypatch):
    """A layer that refuses an overflow (FloatingPointError) mid-run: reported as the step's divergence."""
    real = loop.TinyTransformer.__call__
    steps = []

    def call(self, ids):
        steps.append(self.training)  # training steps only (the held-out checks run in eval mode)
        if sum(steps) == 3:
            raise FloatingPointError("layer0.self_attn.q_proj overflowed float32")
        return real(self, ids)

    monkeypatch.setattr(loop.TinyTransformer, "__call__", call)
    with pytest.raises(Diverged, match=r"diverged at step 3 of 6: layer0.self_attn.q_proj overflowed"):
        train(TrainConfig(**TINY))
