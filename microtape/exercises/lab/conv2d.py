"""Exercise: the backward pass of a 2-D convolution with stride and padding.

``conv1d_backward`` along two spatial axes: the same family, declared by
:func:`~microtape.exercises.lab.conv_chain.conv_exercise` (the tape's answer,
the outputs and the mistakes' chains); this module gives the stub, the trials
and the hints' words for two axes.
"""

from .. import register
from . import conv_chain

__all__ = ["conv2d_backward"]


def conv2d_backward(x, w, grad_y, stride, padding):
    r"""Backward pass of a 2-D convolution (PyTorch's ``conv2d``: a cross-correlation).

    Forward (done for you), with ``xp`` = ``x`` padded by ``padding`` zeros on every side
    of both spatial axes (the same ``stride`` along both):
        y[n, o, i, j] = b[o] + Σ_c Σ_p Σ_q w[o, c, p, q] · xp[n, c, stride·i + p, stride·j + q]
        x:  [N, C_in, H, W]          w: [C_out, C_in, KH, KW]        b: [C_out]
        y:  [N, C_out, H_out, W_out] H_out = (H + 2·padding − KH) // stride + 1 (W_out alike)

    Arguments: ``x``, ``w``, ``grad_y`` = dL/dy [N, C_out, H_out, W_out], and the
    integers ``stride`` (≥ 1) and ``padding`` (≥ 0).

    Return a tuple ``(grad_x, grad_w, grad_b)`` shaped like ``x``, ``w`` and ``b``.

    The maths: as in 1-D, along two axes. ``w`` and ``b`` are shared by every
    batch entry and every output position: their gradients add up over all of
    them. Each input entry was read by every window covering it: scatter
    ``grad_y[n, o, i, j] · w[o, c, p, q]`` back to ``(stride·i + p, stride·j + q)``
    with ``+=`` — with stride 1 a full correlation of ``grad_y`` with the kernel
    flipped along *both* axes. Then crop the padding off.
    """
    raise NotImplementedError("conv2d_backward: write the backward pass of conv2d here")


# One dict per trial. The kernels are not symmetric (random), so a forgotten
# flip shows; strides above 1 and paddings above 0 appear in both sets. The
# last hidden trial is large: numeric differentiation (two forwards per input
# entry, ~74 000 entries) cannot finish within the time limit, a derivation takes milliseconds.
VISIBLE = (
    {"N": 2, "C_in": 2, "C_out": 2, "size": (5, 6), "kernel": (3, 2), "stride": 1, "padding": 0},
    {"N": 1, "C_in": 2, "C_out": 3, "size": (7, 7), "kernel": (3, 3), "stride": 2, "padding": 1},
    {"N": 2, "C_in": 1, "C_out": 2, "size": (4, 5), "kernel": (2, 3), "stride": 1, "padding": 2},
    {"N": 1, "C_in": 3, "C_out": 2, "size": (8, 6), "kernel": (3, 2), "stride": 3, "padding": 1},
)
HIDDEN = (
    {"N": 2, "C_in": 2, "C_out": 3, "size": (6, 8), "kernel": (3, 3), "stride": 2, "padding": 2},
    {"N": 1, "C_in": 3, "C_out": 1, "size": (5, 4), "kernel": (2, 4), "stride": 1, "padding": 1},
    {"N": 2, "C_in": 2, "C_out": 2, "size": (9, 7), "kernel": (2, 2), "stride": 3, "padding": 0},
    {"N": 1, "C_in": 1, "C_out": 3, "size": (6, 6), "kernel": (3, 2), "stride": 1, "padding": 1},
    {"N": 4, "C_in": 8, "C_out": 8, "size": (48, 48), "kernel": (3, 3), "stride": 2, "padding": 1, "shared": True},
)


EXERCISE = conv_chain.conv_exercise(
    conv2d_backward,
    title="Conv2d backward (stride, padding): grad_x, grad_w, grad_b",
    visible=VISIBLE,
    hidden=HIDDEN,
    hints={
        "kernel_not_flipped": (
            "your grad_x correlates grad_y with the kernel as it is. The input gradient is a "
            "correlation with the kernel flipped along both axes (w[..., ::-1, ::-1]) — or, simpler, scatter "
            "grad_y[n, o, i, j] · w[o, c, p, q] back to (stride·i + p, stride·j + q)."
        ),
        "input_grad_stride_ignored": (
            "your grad_x sends window (i, j)'s gradient back to (i + p, j + q), as if the stride were "
            "1. Window (i, j) starts at (stride·i, stride·j): scatter to (stride·i + p, stride·j + q)."
        ),
        "padding_not_cropped": (
            "your grad_x is the gradient of the *padded* input (padding extra rows and "
            "columns on each side). The zeros were not inputs: crop them, "
            "grad_xp[:, :, padding:padding + H, padding:padding + W]."
        ),
        "w_grad_flipped": (
            "your grad_w is flipped along the kernel axes. The flip belongs to the input gradient only: "
            "grad_w[o, c, p, q] = Σ_n Σ_i Σ_j grad_y[n, o, i, j] · xp[n, c, stride·i + p, stride·j + q]."
        ),
        "w_grad_stride_ignored": (
            "your grad_w reads the input at (i + p, j + q), as if the stride were 1. Window (i, j) "
            "read xp[n, c, stride·i + p, stride·j + q]: use those entries."
        ),
        "b_not_summed_over_positions": (
            "your grad_b sums over the batch only. The bias was added at every output position too: "
            "grad_y.sum(axis=(0, 2, 3)), shape [C_out]."
        ),
    },
)
register(EXERCISE)
