"""LayerNorm: normalise each row to mean 0 and variance 1, then scale and shift — taped and by hand.

This module lets you run and differentiate layer normalisation::

    >>> import numpy as np, microtape as mt
    >>> norm = mt.nn.LayerNorm(4)
    >>> y = norm(np.array([[1.0, 2.0, 3.0, 4.0]]))      # a Tensor; each row now has mean 0, variance 1
    >>> dx = norm.backward(np.ones((1, 4)))              # by the tape (method="analytic": by hand)

For each row ``x`` (the last ``len(normalized_shape)`` axes), with ``n``
entries::

    mean   = Σ x / n
    var    = Σ (x − mean)² / n          (divided by n, not n − 1: PyTorch's LayerNorm too)
    std    = sqrt(var + eps)            (eps keeps a constant row from dividing by 0)
    x̂      = (x − mean) / std           "normalized"
    y      = weight ⊙ x̂ + bias          weight starts at 1, bias at 0

The forward is :func:`layer_norm`, written once: on Tensors it records one
named row per line above (``mean, centered, var, std, normalized``), on
:class:`~microtape.values.plain.Plain` arrays it records nothing (finite
differences). The hand-derived backward is
:func:`microtape.nn.analytic_blocks.layernorm_backward`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


import numbers

import numpy as np

from ..values.tensor import Tensor
from . import analytic_blocks
from .checked_layer import CheckedLayer, LastForward, named
from .checks import float_dtype, input_array

__all__ = ["LayerNorm", "layer_norm"]


def layer_norm(
    x: Any, weight: Any, bias: Any, eps: float, name: str | None = None, record: dict[str, Any] | None = None
) -> Any:
    """``(x − mean) / sqrt(var + eps) · weight + bias`` over the trailing axes ``weight`` covers.

    Runs on Tensors (taped), and on Plain arrays (nothing recorded). If
    ``record`` is a dict it receives the ``normalized`` and ``std`` steps
    (what the hand-derived backward reads).
    """
    axes = tuple(range(-weight.ndim, 0))
    axis = axes[0] if len(axes) == 1 else axes
    mean = x.mean(axis, keepdims=True, name="mean")
    centered = named(x - mean, "centered")
    var = (centered * centered).mean(axis, keepdims=True, name="var")
    std = (var + eps).sqrt(name="std")
    normalized = named(centered / std, "normalized")
    if record is not None:
        record.update(normalized=normalized, std=std)
    return named(normalized * weight + bias, name)


class LayerNorm(CheckedLayer):
    """Layer normalisation over the last ``normalized_shape`` axes, with ``weight`` and ``bias`` (PyTorch's).

    ``LayerNorm(normalized_shape, eps=1e-5, *, dtype=np.float64)``:
    ``normalized_shape`` is an int (the last axis) or a tuple of ints (the
    last few axes). ``forward(x)`` takes ``[..., *normalized_shape]``;
    ``backward(g, method="tape" | "analytic")`` returns ``dx`` and adds into
    ``weight.grad``, ``bias.grad``.
    """

    # Set in __init__ (declared: the reports read them).
    normalized_shape: tuple[int, ...]
    eps: float
    weight: Tensor
    bias: Tensor

    def __init__(
        self, normalized_shape: int | Sequence[int], eps: float = 1e-5, *, dtype: DTypeLike = np.float64
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else normalized_shape
        if (
            not isinstance(shape, (tuple, list))
            or not shape
            or any(isinstance(n, bool) or not isinstance(n, numbers.Integral) or n <= 0 for n in shape)
        ):
            raise ValueError(
                f"LayerNorm(normalized_shape={normalized_shape!r}): expected a positive integer or a tuple of them"
            )
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < 1:
            raise ValueError(f"LayerNorm(eps={eps!r}): expected a small positive number such as 1e-5")
        self.normalized_shape = tuple(int(n) for n in shape)
        self.eps = float(eps)
        self.dtype = float_dtype(dtype, "LayerNorm(dtype)")
        self.weight = Tensor(np.ones(self.normalized_shape, dtype=self.dtype), requires_grad=True)
        self.bias = Tensor(np.zeros(self.normalized_shape, dtype=self.dtype), requires_grad=True)

    def __repr__(self) -> str:
        shape = self.normalized_shape[0] if len(self.normalized_shape) == 1 else self.normalized_shape
        return f"LayerNorm({shape}, eps={self.eps:g}, dtype={self.dtype.name})"

    def check_call(self, x: Any) -> Any:
        """Check ``forward``'s argument as ``forward`` does, changing nothing; returns it as an array."""
        where = "LayerNorm.forward"
        data = input_array(x, "x", where, self.dtype)
        trailing = data.shape[data.ndim - len(self.normalized_shape) :]
        if data.ndim < len(self.normalized_shape) or trailing != self.normalized_shape:
            raise ValueError(
                f"{where}: x has shape {data.shape}; its last axes must be normalized_shape="
                f"{list(self.normalized_shape)}"
            )
        if data.size == 0:
            raise ValueError(f"{where}: x has shape {data.shape}; there is no row to normalise")
        return data

    def forward(self, x: Any) -> Tensor:
        """Normalise ``x`` row by row on the tape; returns a Tensor of ``x``'s shape."""
        data = self.check_call(x)

        def run() -> LastForward:
            node = self._input_node(x, data, "x")
            record: dict[Any, Any] = {}
            with self.scope():
                output = layer_norm(node, self.weight, self.bias, self.eps, name="y", record=record)
            saved = {"normalized": record["normalized"].data, "std": record["std"].data}
            return LastForward(output, {"x": node}, {"normalized": record["normalized"]}, saved)

        return self._record_forward(run)

    def gradient_names(self) -> Any:
        """``normalized`` (dx̂), ``weight`` (dγ), ``bias`` (dβ) and ``x``: the backward's order."""
        return ["normalized", "weight", "bias", "x"]

    def analytic_cache(self) -> Any:
        """What the hand-derived backward reads from the last forward: x̂, std and the weight."""
        saved = self._require_forward("analytic_cache()").saved
        return {**saved, "weight": self.weight.data}

    def _analytic_gradients(self, grad_output: Any, links: Any) -> Any:
        cache = self.analytic_cache()
        grads = {"normalized": grad_output * cache["weight"]}
        grads["x"], grads["weight"], grads["bias"] = analytic_blocks.link(links, "layernorm")(
            grad_output, cache["normalized"], cache["std"], cache["weight"]
        )
        return grads

    def forward_plain(self, inputs: Any, params: Any, replace: Any = None) -> Any:
        """The same normalisation on float64 numpy (see :meth:`CheckedLayer.forward_plain`)."""
        from ..values.plain import Plain

        with Plain.replacing(replace or {}):
            output = layer_norm(Plain(inputs["x"]), Plain(params["weight"]), Plain(params["bias"]), self.eps)
        return output.data

    @classmethod
    def from_torch(cls, module: Any, dtype: Any = np.float64) -> Any:
        """A LayerNorm with the shape, eps and weights of a ``torch.nn.LayerNorm`` (torch imported there only)."""
        from .transformer_torch import layernorm_from_torch

        return layernorm_from_torch(cls, module, dtype)

    def to_torch(self) -> Any:
        """An equivalent ``torch.nn.LayerNorm``."""
        from .transformer_torch import layernorm_to_torch

        return layernorm_to_torch(self)
