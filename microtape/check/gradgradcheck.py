"""Second derivatives checked: the recorded reverse pass against finite differences of the first.

This module lets you test that a function's *gradient* is differentiated
correctly (``create_graph=True``)::

    >>> import numpy as np, microtape as mt
    >>> result = mt.check.gradgradcheck(lambda t: (t * t).tanh().sum(), np.array([0.5, -1.0]))
    >>> result.ok
    True

For ``y = f(x1, x2, ...)`` we fix a random cotangent ``u`` (of ``y``'s
shape) and random directions ``w_i`` (one per input), and look at the number

    s(x) = Σ_i ⟨ grad_i(x), w_i ⟩,   grad = the reverse pass of f seeded with u,

computed with ``create_graph=True``, so ``s`` is itself on a tape.
:func:`~.gradcheck.gradcheck` then compares ``s``'s taped gradient — the
second derivatives, ``Σ_i ∂²⟨u, f⟩/∂x ∂x_i · w_i`` — with central differences
of ``s``, entry by entry. (PyTorch's ``gradgradcheck`` does the same.) As
``gradcheck``, a failure raises :class:`~.gradcheck.GradcheckError` unless
``raise_exception=False``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..check.gradcheck import GradcheckResult


import numpy as np

from ..engine import Node, gradients, paused
from ..values.scalar import Scalar
from ..values.tensor import Tensor
from .gradcheck import _as_float64_array, _check_options, _raise_or_return, _wrap, gradcheck

__all__ = ["gradgradcheck"]


def gradgradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    max_entries: int | None = None,
    seed: int = 0,
    raise_exception: bool = True,
) -> GradcheckResult:
    """Compare the second derivatives of ``fn`` (by the recorded reverse pass) with finite differences.

    The arguments are those of :func:`~.gradcheck.gradcheck`; the result is a
    :class:`~.gradcheck.GradcheckResult` whose entries are the gradient of
    ``s = Σ_i ⟨grad_i, w_i⟩`` (see the module's docstring). A failure raises
    :class:`~.gradcheck.GradcheckError`; ``raise_exception=False`` returns it.
    """
    _check_options(fn, inputs, eps, atol, rtol, max_entries, seed, raise_exception, where="gradgradcheck")
    # As gradcheck (and hvp, jvp, hessian): an open tape of the caller's records none of the probes.
    with paused():
        result = _gradgradcheck(fn, inputs, eps, atol, rtol, max_entries, seed)
    return _raise_or_return(result, raise_exception)


def _gradgradcheck(fn: Any, inputs: Any, eps: float, atol: float, rtol: float, max_entries: Any, seed: int) -> Any:
    scalars = [isinstance(x, (Scalar, int, float)) and not isinstance(x, np.ndarray) for x in inputs]
    arrays = [_as_float64_array(x, i) for i, x in enumerate(inputs)]
    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        probe = fn(*[_wrap(a, s) for a, s in zip(arrays, scalars)])
    if not isinstance(probe, Node):
        raise TypeError(f"gradgradcheck: fn must return a Scalar or Tensor, got {type(probe).__name__}")
    shape = np.shape(probe.data)
    cotangent = 1.0 if isinstance(probe, Scalar) else rng.standard_normal(shape).astype(probe.data.dtype)
    directions = [float(rng.standard_normal()) if s else rng.standard_normal(a.shape) for a, s in zip(arrays, scalars)]

    def first_derivative_along_w(*xs: Any) -> Any:
        """s(x) = Σ_i ⟨grad_i, w_i⟩ with the gradient recorded (create_graph=True)."""
        y = fn(*xs)
        if not y.requires_grad:
            return _constant_zero(xs)
        grads = gradients(y, cotangent, create_graph=True)
        total = None
        for x, w in zip(xs, directions):
            if x in grads:
                term = grads[x] * w if isinstance(x, Scalar) else (grads[x] * w).sum()
                total = term if total is None else total + term
        return _constant_zero(xs) if total is None else total

    result = gradcheck(
        first_derivative_along_w,
        *arrays,
        eps=eps,
        atol=atol,
        rtol=rtol,
        max_entries=max_entries,
        seed=seed,
        raise_exception=False,
    )
    result.check = "gradgradcheck"
    return result


def _constant_zero(xs: Any) -> Any:
    """A zero of the inputs' kind that needs no gradient (the gradient did not depend on them)."""
    return Scalar._constant(0.0) if isinstance(xs[0], Scalar) else Tensor(0.0)
