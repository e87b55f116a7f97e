"""Exercise: the backward pass of 2-D max pooling (the gradient routed to each window's arg-max).

The tape's answer: the windows cut out by recorded ``take`` (im2col,
:func:`microtape.exercises.lab.conv_chain.taped_windows`), ``max`` over each
window, and the tape backward — no pooling primitive.
"""

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import Exercise, Mistake, Output, register
from .conv_chain import draw_pool, taped_pool
from .core import variant

__all__ = ["maxpool_backward"]


def maxpool_backward(x, grad_y, kernel, stride):
    r"""Backward pass of 2-D max pooling (square windows, no padding).

    Forward (done for you):
        y[n, c, i, j] = max over p, q < kernel of x[n, c, stride·i + p, stride·j + q]
        x: [N, C, H, W]     y: [N, C, H_out, W_out]   H_out = (H − kernel) // stride + 1 (W_out alike)

    Arguments: ``x``, ``grad_y`` = dL/dy (shaped like ``y``), and the integers
    ``kernel`` and ``stride`` (``stride`` may be smaller than ``kernel``: then
    the windows overlap).

    Return ``grad_x``, shaped like ``x``.

    The maths: a max passes its input through unchanged at the arg-max and
    ignores the others, so window (i, j)'s gradient goes, whole, to the one
    entry of ``x`` that was its maximum (``np.argmax`` of the flattened window,
    then ``divmod(index, kernel)`` gives its row and column in the window); the
    rest get 0. Where windows overlap, one entry can be the maximum of several
    windows: its gradients add up (``+=`` or ``np.add.at``, not ``=``).
    """
    raise NotImplementedError("maxpool_backward: write the backward pass of max pooling here")


# One dict per trial: (N, C, H, W), kernel, stride. Overlapping windows
# (stride < kernel) appear in both sets; the last hidden trial is large
# (~130 000 entries: numeric differentiation cannot finish within the time limit).
VISIBLE = (
    {"shape": (2, 2, 4, 6), "kernel": 2, "stride": 2},
    {"shape": (1, 3, 6, 5), "kernel": 3, "stride": 1},
    {"shape": (2, 1, 7, 7), "kernel": 3, "stride": 2},
    {"shape": (1, 2, 5, 8), "kernel": 2, "stride": 1},
)
HIDDEN = (
    {"shape": (2, 3, 6, 6), "kernel": 2, "stride": 2},
    {"shape": (1, 2, 7, 5), "kernel": 3, "stride": 1},
    {"shape": (3, 1, 9, 8), "kernel": 3, "stride": 2},
    {"shape": (2, 2, 6, 9), "kernel": 2, "stride": 1},
    {"shape": (8, 16, 32, 32), "kernel": 3, "stride": 2, "shared": True},
)


def _max(windows: Any, kernel: Any) -> Any:
    """Each window's maximum: ``y`` [N, C, H_out, W_out] (the window flattened row by row, then ``max``)."""
    batch, channels, rows, _, cols, _ = windows.shape
    flat = windows.transpose(0, 1, 2, 4, 3, 5).reshape(batch, channels, rows, cols, kernel * kernel)
    return flat.max(axis=-1, name="y")


def tape_gradients(inputs: dict[str, Any]) -> Any:
    return taped_pool(inputs, _max)


# ---------------------------------------------------------------- known mistakes

_MISTAKES = (
    "to_every_entry",
    "grad_y_left_out",
    "overlap_overwritten",
    "first_entry",
    "argmax_unraveled_wrong",
    "routed_to_argmin",
)


def _with_mistake(mistake: Any, x: Any, grad_y: Any, kernel: Any, stride: Any) -> Any:
    """``{"grad_x": …}`` by the routing with that one thing wrong (any other name is refused)."""
    if mistake not in _MISTAKES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_MISTAKES)}")
    windows = sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    batch, channels, rows, cols = windows.shape[:4]
    grad_x = np.zeros_like(x)
    if mistake == "to_every_entry":
        share = grad_y
        for p in range(kernel):
            for q in range(kernel):
                grad_x[:, :, p : p + stride * (rows - 1) + 1 : stride, q : q + stride * (cols - 1) + 1 : stride] += (
                    share
                )
        return {"grad_x": grad_x}
    flat = windows.reshape(batch, channels, rows, cols, kernel * kernel)
    if mistake == "first_entry":
        index = np.zeros(flat.shape[:4], dtype=int)
    else:
        index = (np.argmin if mistake == "routed_to_argmin" else np.argmax)(flat, axis=-1)
    p, q = np.divmod(index, kernel)
    if mistake == "argmax_unraveled_wrong":
        p, q = q, p
    n, c, i, j = np.indices(index.shape)
    where = (n, c, stride * i + p, stride * j + q)
    if mistake == "overlap_overwritten":
        grad_x[where] = grad_y  # one window's gradient replaces another's: the last one wins
    else:
        np.add.at(grad_x, where, np.ones_like(grad_y) if mistake == "grad_y_left_out" else grad_y)
    return {"grad_x": grad_x}


EXERCISE = Exercise(
    name="maxpool_backward",
    stub=maxpool_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=draw_pool,
    tape_gradients=tape_gradients,
    title="Max pooling backward: grad_x routed to each window's arg-max",
    outputs=(Output("grad_x", "x"),),
    mistakes=(
        Mistake(
            "to_every_entry",
            "wrong_derivative",
            "your grad_x gives each window's gradient to every entry of the window. Only the maximum "
            "reached y: route grad_y[n, c, i, j] to the arg-max of window (i, j); the others get 0.",
            variant(_with_mistake, "to_every_entry"),
        ),
        Mistake(
            "grad_y_left_out",
            "skipped_step",
            "your grad_x puts 1 at each window's arg-max: that is ∂y/∂x, the local derivative. "
            "Multiply by the gradient arriving from above: the arg-max gets grad_y[n, c, i, j].",
            variant(_with_mistake, "grad_y_left_out"),
        ),
        Mistake(
            "overlap_overwritten",
            "skipped_step",
            "your grad_x keeps only one window's gradient where an entry is the maximum of several "
            "overlapping windows (grad_x[idx] = …). They add up: use np.add.at(grad_x, idx, grad_y) or +=.",
            variant(_with_mistake, "overlap_overwritten"),
        ),
        Mistake(
            "first_entry",
            "wrong_derivative",
            "your grad_x sends each window's gradient to its first (top-left) entry. It goes to the "
            "window's arg-max: np.argmax of the flattened window, then divmod(index, kernel).",
            variant(_with_mistake, "first_entry"),
        ),
        Mistake(
            "argmax_unraveled_wrong",
            "transposed",
            "your grad_x finds the arg-max but swaps its row and column: the flattened window is "
            "row-major, so row, col = divmod(index, kernel) (row = index // kernel).",
            variant(_with_mistake, "argmax_unraveled_wrong"),
        ),
        Mistake(
            "routed_to_argmin",
            "wrong_derivative",
            "your grad_x routes each window's gradient to its minimum. Max pooling kept the maximum: np.argmax.",
            variant(_with_mistake, "routed_to_argmin"),
        ),
    ),
)
register(EXERCISE)
