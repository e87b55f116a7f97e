"""Linear algebra: ``matmul`` (numpy's ``@``: batched, broadcasting, 1-D operands as vectors).

``C = A B`` gives ``grad_A = g Bᵀ`` and ``grad_B = Aᵀ g``: two more matmuls,
written with methods that numpy arrays and Tensors share (``@``,
``swapaxes``, ``reshape``, indexing), so the VJP records on Tensors.
"""

import numpy as np

from .broadcasting import tangent_or_zeros, unbroadcast
from .core import primitive

__all__ = ["matmul"]


def _swap_last(a):
    return a.swapaxes(-1, -2)


def _matmul_vjp(g, ans, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return g * b, g * a  # the dot product: c = Σ a_i b_i
    # A 1-D operand is a row (for a) or column (for b) vector in disguise.
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2[..., None, :]
    if b.ndim == 1:
        g2 = g2[..., None]
    grad_a = g2 @ _swap_last(b2)
    if b2.ndim == 2 and a2.ndim > 2:
        # A weight shared by every row of a batch (x @ W): fold the batch into
        # the rows instead of building one [n, m] product per batch entry.
        rows = a2.shape[-1]
        grad_b = a2.reshape(-1, rows).T @ g2.reshape(-1, g2.shape[-1])
    else:
        grad_b = _swap_last(a2) @ g2
    if a.ndim == 1:
        grad_a = grad_a[..., 0, :]
    if b.ndim == 1:
        grad_b = grad_b[..., :, 0]
    return unbroadcast(grad_a, a), unbroadcast(grad_b, b)


def _matmul_jvp(tangents, ans, a, b):
    # d(A B) = dA B + A dB (each term left out when its tangent is missing).
    ta, tb = tangents
    if ta is None:
        return a @ tb
    if tb is None:
        return ta @ b
    return ta @ b + a @ tangent_or_zeros(tb, b)


matmul = primitive(
    "matmul",
    np.matmul,
    _matmul_vjp,
    ["{g} @ {b}^T", "{a}^T @ {g}"],
    [r"\bar A = \bar C B^{\top}", r"\bar B = A^{\top} \bar C"],
    jvp=_matmul_jvp,
)
