"""MultiHeadAttention.from_torch / .to_torch against a live PyTorch module (needs torch).

Skipped when torch is not installed, unless ``MICROTAPE_REQUIRE_TORCH=1``
(``make test-torch``), in which case a missing torch is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("MICROTAPE_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch")

import microtape as mt  # noqa: E402

pytestmark = pytest.mark.torch


def _torch_forward_backward(module, x, mask, grad_output):
    """Self-attention through torch: output, weights per head, dx and parameter grads."""
    xt = torch.tensor(x, requires_grad=True)
    mask_t = None if mask is None else torch.tensor(mask)
    out, weights = module(xt, xt, xt, attn_mask=mask_t, need_weights=True, average_attn_weights=False)
    out.backward(torch.tensor(grad_output))
    return out.detach().numpy(), weights.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("causal", [False, True])
def test_from_torch_copies_weights_and_matches_torch(causal):
    """A layer built from a torch module computes what the module computes, forward and backward."""
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(8, 2, bias=True, batch_first=True, dtype=torch.float64).eval()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 8))
    grad_output = rng.standard_normal((2, 5, 8))
    mask = mt.nn.masks.causal_mask(5) if causal else None

    attn = mt.nn.MultiHeadAttention.from_torch(module, causal=causal)
    assert not attn.training  # the module was in eval mode
    y = attn(x)
    dx = attn.backward(grad_output)

    out, weights, dx_torch = _torch_forward_backward(module, x, mask, grad_output)
    np.testing.assert_allclose(y.data, out, atol=1e-12)
    np.testing.assert_allclose(attn.attention_weights, weights, atol=1e-12)
    np.testing.assert_allclose(dx, dx_torch, atol=1e-12)
    embed = 8
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        torch_grad = module.in_proj_weight.grad.numpy()[i * embed : (i + 1) * embed]
        np.testing.assert_allclose(getattr(attn, name).weight.grad, torch_grad, atol=1e-12)
    np.testing.assert_allclose(attn.out_proj.weight.grad, module.out_proj.weight.grad.numpy(), atol=1e-12)


def test_to_torch_round_trip():
    """to_torch then from_torch gives back the same weights; the torch module computes our output."""
    attn = mt.nn.MultiHeadAttention(12, 3, seed=7).eval()
    module = attn.to_torch()
    assert module.batch_first and module.embed_dim == 12 and module.num_heads == 3
    back = mt.nn.MultiHeadAttention.from_torch(module)
    for (name, ours), (_, theirs) in zip(attn.named_parameters(), back.named_parameters(), strict=True):
        np.testing.assert_array_equal(ours.data, theirs.data, err_msg=name)

    x = np.random.default_rng(3).standard_normal((1, 4, 12))
    out, _, _ = _torch_forward_backward(module, x, None, np.ones((1, 4, 12)))
    np.testing.assert_allclose(attn(x).data, out, atol=1e-12)


def test_from_torch_refuses_what_it_cannot_copy():
    """Modules with features the contract lacks are refused with a message saying which."""
    module = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True, dtype=torch.float64)
    with pytest.raises(ValueError, match="bias"):
        mt.nn.MultiHeadAttention.from_torch(module)
    module = torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=4, batch_first=True, dtype=torch.float64)
    with pytest.raises(ValueError, match="kdim"):
        mt.nn.MultiHeadAttention.from_torch(module)


def test_bad_torch_inputs_are_refused_by_name():
    """A torch tensor passed as an input, a NaN weight, a Linear or None: clear refusals naming what."""
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0)
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"query must be a microtape Tensor or numpy array, got torch\.Tensor"):
        attn(x)
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        module.in_proj_weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="in_proj_weight"):
        mt.nn.MultiHeadAttention.from_torch(module)
    with pytest.raises(TypeError, match="MultiheadAttention.*Linear"):
        mt.nn.MultiHeadAttention.from_torch(torch.nn.Linear(8, 8))
    with pytest.raises(TypeError, match="NoneType"):
        mt.nn.MultiHeadAttention.from_torch(None)
