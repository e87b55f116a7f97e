"""Post-norm Transformer layers, taped and hand-derived: TransformerEncoderLayer and TransformerDecoderLayer.

This module lets you run, differentiate and check a whole Transformer block::

    >>> import numpy as np, microtape as mt
    >>> layer = mt.nn.TransformerEncoderLayer(16, 4, 32, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((2, 5, 16))
    >>> y = layer(x)                                          # a Tensor [2, 5, 16]
    >>> dx = layer.backward(np.ones((2, 5, 16)))              # by the tape
    >>> dx2 = layer.backward(np.ones((2, 5, 16)), method="analytic")   # sublayer by sublayer, by hand

Both are **post-norm**, as PyTorch's ``norm_first=False``: a stack of residual
blocks, each ``h = norm_i(h + dropout_i(sublayer_i(h)))``::

    encoder:  x → [self_attn, norm1] → [ff, norm2]
    decoder:  x → [self_attn (tgt_mask), norm1] → [multihead_attn over memory (memory_mask), norm2] → [ff, norm3]

    ff(h) = linear2(dropout(activation(linear1(h))))

The attribute names are PyTorch's (``self_attn``, ``multihead_attn``,
``linear1``, ``linear2``, ``norm1``, ``norm2``, ``norm3``), so ``from_torch``
maps a ``torch.nn.TransformerEncoderLayer(..., batch_first=True)`` one to one.
The tape names every step: ``self_attn`` (the attention's output),
``residual1``, ``norm1``, ``pre_activation``, ``hidden``, ``ff``,
``residual2``, … (and ``<sublayer>_dropped`` with dropout).

The forward is written once, :func:`~microtape.nn.post_norm.post_norm_chain`, and runs on Tensors
(the attention sublayers are the :class:`MultiHeadAttention` children) and
on Plain numpy (``forward_plain``: what finite differences nudge). The
hand-derived backward chains each sublayer's own: LayerNorm's and the
feed-forward's links (:mod:`microtape.nn.analytic_blocks`) and the
attention's (``attn.named_gradients(g, "analytic")``), through
:func:`~microtape.nn.analytic_blocks.post_norm_backward`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


import numbers

import numpy as np

from ..values.tensor import Tensor
from . import analytic_blocks
from .attention.layer import MultiHeadAttention, NamedGradients, read_only
from .checked_layer import CheckedLayer, LastForward, sequence_array
from .checks import child_seeds, float_dtype, positive_int, probability
from .feedforward import check_activation, draw_keep, feedforward_cache, feedforward_chain, feedforward_names
from .layernorm import LayerNorm
from .linear import Linear
from .post_norm import Block, post_norm_chain, post_norm_plain

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "Block", "post_norm_chain"]


class _PostNormLayer(CheckedLayer):
    """What the encoder and decoder layers share: their blocks differ, nothing else."""

    blocks: tuple[Block, ...] = ()
    attentions: tuple[str, ...] = ()  # the attention sublayers, in forward order
    norm1: LayerNorm  # (and norm2, norm3…: one per block, set from ``blocks``)
    # Set in __init__ (declared: the forward and the reports read them).
    embed: int
    num_heads: int
    ff_dim: int
    dropout: float
    activation: str
    eps: float
    _rng: np.random.Generator

    # One signature for both layers (PyTorch's, batch_first): each subclass differs in its blocks only.
    def __init__(
        self,
        embed: int,
        num_heads: int,
        ff_dim: int,
        dropout: float = 0.0,
        activation: str = "relu",
        *,
        layer_norm_eps: float = 1e-5,
        seed: int | None = None,
        dtype: DTypeLike = np.float64,
    ) -> None:
        super().__init__()
        where = type(self).__name__
        embed = positive_int(embed, f"{where}(embed)")
        if isinstance(num_heads, bool) or not isinstance(num_heads, numbers.Integral) or num_heads <= 0:
            raise ValueError(f"{where}(num_heads={num_heads!r}): expected a positive integer")
        if embed % num_heads:
            raise ValueError(f"{where}(num_heads={num_heads}): must divide embed={embed}")
        self.embed, self.num_heads = embed, int(num_heads)
        self.ff_dim = positive_int(ff_dim, f"{where}(ff_dim)")
        self.dropout = probability(dropout, f"{where}(dropout)")
        self.activation = check_activation(activation, where)
        self.dtype = float_dtype(dtype, f"{where}(dtype)")
        seeds = child_seeds(seed, len(self.attentions) + 3, f"{where}(seed)")
        # Created in PyTorch's order, so named_parameters() lists them in that order too.
        for name, child in zip(self.attentions, seeds):
            # MultiHeadAttention takes an integer seed: one drawn from this child's sequence.
            attn_seed = int(child.generate_state(1)[0])
            setattr(
                self, name, MultiHeadAttention(embed, self.num_heads, self.dropout, seed=attn_seed, dtype=self.dtype)
            )
        self.linear1 = Linear(embed, self.ff_dim, seed=seeds[-3], dtype=self.dtype)
        self.linear2 = Linear(self.ff_dim, embed, seed=seeds[-2], dtype=self.dtype)
        for block in self.blocks:
            setattr(self, block.norm, LayerNorm(embed, layer_norm_eps, dtype=self.dtype))
        self.eps = self.norm1.eps
        self._rng = np.random.default_rng(seeds[-1])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(embed={self.embed}, num_heads={self.num_heads}, ff_dim={self.ff_dim}, "
            f"dropout={self.dropout}, activation={self.activation!r}, layer_norm_eps={self.eps:g}, "
            f"dtype={self.dtype.name})"
        )

    # -- forward

    def _draw_keeps(self, batch: Any, length: Any) -> Any:
        """The dropout masks of one forward (all None in eval mode or with dropout=0)."""
        names = [block.dropout for block in self.blocks] + ["dropout"]
        if not (self.training and self.dropout > 0):
            return dict.fromkeys(names)
        shapes = {name: (batch, length, self.embed) for name in names}
        shapes["dropout"] = (batch, length, self.ff_dim)
        return {name: draw_keep(self._rng, shapes[name], self.dropout, self.dtype) for name in names}

    def _attention_call(self, name: str, inputs: Any, masks: Any) -> Any:
        """The taped call of an attention sublayer: self-attention, or over ``memory``.

        Its steps are tagged with the sublayer's name (``self_attn.q_proj``, …),
        so listings and graphs group them as the parameters are named.
        """
        attn = getattr(self, name)
        memory = inputs["memory"] if name == "multihead_attn" else None

        def call(h: Any) -> Any:
            with attn.scope():
                return attn(h, mask=masks[name]) if memory is None else attn(h, memory, memory, mask=masks[name])

        return call

    def _run_forward(self, given: Any, arrays: Any, masks: Any) -> Any:
        def run() -> LastForward:
            inputs = {role: self._input_node(given[role], arrays[role], role) for role in self.input_roles}
            batch, length = arrays["x"].shape[:2]
            keeps = self._draw_keeps(batch, length)
            constants = {
                name: None if keep is None else Tensor(keep, name=f"{name}_keep") for name, keep in keeps.items()
            }
            params = dict(self.named_parameters())
            record: dict[Any, Any] = {}
            sublayers = {name: self._attention_call(name, inputs, masks) for name in self.attentions}
            sublayers["ff"] = lambda h: feedforward_chain(
                h, params, self.activation, constants["dropout"], "ff", record
            )
            with self.scope():
                output = post_norm_chain(inputs["x"], self.blocks, sublayers, params, self.eps, constants, record)
            return LastForward(
                output,
                inputs,
                nodes={name: node for name, node in record.items() if "." not in name and node is not output},
                saved=self._saved(record, params, keeps),
                constants={"keeps": keeps},
            )

        return self._record_forward(run)

    def _saved(self, record: Any, params: Any, keeps: Any) -> Any:
        """The numpy values the hand-derived backward reads (attention's come from the sublayers)."""
        saved = {name: node.data for name, node in record.items() if name.endswith((".normalized", ".std"))}
        ff_input = next(block.input for block in self.blocks if block.sublayer == "ff")
        saved["ff"] = feedforward_cache(record, record[ff_input].data, keeps["dropout"], self.activation, params)
        saved["attention outputs"] = {name: record[name] for name in self.attentions}
        return saved

    # -- names

    def _attention_names(self, name: str) -> Any:
        return [f"{name}.{step}" for step in getattr(self, name).gradient_names()]

    def gradient_names(self) -> Any:
        """Every named gradient, in backward order: block by block from the last, each block's input last."""
        last = self._require_forward("gradient_names()")
        keeps = last.constants["keeps"]
        names = []
        for block in reversed(self.blocks):
            names += [block.residual, f"{block.norm}.weight", f"{block.norm}.bias"]
            names += [f"{block.sublayer}_dropped"] if keeps[block.dropout] is not None else []
            names.append(block.sublayer)
            if block.sublayer == "ff":
                names += feedforward_names(keeps["dropout"] is not None)
            else:
                names += self._attention_names(block.sublayer)
            names.append(block.input)
        return names + [role for role in self.input_roles if role not in names]

    def step_value(self, name: str) -> Any:
        """A named step's value in the last forward, an attention's inner steps included (``self_attn.weights``)."""
        attention, _, step = name.partition(".")
        if attention in self.attentions and step:
            attn = self._fresh_attention(attention)
            if step in ("x", "query", "key", "value"):
                return attn.analytic_cache()["query" if step == "x" else step]
            return read_only(attn.tape.variable(step).data)
        return super().step_value(name)

    # -- the two routes

    def _fresh_attention(self, name: str) -> Any:
        """The attention sublayer, checked to still hold the forward this layer recorded."""
        attn = getattr(self, name)
        if attn.last_output is not self._last.saved["attention outputs"][name]:
            raise RuntimeError(
                f"{type(self).__name__}: {name} ran another forward since this layer's last forward; "
                "run the layer's forward again before its backward"
            )
        return attn

    def _tape_extras(self, grads: Any) -> Any:
        # Each attention's inner steps (its dS, dP, ...) read off this layer's one reverse pass:
        # its nodes are on this tape too, so no second pass over the attention's own tape.
        extras = NamedGradients()
        for name in self.attentions:
            steps = self._fresh_attention(name)._named_tape_gradients(grads.reverse_pass)
            for step, value in steps.items():
                extras[f"{name}.{step}"] = value
                extras.completed_at[f"{name}.{step}"] = steps.completed_at.get(step)
        return extras

    def _attention_backward(self, name: str) -> Any:
        """The attention sublayer's hand-derived backward, as ``post_norm_backward`` calls it."""

        def backward(grad: Any, links: Any) -> Any:
            steps = self._fresh_attention(name).named_gradients(grad, "analytic", links=links)
            grads = {f"{name}.{step}": value for step, value in steps.items()}
            return grads, steps["x"] if "x" in steps else steps["query"]

        return backward

    def _feedforward_backward(self, grad: Any, links: Any) -> Any:
        grads = analytic_blocks.feedforward_backward(grad, self._last.saved["ff"], links)
        return grads, grads.pop("x")

    def _analytic_gradients(self, grad_output: Any, links: Any) -> Any:
        last = self._last
        keeps = last.constants["keeps"]
        blocks = [
            {
                "norm": block.norm,
                "residual": block.residual,
                "sublayer": block.sublayer,
                "input": block.input,
                "normalized": last.saved[f"{block.norm}.normalized"],
                "std": last.saved[f"{block.norm}.std"],
                "weight": getattr(self, block.norm).weight.data,
                "keep": keeps[block.dropout],
                "backward": (
                    self._feedforward_backward if block.sublayer == "ff" else self._attention_backward(block.sublayer)
                ),
            }
            for block in self.blocks
        ]
        grads = analytic_blocks.post_norm_backward(grad_output, blocks, links)
        if "memory" in self.input_roles:
            # The memory is the cross-attention's key and its value: two paths, one sum.
            grads["memory"] = grads["multihead_attn.key"] + grads["multihead_attn.value"]
        return grads

    def analytic_cache(self) -> Any:
        """What the hand-derived backward reads from the last forward (each attention's: ``attn.analytic_cache()``)."""
        saved = self._require_forward("analytic_cache()").saved
        cache = {name: read_only(value) for name, value in saved.items() if name.endswith((".normalized", ".std"))}
        cache["ff"] = {
            name: read_only(value) if isinstance(value, np.ndarray) else value for name, value in saved["ff"].items()
        }
        cache["keeps"] = {name: read_only(keep) for name, keep in self._last.constants["keeps"].items()}
        return cache

    def _backward_names(self) -> Any:
        # backward() keeps the layer's own gradients; an attention's inner steps
        # (its dS, dP, ...) come with named_gradients and layer reports.
        inner = tuple(f"{name}." for name in self.attentions)
        parameters = {name for name, _ in self.named_parameters()}
        return [name for name in self.gradient_names() if not name.startswith(inner) or name in parameters]

    # -- the same forward on plain numpy

    def forward_plain(self, inputs: Any, params: Any, replace: Any = None) -> Any:
        """The last forward on float64 numpy: the same chain, attention by ``attention_chain``, same masks.

        A replaced name with a sublayer's prefix (``self_attn.weights``,
        ``self_attn.x``) replaces that step inside that attention only.
        """
        return post_norm_plain(self, inputs, params, replace)


class TransformerEncoderLayer(_PostNormLayer):
    """A post-norm encoder layer: ``x = norm1(x + dropout(self_attn(x))); x = norm2(x + dropout(ff(x)))``.

    ``TransformerEncoderLayer(embed, num_heads, ff_dim, dropout=0.0,
    activation="relu", *, layer_norm_eps=1e-5, seed=None, dtype=np.float64)``
    — PyTorch's ``TransformerEncoderLayer(d_model, nhead, dim_feedforward,
    dropout, activation, layer_norm_eps, batch_first=True, norm_first=False)``.
    ``dropout`` applies in four places, as there: the attention weights, the
    feed-forward's hidden layer and both residual branches (training mode only).
    ``activation`` is ``"relu"`` or ``"gelu"`` (the tanh approximation).
    """

    blocks = (
        Block("self_attn", "norm1", "residual1", "x", "dropout1"),
        Block("ff", "norm2", "residual2", "norm1", "dropout2"),
    )
    attentions = ("self_attn",)
    self_attn: MultiHeadAttention  # set by _PostNormLayer.__init__ from ``blocks``

    def check_call(self, x: Any, mask: Any = None) -> Any:
        """Check ``forward``'s arguments as ``forward`` does, changing nothing; returns ``x`` as an array."""
        where = "TransformerEncoderLayer.forward"
        data = sequence_array(x, "x", where, self.embed, self.dtype)
        self.self_attn.check_call(data, mask=mask, where=where)
        return data

    def forward(self, x: Any, mask: Any = None) -> Tensor:
        """The layer on ``x`` ``[B, T, E]``; ``mask`` is an additive ``[T, T]`` attention mask or None."""
        data = self.check_call(x, mask)
        return self._run_forward({"x": x}, {"x": data}, {"self_attn": mask})

    @classmethod
    def from_torch(cls, module: Any, dtype: Any = np.float64) -> Any:
        """A layer with the weights of a ``torch.nn.TransformerEncoderLayer`` (post-norm; torch imported there only)."""
        from .transformer_torch import encoder_from_torch

        return encoder_from_torch(cls, module, dtype)

    def to_torch(self) -> Any:
        """An equivalent ``torch.nn.TransformerEncoderLayer(batch_first=True, norm_first=False)``."""
        from .transformer_torch import encoder_to_torch

        return encoder_to_torch(self)


class TransformerDecoderLayer(_PostNormLayer):
    """A post-norm decoder layer: masked self-attention, cross-attention over ``memory``, feed-forward.

    ``x = norm1(x + dropout(self_attn(x, tgt_mask)))``,
    ``x = norm2(x + dropout(multihead_attn(x, memory, memory, memory_mask)))``,
    ``x = norm3(x + dropout(ff(x)))`` — PyTorch's ``TransformerDecoderLayer``
    with ``batch_first=True, norm_first=False``. ``backward`` returns ``dx``;
    :meth:`grad_memory_input` gives ``d memory`` (the cross-attention's key and
    value paths, added).
    """

    blocks = (
        Block("self_attn", "norm1", "residual1", "x", "dropout1"),
        Block("multihead_attn", "norm2", "residual2", "norm1", "dropout2"),
        Block("ff", "norm3", "residual3", "norm2", "dropout3"),
    )
    attentions = ("self_attn", "multihead_attn")
    self_attn: MultiHeadAttention  # set by _PostNormLayer.__init__ from ``blocks``
    multihead_attn: MultiHeadAttention
    input_roles = ("x", "memory")

    def check_call(self, x: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None) -> Any:
        """Check ``forward``'s arguments as ``forward`` does, changing nothing; returns ``(x, memory)`` as arrays."""
        where = "TransformerDecoderLayer.forward"
        data = sequence_array(x, "x", where, self.embed, self.dtype)
        memory_data = sequence_array(memory, "memory", where, self.embed, self.dtype)
        if memory_data.shape[0] != data.shape[0]:
            raise ValueError(
                f"{where}: x has batch {data.shape[0]} but memory has {memory_data.shape[0]}; B must match"
            )
        self.self_attn.check_call(data, mask=tgt_mask, mask_name="tgt_mask", where=where)
        self.multihead_attn.check_call(
            data, memory_data, memory_data, mask=memory_mask, mask_name="memory_mask", where=where
        )
        return data, memory_data

    def forward(self, x: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None) -> Tensor:
        """The layer on ``x`` ``[B, T, E]`` attending to ``memory`` ``[B, S, E]``.

        ``tgt_mask`` (``[T, T]``, e.g. ``mt.nn.masks.causal_mask(T)``) masks the
        self-attention, ``memory_mask`` (``[T, S]``) the cross-attention; both
        additive, as for MultiHeadAttention.
        """
        data, memory_data = self.check_call(x, memory, tgt_mask, memory_mask)
        masks = {"self_attn": tgt_mask, "multihead_attn": memory_mask}
        return self._run_forward({"x": x, "memory": memory}, {"x": data, "memory": memory_data}, masks)

    def grad_memory_input(self) -> Any:
        """``d memory`` of the last backward (the cross-attention's ``dk + dv``)."""
        grads = self._require_forward("grad_memory_input()").grads
        if not grads:
            raise RuntimeError("TransformerDecoderLayer.grad_memory_input(): call backward() first")
        return read_only(grads["memory"])

    @classmethod
    def from_torch(cls, module: Any, dtype: Any = np.float64) -> Any:
        """A layer with the weights of a ``torch.nn.TransformerDecoderLayer`` (post-norm; torch imported there only)."""
        from .transformer_torch import decoder_from_torch

        return decoder_from_torch(cls, module, dtype)

    def to_torch(self) -> Any:
        """An equivalent ``torch.nn.TransformerDecoderLayer(batch_first=True, norm_first=False)``."""
        from .transformer_torch import decoder_to_torch

        return decoder_to_torch(self)
