"""The tiny Transformer of the toy tasks: embedding + positions, encoder layers, a linear head.

This module lets you build the model ``microtape train`` trains::

    >>> import numpy as np
    >>> from microtape.train.model import TinyTransformer
    >>> model = TinyTransformer(vocab=10, length=8, embed=32, heads=2, ff_dim=64, layers=1, seed=0)
    >>> logits = model(np.array([[3, 1, 4, 1, 5, 9, 2, 6]]))     # a Tensor [1, 8, 10]

For token ids ``[B, T]``::

    h      = embedding(ids) + positions          [B, T, E]   (a learned vector per digit, a fixed one per place)
    h      = layer_i(h)                           post-norm encoder layers, no mask: every position sees all
    logits = head(h)                              [B, T, vocab]: a score per digit, at every position

Parameter names follow the attribute paths: ``embedding.weight``,
``layer0.self_attn.q_proj.weight``, …, ``head.weight``.
"""

from typing import Any

import numpy as np

from ..nn import Embedding, Linear, Module, PositionalEncoding, TransformerEncoderLayer
from ..nn.checks import child_seeds, float_dtype, positive_int

__all__ = ["TinyTransformer"]


class TinyTransformer(Module):
    """Embedding, sinusoidal positions, ``layers`` encoder layers and a ``Linear(embed, vocab)`` head."""

    def __init__(
        self,
        vocab: int,
        length: int,
        embed: int,
        heads: int,
        ff_dim: int,
        layers: int,
        *,
        seed: int | None = None,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        self.vocab = positive_int(vocab, "TinyTransformer(vocab)")
        self.length = positive_int(length, "TinyTransformer(length)")
        self.dtype = float_dtype(dtype, "TinyTransformer(dtype)")
        count = positive_int(layers, "TinyTransformer(layers)")
        seeds = child_seeds(seed, count + 2, "TinyTransformer(seed)")
        self.embedding = Embedding(self.vocab, embed, seed=seeds[0], dtype=self.dtype)
        self.positions = PositionalEncoding(embed, self.length, dtype=self.dtype)
        self._layers: list[TransformerEncoderLayer] = []
        for i in range(count):
            layer = TransformerEncoderLayer(
                embed, heads, ff_dim, seed=int(seeds[i + 1].generate_state(1)[0]), dtype=self.dtype
            )
            setattr(self, f"layer{i}", layer)  # registered (a list is not): layer0.self_attn...
            self._layers.append(layer)
        self.head = Linear(embed, self.vocab, seed=seeds[-1], dtype=self.dtype)

    @property
    def layers(self) -> Any:
        """The encoder layers, in order."""
        return list(self._layers)

    def embed(self, ids: Any) -> Any:
        """The input of the first layer: ``embedding(ids) + positions``, a Tensor ``[B, T, E]``."""
        return self.positions(self.embedding(ids))

    def forward(self, ids: Any) -> Any:
        """Logits ``[B, T, vocab]`` for token ids ``[B, T]``."""
        h = self.embed(ids)
        for layer in self._layers:
            h = layer(h)
        return self.head(h, name="logits")

    def predict(self, ids: Any) -> Any:
        """The most likely digit at every position, ``[B, T]`` (evaluation mode, nothing kept for backward)."""
        mode = self.training
        self.eval()
        try:
            return self(ids).data.argmax(axis=-1)
        finally:
            self.train(mode)

    def attention_weights(self, layer: int = 0) -> Any:
        """``[B, H, T, T]``: the attention weights of one layer in the last forward."""
        return self._layers[layer].self_attn.attention_weights
