"""Convolution and pooling, in PyTorch's layout: ``x [B, C_in, *spatial]``, ``weight [C_out, C_in, *kernel]``.

One convolution, written once for any number of spatial axes (1-D: ``[B, C, L]``,
2-D: ``[B, C, H, W]``), as an *im2col*: ``sliding_window_view`` lays every
window of the (zero-padded) input out as a row, stride picks every s-th
window, and one ``tensordot`` with the weight does all the multiply-adds::

    windows[b, c, i, k] = x_padded[b, c, i·s + k]
    y[b, o, i]          = Σ_c Σ_k windows[b, c, i, k] · weight[o, c, k]

(what deep learning calls a convolution is a *correlation*: the kernel is not flipped).

Its derivatives are two more convolutions, each its own op, so the reverse pass
through a convolution is itself a recorded program (``create_graph=True``):

``conv_transpose(z, weight)``
    the input's gradient: a **full correlation of the gradient with the flipped
    kernel** (the gradient dilated by the stride, padded by ``K − 1`` on both
    sides, correlated with the weight flipped along every spatial axis and with
    its two channel axes swapped), cropped by the padding — a "transposed
    convolution". It is computed as a *col2im* (each kernel offset adds its
    products into the padded input), so no zero of the dilation or padding is
    ever multiplied by a weight: a NaN weight reaches only the inputs it met;
``conv_weight_grad(x, z)``
    the weight's gradient: a correlation of the input's windows with the gradient.

All three are the partial derivatives of one number, ``T(x, z, w) = Σ windows(x) · z · w``
(linear in each of the three), so the VJP of each is the other two: the family
is closed under differentiation, to any order.

Pooling (2-D, no padding, stride defaulting to the kernel as in PyTorch):

``avg_pool2d``
    the mean of each window; its VJP spreads ``g / (kH·kW)`` over the window (a
    ``conv_transpose`` with a constant kernel; overlapping windows add up).
``max_pool2d``
    the largest entry of each window; its VJP sends ``g`` to that entry. **Ties:**
    the first maximum in the window, reading row by row (numpy's ``argmax``, and
    PyTorch's rule), takes the whole gradient; the others get 0. Forward and
    VJP are then a ``take`` and a ``scatter_add`` at those positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..engine.protocols import Value
from .broadcasting import shape_of, sum_of
from .core import Grads, Shape, primitive, value_of
from .shape import reshape, scatter_add

__all__ = ["conv", "conv_transpose", "conv_weight_grad", "max_pool2d", "avg_pool2d", "windows", "output_size"]


def output_size(length: int, kernel: int, stride: int, padding: int) -> int:
    """How many windows fit along one axis: ``(length + 2·padding − kernel) // stride + 1``."""
    return (length + 2 * padding - kernel) // stride + 1


def _spatial(n: int) -> tuple[int, ...]:
    """The spatial axes of a ``[B, C, *spatial]`` array with ``n`` of them."""
    return tuple(range(2, 2 + n))


def windows(x: Value, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]) -> Value:
    """im2col: ``x [B, C, *spatial]`` as ``[B, C, *out, *kernel]``, every window a view (no copy but the padding).

    ``windows(x)[b, c, i, j, p, q] = x_padded[b, c, i·sH + p, j·sW + q]``.
    """
    n = len(kernel)
    if any(padding):
        x = np.pad(x, ((0, 0), (0, 0), *((p, p) for p in padding)))
    view = sliding_window_view(x, tuple(kernel), axis=_spatial(n))
    every_stride = (slice(None), slice(None), *(slice(None, None, s) for s in stride))
    return view[every_stride]


# ---------------------------------------------------------------- the three convolutions (forward on numpy)


def _conv_forward(x: Value, weight: Value, stride: Sequence[int], padding: Sequence[int]) -> Value:
    n = weight.ndim - 2
    cols = windows(x, weight.shape[2:], stride, padding)  # [B, C, *out, *k]
    kernel_axes = tuple(range(2 + n, 2 + 2 * n))
    # Sum over the input channel and the kernel offsets: [B, *out, C_out], then the channel axis to 1.
    y = np.tensordot(cols, weight, axes=((1, *kernel_axes), (1, *_spatial(n))))
    return np.ascontiguousarray(np.moveaxis(y, -1, 1))


def _conv_transpose_forward(
    z: Value, weight: Value, input_shape: Shape, stride: Sequence[int], padding: Sequence[int]
) -> Value:
    """``x̄ = crop(full_correlation(dilate(z), flip(weight)ᵀ))``: the input gradient of a convolution.

    Each output position i saw the inputs i·s … i·s + K − 1; sending ``z[i]``
    back through the kernel is correlating the stride-dilated ``z`` with the
    kernel read backwards. It is computed the other way round (a *col2im*):
    every kernel offset k sends ``Σ_o z[b, o, i] · weight[o, c, k]`` to the
    padded input at ``i·s + k``, and the padding is cropped off. So an input
    gets only the products of the kernel entries that met it — never a
    ``0 · w`` from a zero put in by the dilation or the padding, which would
    make every entry NaN once one weight is (PyTorch's answer too:
    ``conv1d(ones(1, 1, 6), [[[nan, 1, 2]]])`` → ``[nan, nan, nan, nan, 3, 2]``).
    Inputs no window reached (the end of an axis the stride skipped) get 0.
    """
    n = weight.ndim - 2
    kernel, out = weight.shape[2:], z.shape[2:]
    # spread[k..., b, c, i...] = Σ_o z[b, o, i] · weight[o, c, k]: what offset k sends back from window i.
    spread = np.tensordot(weight, z, axes=((0,), (1,)))  # [C_in, *k, B, *out]
    spread = np.moveaxis(spread, 0, n + 1)  # [*k, B, C_in, *out] (a view)
    padded_shape = (z.shape[0], weight.shape[1], *(length + 2 * p for length, p in zip(input_shape[2:], padding)))
    padded = np.zeros(padded_shape, dtype=np.result_type(z, weight))
    every = (slice(None), slice(None))  # every batch entry and channel
    for offset in np.ndindex(*kernel):
        reached = tuple(slice(k, k + (o - 1) * s + 1, s) for k, o, s in zip(offset, out, stride))
        padded[every + reached] += spread[offset]
    crop = tuple(slice(p, p + length) for p, length in zip(padding, input_shape[2:]))
    return np.ascontiguousarray(padded[every + crop])


def _conv_weight_grad_forward(
    x: Value, z: Value, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int]
) -> Value:
    """``w̄[o, c, k] = Σ_b Σ_i windows(x)[b, c, i, k] · z[b, o, i]``: each kernel entry met these inputs."""
    n = len(kernel_size)
    cols = windows(x, kernel_size, stride, padding)  # [B, C, *out, *k]
    batch_and_out = (0, *_spatial(n))
    return np.tensordot(z, cols, axes=(batch_and_out, batch_and_out)).astype(np.result_type(x, z), copy=False)


# ---------------------------------------------------------------- their derivatives: each is the other two


def _kernel_of(weight: Value) -> Shape:
    return tuple(shape_of(weight)[2:])


def _conv_vjp(g: Value, ans: Value, x: Value, weight: Value, stride: Shape, padding: Shape) -> Grads:
    return (
        conv_transpose.bind(g, weight, input_shape=shape_of(x), stride=stride, padding=padding),
        conv_weight_grad.bind(x, g, kernel_size=_kernel_of(weight), stride=stride, padding=padding),
    )


def _conv_jvp(
    tangents: Sequence[Value | None], ans: Value, x: Value, weight: Value, stride: Shape, padding: Shape
) -> Value:
    tx, tw = tangents
    return sum_of(
        None if tx is None else _conv_forward(tx, weight, stride, padding),
        None if tw is None else _conv_forward(x, tw, stride, padding),
    )


def _conv_transpose_vjp(
    g: Value, ans: Value, z: Value, weight: Value, input_shape: Shape, stride: Shape, padding: Shape
) -> Grads:
    return (
        conv.bind(g, weight, stride=stride, padding=padding),
        conv_weight_grad.bind(g, z, kernel_size=_kernel_of(weight), stride=stride, padding=padding),
    )


def _conv_transpose_jvp(
    tangents: Sequence[Value | None],
    ans: Value,
    z: Value,
    weight: Value,
    input_shape: Shape,
    stride: Shape,
    padding: Shape,
) -> Value:
    tz, tw = tangents
    return sum_of(
        None if tz is None else _conv_transpose_forward(tz, weight, input_shape, stride, padding),
        None if tw is None else _conv_transpose_forward(z, tw, input_shape, stride, padding),
    )


def _conv_weight_grad_vjp(
    g: Value, ans: Value, x: Value, z: Value, kernel_size: Shape, stride: Shape, padding: Shape
) -> Grads:
    return (
        conv_transpose.bind(z, g, input_shape=shape_of(x), stride=stride, padding=padding),
        conv.bind(x, g, stride=stride, padding=padding),
    )


def _conv_weight_grad_jvp(
    tangents: Sequence[Value | None],
    ans: Value,
    x: Value,
    z: Value,
    kernel_size: Shape,
    stride: Shape,
    padding: Shape,
) -> Value:
    tx, tz = tangents
    return sum_of(
        None if tx is None else _conv_weight_grad_forward(tx, z, kernel_size, stride, padding),
        None if tz is None else _conv_weight_grad_forward(x, tz, kernel_size, stride, padding),
    )


# ---------------------------------------------------------------- what they allocate for their own step
# Counted in numbers (times the itemsize at the end), from the shapes: what the memory view adds to a
# step besides the arrays on the tape. Measured against tracemalloc in tests/viz/test_memory.py.


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _padded_copy(x: Shape, padding: Sequence[int]) -> int:
    """``np.pad``'s copy of the input (none without padding: the windows are a view of ``x`` itself)."""
    return _size((*x[:2], *(n + 2 * p for n, p in zip(x[2:], padding)))) if any(padding) else 0


def _conv_forward_extra(x: Shape, weight: Shape, out: Shape, padding: Sequence[int]) -> int:
    """The padded copy and the im2col columns ``[B·L', C·K]`` ``tensordot`` lays out (the product then
    takes the output's size, which the output's own copy replaces)."""
    columns = x[0] * x[1] * _size(out[2:]) * _size(weight[2:])
    return _padded_copy(x, padding) + columns


def _conv_transpose_peak(z: Shape, weight: Shape, x: Shape, padding: Sequence[int]) -> int:
    """The most alive at once in ``_conv_transpose_forward``, its result included.

    ``z`` transposed for ``tensordot`` with the products ``[C_in·K, B·L']``
    (``spread``); then ``spread``, the zero-padded input and the cropped copy.
    """
    spread = weight[1] * _size(weight[2:]) * z[0] * _size(z[2:])
    padded = _size((*x[:2], *(n + 2 * p for n, p in zip(x[2:], padding))))
    cropped = _size(x) if any(padding) else 0  # without padding the padded array is the result
    return max(_size(z) + spread, spread + padded + cropped)


def _weight_grad_peak(x: Shape, z: Shape, weight: Shape, padding: Sequence[int]) -> int:
    """The padded copy, ``z`` transposed and the im2col columns, all at once in ``tensordot``; the result."""
    return _conv_forward_extra(x, weight, z, padding) + _size(z) + _size(weight)


def _conv_scratch(shapes: Sequence[Shape], itemsize: int, stride: Shape, padding: Shape) -> tuple[int, int]:
    y, x, weight = shapes
    # The VJP runs conv_transpose (x̄ is then kept), then conv_weight_grad; beyond the two gradients:
    vjp = max(
        _conv_transpose_peak(y, weight, x, padding) - _size(x), _weight_grad_peak(x, y, weight, padding) - _size(weight)
    )
    return _conv_forward_extra(x, weight, y, padding) * itemsize, vjp * itemsize


def _conv_transpose_scratch(
    shapes: Sequence[Shape], itemsize: int, input_shape: Shape, stride: Shape, padding: Shape
) -> tuple[int, int]:
    x, z, weight = shapes  # (its output is the input gradient of the conv it transposes)
    forward = _conv_transpose_peak(z, weight, x, padding) - _size(x)
    vjp = max(_conv_forward_extra(x, weight, z, padding), _weight_grad_peak(x, z, weight, padding) - _size(weight))
    return forward * itemsize, vjp * itemsize


def _conv_weight_grad_scratch(
    shapes: Sequence[Shape], itemsize: int, kernel_size: Shape, stride: Shape, padding: Shape
) -> tuple[int, int]:
    weight, x, z = shapes
    forward = _weight_grad_peak(x, z, weight, padding) - _size(weight)
    vjp = max(_conv_transpose_peak(z, weight, x, padding) - _size(x), _conv_forward_extra(x, weight, z, padding))
    return forward * itemsize, vjp * itemsize


def _conv_label(params: dict[str, Any]) -> str:
    """What a graph's box says: ``2-D``, then the stride and padding when they are not 1 and 0."""
    stride, padding = params.get("stride", (1,)), params.get("padding", (0,))
    text = f"{len(stride)}-D"
    if any(s != 1 for s in stride):
        text += f" stride {_pair_text(stride)}"
    if any(padding):
        text += f" pad {_pair_text(padding)}"
    return text


def _pair_text(values: Sequence[int]) -> str:
    return str(values[0]) if len(set(values)) == 1 else "×".join(str(v) for v in values)


conv = primitive(
    "conv",
    _conv_forward,
    _conv_vjp,
    [
        "full correlation of {g} (dilated by the stride) with the flipped {weight}, cropped by the padding",
        "correlation of the windows of {x} with {g}",
    ],
    [
        r"\bar x = \mathrm{crop}\big(\bar y \star_{\mathrm{full}} \mathrm{flip}(W)\big)",
        r"\bar W_{oc k} = \sum_{b,i} x^{\mathrm{pad}}_{b,c,\,i s + k}\, \bar y_{b o i}",
    ],
    inputs=("x", "weight"),
    note="y[b,o,i] = Σ_c Σ_k x_pad[b,c,i·s+k] weight[o,c,k]",
    example_params={"stride": (1,), "padding": (0,)},
    label=_conv_label,
    jvp=_conv_jvp,
    reads=("x", "weight"),
    scratch=_conv_scratch,
)

conv_transpose = primitive(
    "conv_transpose",
    _conv_transpose_forward,
    _conv_transpose_vjp,
    ["conv({g}, {weight}): the convolution it transposes", "correlation of the windows of {g} with {z}"],
    [r"\bar z = \bar X \star W", r"\bar W_{ock} = \sum_{b,i} \bar X^{\mathrm{pad}}_{b,c,\,is+k}\, z_{boi}"],
    inputs=("z", "weight"),
    note="the input gradient of conv: z dilated by the stride, fully correlated with the flipped weight",
    example_params={"input_shape": (1, 1, 3), "stride": (1,), "padding": (0,)},
    label=_conv_label,
    jvp=_conv_transpose_jvp,
    reads=("z", "weight"),
    scratch=_conv_transpose_scratch,
)

conv_weight_grad = primitive(
    "conv_weight_grad",
    _conv_weight_grad_forward,
    _conv_weight_grad_vjp,
    ["conv_transpose({z}, {g}): the full correlation with the flipped kernel", "conv({x}, {g})"],
    [r"\bar x = \mathrm{crop}\big(z \star_{\mathrm{full}} \mathrm{flip}(\bar W)\big)", r"\bar z = x \star \bar W"],
    inputs=("x", "z"),
    note="the weight gradient of conv: W[o,c,k] = Σ_b Σ_i x_pad[b,c,i·s+k] z[b,o,i]",
    example_params={"kernel_size": (2,), "stride": (1,), "padding": (0,)},
    label=_conv_label,
    jvp=_conv_weight_grad_jvp,
    reads=("x", "z"),
    scratch=_conv_weight_grad_scratch,
)


# ---------------------------------------------------------------- pooling


def _pool_windows(x: Value, kernel: Shape, stride: Shape) -> Value:
    return windows(x, kernel, stride, (0, 0))  # [B, C, oH, oW, kH, kW]


def _avg_pool2d_forward(x: Value, kernel: Shape, stride: Shape) -> Value:
    return _pool_windows(x, kernel, stride).mean(axis=(-2, -1))


def _avg_pool2d_vjp(g: Value, ans: Value, x: Value, kernel: Shape, stride: Shape) -> Grads:
    # Each window's mean sends g / (kH·kW) to each of its entries: a transposed convolution of every
    # channel alone with the constant kernel 1/(kH·kW). Channels are folded into the batch for it.
    batch, channels, height, width = shape_of(x)
    out_h, out_w = shape_of(g)[2:]
    spread = np.full((1, 1, *kernel), 1.0 / (kernel[0] * kernel[1]), dtype=np.result_type(value_of(g)))
    lone = reshape.bind(g, shape=(batch * channels, 1, out_h, out_w))
    grad = conv_transpose.bind(
        lone, spread, input_shape=(batch * channels, 1, height, width), stride=stride, padding=(0, 0)
    )
    return (reshape.bind(grad, shape=(batch, channels, height, width)),)


def _avg_pool2d_scratch(shapes: Sequence[Shape], itemsize: int, kernel: Shape, stride: Shape) -> tuple[int, int]:
    # The VJP is a conv_transpose of every channel alone (no padding: its padded array is the result).
    y, x = shapes
    lone = (x[0] * x[1], 1)
    peak = _conv_transpose_peak((*lone, *y[2:]), (1, 1, *kernel), (*lone, *x[2:]), (0, 0))
    return 0, (peak - _size(x)) * itemsize


def _max_pool2d_scratch(shapes: Sequence[Shape], itemsize: int, kernel: Shape, stride: Shape) -> tuple[int, int]:
    # The VJP's _max_positions: the windows copied as rows, then int64 index arrays of the output's
    # size (the argmax, its rows and columns, the flat positions) alive together.
    y, _ = shapes
    return 0, _size(y) * (_size(kernel) * itemsize + 4 * 8)


def _pool_label(params: dict[str, Any]) -> str:
    kernel, stride = params.get("kernel", (2, 2)), params.get("stride", (2, 2))
    text = _pair_text(kernel) if len(set(kernel)) > 1 else f"{kernel[0]}×{kernel[0]}"
    return text if tuple(stride) == tuple(kernel) else f"{text} stride {_pair_text(stride)}"


avg_pool2d = primitive(
    "avg_pool2d",
    _avg_pool2d_forward,
    _avg_pool2d_vjp,
    ["{g} / (kH·kW) spread over each window (overlapping windows add up)"],
    [r"\bar x_{b c\, h w} = \frac{1}{k_H k_W} \sum_{(i,j) \ni (h,w)} \bar y_{b c\, i j}"],
    example_params={"kernel": (2, 2), "stride": (2, 2)},
    label=_pool_label,
    jvp=lambda tangents, ans, x, kernel, stride: _avg_pool2d_forward(tangents[0], kernel, stride),
    reads=(),
    scratch=_avg_pool2d_scratch,
)


def _max_positions(x: Value, kernel: Shape, stride: Shape) -> Value:
    """Where each window's maximum is, as flat indices into ``x``: the first maximum, row by row (ties)."""
    batch, channels, height, width = x.shape
    cols = _pool_windows(x, kernel, stride)
    out_h, out_w = cols.shape[2:4]
    # (The window's size said outright: an empty batch has no entries to infer it from.)
    entries = cols.reshape(batch, channels, out_h, out_w, kernel[0] * kernel[1])
    first = entries.argmax(axis=-1)  # argmax keeps the first of a tie
    rows = np.arange(out_h)[:, None] * stride[0] + first // kernel[1]
    columns = np.arange(out_w)[None, :] * stride[1] + first % kernel[1]
    planes = np.arange(batch * channels).reshape(batch, channels, 1, 1)
    return (planes * height + rows) * width + columns


def _max_pool2d_forward(x: Value, kernel: Shape, stride: Shape) -> Value:
    return _pool_windows(x, kernel, stride).max(axis=(-2, -1))


def _max_pool2d_vjp(g: Value, ans: Value, x: Value, kernel: Shape, stride: Shape) -> Grads:
    # Only the maximum of each window moved y, so g goes there (and adds up where windows share it).
    positions = _max_positions(value_of(x), kernel, stride)
    size = int(np.prod(shape_of(x)))
    grad = scatter_add.bind(g, shape=(size,), indices=positions, axis=0)
    return (reshape.bind(grad, shape=shape_of(x)),)


# One input: forward mode calls a JVP only when some input has a tangent, so tangents[0] is never None.
def _max_pool2d_jvp(tangents: Sequence[Value], ans: Value, x: Value, kernel: Shape, stride: Shape) -> Value:
    return np.take(tangents[0].reshape(-1), _max_positions(x, kernel, stride))


max_pool2d = primitive(
    "max_pool2d",
    _max_pool2d_forward,
    _max_pool2d_vjp,
    ["{g} sent to each window's maximum of {x} (the first one, row by row, at a tie); 0 elsewhere"],
    [r"\bar x_{bchw} = \sum_{(i,j):\ (h,w) = \arg\max_{\mathrm{window}(i,j)} x} \bar y_{bcij}"],
    note="ties: the first maximum in the window, row by row, takes the gradient (as PyTorch)",
    example_params={"kernel": (2, 2), "stride": (2, 2)},
    label=_pool_label,
    jvp=_max_pool2d_jvp,
    reads=("x",),
    scratch=_max_pool2d_scratch,
)
