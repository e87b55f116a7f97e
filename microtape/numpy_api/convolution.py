"""Convolution and pooling on Tensors, in PyTorch's names and layout: ``mt.conv2d(x, weight, bias)``.

``conv1d`` and ``conv2d`` record one ``conv`` op (plus an ``add`` for the
bias, broadcast over the batch and the positions); ``max_pool2d`` and
``avg_pool2d`` one op each. The ops and their derivatives live in
:mod:`microtape.ops.convolution`; this module checks what you pass and says
what was wrong before anything is recorded.

The input gradient of a convolution is a full correlation of the output's
gradient with the flipped kernel (see ``mt.ops.OPS["conv"].formula``).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from .. import ops
from ..engine import Node, record
from ..ops.convolution import output_size
from ..ops.core import Op, Shape
from ..values.tensor import Tensor

__all__ = ["conv1d", "conv2d", "max_pool2d", "avg_pool2d"]

#: What these functions take: a Tensor, or anything numpy reads as a real array (a constant; a Scalar is refused).
ArrayOperand: TypeAlias = "Tensor | npt.ArrayLike"
#: A stride, padding or kernel: one int for every spatial axis, or one int per axis.
IntOrInts: TypeAlias = "int | Sequence[int]"


def _as_tensor(x: Any, what: str, where: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Node):
        raise TypeError(f"{where}({what}=...): expected a Tensor or a numpy array, got a {type(x).__name__}")
    try:
        array = np.asarray(x)
    except Exception as error:  # a ragged list: numpy's message, with the argument's name
        raise TypeError(f"{where}({what}=...): expected a Tensor or a numpy array ({error})") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{where}({what}=...): expected real numbers, got an array of dtype {array.dtype}")
    return Tensor(array.astype(np.float64) if array.dtype.kind != "f" else array)


def _tuple(value: Any, n: int, what: str, where: str, smallest: int) -> tuple[int, ...]:
    """An int or a tuple of ``n`` ints, each at least ``smallest``, as a tuple of ``n`` Python ints."""
    values = (value,) * n if isinstance(value, (numbers.Integral, np.integer)) else value
    if (
        not isinstance(values, (tuple, list))
        or len(values) != n
        or not all(isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool) for v in values)
    ):
        expected = "an int" if n == 1 else "an int or a pair of ints"
        raise TypeError(f"{where}({what}={value!r}): expected {expected}")
    if not all(v >= smallest for v in values):  # type: ignore[operator]  # stubs: numbers.Integral has no __ge__
        rule = "positive" if smallest == 1 else "non-negative"
        raise ValueError(f"{where}({what}={value!r}): must be {rule}")
    return tuple(int(v) for v in values)


#: The most the windows laid out as rows (im2col) may take, in bytes: beyond it a call is refused up front.
WINDOWS_MEMORY_LIMIT = 4 * 2**30


def _check_windows(
    shape: Shape, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int], where: str, itemsize: int = 8
) -> None:
    """Refuse a kernel larger than the (padded) input along some axis (no window), or windows too large to lay out."""
    axes = "L" if len(kernel) == 1 else "HW"
    sizes = []
    for axis, length, k, s, p in zip(axes, shape[2:], kernel, stride, padding):
        sizes.append(output_size(length, k, s, p))
        if sizes[-1] < 1:
            padded = f"{length} + 2·{p} = {length + 2 * p}" if p else f"{length}"
            raise ValueError(f"{where}: the kernel ({k}) is larger than the padded input along {axis} ({padded})")
    # Every window, one row each: B · C · (windows) · (kernel entries) numbers — the im2col matrix.
    needed = shape[0] * shape[1] * int(np.prod(sizes)) * int(np.prod(kernel)) * itemsize
    if needed > WINDOWS_MEMORY_LIMIT:
        raise MemoryError(
            f"{where}: laying out the windows of x {tuple(shape)} takes about {needed / 2**30:,.1f} GiB "
            f"(limit {WINDOWS_MEMORY_LIMIT / 2**30:g} GiB); use a smaller batch, input or kernel"
        )


def _conv(
    x: ArrayOperand,
    weight: ArrayOperand,
    bias: ArrayOperand | None,
    stride: IntOrInts,
    padding: IntOrInts,
    n: int,
    name: str | None,
) -> Tensor:
    where = f"conv{n}d"
    layout = "[B, C_in, L]" if n == 1 else "[B, C_in, H, W]"
    kernel_layout = "[C_out, C_in, K]" if n == 1 else "[C_out, C_in, kH, kW]"
    x, weight = _as_tensor(x, "x", where), _as_tensor(weight, "weight", where)
    if x.ndim != n + 2:
        raise ValueError(f"{where}(x): expected {layout}, got shape {x.shape}")
    if weight.ndim != n + 2:
        raise ValueError(f"{where}(weight): expected {kernel_layout}, got shape {weight.shape}")
    if x.shape[1] != weight.shape[1]:
        raise ValueError(
            f"{where}: x has {x.shape[1]} input channels (axis 1 of {x.shape}) but weight expects "
            f"{weight.shape[1]} (axis 1 of {weight.shape})"
        )
    stride = _tuple(stride, n, "stride", where, 1)
    padding = _tuple(padding, n, "padding", where, 0)
    _check_windows(x.shape, weight.shape[2:], stride, padding, where, x.data.itemsize)
    if bias is not None:
        bias = _as_tensor(bias, "bias", where)
        if bias.shape != (weight.shape[0],):
            expected = f"({weight.shape[0]},) (one per output channel)"
            raise ValueError(f"{where}(bias): expected shape {expected}, got {bias.shape}")
    y = record(ops.conv, (x, weight), {"stride": stride, "padding": padding}, None if bias is not None else name)
    if bias is None:
        return y
    out = y + bias.reshape(1, -1, *(1,) * n)
    out.name = name
    return out


def conv1d(
    x: ArrayOperand,
    weight: ArrayOperand,
    bias: ArrayOperand | None = None,
    stride: IntOrInts = 1,
    padding: IntOrInts = 0,
    name: str | None = None,
) -> Tensor:
    """1-D convolution (PyTorch's ``F.conv1d``): ``x [B, C_in, L]``, ``weight [C_out, C_in, K]`` → ``[B, C_out, L']``.

    ``L' = (L + 2·padding − K) // stride + 1``; zeros are padded on both
    ends. Its input gradient is a full correlation of the output gradient with
    the flipped kernel; its weight gradient a correlation of the input with the
    output gradient.
    """
    return _conv(x, weight, bias, stride, padding, 1, name)


def conv2d(
    x: ArrayOperand,
    weight: ArrayOperand,
    bias: ArrayOperand | None = None,
    stride: IntOrInts = 1,
    padding: IntOrInts = 0,
    name: str | None = None,
) -> Tensor:
    """2-D convolution (PyTorch's ``F.conv2d``): ``x [B, C_in, H, W]``, ``weight [C_out, C_in, kH, kW]``.

    ``stride`` and ``padding`` are an int or a pair (rows, columns). The input
    gradient is a full correlation of the output gradient with the flipped
    kernel (see :func:`conv1d`).
    """
    return _conv(x, weight, bias, stride, padding, 2, name)


def _pool(op: Op, x: ArrayOperand, kernel: IntOrInts, stride: IntOrInts | None, name: str | None) -> Tensor:
    where = op.name
    x = _as_tensor(x, "x", where)
    if x.ndim != 4:
        raise ValueError(f"{where}(x): expected [B, C, H, W], got shape {x.shape}")
    kernel = _tuple(kernel, 2, "kernel", where, 1)
    stride = kernel if stride is None else _tuple(stride, 2, "stride", where, 1)
    _check_windows(x.shape, kernel, stride, (0, 0), where, x.data.itemsize)
    return record(op, (x,), {"kernel": kernel, "stride": stride}, name)


def max_pool2d(x: ArrayOperand, kernel: IntOrInts, stride: IntOrInts | None = None, name: str | None = None) -> Tensor:
    """The largest entry of each ``kernel`` window of ``x [B, C, H, W]`` (PyTorch's ``F.max_pool2d``, no padding).

    ``stride`` defaults to ``kernel`` (windows side by side). The gradient goes
    to each window's maximum; at a tie, to the first one reading row by row.
    """
    return _pool(ops.max_pool2d, x, kernel, stride, name)


def avg_pool2d(x: ArrayOperand, kernel: IntOrInts, stride: IntOrInts | None = None, name: str | None = None) -> Tensor:
    """The mean of each ``kernel`` window of ``x [B, C, H, W]`` (PyTorch's ``F.avg_pool2d``, no padding).

    ``stride`` defaults to ``kernel``. The gradient spreads ``g / (kH·kW)`` over each window.
    """
    return _pool(ops.avg_pool2d, x, kernel, stride, name)
