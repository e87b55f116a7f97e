"""What a part of the attention layer may use of the whole layer.

:class:`~microtape.nn.MultiHeadAttention` is built from parts (mixins):
:class:`~.lean.LeanSwitch` (the ``lean`` and ``keep`` switches) and
:class:`~.readout.AttentionReadouts` (the read-only views of the last forward).
Each part reads the layer's ``_last`` forward, its sizes and its parameters;
:class:`AttentionLayerPart`, their common base, declares those names once for
the type checker. At run time it is an empty class.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ...values.tensor import Tensor

__all__ = ["AttentionLayerPart"]


class AttentionLayerPart:
    """The base of MultiHeadAttention's parts: the layer's names they read (declared, not defined here)."""

    if TYPE_CHECKING:  # what the layer that mixes a part in has (MultiHeadAttention)
        _last: Any
        num_heads: int
        causal: bool
        dtype: np.dtype

        def _require_forward(self, what: str) -> Any: ...
        def named_parameters(self) -> list[tuple[str, Tensor]]: ...
