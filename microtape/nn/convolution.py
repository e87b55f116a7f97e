"""Conv1d and Conv2d: a convolution with its own weight and bias, in PyTorch's names and layout.

This module lets you build a small convolutional net::

    >>> import numpy as np, microtape as mt
    >>> conv = mt.nn.Conv2d(1, 4, kernel_size=3, padding=1, seed=0)
    >>> y = conv(np.ones((2, 1, 8, 8)))       # a Tensor [2, 4, 8, 8]
    >>> conv.weight.shape, conv.bias.shape
    ((4, 1, 3, 3), (4,))

``weight [out_channels, in_channels, *kernel_size]`` and ``bias [out_channels]``
are PyTorch's, so weights copy straight across (``conv.weight.data[...] =
torch_conv.weight.detach().numpy()``). The forward records one ``conv`` op
(see :mod:`microtape.ops.convolution`: its input gradient is a full
correlation with the flipped kernel) and an ``add`` for the bias.
"""

from typing import Any

import numpy as np

from ..numpy_api.convolution import conv1d, conv2d
from ..values.tensor import Tensor
from .checks import float_dtype, input_array, positive_int, seed_value
from .module import Module

__all__ = ["Conv1d", "Conv2d"]


def _sizes(value: Any, n: Any, what: str, smallest: Any) -> Any:
    """An int or ``n`` ints (each ≥ ``smallest``) as a tuple of ``n`` ints."""
    values = (value,) * n if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    if (
        not isinstance(values, (tuple, list))
        or len(values) != n
        or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= smallest for v in values)
    ):
        rule = "positive" if smallest == 1 else "non-negative"
        shape = "an int" if n == 1 else f"an int or {n} ints"
        raise ValueError(f"{what}={value!r}: expected {shape}, each {rule}")
    return tuple(int(v) for v in values)


class _ConvNd(Module):
    """What Conv1d and Conv2d share: the parameters, PyTorch's initialisation, the input check."""

    dims = 0
    function: Any = None

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: int = 1,
        padding: int = 0,
        bias: bool = True,
        *,
        seed: int | None = None,
        dtype: Any = np.float64,
    ) -> None:
        super().__init__()
        kind = type(self).__name__
        self.in_channels = positive_int(in_channels, f"{kind}(in_channels)")
        self.out_channels = positive_int(out_channels, f"{kind}(out_channels)")
        self.kernel_size = _sizes(kernel_size, self.dims, f"{kind}(kernel_size)", 1)
        self.stride = _sizes(stride, self.dims, f"{kind}(stride)", 1)
        self.padding = _sizes(padding, self.dims, f"{kind}(padding)", 0)
        if not isinstance(bias, (bool, np.bool_)):
            raise TypeError(f"{kind}(bias={bias!r}): expected True or False")
        dtype = float_dtype(dtype, f"{kind}(dtype)")
        rng = np.random.default_rng(seed_value(seed, f"{kind}(seed)"))
        # PyTorch's default: uniform in ±1/√fan_in, fan_in = in_channels · (entries of one kernel).
        bound = 1.0 / np.sqrt(self.in_channels * int(np.prod(self.kernel_size)))
        shape = (self.out_channels, self.in_channels, *self.kernel_size)
        self.weight = Tensor(rng.uniform(-bound, bound, shape).astype(dtype), requires_grad=True)
        self.bias = None
        if bias:
            self.bias = Tensor(rng.uniform(-bound, bound, self.out_channels).astype(dtype), requires_grad=True)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, bias={self.bias is not None})"
        )

    @property
    def dtype(self) -> Any:
        return self.weight.data.dtype

    def forward(self, x: Any, name: str = "y") -> Any:
        """The convolution of ``x`` with this layer's weight, plus its bias, on the tape."""
        where = f"{type(self).__name__}.forward"
        data = input_array(x, "x", where, self.dtype)
        if data.ndim != self.dims + 2 or data.shape[1] != self.in_channels:
            layout = "[B, C_in, L]" if self.dims == 1 else "[B, C_in, H, W]"
            raise ValueError(f"{where}: x has shape {data.shape}; expected {layout} with C_in={self.in_channels}")
        if not (isinstance(x, Tensor) and x.requires_grad):
            x = Tensor(data, name="x")
        elif x.dtype != self.dtype:
            x = x.astype(self.dtype)
        with self.scope():
            return type(self).function(x, self.weight, self.bias, self.stride, self.padding, name=name)


class Conv1d(_ConvNd):
    """``y = conv1d(x, weight) + bias`` on ``x [B, in_channels, L]`` (PyTorch's ``nn.Conv1d``)."""

    dims = 1
    function = staticmethod(conv1d)


class Conv2d(_ConvNd):
    """``y = conv2d(x, weight) + bias`` on ``x [B, in_channels, H, W]`` (PyTorch's ``nn.Conv2d``)."""

    dims = 2
    function = staticmethod(conv2d)
