"""Exercise: the backward pass of 2-D average pooling.

The tape's answer: the windows cut out by recorded ``take`` (im2col,
:func:`microtape.exercises.lab.conv_chain.taped_windows`), ``mean`` over each
window, and the tape backward — no pooling primitive.
"""

from typing import Any

import numpy as np

from .. import Exercise, Mistake, Output, register
from .conv_chain import draw_pool, taped_pool
from .core import variant

__all__ = ["avgpool_backward"]


def avgpool_backward(x, grad_y, kernel, stride):
    r"""Backward pass of 2-D average pooling (square windows, no padding).

    Forward (done for you):
        y[n, c, i, j] = mean over p, q < kernel of x[n, c, stride·i + p, stride·j + q]
        x: [N, C, H, W]     y: [N, C, H_out, W_out]   H_out = (H − kernel) // stride + 1 (W_out alike)

    Arguments: ``x`` (only its shape matters), ``grad_y`` = dL/dy (shaped like
    ``y``), and the integers ``kernel`` and ``stride`` (``stride`` may differ
    from ``kernel``: smaller, the windows overlap; larger, some entries are in no window).

    Return ``grad_x``, shaped like ``x``.

    The maths: each of the ``kernel²`` entries of a window counts
    ``1/kernel²`` in its mean, so each gets ``grad_y[n, c, i, j] / kernel²``.
    An entry covered by several overlapping windows gets the sum of their
    shares (``+=``); an entry in no window gets 0.
    """
    raise NotImplementedError("avgpool_backward: write the backward pass of average pooling here")


# One dict per trial: (N, C, H, W), kernel, stride. Overlapping windows,
# gaps (stride > kernel) and stride != kernel appear in both sets; the last
# hidden trial is large (~130 000 entries).
VISIBLE = (
    {"shape": (2, 2, 4, 6), "kernel": 2, "stride": 2},
    {"shape": (1, 3, 6, 5), "kernel": 3, "stride": 1},
    {"shape": (2, 1, 7, 7), "kernel": 2, "stride": 3},
    {"shape": (1, 2, 5, 8), "kernel": 3, "stride": 2},
)
HIDDEN = (
    {"shape": (2, 3, 6, 6), "kernel": 3, "stride": 3},
    {"shape": (1, 2, 7, 5), "kernel": 2, "stride": 1},
    {"shape": (3, 1, 9, 8), "kernel": 3, "stride": 2},
    {"shape": (2, 2, 8, 9), "kernel": 2, "stride": 3},
    {"shape": (8, 16, 32, 32), "kernel": 3, "stride": 2, "shared": True},
)


def _mean(windows: Any, kernel: Any) -> Any:
    """Each window's mean: ``y`` [N, C, H_out, W_out]."""
    return windows.mean(axis=(3, 5), name="y")


def tape_gradients(inputs: dict[str, Any]) -> Any:
    return taped_pool(inputs, _mean)


# ---------------------------------------------------------------- known mistakes

_MISTAKES = (
    "not_divided",
    "divided_by_kernel_side",
    "divided_by_stride_area",
    "overlap_overwritten",
    "top_left_only",
    "overlaps_averaged",
)


def _with_mistake(mistake: Any, x: Any, grad_y: Any, kernel: Any, stride: Any) -> Any:
    """``{"grad_x": …}`` by the spreading with that one thing wrong (any other name is refused)."""
    if mistake not in _MISTAKES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_MISTAKES)}")
    rows, cols = grad_y.shape[2:]
    divisor = {"not_divided": 1, "divided_by_kernel_side": kernel, "divided_by_stride_area": stride * stride}
    share = grad_y / divisor.get(mistake, kernel * kernel)
    grad_x = np.zeros_like(x)
    covered = np.zeros(x.shape[2:])
    offsets = [(0, 0)] if mistake == "top_left_only" else [(p, q) for p in range(kernel) for q in range(kernel)]
    if mistake == "top_left_only":
        share = grad_y
    for p, q in offsets:
        where = (Ellipsis, slice(p, p + stride * (rows - 1) + 1, stride), slice(q, q + stride * (cols - 1) + 1, stride))
        if mistake == "overlap_overwritten":
            grad_x[where] = share  # a later window's share replaces an earlier one's
        else:
            grad_x[where] += share
        covered[where[1:]] += 1
    if mistake == "overlaps_averaged":
        grad_x = grad_x / np.maximum(covered, 1)
    return {"grad_x": grad_x}


EXERCISE = Exercise(
    name="avgpool_backward",
    stub=avgpool_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=draw_pool,
    tape_gradients=tape_gradients,
    title="Average pooling backward: grad_x shared out over each window",
    outputs=(Output("grad_x", "x"),),
    mistakes=(
        Mistake(
            "not_divided",
            "wrong_divisor",
            "your grad_x gives every entry of a window the whole grad_y: that is sum pooling. "
            "The mean divides by kernel², so each entry gets grad_y / kernel².",
            variant(_with_mistake, "not_divided"),
        ),
        Mistake(
            "divided_by_kernel_side",
            "wrong_divisor",
            "your grad_x divides by kernel, not kernel²: a window holds kernel × kernel entries.",
            variant(_with_mistake, "divided_by_kernel_side"),
        ),
        Mistake(
            "divided_by_stride_area",
            "wrong_divisor",
            "your grad_x divides by stride², not kernel²: the mean is over the kernel × kernel "
            "window, whatever the step between windows.",
            variant(_with_mistake, "divided_by_stride_area"),
        ),
        Mistake(
            "overlap_overwritten",
            "skipped_step",
            "your grad_x keeps only one window's share where windows overlap (an assignment, =). "
            "Each window an entry belongs to adds its share: use +=.",
            variant(_with_mistake, "overlap_overwritten"),
        ),
        Mistake(
            "top_left_only",
            "wrong_derivative",
            "your grad_x sends each window's whole gradient to its top-left entry, as a max pooling "
            "would. Every entry of the window counted in the mean: each gets grad_y / kernel².",
            variant(_with_mistake, "top_left_only"),
        ),
        Mistake(
            "overlaps_averaged",
            "wrong_derivative",
            "your grad_x averages the shares of the windows covering an entry. The entry fed each of "
            "those windows: the shares add up (a sum, not a mean).",
            variant(_with_mistake, "overlaps_averaged"),
        ),
    ),
)
register(EXERCISE)
