"""Second derivatives: Hessian-vector products and small Hessians, by differentiating the reverse pass.

This module lets you ask how a loss *curves*, not only which way it slopes::

    >>> import numpy as np, microtape as mt
    >>> f = lambda x: (x * x * x).sum()                 # Σ x³: its Hessian is diag(6x)
    >>> mt.hvp(f, np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    array([ 6., 12.])
    >>> mt.hessian(f, np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])

How: ``gradients(y, create_graph=True)`` runs the reverse pass on tape
values, so the gradient ``g(x)`` is itself a recorded program. Its reverse
pass in turn gives ``d/dx ⟨g(x), v⟩ = H v`` — reverse mode over reverse mode,
the way PyTorch's ``autograd.functional.hvp`` and JAX's ``grad(grad(f))``
work. Both run on fresh copies of ``x`` with no tape of yours recording, so
your values and tapes are left as they were.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine import Node, Tape, gradients, paused
from ..values.scalar import Scalar
from ..values.tensor import Tensor

__all__ = ["hvp", "hessian", "leaf_from", "MAX_HESSIAN_ENTRIES"]

#: The largest input whose full Hessian ``hessian`` builds (one reverse pass per entry).
MAX_HESSIAN_ENTRIES = 4096


def leaf_from(value: Any, what: str) -> Tensor | Scalar:
    """A fresh leaf that requires a gradient, holding ``value``'s numbers (a Scalar for a number)."""
    if isinstance(value, Scalar) or (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.generic))):
        return Scalar(float(value.data if isinstance(value, Scalar) else value))
    if isinstance(value, (bool, np.bool_)) or isinstance(value, Node) and not isinstance(value, Tensor):
        raise TypeError(f"{what}: expected a Tensor, an array or a number, got {type(value).__name__}")
    data = value.data if isinstance(value, Tensor) else value
    try:
        return Tensor(np.array(data, copy=True), requires_grad=True)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what}: expected a Tensor, an array or a number ({error})") from None


def direction_like(v: Any, leaf: Tensor | Scalar, what: str) -> Any:
    """``v`` checked against ``leaf``: a number for a Scalar, an array of its shape and dtype otherwise."""
    if isinstance(leaf, Scalar):
        v = v.data if isinstance(v, Scalar) else v
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{what}: expected a number (the input is a Scalar), got {type(v).__name__}")
        return float(v)
    array = np.asarray(v.data if isinstance(v, Tensor) else v)
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{what}: expected real numbers, got dtype {array.dtype}")
    if array.shape != leaf.shape:
        raise ValueError(f"{what}: has shape {array.shape}, expected the input's shape {leaf.shape}")
    return array.astype(leaf.dtype)


def scalar_output(f: Callable[..., Any], args: tuple[Any, ...], what: str) -> Node:
    """``f(*args)``, checked to be one number on the tape (a Scalar, or a Tensor of one entry)."""
    if not callable(f):
        raise TypeError(f"{what}(f, ...): f must be callable, got {type(f).__name__}")
    y = f(*args)
    if not isinstance(y, Node):
        raise TypeError(f"{what}(f, ...): f must return a Scalar or Tensor, got {type(y).__name__}")
    if isinstance(y, Tensor) and y.size != 1:
        raise ValueError(
            f"{what}(f, ...): f must return a single number (a scalar loss), got a Tensor of shape {y.shape}; "
            "reduce it first (for example .sum())"
        )
    return y


def _zeros_like(leaf: Tensor | Scalar) -> Any:
    return 0.0 if isinstance(leaf, Scalar) else np.zeros(leaf.shape, dtype=leaf.dtype)


def _first_gradient(f: Callable[..., Any], leaf: Tensor | Scalar, what: str) -> tuple[Node, Any]:
    """``(y, g)``: f's value at ``leaf`` and its gradient as a recorded program (None if f ignores ``leaf``)."""
    y = scalar_output(f, (leaf,), what)
    if not y.requires_grad:
        return y, None
    grads = gradients(y, create_graph=True)
    return y, grads[leaf] if leaf in grads else None


def hvp(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """The Hessian of the scalar function ``f`` at ``x``, times ``v``: ``H v``, of ``x``'s shape.

    ``f`` takes one Tensor (or Scalar, for a number ``x``) and returns a single
    number. ``v`` has ``x``'s shape. Costs about three reverse passes, whatever
    the size of ``x``.
    """
    leaf = leaf_from(x, "hvp(x)")
    direction = direction_like(v, leaf, "hvp(v)")
    with paused():
        _, grad = _first_gradient(f, leaf, "hvp")
        if grad is None:
            return _zeros_like(leaf)
        inner = grad * direction if isinstance(leaf, Scalar) else (grad * direction).sum()
        if not inner.requires_grad:  # the gradient does not depend on x: f is linear there
            return _zeros_like(leaf)
        second = gradients(inner)
    return second[leaf] if leaf in second else _zeros_like(leaf)


def hessian(f: Callable[..., Any], x: Any) -> Any:
    """The full Hessian of the scalar function ``f`` at ``x``: shape ``x.shape + x.shape`` (small inputs).

    Row ``i`` is the gradient of the ``i``-th entry of the gradient: one
    reverse pass over the recorded backward program per entry of ``x``.
    """
    leaf = leaf_from(x, "hessian(x)")
    size = 1 if isinstance(leaf, Scalar) else leaf.size
    if size > MAX_HESSIAN_ENTRIES:
        raise ValueError(
            f"hessian(x): x has {size} entries, so the Hessian would have {size * size:,} "
            f"(at most {MAX_HESSIAN_ENTRIES} entries are allowed); use hvp(f, x, v) for products instead"
        )
    with paused():
        _, grad = _first_gradient(f, leaf, "hessian")
        if isinstance(leaf, Scalar):
            if grad is None or not grad.requires_grad:
                return 0.0
            second = gradients(grad)
            return second[leaf] if leaf in second else 0.0
        rows = np.zeros((size, size), dtype=leaf.dtype)
        if grad is not None and grad.requires_grad:
            program = Tape.of(grad)
            # A one-hot seed multiplies an infinite slope (√x at 0) by 0: NaN, PyTorch's
            # entry too, and the answer says it — without a warning printed per row.
            with np.errstate(invalid="ignore"):
                for i in range(size):
                    one_hot = np.zeros(size, dtype=leaf.dtype)
                    one_hot[i] = 1.0
                    second = gradients(grad, one_hot.reshape(leaf.shape), tape=program)
                    if leaf in second:
                        rows[i] = np.ravel(second[leaf])
    return rows.reshape(leaf.shape + leaf.shape)
