"""FeedForward: the Transformer's position-wise block ``linear2(dropout(act(linear1(x))))``.

This module lets you run and differentiate the feed-forward block::

    >>> import numpy as np, microtape as mt
    >>> ff = mt.nn.FeedForward(8, 32, activation="gelu", seed=0)
    >>> y = ff(np.ones((2, 3, 8)))                      # every position goes through the same two layers
    >>> dx = ff.backward(np.ones((2, 3, 8)), method="analytic")

The steps, and the tape name of each::

    pre_activation = x W₁ᵀ + b₁                [..., ff_dim]   (linear1)
    hidden         = relu(pre_activation)  or  gelu(pre_activation)  (tanh approximation)
    hidden_dropped = hidden ⊙ keep             (training with dropout only: keep = 1/(1-p) or 0)
    output         = hidden W₂ᵀ + b₂           [..., embed]    (linear2)

The forward is :func:`feedforward_chain`, written once (the Transformer layers
call it too); the hand-derived backward is
:func:`microtape.nn.analytic_blocks.feedforward_backward`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


import numpy as np

from ..engine import module_scope
from ..values.tensor import Tensor
from . import analytic_blocks
from .checked_layer import CheckedLayer, LastForward
from .checks import child_seeds, float_dtype, input_array, positive_int, probability
from .linear import Linear, linear

__all__ = ["FeedForward", "feedforward_chain", "ACTIVATIONS", "check_activation"]

#: The activations the feed-forward block offers (the Tensor method of each).
ACTIVATIONS = ("relu", "gelu")


def check_activation(activation: Any, where: str) -> Any:
    """``activation`` if it is one of :data:`ACTIVATIONS`; a ValueError naming it otherwise."""
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{where}(activation={activation!r}): expected 'relu' or 'gelu' (gelu is the tanh approximation)"
        )
    return activation


def feedforward_chain(
    x: Any, params: Any, activation: Any, keep: Any = None, name: str = "output", record: Any = None
) -> Any:
    """``linear2(dropout(act(linear1(x))))`` on Tensors or Plain arrays; returns the output.

    ``params`` maps ``linear1.weight``, ``linear1.bias``, ``linear2.weight``,
    ``linear2.bias`` to values of the input's kind; ``keep`` is the saved
    dropout mask (a constant) or None. If ``record`` is a dict it receives
    the named steps.
    """
    with module_scope("linear1"):
        pre_activation = linear(x, params["linear1.weight"], params["linear1.bias"], name="pre_activation")
    hidden = getattr(pre_activation, activation)(name="hidden")
    used = hidden if keep is None else hidden.dropout(keep, name="hidden_dropped")
    with module_scope("linear2"):
        output = linear(used, params["linear2.weight"], params["linear2.bias"], name=name)
    if record is not None:
        record.update(pre_activation=pre_activation, hidden=hidden)
        if keep is not None:
            record["hidden_dropped"] = used
    return output


def feedforward_cache(record: Any, x: Any, keep: Any, activation: Any, params: Any) -> Any:
    """The numpy values :func:`~microtape.nn.analytic_blocks.feedforward_backward` reads."""
    return {
        "x": x,
        "pre_activation": record["pre_activation"].data,
        "hidden": record["hidden"].data,
        "keep": keep,
        "activation": activation,
        "linear1.weight": params["linear1.weight"].data,
        "linear2.weight": params["linear2.weight"].data,
    }


def feedforward_names(dropout_used: Any) -> Any:
    """The feed-forward's gradient names in backward order (``hidden_dropped`` only with dropout)."""
    names = ["linear2.weight", "linear2.bias"]
    names += ["hidden_dropped"] if dropout_used else []
    return names + ["hidden", "pre_activation", "linear1.weight", "linear1.bias"]


def draw_keep(rng: np.random.Generator, shape: Any, p: Any, dtype: Any) -> Any:
    """An inverted-dropout mask: ``1/(1-p)`` where kept (probability ``1-p``), 0 where dropped."""
    return ((rng.random(shape) >= p) / (1.0 - p)).astype(dtype)


class FeedForward(CheckedLayer):
    """``linear2(dropout(act(linear1(x))))``: ``Linear(embed, ff_dim)``, relu or gelu, ``Linear(ff_dim, embed)``.

    ``FeedForward(embed, ff_dim, activation="relu", dropout=0.0, *, seed=None,
    dtype=np.float64)``. ``seed`` fixes the weights and the dropout masks;
    dropout is active in training mode only (``eval()`` turns it off).
    """

    def __init__(
        self,
        embed: int,
        ff_dim: int,
        activation: str = "relu",
        dropout: float = 0.0,
        *,
        seed: int | None = None,
        dtype: DTypeLike = np.float64,
    ) -> None:
        super().__init__()
        embed = positive_int(embed, "FeedForward(embed)")
        ff_dim = positive_int(ff_dim, "FeedForward(ff_dim)")
        self.activation = check_activation(activation, "FeedForward")
        self.dropout = probability(dropout, "FeedForward(dropout)")
        self.dtype = float_dtype(dtype, "FeedForward(dtype)")
        seeds = child_seeds(seed, 3, "FeedForward(seed)")
        self.embed, self.ff_dim = embed, ff_dim
        self.linear1 = Linear(embed, ff_dim, seed=seeds[0], dtype=self.dtype)
        self.linear2 = Linear(ff_dim, embed, seed=seeds[1], dtype=self.dtype)
        self._rng = np.random.default_rng(seeds[2])

    def __repr__(self) -> str:
        return (
            f"FeedForward(embed={self.embed}, ff_dim={self.ff_dim}, activation={self.activation!r}, "
            f"dropout={self.dropout}, dtype={self.dtype.name})"
        )

    @property
    def _dropout_on(self) -> Any:
        return self.training and self.dropout > 0

    def check_call(self, x: Any) -> Any:
        """Check ``forward``'s argument as ``forward`` does, changing nothing; returns it as an array."""
        data = input_array(x, "x", "FeedForward.forward", self.dtype)
        if data.ndim < 1 or data.shape[-1] != self.embed or data.size == 0:
            raise ValueError(
                f"FeedForward.forward: x has shape {data.shape}; expected [..., {self.embed}] (embed={self.embed}), "
                "not empty"
            )
        return data

    def forward(self, x: Any) -> Tensor:
        """The block on the tape; returns a Tensor of ``x``'s shape."""
        data = self.check_call(x)

        def run() -> LastForward:
            node = self._input_node(x, data, "x")
            keep = None
            if self._dropout_on:
                keep = draw_keep(self._rng, data.shape[:-1] + (self.ff_dim,), self.dropout, self.dtype)
            params = dict(self.named_parameters())
            record: dict[Any, Any] = {}
            with self.scope():
                constant = None if keep is None else Tensor(keep, name="dropout_keep")
                output = feedforward_chain(node, params, self.activation, constant, name="y", record=record)
            saved = feedforward_cache(record, data, keep, self.activation, params)
            return LastForward(output, {"x": node}, dict(record), saved, {"keep": keep})

        return self._record_forward(run)

    def gradient_names(self) -> Any:
        """The linear2, hidden, pre-activation and linear1 gradients, then ``x``: the backward's order."""
        last = self._require_forward("gradient_names()")
        return feedforward_names(last.saved["keep"] is not None) + ["x"]

    def analytic_cache(self) -> Any:
        """What the hand-derived backward reads from the last forward (x, pre_activation, hidden, keep, weights)."""
        return dict(self._require_forward("analytic_cache()").saved)

    def _analytic_gradients(self, grad_output: Any, links: Any) -> Any:
        return analytic_blocks.feedforward_backward(grad_output, self.analytic_cache(), links)

    def forward_plain(self, inputs: Any, params: Any, replace: Any = None) -> Any:
        """The last forward on float64 numpy, the same dropout mask (see :meth:`CheckedLayer.forward_plain`)."""
        from ..values.plain import Plain

        keep = self._require_forward("forward_plain()").constants["keep"]
        with Plain.replacing(replace or {}):
            plain_params = {name: Plain(value) for name, value in params.items()}
            output = feedforward_chain(Plain(inputs["x"]), plain_params, self.activation, keep)
        return output.data

    @classmethod
    def from_torch(cls, module: Any, dtype: Any = np.float64) -> Any:
        """A FeedForward from a ``torch.nn.Sequential(Linear, ReLU | GELU(approximate="tanh"), [Dropout], Linear)``."""
        from .transformer_torch import feedforward_from_torch

        return feedforward_from_torch(cls, module, dtype)

    def to_torch(self) -> Any:
        """An equivalent ``torch.nn.Sequential(Linear, ReLU | GELU(approximate="tanh"), Dropout, Linear)``."""
        from .transformer_torch import feedforward_to_torch

        return feedforward_to_torch(self)
