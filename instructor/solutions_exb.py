"""Reference solutions to the exb batch of exercises (convolution, pooling, recurrent nets,
forward mode, second order, tiled attention) — for teachers, never in the student handout.

Plain numpy, the chain rule one link at a time; the checker judges them
against the tape. ``instructor/solutions.py`` merges :data:`SOLUTIONS` into its own.
"""

import numpy as np

__all__ = [
    "conv1d_backward",
    "conv2d_backward",
    "maxpool_backward",
    "avgpool_backward",
    "SOLUTIONS",
]


def conv1d_backward(x, w, grad_y, stride, padding):
    padded = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    grad_padded = np.zeros_like(padded)
    grad_w = np.zeros_like(w)
    length = grad_y.shape[2]
    for k in range(w.shape[2]):
        # Kernel tap k met xp at stride·l + k in every window l: one strided slice.
        reach = slice(k, k + stride * (length - 1) + 1, stride)
        grad_padded[:, :, reach] += np.einsum("nol,oc->ncl", grad_y, w[:, :, k])
        grad_w[:, :, k] = np.einsum("nol,ncl->oc", grad_y, padded[:, :, reach])
    grad_b = grad_y.sum(axis=(0, 2))  # shared by the batch and every position
    return grad_padded[:, :, padding : padding + x.shape[2]], grad_w, grad_b


def conv2d_backward(x, w, grad_y, stride, padding):
    padded = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    grad_padded = np.zeros_like(padded)
    grad_w = np.zeros_like(w)
    rows, cols = grad_y.shape[2:]
    for p in range(w.shape[2]):
        for q in range(w.shape[3]):
            # Kernel tap (p, q) met xp at (stride·i + p, stride·j + q) in every window (i, j).
            reach = (slice(None), slice(None), slice(p, p + stride * (rows - 1) + 1, stride),
                     slice(q, q + stride * (cols - 1) + 1, stride))  # fmt: skip
            grad_padded[reach] += np.einsum("noij,oc->ncij", grad_y, w[:, :, p, q])
            grad_w[:, :, p, q] = np.einsum("noij,ncij->oc", grad_y, padded[reach])
    grad_b = grad_y.sum(axis=(0, 2, 3))
    height, width = x.shape[2:]
    return grad_padded[:, :, padding : padding + height, padding : padding + width], grad_w, grad_b


def maxpool_backward(x, grad_y, kernel, stride):
    windows = np.lib.stride_tricks.sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    flat = windows.reshape(*windows.shape[:4], kernel * kernel)
    rows, cols = np.divmod(np.argmax(flat, axis=-1), kernel)  # the arg-max's place in its window
    n, c, i, j = np.indices(rows.shape)
    grad_x = np.zeros_like(x)
    # Overlapping windows may share their maximum: add, never overwrite.
    np.add.at(grad_x, (n, c, stride * i + rows, stride * j + cols), grad_y)
    return grad_x


def avgpool_backward(x, grad_y, kernel, stride):
    rows, cols = grad_y.shape[2:]
    grad_x = np.zeros_like(x)
    for p in range(kernel):
        for q in range(kernel):
            # Entry (p, q) of every window: one slice with the stride as its step.
            grad_x[:, :, p : p + stride * (rows - 1) + 1 : stride, q : q + stride * (cols - 1) + 1 : stride] += (
                grad_y / kernel**2
            )
    return grad_x


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}
