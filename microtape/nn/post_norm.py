"""The post-norm residual stack, written once: ``h = norm(h + dropout(sublayer(h)))``, block after block.

This module lets the Transformer encoder and decoder layers run one chain on
Tensors (the taped forward) and on plain float64 arrays (what finite
differences perturb)::

    post_norm_chain(x, blocks, sublayers, params, eps, keeps, record)   # Tensors or Plain arrays
    post_norm_plain(layer, inputs, params, replace)                     # the last forward, on numpy

Post-norm is PyTorch's ``norm_first=False``: each block's sum of its input
and its (dropped-out) sublayer output is normalised.
"""

from dataclasses import dataclass
from typing import Any

from ..engine import module_scope
from .attention.chain import attention_chain
from .checked_layer import named
from .feedforward import feedforward_chain
from .layernorm import layer_norm

__all__ = ["Block", "post_norm_chain", "post_norm_plain"]


@dataclass(frozen=True)
class Block:
    """One residual block of a post-norm layer: ``norm(input + dropout(sublayer(input)))``."""

    sublayer: str  # "self_attn", "multihead_attn" or "ff"
    norm: str  # the LayerNorm closing the block: "norm1", ...
    residual: str  # the name of the sum it normalises: "residual1", ...
    input: str  # the block's input: "x", or the previous block's norm
    dropout: str  # the residual dropout (PyTorch's attribute name): "dropout1", ...


def post_norm_chain(
    x: Any, blocks: Any, sublayers: Any, params: Any, eps: float, keeps: Any, record: Any = None
) -> Any:
    """``h = norm(h + dropout(sublayer(h)))`` block after block; on Tensors or Plain arrays.

    ``sublayers`` maps a block's sublayer name to a function of ``h``;
    ``params`` holds the norms' ``weight`` and ``bias`` (``"norm1.weight"``);
    ``keeps`` the residual dropout masks by name (None: no dropout). If
    ``record`` is a dict it receives every named step and each norm's
    ``normalized`` and ``std``. Returns the last norm's output.
    """
    h = x
    for block in blocks:
        branch = sublayers[block.sublayer](h)
        keep = keeps.get(block.dropout)
        used = branch if keep is None else branch.dropout(keep, name=f"{block.sublayer}_dropped")
        # The residual connection: the block's input skips past the sublayer.
        residual = named(h + used, block.residual)
        norm_record: dict[Any, Any] = {}
        weight, bias = params[f"{block.norm}.weight"], params[f"{block.norm}.bias"]
        with module_scope(block.norm):
            h = layer_norm(residual, weight, bias, eps, name=block.norm, record=norm_record)
        if record is not None:
            record[block.sublayer] = branch
            if keep is not None:
                record[f"{block.sublayer}_dropped"] = used
            record.update({block.residual: residual, block.norm: h})
            record.update({f"{block.norm}.{step}": node for step, node in norm_record.items()})
    return h


def post_norm_plain(layer: Any, inputs: Any, params: Any, replace: Any = None) -> Any:
    """``layer``'s last forward on float64 numpy: the same chain, attention by ``attention_chain``, same masks.

    A replaced name with a sublayer's prefix (``self_attn.weights``,
    ``self_attn.x``) replaces that step inside that attention only.
    """
    from ..values.plain import Plain

    last = layer._require_forward("forward_plain()")
    replace = dict(replace or {})
    plain = {name: Plain(value) for name, value in params.items()}
    x = Plain(inputs["x"])
    keeps = last.constants["keeps"]

    def attend(name: str, query: Any, memory: Any) -> Any:
        attn = layer._fresh_attention(name)
        prefix = f"{name}."
        inner = {key[len(prefix) :]: value for key, value in replace.items() if key.startswith(prefix)}
        attn_params = {key[len(prefix) :]: value for key, value in plain.items() if key.startswith(prefix)}
        with Plain.replacing(inner):
            # The attention's own inputs are named as its gradients are ("x", or "query",
            # "key", "value"), so a finite difference can nudge what only the attention reads.
            if memory is None:
                query = key = value = named(Plain(query.data), "x")
            else:
                query = named(Plain(query.data), "query")
                key, value = named(Plain(memory), "key"), named(Plain(memory), "value")
            output = attention_chain(
                query, key, value, attn_params, attn.num_heads, mask=attn.last_mask, keep=attn.dropout_keep
            )
        return named(output, name)  # back under the layer's replacements

    sublayers = {
        "self_attn": lambda h: attend("self_attn", h, None),
        "multihead_attn": lambda h: attend("multihead_attn", h, inputs.get("memory")),
        "ff": lambda h: feedforward_chain(h, plain, layer.activation, keeps["dropout"], "ff"),
    }
    with Plain.replacing(replace):
        output = post_norm_chain(x, layer.blocks, sublayers, plain, layer.eps, keeps)
    return output.data
