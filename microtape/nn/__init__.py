"""Layers built from taped operations: Module, Linear and MultiHeadAttention.

``microtape.nn.masks`` builds additive attention masks; ``microtape.nn.analytic``
holds the hand-derived backward (numpy only) the layers can use instead of the
tape; ``microtape.nn.attention_chain`` the attention forward, written once;
``microtape.nn.tiled`` the tiled (flash) attention core that
``MultiHeadAttention(..., block_size=...)`` records as one op, and
``microtape.nn.dropout_mask`` the counter-based dropout masks both paths share.
"""

from . import analytic, dropout_mask, masks, tiled
from .attention import MultiHeadAttention
from .attention_chain import attention_chain, attention_core
from .linear import Linear
from .module import Module

__all__ = [
    "Module",
    "Linear",
    "MultiHeadAttention",
    "attention_chain",
    "attention_core",
    "masks",
    "analytic",
    "tiled",
    "dropout_mask",
]
