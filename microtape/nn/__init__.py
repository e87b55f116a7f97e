"""Layers built from taped operations, up to a whole Transformer block.

``Module`` (parameters, train/eval), ``Linear``, ``MultiHeadAttention``,
``LayerNorm``, ``Embedding`` with ``PositionalEncoding``, ``FeedForward``,
the post-norm ``TransformerEncoderLayer`` and ``TransformerDecoderLayer``,
and the ``cross_entropy`` loss. ``microtape.nn.masks`` builds additive
attention masks; ``microtape.nn.analytic`` (attention's) and ``microtape.nn.analytic_blocks``
hold the hand-derived backward (numpy only) the layers can use instead of
the tape; ``microtape.nn.attention_chain`` the attention forward, written once;
``microtape.nn.derivation`` its derivation table; ``microtape.nn.tiled`` the tiled (flash) attention core that
``MultiHeadAttention(..., block_size=...)`` records as one op, and
``microtape.nn.dropout_mask`` the counter-based dropout masks both paths share.
"""

from . import analytic_blocks, dropout_mask, masks
from .attention import analytic, derivation, tiled
from .attention.chain import attention_chain, attention_core
from .attention.layer import MultiHeadAttention
from .embedding import Embedding
from .feedforward import FeedForward
from .layernorm import LayerNorm, layer_norm
from .linear import Linear
from .loss import cross_entropy
from .module import Module
from .positional import PositionalEncoding, sinusoidal_positions
from .transformer import TransformerDecoderLayer, TransformerEncoderLayer

__all__ = [
    "Module",
    "Linear",
    "MultiHeadAttention",
    "LayerNorm",
    "layer_norm",
    "Embedding",
    "PositionalEncoding",
    "sinusoidal_positions",
    "FeedForward",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "cross_entropy",
    "attention_chain",
    "attention_core",
    "masks",
    "analytic",
    "derivation",
    "tiled",
    "dropout_mask",
    "analytic_blocks",
]
