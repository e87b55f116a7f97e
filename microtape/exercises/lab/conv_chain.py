"""Convolution's forward on the tape (an im2col of recorded ops) and its hand chain with one known mistake.

The two convolution exercises (``conv1d_backward``, ``conv2d_backward``) share
this: :func:`taped_conv` is the tape's answer — the forward built from
microtape's existing recorded ops (``pad``, ``Tensor.take`` of the windows,
``einsum``), not from a convolution primitive, so it checks a student
independently of any conv op — and :func:`conv_with_mistake` is the chain a
student writes, with exactly one named thing wrong. It refuses any other
name, so no call of it is the right answer. :func:`conv_exercise` declares
either exercise from these (what differs is the trials and the hints' words);
the pooling exercises share :func:`draw_pool` and :func:`taped_pool`.

Shapes (one or two spatial axes, written ``...``): ``x [N, C_in, ...]``,
``w [C_out, C_in, *kernel]``, ``b [C_out]``, output
``y [N, C_out, ...]`` with each side ``(size + 2·padding − kernel) // stride + 1``.
"""

import itertools
from typing import Any

import numpy as np

from ...engine import Tape
from ...numpy_api.functions import einsum
from ...numpy_api.joining import pad
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output
from .core import variant

__all__ = [
    "out_size",
    "draw_conv",
    "draw_pool",
    "taped_windows",
    "taped_conv",
    "taped_pool",
    "CONV_MISTAKES",
    "CONV_KINDS",
    "conv_with_mistake",
    "conv_exercise",
]


def out_size(size: Any, kernel: Any, stride: Any, padding: Any) -> Any:
    """The number of window positions along one axis."""
    return (size + 2 * padding - kernel) // stride + 1


def draw_conv(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    """One trial: ``x``, ``w``, ``grad_y``, ``stride``, ``padding`` and the bias ``b`` the tape needs."""
    batch, c_in, c_out, sizes, kernels, stride, padding = (
        case[key] for key in ("N", "C_in", "C_out", "size", "kernel", "stride", "padding")
    )
    outs = tuple(out_size(s, k, stride, padding) for s, k in zip(sizes, kernels, strict=True))
    return {
        "x": rng.standard_normal((batch, c_in, *sizes)),
        "w": rng.standard_normal((c_out, c_in, *kernels)),
        "grad_y": rng.standard_normal((batch, c_out, *outs)),
        "stride": int(stride),
        "padding": int(padding),
        "b": rng.standard_normal(c_out),
    }


def draw_pool(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    """One pooling trial: ``x`` [N, C, H, W], ``grad_y`` of the pooled shape, ``kernel`` and ``stride``."""
    batch, channels, height, width = case["shape"]
    kernel, stride = case["kernel"], case["stride"]
    outs = (out_size(height, kernel, stride, 0), out_size(width, kernel, stride, 0))
    return {
        "x": rng.standard_normal(case["shape"]),
        "grad_y": rng.standard_normal((batch, channels, *outs)),
        "kernel": int(kernel),
        "stride": int(stride),
    }


def _window_indices(size: Any, kernel: Any, stride: Any) -> Any:
    """``[out, kernel]``: the padded positions each window reads (window ``i`` starts at ``stride·i``)."""
    starts = stride * np.arange((size - kernel) // stride + 1)
    return starts[:, None] + np.arange(kernel)[None, :]


def taped_windows(tensor: Any, kernels: Any, stride: Any, first_axis: int = 2) -> Any:
    """im2col, recorded: each spatial axis from ``first_axis`` on becomes (window, offset) by ``Tensor.take``.

    ``[N, C, H, W]`` with kernels ``(KH, KW)`` becomes ``[N, C, H_out, KH, W_out, KW]``;
    the gradient of ``take`` is a scatter-add, so an entry read by two
    overlapping windows gets both gradients.
    """
    windows = tensor
    for axis, kernel in enumerate(kernels):
        where = first_axis + 2 * axis
        windows = windows.take(_window_indices(tensor.shape[first_axis + axis], kernel, stride), axis=where)
    return windows


def taped_conv(inputs: dict[str, Any]) -> Any:
    """``(grad_x, grad_w, grad_b)`` by the tape: im2col by recorded ``take``, then one ``einsum``."""
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    weight = Tensor(inputs["w"], requires_grad=True, name="w")
    bias = Tensor(inputs["b"], requires_grad=True, name="b")
    stride, padding = inputs["stride"], inputs["padding"]
    spatial = x.ndim - 2
    with Tape() as tape:
        padded = pad(x, ((0, 0), (0, 0)) + ((padding, padding),) * spatial, name="x_padded")
        # Each spatial axis becomes (window, offset): [N, C, H, W] -> [N, C, Ho, KH, Wo, KW].
        windows = taped_windows(padded, inputs["w"].shape[2:], stride)
        if spatial == 1:
            y = einsum("ncak,ock->noa", windows, weight)
            y = y + bias.reshape(-1, 1)
        else:
            y = einsum("ncaibj,ocij->noab", windows, weight)
            y = y + bias.reshape(-1, 1, 1)
    tape.backward(y, inputs["grad_y"])
    return x.grad, weight.grad, bias.grad


def taped_pool(inputs: dict[str, Any], pool: Any) -> Any:
    """A pooling exercise's answer: ``(grad_x,)`` by the tape, ``y = pool(windows, kernel)`` of ``x``'s windows.

    The windows are cut out by recorded ``take`` (:func:`taped_windows`,
    ``[N, C, H_out, kernel, W_out, kernel]``); ``pool`` reduces each to one
    entry of ``y`` with recorded ops — no pooling primitive.
    """
    x = Tensor(inputs["x"], requires_grad=True, name="x")
    kernel, stride = inputs["kernel"], inputs["stride"]
    with Tape() as tape:
        y = pool(taped_windows(x, (kernel, kernel), stride), kernel)
    tape.backward(y, inputs["grad_y"])
    return (x.grad,)


# ---------------------------------------------------------------- the hand chain, one thing wrong

#: The outputs each mistake changes.
CONV_MISTAKES = {
    "kernel_not_flipped": ("grad_x",),
    "input_grad_stride_ignored": ("grad_x",),
    "padding_not_cropped": ("grad_x",),
    "w_grad_flipped": ("grad_w",),
    "w_grad_stride_ignored": ("grad_w",),
    "b_not_summed_over_positions": ("grad_b",),
}

#: The kind of each mistake (its hint, worded for one or two axes, is the exercise's).
CONV_KINDS = {
    "kernel_not_flipped": "wrong_derivative",
    "input_grad_stride_ignored": "skipped_step",
    "padding_not_cropped": "padding_kept",
    "w_grad_flipped": "wrong_derivative",
    "w_grad_stride_ignored": "skipped_step",
    "b_not_summed_over_positions": "broadcast_not_summed",
}


def _placed(offset: Any, count: int, stride: Any) -> Any:
    """The positions ``offset, offset + stride, …`` (``count`` of them) as a slice."""
    return slice(offset, offset + stride * (count - 1) + 1, stride)


def conv_with_mistake(mistake: Any, x: Any, weight: Any, grad_y: Any, stride: Any, padding: Any) -> Any:
    """The outputs ``mistake`` changes, computed by the chain with that one thing wrong."""
    if mistake not in CONV_MISTAKES:
        raise ValueError(f"conv_with_mistake(mistake={mistake!r}): expected one of {', '.join(CONV_MISTAKES)}")
    spatial = x.ndim - 2
    kernels, outs = weight.shape[2:], grad_y.shape[2:]
    padded = np.pad(x, ((0, 0), (0, 0)) + ((padding, padding),) * spatial)
    grad_padded = np.zeros_like(padded)
    grad_weight = np.zeros_like(weight)
    letters = "ab"[:spatial]
    for offset in itertools.product(*(range(k) for k in kernels)):
        # Where this kernel entry touched the input: every window's start + offset.
        step_x = 1 if mistake == "input_grad_stride_ignored" else stride
        step_w = 1 if mistake == "w_grad_stride_ignored" else stride
        tap = tuple(k - 1 - o for o, k in zip(offset, kernels)) if mistake == "kernel_not_flipped" else offset
        reach_x = (slice(None), slice(None)) + tuple(_placed(o, n, step_x) for o, n in zip(offset, outs))
        reach_w = (slice(None), slice(None)) + tuple(_placed(o, n, step_w) for o, n in zip(offset, outs))
        grad_padded[reach_x] += np.einsum(f"no{letters},oc->nc{letters}", grad_y, weight[(Ellipsis,) + tap])
        grad_weight[(Ellipsis,) + offset] = np.einsum(f"no{letters},nc{letters}->oc", grad_y, padded[reach_w])
    if mistake == "w_grad_flipped":
        grad_weight = grad_weight[(Ellipsis,) + (slice(None, None, -1),) * spatial]
    crop = (slice(None), slice(None)) + tuple(slice(padding, padding + n) for n in x.shape[2:])
    grad_x = grad_padded if mistake == "padding_not_cropped" else grad_padded[crop]
    positions = (0, *range(2, grad_y.ndim))
    grad_bias = grad_y.sum(axis=0) if mistake == "b_not_summed_over_positions" else grad_y.sum(axis=positions)
    every = {"grad_x": grad_x, "grad_w": grad_weight, "grad_b": grad_bias}
    return {name: every[name] for name in CONV_MISTAKES[mistake]}


def conv_exercise(stub: Any, *, title: str, visible: Any, hidden: Any, hints: Any) -> Exercise:
    """The :class:`~microtape.exercises.Exercise` of a convolution's backward (one for the family).

    ``stub`` is the student's function, ``visible`` and ``hidden`` its trials,
    ``hints`` the words of each known mistake (one per name of
    :data:`CONV_MISTAKES`, in any order). The outputs, the tape's answer and
    the mistakes' chains are this module's, for one or two spatial axes.
    """
    if set(hints) != set(CONV_MISTAKES):
        raise ValueError(f"conv_exercise(hints=...): expected a hint for each of {', '.join(CONV_MISTAKES)}")
    return Exercise(
        name=stub.__name__,
        stub=stub,
        visible=visible,
        hidden=hidden,
        make_inputs=draw_conv,
        tape_gradients=taped_conv,
        title=title,
        outputs=(Output("grad_x", "x"), Output("grad_w", "w"), Output("grad_b", "b")),
        mistakes=tuple(
            Mistake(name, CONV_KINDS[name], hints[name], variant(conv_with_mistake, name)) for name in CONV_MISTAKES
        ),
    )
