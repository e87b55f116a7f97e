"""BatchNorm: normalise each channel over the batch (train) or with running statistics (eval).

This module lets you run and differentiate batch normalisation::

    >>> import numpy as np, microtape as mt
    >>> norm = mt.nn.BatchNorm(3)
    >>> y = norm(np.random.default_rng(0).normal(size=(8, 3, 4, 4)))   # train mode: batch statistics
    >>> norm.running_mean.shape, norm.eval().training
    ((3,), False)

The channel axis is axis 1 (PyTorch's layout: ``[B, C]``, ``[B, C, L]``,
``[B, C, H, W]``); the statistics are taken over every other axis, ``n``
entries per channel. In train mode, per channel::

    mean     = Σ x / n
    centered = x − mean
    var      = Σ centered² / n             (biased: what the normalisation divides by)
    xhat     = centered / sqrt(var + eps)
    y        = weight ⊙ xhat + bias         weight starts at 1, bias at 0

and the running statistics move towards the batch's (PyTorch's rule, with its
*unbiased* variance ``var · n / (n − 1)`` for ``running_var``)::

    running_mean = (1 − momentum) · running_mean + momentum · mean
    running_var  = (1 − momentum) · running_var  + momentum · var · n / (n − 1)

In eval mode ``xhat = (x − running_mean) / sqrt(running_var + eps)``: the
statistics are constants, so the gradient is a plain scale. Each line above
is a named row on the tape (``mean``, ``centered``, ``var``, ``xhat``), the
steps a derivation of its backward follows.
"""

import numbers
from typing import Any

import numpy as np

from ..values.tensor import Tensor
from .checks import float_dtype, input_array, positive_int
from .module import Module

__all__ = ["BatchNorm"]


class BatchNorm(Module):
    """Batch normalisation over every axis but the channel axis 1 (PyTorch's ``BatchNorm1d``/``2d`` in one).

    Parameters ``weight`` and ``bias`` ``[num_features]``; buffers (plain
    numpy arrays, never differentiated) ``running_mean``, ``running_var`` and
    ``num_batches_tracked``, as PyTorch names them.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, *, dtype: Any = np.float64) -> None:
        super().__init__()
        self.num_features = positive_int(num_features, "BatchNorm(num_features)")
        for value, what in ((eps, "eps"), (momentum, "momentum")):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
                raise TypeError(f"BatchNorm({what}={value!r}): expected a finite number")
        if eps <= 0:
            raise ValueError(f"BatchNorm(eps={eps!r}): must be positive (it keeps a constant channel from 0/0)")
        if not 0 <= momentum <= 1:
            raise ValueError(f"BatchNorm(momentum={momentum!r}): expected a number in [0, 1]")
        self.eps, self.momentum = float(eps), float(momentum)
        dtype = float_dtype(dtype, "BatchNorm(dtype)")
        self.weight = Tensor(np.ones(self.num_features, dtype=dtype), requires_grad=True)
        self.bias = Tensor(np.zeros(self.num_features, dtype=dtype), requires_grad=True)
        self.running_mean = np.zeros(self.num_features, dtype=dtype)
        self.running_var = np.ones(self.num_features, dtype=dtype)
        self.num_batches_tracked = 0

    def __repr__(self) -> str:
        return f"BatchNorm({self.num_features}, eps={self.eps}, momentum={self.momentum})"

    @property
    def dtype(self) -> Any:
        return self.weight.data.dtype

    def _input_node(self, x: Any) -> Any:
        data = input_array(x, "x", "BatchNorm.forward", self.dtype)
        if data.ndim < 2 or data.shape[1] != self.num_features:
            raise ValueError(
                f"BatchNorm.forward: x has shape {data.shape}; expected [B, {self.num_features}, ...] "
                f"(axis 1 is the channel axis, num_features={self.num_features})"
            )
        if self.training and data.size // self.num_features < 2:
            raise ValueError(
                f"BatchNorm.forward: x has shape {data.shape}: one value per channel, no variance to take "
                "in train mode (give a batch of at least 2, or call .eval())"
            )
        if isinstance(x, Tensor) and x.requires_grad:
            return x if x.dtype == self.dtype else x.astype(self.dtype)
        return Tensor(data, name="x")

    def forward(self, x: Any, name: str = "y") -> Any:
        """Normalise ``x`` per channel and scale and shift it; in train mode also update the running statistics."""
        x = self._input_node(x)
        axes = (0, *range(2, x.ndim))
        along_channels = (1, -1, *(1,) * (x.ndim - 2))  # a [C] vector broadcast against [B, C, ...]
        with self.scope():
            if self.training:
                mean = x.mean(axis=axes, keepdims=True, name="mean")
                centered = x - mean
                centered.name = "centered"
                var = (centered * centered).mean(axis=axes, keepdims=True, name="var")
                xhat = centered / (var + self.eps).sqrt(name="std")
            else:
                mean, var = self.running_mean.reshape(along_channels), self.running_var.reshape(along_channels)
                xhat = (x - mean) / np.sqrt(var + self.eps)
            xhat.name = "xhat"
            output = xhat * self.weight.reshape(along_channels) + self.bias.reshape(along_channels)
            output.name = name
        if self.training:
            self._update_running(mean.data.reshape(-1), var.data.reshape(-1), x.size // self.num_features)  # type: ignore[union-attr]  # Tensors
        return output

    def _update_running(self, mean: Any, var: Any, n: Any) -> None:
        """PyTorch's running statistics: a moving average, with the unbiased variance ``var · n / (n − 1)``."""
        m = self.momentum
        self.running_mean = (1 - m) * self.running_mean + m * mean
        self.running_var = (1 - m) * self.running_var + m * var * n / (n - 1)
        self.num_batches_tracked += 1
