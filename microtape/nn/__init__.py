"""Layers built from taped operations: Module, Linear and MultiHeadAttention.

``microtape.nn.masks`` builds additive attention masks; ``microtape.nn.analytic``
holds the hand-derived backward (numpy only) the layers can use instead of the
tape; ``microtape.nn.attention_chain`` the attention forward, written once.
"""

from . import analytic, masks
from .attention import MultiHeadAttention
from .attention_chain import attention_chain, attention_core
from .linear import Linear
from .module import Module

__all__ = ["Module", "Linear", "MultiHeadAttention", "attention_chain", "attention_core", "masks", "analytic"]
