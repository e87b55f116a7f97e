"""Exercise: the backward pass of a 1-D convolution with stride and padding.

The tape's answer is :func:`microtape.exercises.lab.conv_chain.taped_conv`: the
forward built from recorded ``pad``, ``take`` (im2col) and ``einsum`` — not
from a convolution primitive — and the tape backward. The exercise is declared
by :func:`~microtape.exercises.lab.conv_chain.conv_exercise`, as ``conv2d_backward``
is: this module gives the stub, the trials and the hints' words.
"""

from .. import register
from . import conv_chain

__all__ = ["conv1d_backward"]


def conv1d_backward(x, w, grad_y, stride, padding):
    r"""Backward pass of a 1-D convolution (PyTorch's ``conv1d``: a cross-correlation).

    Forward (done for you), with ``xp`` = ``x`` padded by ``padding`` zeros at both ends:
        y[n, o, l] = b[o] + Σ_c Σ_k w[o, c, k] · xp[n, c, stride·l + k]
        x:  [N, C_in, L]        w: [C_out, C_in, K]        b: [C_out]
        y:  [N, C_out, L_out]   L_out = (L + 2·padding − K) // stride + 1

    Arguments: ``x``, ``w``, ``grad_y`` = dL/dy [N, C_out, L_out], and the
    integers ``stride`` (≥ 1) and ``padding`` (≥ 0).

    Return a tuple ``(grad_x, grad_w, grad_b)`` shaped like ``x``, ``w`` and ``b``.

    The maths: every output position used the same ``w`` and ``b``, so their
    gradients add up over the batch *and* the positions. Each input entry
    ``xp[n, c, j]`` was read by every window that covered it: scatter
    ``grad_y[n, o, l] · w[o, c, k]`` back to ``j = stride·l + k`` (``+=``) —
    with stride 1 that is a full correlation of ``grad_y`` with the *flipped*
    kernel. Then drop the padding: ``grad_x`` has the shape of ``x``, not ``xp``.
    """
    raise NotImplementedError("conv1d_backward: write the backward pass of conv1d here")


# One dict per trial. The kernels are not symmetric (random), so a forgotten
# flip shows; strides above 1 and paddings above 0 appear in both sets. The
# last hidden trial is large: numeric differentiation (two forwards per input
# entry, ~130 000 entries) cannot finish within the time limit, a derivation takes milliseconds.
VISIBLE = (
    {"N": 2, "C_in": 3, "C_out": 2, "size": (7,), "kernel": (3,), "stride": 1, "padding": 0},
    {"N": 1, "C_in": 2, "C_out": 3, "size": (8,), "kernel": (3,), "stride": 2, "padding": 1},
    {"N": 3, "C_in": 1, "C_out": 2, "size": (6,), "kernel": (2,), "stride": 1, "padding": 2},
    {"N": 2, "C_in": 2, "C_out": 2, "size": (9,), "kernel": (4,), "stride": 3, "padding": 1},
)
HIDDEN = (
    {"N": 2, "C_in": 2, "C_out": 3, "size": (10,), "kernel": (3,), "stride": 2, "padding": 2},
    {"N": 1, "C_in": 3, "C_out": 1, "size": (5,), "kernel": (5,), "stride": 1, "padding": 1},
    {"N": 3, "C_in": 2, "C_out": 2, "size": (11,), "kernel": (2,), "stride": 3, "padding": 0},
    {"N": 2, "C_in": 1, "C_out": 4, "size": (7,), "kernel": (3,), "stride": 1, "padding": 1},
    {"N": 32, "C_in": 16, "C_out": 8, "size": (256,), "kernel": (5,), "stride": 2, "padding": 2, "shared": True},
)


EXERCISE = conv_chain.conv_exercise(
    conv1d_backward,
    title="Conv1d backward (stride, padding): grad_x, grad_w, grad_b",
    visible=VISIBLE,
    hidden=HIDDEN,
    hints={
        "kernel_not_flipped": (
            "your grad_x correlates grad_y with the kernel as it is. The input gradient is a "
            "correlation with the *flipped* kernel (w[..., ::-1]) — or, simpler, scatter "
            "grad_y[n, o, l] · w[o, c, k] back to position stride·l + k."
        ),
        "input_grad_stride_ignored": (
            "your grad_x sends window l's gradient back to positions l + k, as if the stride were 1. "
            "Window l starts at stride·l: scatter to stride·l + k."
        ),
        "padding_not_cropped": (
            "your grad_x is the gradient of the *padded* input (padding extra entries at each end). "
            "The zeros were not inputs: drop them, grad_xp[:, :, padding:padding + L]."
        ),
        "w_grad_flipped": (
            "your grad_w is flipped along the kernel axis. The flip belongs to the input gradient only: "
            "grad_w[o, c, k] = Σ_n Σ_l grad_y[n, o, l] · xp[n, c, stride·l + k], no reversal."
        ),
        "w_grad_stride_ignored": (
            "your grad_w reads the input at l + k, as if the stride were 1. Window l read "
            "xp[n, c, stride·l + k]: use those entries."
        ),
        "b_not_summed_over_positions": (
            "your grad_b sums over the batch only. The bias was added at every output position too: "
            "grad_y.sum(axis=(0, 2)), shape [C_out]."
        ),
    },
)
register(EXERCISE)
