"""Linear algebra: ``matmul`` (numpy's ``@``), ``einsum`` (two operands) and ``norm`` (the 2-norm).

``C = A B`` gives ``grad_A = g Bᵀ`` and ``grad_B = Aᵀ g``: two more matmuls,
written with methods that numpy arrays and Tensors share (``@``,
``swapaxes``, ``reshape``, indexing), so the VJP records on Tensors.
``einsum``'s VJP is an einsum too: the output's letters and the other
operand's give back this operand's. ``norm``'s is ``g x / ‖x‖`` (0 at
``x = 0``, PyTorch's choice of subgradient).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.protocols import Value
from .broadcasting import shape_of, sum_of, tangent_or_zeros, unbroadcast
from .core import Axis, Grads, Shape, primitive, value_of
from .elementwise import no_second_derivative
from .reductions import spread, with_kept_axes
from .shape import broadcast_to, reshape

__all__ = ["matmul", "einsum", "norm", "parse_einsum"]


def _swap_last(a: Value) -> Value:
    return a.swapaxes(-1, -2)


def _transposed_matrix(array: Value) -> Value:
    """True for a numpy matrix laid out as the transpose of a C-ordered one (``W.T``)."""
    return (
        array.__class__ is np.ndarray
        and array.ndim == 2
        and not array.flags.c_contiguous
        and array.T.flags.c_contiguous
    )


def _rows_times(a: Value, b: Value) -> Value:
    """``a @ b``; a batch of rows times one matrix (``x @ W``) runs as one product over all the rows.

    numpy's ``@`` runs ``[B, T, n] @ [n, m]`` as B products of ``[T, n]``; as
    one ``[B·T, n]`` product it is the same numbers, in less time.
    """
    if a.__class__ is np.ndarray and a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous:
        return (a.reshape(-1, a.shape[-1]) @ b).reshape(*a.shape[:-1], b.shape[-1])
    return a @ b


def _product_like(a: Value, b: Value, like: Value) -> Value:
    """``a @ b``, laid out in memory as ``like`` is (the gradient of ``like``).

    The gradient of a transposed matrix (the ``W.T`` of ``x @ W.T``) is
    computed as the transpose of ``bᵀ aᵀ``: the same numbers, and the
    transpose that follows it in the graph hands ``W`` a C-ordered gradient
    (a plain sum into ``W.grad``). A batch of transposed matrices (the ``Kᵀ``
    of ``Q Kᵀ``) keeps numpy's layout: the head merge after it is then a view.
    """
    if _transposed_matrix(like):
        return _swap_last(_rows_times(_swap_last(b), _swap_last(a)))
    return _rows_times(a, b)


def _matmul_vjp(g: Value, ans: Value, a: Value, b: Value) -> Grads:
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
    grad_a = _product_like(g2, _swap_last(b2), a)
    if b2.ndim == 2 and a2.ndim > 2:
        # A weight shared by every row of a batch (x @ W): fold the batch into
        # the rows instead of building one [n, m] product per batch entry.
        rows = a2.shape[-1]
        grad_b = _product_like(a2.reshape(-1, rows).T, g2.reshape(-1, g2.shape[-1]), b)
    else:
        grad_b = _product_like(_swap_last(a2), g2, b)
    if a.ndim == 1:
        grad_a = grad_a[..., 0, :]
    if b.ndim == 1:
        grad_b = grad_b[..., :, 0]
    return unbroadcast(grad_a, a), unbroadcast(grad_b, b)


def _matmul_jvp(tangents: Sequence[Value | None], ans: Value, a: Value, b: Value) -> Value:
    # d(A B) = dA B + A dB (each term left out when its tangent is missing).
    ta, tb = tangents
    if ta is None:
        return a @ tb
    if tb is None:
        return ta @ b
    return ta @ b + a @ tangent_or_zeros(tb, b)


matmul = primitive(
    "matmul",
    _rows_times,
    _matmul_vjp,
    ["{g} @ {b}^T", "{a}^T @ {g}"],
    [r"\bar A = \bar C B^{\top}", r"\bar B = A^{\top} \bar C"],
    jvp=_matmul_jvp,
    reads=("a", "b"),
)


# ---------------------------------------------------------------- einsum


def parse_einsum(subscripts: str) -> tuple[list[str], str]:
    """``"ij,jk->ik"`` as ``(["ij", "jk"], "ik")``; the implicit form (no ``->``) gets numpy's output.

    numpy's implicit output is the letters used exactly once, in alphabetical order.
    """
    text = subscripts.replace(" ", "")
    if "->" in text:
        inputs, output = text.split("->")
    else:
        inputs = text
        letters = inputs.replace(",", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return inputs.split(","), output


def _einsum_forward(a: Value, b: Value, subscripts: str) -> Value:
    return np.einsum(subscripts, a, b)


def _einsum_grad(g: Value, other: Value, own: str, other_letters: str, output: Any, shape: Shape) -> Value:
    """One operand's gradient: an einsum of ``g`` with the other operand back to this operand's letters.

    A letter only this operand has (summed away alone) gets its axis back by
    broadcasting: every entry along it received the same gradient.
    """
    kept = "".join(c for c in own if c in output or c in other_letters)
    grad = einsum.bind(g, other, subscripts=f"{output},{other_letters}->{kept}")
    if kept != own:
        grad = reshape.bind(grad, shape=tuple(n if c in kept else 1 for c, n in zip(own, shape)))
        grad = broadcast_to.bind(grad, shape=shape)
    return grad


def _einsum_vjp(g: Value, ans: Value, a: Value, b: Value, subscripts: str) -> Grads:
    (letters_a, letters_b), output = parse_einsum(subscripts)
    return (
        _einsum_grad(g, b, letters_a, letters_b, output, shape_of(a)),
        _einsum_grad(g, a, letters_b, letters_a, output, shape_of(b)),
    )


def _einsum_jvp(tangents: Sequence[Value | None], ans: Value, a: Value, b: Value, subscripts: str) -> Value:
    # Linear in each operand: d einsum(a, b) = einsum(da, b) + einsum(a, db).
    ta, tb = tangents
    return sum_of(
        None if ta is None else np.einsum(subscripts, ta, b),
        None if tb is None else np.einsum(subscripts, a, tb),
    )


einsum = primitive(
    "einsum",
    _einsum_forward,
    _einsum_vjp,
    ["einsum of {g} with {b} back to the letters of {a}", "einsum of {g} with {a} back to the letters of {b}"],
    [r"\bar A = \mathrm{einsum}(\bar C, B)", r"\bar B = \mathrm{einsum}(\bar C, A)"],
    example_params={"subscripts": "ij,jk->ik"},
    label=lambda params: f"{params.get('subscripts', '')}",
    jvp=_einsum_jvp,
    reads=("a", "b"),
)


# ---------------------------------------------------------------- norm


def _norm_forward(x: Value, axis: Axis = None, keepdims: bool = False, flat_at_zero: bool = False) -> Value:
    # The 2-norm (Frobenius over several axes): what numpy.linalg.norm gives with ord=None.
    return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims))


def _safe_norm(ans: Value, like: Value) -> Value:
    """‖x‖ with 1 where it is 0: there x is 0 too, so x / ‖x‖ gives PyTorch's subgradient 0."""
    zero = value_of(ans) == 0
    if isinstance(zero, np.ndarray):
        return ans + zero.astype(np.result_type(value_of(like)))
    return ans + float(zero)


def _norm_vjp(
    g: Value, ans: Value, x: Value, axis: Axis = None, keepdims: bool = False, flat_at_zero: bool = False
) -> Grads:
    shape = shape_of(x)
    grad = spread(g, x, axis, keepdims) * x / with_kept_axes(_safe_norm(ans, x), axis, keepdims, shape)
    if value_of(ans) is not ans and np.any(value_of(ans) == 0):
        # Recorded (create_graph=True) at the kink: the first derivative 0 is a choice. The norm has no
        # second derivative there (PyTorch: NaN); ``std`` (flat_at_zero) takes 0, as PyTorch's
        # std_backward does by masking where the result is 0: a constant 0 there, so its slope is 0 too.
        if flat_at_zero:
            moving = (value_of(ans) != 0).astype(np.result_type(value_of(x)))
            return (grad * with_kept_axes(moving, axis, keepdims, shape),)
        grad = grad + with_kept_axes(no_second_derivative(ans), axis, keepdims, shape)
    return (grad,)


def _norm_jvp(
    tangents: Sequence[Value | None],
    ans: Value,
    x: Value,
    axis: Axis = None,
    keepdims: bool = False,
    flat_at_zero: bool = False,
) -> Value:
    return np.sum(tangents[0] * x, axis=axis, keepdims=keepdims) / _safe_norm(ans, x)


norm = primitive(
    "norm",
    _norm_forward,
    _norm_vjp,
    ["broadcast({g}) * {x} / {y}  (0 where {y} = 0)"],
    [r"\bar x = \bar y\, x / \lVert x \rVert"],
    example_params={"axis": -1, "keepdims": False},
    jvp=_norm_jvp,
    reads=("x", "y"),
)
