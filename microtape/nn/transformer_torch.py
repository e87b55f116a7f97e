"""The PyTorch bridges of the Transformer pieces: weights across, both ways (torch imported only here).

This module lets a cross-check build microtape layers from PyTorch modules
and back::

    layer = mt.nn.TransformerEncoderLayer.from_torch(torch_layer)   # -> encoder_from_torch
    torch_layer = layer.to_torch()                                  # -> encoder_to_torch

Every weight uses ``y = x Wᵀ + b`` on both sides, so they copy straight
across. A conversion is exact or refused with a message naming the field
that does not map: pre-norm layers (``norm_first=True``; microtape's layers
are post-norm), PyTorch's *exact* GELU (``activation="gelu"`` there is the
erf form; microtape's gelu is the tanh approximation — build the torch layer
with ``activation=torch.nn.GELU(approximate="tanh")``), ``batch_first=False``
attention (microtape takes ``[B, T, E]``), attention modules with different
head counts or widths (microtape's layer has one ``num_heads``), and dropout
probabilities that differ from one place to another (microtape's layer has one
``dropout``).
"""

from typing import Any

import numpy as np

from .attention.layer import MultiHeadAttention
from .attention.torch_bridge import torch_array

__all__ = [
    "layernorm_from_torch",
    "layernorm_to_torch",
    "embedding_from_torch",
    "embedding_to_torch",
    "feedforward_from_torch",
    "feedforward_to_torch",
    "encoder_from_torch",
    "encoder_to_torch",
    "decoder_from_torch",
    "decoder_to_torch",
]


def _torch_dtype(dtype: Any) -> Any:
    import torch

    return torch.float64 if np.dtype(dtype) == np.float64 else torch.float32


def _expect(module: Any, kind: Any, where: str) -> None:
    if not isinstance(module, kind):
        raise TypeError(f"{where}.from_torch(module): expected a torch.nn.{kind.__name__}, got {type(module).__name__}")


def _copy_into(tensor: Any, array: Any) -> None:
    tensor.data[...] = array


def _copy_to_torch(torch_parameter: Any, array: Any) -> None:
    import torch

    with torch.no_grad():
        torch_parameter.copy_(torch.from_numpy(np.ascontiguousarray(array)))


def _copy_linear(target: Any, module: Any, what: str) -> None:
    if module.bias is None:
        raise ValueError(f"from_torch: {what} has no bias; microtape's layers always have one (bias=True)")
    _copy_into(target.weight, torch_array(module.weight, f"{what}.weight"))
    _copy_into(target.bias, torch_array(module.bias, f"{what}.bias"))


def _linear_to_torch(target: Any, layer: Any) -> None:
    _copy_to_torch(target.weight, layer.weight.data)
    _copy_to_torch(target.bias, layer.bias.data)


# ---------------------------------------------------------------- LayerNorm and Embedding


def layernorm_from_torch(cls: Any, module: Any, dtype: Any = np.float64) -> Any:
    """A ``cls`` (LayerNorm) with the shape, eps, weight and bias of a ``torch.nn.LayerNorm``."""
    import torch

    _expect(module, torch.nn.LayerNorm, "LayerNorm")
    if module.weight is None or module.bias is None:
        raise ValueError("LayerNorm.from_torch: the module must have a weight and a bias (elementwise_affine=True)")
    layer = cls(tuple(module.normalized_shape), eps=module.eps, dtype=dtype)
    _copy_linear(layer, module, "LayerNorm")
    return layer


def layernorm_to_torch(layer: Any) -> Any:
    """An equivalent ``torch.nn.LayerNorm``."""
    import torch

    module = torch.nn.LayerNorm(layer.normalized_shape, eps=layer.eps, dtype=_torch_dtype(layer.dtype))
    _linear_to_torch(module, layer)
    return module


def embedding_from_torch(cls: Any, module: Any, dtype: Any = np.float64) -> Any:
    """A ``cls`` (Embedding) with the table of a ``torch.nn.Embedding``."""
    import torch

    _expect(module, torch.nn.Embedding, "Embedding")
    if module.padding_idx is not None or module.max_norm is not None:
        raise ValueError("Embedding.from_torch: padding_idx and max_norm are not supported")
    layer = cls(module.num_embeddings, module.embedding_dim, dtype=dtype)
    _copy_into(layer.weight, torch_array(module.weight, "weight"))
    return layer


def embedding_to_torch(layer: Any) -> Any:
    """An equivalent ``torch.nn.Embedding``."""
    import torch

    module = torch.nn.Embedding(layer.num_embeddings, layer.embedding_dim, dtype=_torch_dtype(layer.dtype))
    _copy_to_torch(module.weight, layer.weight.data)
    return module


# ---------------------------------------------------------------- activations


def _activation_name(activation: Any, where: str) -> str:
    """``"relu"`` or ``"gelu"`` (tanh form) for a torch activation; refuse anything else, the exact GELU too."""
    import functools

    import torch
    import torch.nn.functional as F

    if activation is F.relu or isinstance(activation, torch.nn.ReLU):
        return "relu"
    if isinstance(activation, torch.nn.GELU):
        if activation.approximate == "tanh":
            return "gelu"
    elif getattr(activation, "microtape_gelu_tanh", False):
        return "gelu"
    elif isinstance(activation, functools.partial) and activation.func is F.gelu:
        if activation.keywords.get("approximate") == "tanh":
            return "gelu"
    elif activation is not F.gelu:
        raise ValueError(f"{where}: activation {activation!r} is not supported; expected relu or gelu (tanh form)")
    raise ValueError(
        f"{where}: this module uses PyTorch's exact (erf) GELU, but microtape's gelu is the tanh approximation; "
        'build it with activation=torch.nn.GELU(approximate="tanh")'
    )


def _activation_for_torch(name: str) -> Any:
    """The torch activation of a microtape layer: F.relu, or GELU's tanh form as a plain function.

    A plain function, not ``torch.nn.GELU``: PyTorch's inference fast path
    recognises GELU modules and would run its *exact* GELU kernel instead.
    """
    import torch.nn.functional as F

    if name == "relu":
        return F.relu

    def gelu_tanh(x: Any) -> Any:
        """GELU, tanh approximation (microtape's gelu)."""
        return F.gelu(x, approximate="tanh")

    gelu_tanh.microtape_gelu_tanh = True  # type: ignore[attr-defined]  # a mark read by encoder_from_torch
    return gelu_tanh


# ---------------------------------------------------------------- FeedForward


def feedforward_from_torch(cls: Any, module: Any, dtype: Any = np.float64) -> Any:
    """A ``cls`` (FeedForward) from ``Sequential(Linear, ReLU | GELU(tanh), [Dropout], Linear)``."""
    import torch

    _expect(module, torch.nn.Sequential, "FeedForward")
    parts = list(module)
    # The dropout sits where microtape's does (after the activation) or nowhere: elsewhere it means another layer.
    dropouts = parts[2:3] if len(parts) == 4 and isinstance(parts[2], torch.nn.Dropout) else []
    core = [part for part in parts if not any(part is d for d in dropouts)]
    linears = isinstance(core[0], torch.nn.Linear) and isinstance(core[-1], torch.nn.Linear) if core else False
    if len(core) != 3 or not linears or any(isinstance(part, torch.nn.Dropout) for part in core):
        raise ValueError(
            "FeedForward.from_torch: expected Sequential(Linear, ReLU or GELU(approximate='tanh'), [Dropout], Linear)"
        )
    first, activation, second = core
    layer = cls(
        first.in_features,
        first.out_features,
        _activation_name(activation, "FeedForward.from_torch"),
        dropouts[0].p if dropouts else 0.0,
        dtype=dtype,
    )
    _copy_linear(layer.linear1, first, "linear1")
    _copy_linear(layer.linear2, second, "linear2")
    layer.train(bool(module.training))
    return layer


def feedforward_to_torch(layer: Any) -> Any:
    """An equivalent ``Sequential(Linear, ReLU | GELU(approximate="tanh"), Dropout, Linear)``."""
    import torch

    dtype = _torch_dtype(layer.dtype)
    activation = torch.nn.ReLU() if layer.activation == "relu" else torch.nn.GELU(approximate="tanh")
    module = torch.nn.Sequential(
        torch.nn.Linear(layer.embed, layer.ff_dim, dtype=dtype),
        activation,
        torch.nn.Dropout(layer.dropout),
        torch.nn.Linear(layer.ff_dim, layer.embed, dtype=dtype),
    )
    _linear_to_torch(module[0], layer.linear1)
    _linear_to_torch(module[3], layer.linear2)
    module.train(layer.training)
    return module


# ---------------------------------------------------------------- encoder and decoder layers


def _one_value(module: Any, fields: Any, what: str, where: str) -> Any:
    """The value that every ``field`` of ``module`` (dotted paths) shares; refuse naming the first that differs."""
    values = {}
    for field in fields:
        value = module
        for part in field.split("."):
            value = getattr(value, part)
        values[field] = value
    first_field, first = fields[0], values[fields[0]]
    for field in fields[1:]:
        if values[field] != first:
            raise ValueError(
                f"{where}: {field} is {values[field]!r} but {first_field} is {first!r}; microtape's layer has one "
                f"{what} for all of them, so this module cannot be converted exactly"
            )
    return first


def _dropout_fields(module: Any, attentions: Any) -> Any:
    """Every dropout probability of a torch encoder/decoder layer, by its dotted name."""
    residual = sorted(name for name, _ in module.named_children() if name.startswith("dropout") and name != "dropout")
    return ["dropout.p", *[f"{name}.p" for name in residual], *[f"{name}.dropout" for name in attentions]]


def _post_norm_from_torch(cls: Any, module: Any, dtype: Any, attentions: Any, norms: Any) -> Any:
    where = f"{cls.__name__}.from_torch"
    if module.norm_first:
        raise ValueError(f"{where}: the module is pre-norm (norm_first=True); microtape's layers are post-norm")
    eps = {getattr(module, norm).eps for norm in norms}
    if len(eps) != 1:
        raise ValueError(f"{where}: the norms use different eps {sorted(eps)}; microtape's layer has one")
    for name in attentions:
        if not getattr(module, name).batch_first:
            raise ValueError(
                f"{where}: {name}.batch_first is False (inputs [T, B, E]); microtape's layers take [B, T, E]: "
                "build the torch layer with batch_first=True"
            )
    _one_value(module, [f"{name}.num_heads" for name in attentions], "num_heads", where)
    _one_value(module, [f"{name}.embed_dim" for name in attentions], "embed width", where)
    dropout = _one_value(module, _dropout_fields(module, attentions), "dropout probability", where)
    layer = cls(
        module.self_attn.embed_dim,
        module.self_attn.num_heads,
        module.linear1.out_features,
        float(dropout),
        _activation_name(module.activation, where),
        layer_norm_eps=eps.pop(),
        dtype=dtype,
    )
    for name in attentions:
        # MultiHeadAttention.from_torch unpacks torch's in_proj; its weights are copied into ours.
        built = MultiHeadAttention.from_torch(getattr(module, name), dtype=dtype)
        for (_, ours), (_, theirs) in zip(getattr(layer, name).named_parameters(), built.named_parameters()):
            _copy_into(ours, theirs.data)
    _copy_linear(layer.linear1, module.linear1, "linear1")
    _copy_linear(layer.linear2, module.linear2, "linear2")
    for norm in norms:
        _copy_linear(getattr(layer, norm), getattr(module, norm), norm)
    layer.train(bool(module.training))
    return layer


def _post_norm_to_torch(layer: Any, torch_class: Any, attentions: Any, norms: Any) -> Any:

    module = torch_class(
        layer.embed,
        layer.num_heads,
        layer.ff_dim,
        layer.dropout,
        activation=_activation_for_torch(layer.activation),
        layer_norm_eps=layer.eps,
        batch_first=True,
        norm_first=False,
        dtype=_torch_dtype(layer.dtype),
    )
    for name in attentions:
        getattr(module, name).load_state_dict(getattr(layer, name).to_torch().state_dict())
    _linear_to_torch(module.linear1, layer.linear1)
    _linear_to_torch(module.linear2, layer.linear2)
    for norm in norms:
        _linear_to_torch(getattr(module, norm), getattr(layer, norm))
    module.train(layer.training)
    return module


def encoder_from_torch(cls: Any, module: Any, dtype: Any = np.float64) -> Any:
    """A ``cls`` with the weights of a post-norm ``torch.nn.TransformerEncoderLayer``."""
    import torch

    _expect(module, torch.nn.TransformerEncoderLayer, cls.__name__)
    return _post_norm_from_torch(cls, module, dtype, ("self_attn",), ("norm1", "norm2"))


def encoder_to_torch(layer: Any) -> Any:
    """An equivalent ``torch.nn.TransformerEncoderLayer(batch_first=True, norm_first=False)``."""
    import torch

    return _post_norm_to_torch(layer, torch.nn.TransformerEncoderLayer, ("self_attn",), ("norm1", "norm2"))


def decoder_from_torch(cls: Any, module: Any, dtype: Any = np.float64) -> Any:
    """A ``cls`` with the weights of a post-norm ``torch.nn.TransformerDecoderLayer``."""
    import torch

    _expect(module, torch.nn.TransformerDecoderLayer, cls.__name__)
    return _post_norm_from_torch(cls, module, dtype, ("self_attn", "multihead_attn"), ("norm1", "norm2", "norm3"))


def decoder_to_torch(layer: Any) -> Any:
    """An equivalent ``torch.nn.TransformerDecoderLayer(batch_first=True, norm_first=False)``."""
    import torch

    attentions, norms = ("self_attn", "multihead_attn"), ("norm1", "norm2", "norm3")
    return _post_norm_to_torch(layer, torch.nn.TransformerDecoderLayer, attentions, norms)
