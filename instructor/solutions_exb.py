"""Reference solutions to the exb batch of exercises (convolution, pooling, recurrent nets,
forward mode, second order, tiled attention) — for teachers, never in the student handout.

Plain numpy, the chain rule one link at a time; the checker judges them
against the tape. ``instructor/solutions.py`` merges :data:`SOLUTIONS` into its own.
"""

import itertools

import numpy as np

__all__ = ["conv1d_backward", "conv2d_backward", "SOLUTIONS"]


def _conv_backward(x, w, grad_y, stride, padding):
    """Any number of spatial axes: scatter each kernel entry's contribution back (stride, then crop)."""
    spatial = x.ndim - 2
    letters = "ab"[:spatial]
    padded = np.pad(x, ((0, 0), (0, 0)) + ((padding, padding),) * spatial)
    grad_padded = np.zeros_like(padded)
    grad_w = np.zeros_like(w)
    outs = grad_y.shape[2:]
    for offset in itertools.product(*(range(k) for k in w.shape[2:])):
        # Kernel entry `offset` met xp at stride·i + offset in every window i.
        reach = (slice(None), slice(None)) + tuple(
            slice(o, o + stride * (n - 1) + 1, stride) for o, n in zip(offset, outs)
        )
        grad_padded[reach] += np.einsum(f"no{letters},oc->nc{letters}", grad_y, w[(Ellipsis, *offset)])
        grad_w[(Ellipsis, *offset)] = np.einsum(f"no{letters},nc{letters}->oc", grad_y, padded[reach])
    crop = (slice(None), slice(None)) + tuple(slice(padding, padding + n) for n in x.shape[2:])
    grad_b = grad_y.sum(axis=(0, *range(2, grad_y.ndim)))  # shared by the batch and every position
    return grad_padded[crop], grad_w, grad_b


def conv1d_backward(x, w, grad_y, stride, padding):
    return _conv_backward(x, w, grad_y, stride, padding)


def conv2d_backward(x, w, grad_y, stride, padding):
    return _conv_backward(x, w, grad_y, stride, padding)


#: Every solution by exercise name.
SOLUTIONS = {name: globals()[name] for name in __all__[:-1]}
