"""The PyTorch bridge of MultiHeadAttention: weights across, both ways (torch imported only here).

This module lets a cross-check build a microtape layer from a
``torch.nn.MultiheadAttention`` and back::

    attn = mt.nn.MultiHeadAttention.from_torch(torch_module)   # -> attention_from_torch
    torch_module = attn.to_torch()                              # -> attention_to_torch

PyTorch keeps the three input projections in one ``in_proj_weight``
``[3E, E]`` (rows: query, key, value); microtape keeps four ``Linear(E, E)``.
Both use ``y = x Wᵀ + b``, so the rows copy straight across.
"""

from typing import Any

import numpy as np

from ..checks import check_finite

__all__ = ["attention_from_torch", "attention_to_torch", "torch_array"]


def torch_array(tensor: Any, what: str) -> Any:
    """A torch parameter as a float64 numpy array; refuses NaN/inf weights."""
    array = tensor.detach().cpu().double().numpy()
    check_finite(array, what, "from_torch")
    return array


def attention_from_torch(cls: Any, module: Any, causal: bool = False, dtype: Any = np.float64) -> Any:
    """A ``cls`` (MultiHeadAttention) with the weights of a ``torch.nn.MultiheadAttention``."""
    import torch

    if not isinstance(module, torch.nn.MultiheadAttention):
        raise TypeError(
            f"from_torch(module): expected a torch.nn.MultiheadAttention, got {type(module).__name__}"
            + (" (use mt.nn.Linear weights directly for a Linear)" if isinstance(module, torch.nn.Linear) else "")
        )
    embed, heads = module.embed_dim, module.num_heads
    if getattr(module, "in_proj_weight", None) is None:
        raise ValueError("from_torch: separate q/k/v projection weights (kdim/vdim != embed) are not supported")
    if module.in_proj_bias is None or module.out_proj.bias is None:
        raise ValueError("from_torch: the module must have biases (bias=True)")
    if getattr(module, "bias_k", None) is not None or getattr(module, "add_zero_attn", False):
        raise ValueError("from_torch: add_bias_kv and add_zero_attn are not supported")
    if not module.batch_first:
        raise ValueError(
            "from_torch: the module has batch_first=False (inputs [T, B, E]); microtape's layer takes [B, T, E]: "
            "build it with batch_first=True (the weights are the same)"
        )
    weight = torch_array(module.in_proj_weight, "in_proj_weight")
    bias = torch_array(module.in_proj_bias, "in_proj_bias")
    out_weight = torch_array(module.out_proj.weight, "out_proj.weight")
    out_bias = torch_array(module.out_proj.bias, "out_proj.bias")
    layer = cls(embed, heads, dropout=float(module.dropout), causal=causal, dtype=dtype)
    for i, projection in enumerate(("q_proj", "k_proj", "v_proj")):
        getattr(layer, projection).weight.data[...] = weight[i * embed : (i + 1) * embed]
        getattr(layer, projection).bias.data[...] = bias[i * embed : (i + 1) * embed]
    layer.out_proj.weight.data[...] = out_weight
    layer.out_proj.bias.data[...] = out_bias
    layer.train(bool(module.training))
    return layer


def attention_to_torch(layer: Any) -> Any:
    """An equivalent ``torch.nn.MultiheadAttention(batch_first=True)`` (float64 or float32)."""
    import torch

    torch_dtype = torch.float64 if layer.dtype == np.float64 else torch.float32
    module = torch.nn.MultiheadAttention(
        layer.embed, layer.num_heads, dropout=layer.dropout, bias=True, batch_first=True, dtype=torch_dtype
    )
    in_weight = np.concatenate([layer.q_proj.weight.data, layer.k_proj.weight.data, layer.v_proj.weight.data])
    in_bias = np.concatenate([layer.q_proj.bias.data, layer.k_proj.bias.data, layer.v_proj.bias.data])
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.from_numpy(in_weight))
        module.in_proj_bias.copy_(torch.from_numpy(in_bias))
        module.out_proj.weight.copy_(torch.from_numpy(layer.out_proj.weight.data))
        module.out_proj.bias.copy_(torch.from_numpy(layer.out_proj.bias.data))
    module.train(layer.training)
    return module
