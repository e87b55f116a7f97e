"""The Transformer pieces against PyTorch computed live (needs torch; `make test-torch`).

The same checks as ``test_golden_layers.py`` with references computed by
torch now, through ``tests/golden/make_golden_layers.py`` (the torch logic is
written once), plus:

* the committed ``layers.npz`` equals what torch computes now;
* random encoder and decoder configurations (sizes, heads, activation, masks);
* the bridges: ``from_torch`` of torch's own layers (post-norm, relu and
  tanh-gelu) computes what torch computes, forward and backward; ``to_torch``
  gives torch modules that compute what microtape computes — also in eval
  mode under ``no_grad``, where PyTorch's fast path would run an *exact*
  GELU if it recognised the activation; and the refusals (pre-norm layers,
  the exact GELU).

Skipped when torch is missing, unless ``MICROTAPE_REQUIRE_TORCH=1``.
"""

import os

import numpy as np
import pytest

if os.environ.get("MICROTAPE_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch")

from golden.layer_cases import CASES, load_cases  # noqa: E402
from golden.make_golden_layers import torch_reference  # noqa: E402
from golden.run_layers import run_case  # noqa: E402

import microtape as mt  # noqa: E402

pytestmark = pytest.mark.torch

STORED = load_cases()
LAYER_KINDS = ("layernorm", "feedforward", "encoder", "decoder")
FIXTURE_TOLERANCE = 1e-12


@pytest.mark.parametrize("config", CASES, ids=lambda c: c["name"])
def test_fixture_is_current(config):
    live = torch_reference(config)["outputs"]
    stored = STORED[config["name"]]["outputs"]
    assert sorted(live) == sorted(stored)
    for key in live:
        np.testing.assert_allclose(stored[key], live[key], rtol=FIXTURE_TOLERANCE, atol=FIXTURE_TOLERANCE, err_msg=key)


@pytest.mark.parametrize("config", CASES, ids=lambda c: c["name"])
def test_matches_live_torch(config):
    reference = torch_reference(config)
    for method in ("tape", "analytic") if config["kind"] in LAYER_KINDS else ("tape",):
        run_case(mt, reference, method)


def _random_config(seed):
    rng = np.random.default_rng(1000 + seed)
    kind = "encoder" if seed % 2 == 0 else "decoder"
    heads = int(rng.choice([1, 2, 3, 4]))
    config = {
        "name": f"random_{kind}_{seed}",
        "kind": kind,
        "seed": 2000 + seed,
        "B": int(rng.integers(1, 4)),
        "T": int(rng.integers(1, 8)),
        "E": heads * int(rng.integers(1, 5)),
        "H": heads,
        "ff": int(rng.integers(1, 24)),
        "activation": str(rng.choice(["relu", "gelu"])),
    }
    if kind == "encoder":
        config["mask"] = rng.choice([None, "causal", "random"])
    else:
        config.update(S=int(rng.integers(1, 8)), tgt_mask=rng.choice([None, "causal"]))
        config["memory_mask"] = bool(rng.integers(2))
    return config


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("seed", range(8))
def test_random_layers_match_live_torch(seed, method):
    """Random sizes (T and S down to 1, one head to four), activations and masks."""
    run_case(mt, torch_reference(_random_config(seed)), method)


# ---------------------------------------------------------------- the bridges


def _torch_layer(kind, activation, **options):
    torch.manual_seed(0)
    act = torch.nn.functional.relu if activation == "relu" else torch.nn.GELU(approximate="tanh")
    cls = torch.nn.TransformerEncoderLayer if kind == "encoder" else torch.nn.TransformerDecoderLayer
    return cls(12, 3, 20, dropout=0.0, activation=act, batch_first=True, dtype=torch.float64, **options)


def _run_torch(module, kind, x, memory, grad):
    xt = torch.tensor(x, requires_grad=True)
    if kind == "encoder":
        out = module(xt)
    else:
        memory_t = torch.tensor(memory, requires_grad=True)
        out = module(xt, memory_t)
    out.backward(torch.tensor(grad))
    return out.detach().numpy(), xt.grad.numpy(), {n: p.grad.numpy() for n, p in module.named_parameters()}


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_from_torch_computes_what_torch_computes(kind, activation):
    module = _torch_layer(kind, activation)
    cls = mt.nn.TransformerEncoderLayer if kind == "encoder" else mt.nn.TransformerDecoderLayer
    layer = cls.from_torch(module)
    assert layer.activation == activation
    rng = np.random.default_rng(3)
    x, memory, grad = rng.standard_normal((2, 5, 12)), rng.standard_normal((2, 4, 12)), rng.standard_normal((2, 5, 12))
    out, dx, torch_grads = _run_torch(module, kind, x, memory, grad)
    y = layer(x) if kind == "encoder" else layer(x, memory)
    np.testing.assert_allclose(y.data, out, atol=1e-12)
    np.testing.assert_allclose(layer.backward(grad), dx, atol=1e-12)
    np.testing.assert_allclose(layer.linear1.weight.grad, torch_grads["linear1.weight"], atol=1e-12)
    np.testing.assert_allclose(layer.norm1.weight.grad, torch_grads["norm1.weight"], atol=1e-12)
    in_proj = torch_grads["self_attn.in_proj_weight"]
    np.testing.assert_allclose(layer.self_attn.k_proj.weight.grad, in_proj[12:24], atol=1e-12)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_to_torch_computes_what_microtape_computes(kind, activation):
    """Also in eval mode under no_grad: PyTorch's fast path must not swap in its exact GELU."""
    cls = mt.nn.TransformerEncoderLayer if kind == "encoder" else mt.nn.TransformerDecoderLayer
    layer = cls(12, 3, 20, activation=activation, seed=4).eval()
    module = layer.to_torch()
    assert not module.training and not module.norm_first and module.self_attn.batch_first
    rng = np.random.default_rng(5)
    x, memory = rng.standard_normal((2, 5, 12)), rng.standard_normal((2, 4, 12))
    ours = layer(x) if kind == "encoder" else layer(x, memory)
    with torch.no_grad():
        theirs = module(torch.tensor(x)) if kind == "encoder" else module(torch.tensor(x), torch.tensor(memory))
    np.testing.assert_allclose(theirs.numpy(), ours.data, atol=1e-12)
    back = cls.from_torch(module)
    for (name, a), (_, b) in zip(layer.named_parameters(), back.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.data, b.data, err_msg=name)


def test_from_torch_refuses_what_does_not_map():
    with pytest.raises(ValueError, match="post-norm"):
        mt.nn.TransformerEncoderLayer.from_torch(_torch_layer("encoder", "relu", norm_first=True))
    exact = torch.nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match=r"exact \(erf\) GELU.*approximate=\"tanh\""):
        mt.nn.TransformerEncoderLayer.from_torch(exact)
    with pytest.raises(TypeError, match="TransformerDecoderLayer"):
        mt.nn.TransformerDecoderLayer.from_torch(exact)


def test_small_bridges_round_trip():
    """LayerNorm, Embedding and FeedForward to torch and back: same weights, same outputs."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 8))
    norm = mt.nn.LayerNorm(8, eps=1e-3)
    norm.weight.data[...] = rng.standard_normal(8)
    torch_norm = norm.to_torch()
    np.testing.assert_allclose(torch_norm(torch.tensor(x)).detach().numpy(), norm(x).data, atol=1e-12)
    assert mt.nn.LayerNorm.from_torch(torch_norm).eps == 1e-3

    embedding = mt.nn.Embedding(7, 4, seed=1)
    ids = np.array([[1, 6, 1]])
    torch_embedding = embedding.to_torch()
    np.testing.assert_array_equal(torch_embedding(torch.tensor(ids)).detach().numpy(), embedding(ids).data)
    np.testing.assert_array_equal(mt.nn.Embedding.from_torch(torch_embedding).weight.data, embedding.weight.data)

    ff = mt.nn.FeedForward(8, 12, "gelu", seed=2).eval()
    torch_ff = ff.to_torch()
    np.testing.assert_allclose(torch_ff(torch.tensor(x)).detach().numpy(), ff(x).data, atol=1e-12)
    again = mt.nn.FeedForward.from_torch(torch_ff)
    assert again.activation == "gelu" and not again.training
    np.testing.assert_array_equal(again.linear2.weight.data, ff.linear2.weight.data)
