"""Layers built from taped operations: Linear and MultiHeadAttention.

``microtape.nn.masks`` builds additive attention masks; ``microtape.nn.analytic``
holds the hand-derived backward (numpy only) the layers can use instead of the tape.
"""

from . import analytic, masks
from .attention import MultiHeadAttention, attention_chain
from .linear import Linear

__all__ = ["Linear", "MultiHeadAttention", "attention_chain", "masks", "analytic"]
