"""Finite-difference gradient checking: does backward agree with the definition?

This module lets you test any function built from microtape ops::

    >>> import numpy as np, microtape as mt
    >>> x = np.array([[0.5, -1.0, 2.0]])
    >>> result = mt.check.gradcheck(lambda t: (t * t).tanh().sum(), x)
    >>> result.ok
    True

A failing check **raises** :class:`GradcheckError` (as PyTorch's
``gradcheck`` does), its message naming the worst entry, so a test or a
notebook cell cannot pass over a wrong gradient by forgetting to look at the
result; ``raise_exception=False`` returns the failing result instead (its
``ok`` is False), for code that wants to read or print it.

For a function ``y = f(x1, x2, ...)`` we pick a fixed random upstream
gradient ``v`` (ones for a single-number output) and compare, entry by entry,
the taped gradient of ``sum(v * y)`` with the central difference

    (sum(v * f(x + eps e_i)) - sum(v * f(x - eps e_i))) / (2 eps)

whose error shrinks like eps². Everything runs in float64. An entry passes
when ``|taped - numeric| <= atol + rtol * |numeric|`` (numpy's ``allclose``
rule). A value or gradient that is not finite (NaN, ±inf) on either side is
a failure, said as such — never a pass: ``abs(nan - x) > tol`` is False, so
a plain comparison would let it through.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine import Node, Tape, gradients, paused
from ..engine.nonfinite import first_nonfinite_gradient, first_nonfinite_value
from ..values.scalar import Scalar
from ..values.tensor import Tensor

__all__ = ["gradcheck", "GradcheckError", "GradcheckResult", "numeric_gradient"]


@dataclass
class Mismatch:
    """The worst entry found: where it is and both opinions of it."""

    input: int
    index: tuple
    taped: float
    numeric: float

    @property
    def abs_error(self) -> Any:
        return abs(self.taped - self.numeric)


@dataclass
class GradcheckResult:
    """What :func:`gradcheck` found. ``ok`` is the verdict; ``worst`` the worst entry."""

    ok: bool
    worst: Mismatch | None
    max_abs_error: float
    checked: int
    eps: float
    atol: float
    rtol: float
    per_input: list = field(default_factory=list)  # max abs error for each input
    not_finite: list = field(default_factory=list)  # what was NaN or infinite, in words
    check: str = "gradcheck"  # which check found this (gradgradcheck reuses this result)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        verdict = "passed" if self.ok else "FAILED"
        lines = [
            f"{self.check} {verdict}: {self.checked} entries, max |taped - numeric| = {self.max_abs_error:.3e} "
            f"(eps={self.eps:g}, atol={self.atol:g}, rtol={self.rtol:g})"
        ]
        lines += [f"  not finite: {text}" for text in self.not_finite]
        for i, error in enumerate(self.per_input):
            lines.append(f"  input {i}: max abs error {error:.3e}")
        if self.worst is not None:
            w = self.worst
            lines.append(f"  worst: input {w.input} at {w.index}: taped {w.taped:.10g}, numeric {w.numeric:.10g}")
        return "\n".join(lines)

    __repr__ = __str__


class GradcheckError(RuntimeError):
    """A failed :func:`gradcheck` or :func:`~.gradgradcheck.gradgradcheck`; ``error.result`` is what it found."""

    def __init__(self, result: GradcheckResult) -> None:
        super().__init__(str(result))
        self.result = result


def _raise_or_return(result: GradcheckResult, raise_exception: bool) -> GradcheckResult:
    """PyTorch's rule: a failing check raises (naming its worst entry) unless ``raise_exception=False``."""
    if raise_exception and not result.ok:
        raise GradcheckError(result)
    return result


def _as_float64_array(value: Any, position: Any) -> Any:
    if isinstance(value, Node):
        value = value.data
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"gradcheck input {position}: expected numbers, got a bool")
    raw = np.asarray(value)
    if raw.dtype.kind not in "biuf":
        raise TypeError(f"gradcheck input {position}: expected real numbers, got dtype {raw.dtype} ({value!r:.60})")
    array = np.array(raw, dtype=np.float64)  # a copy: we perturb it in place
    if not np.all(np.isfinite(array)):
        raise ValueError(f"gradcheck input {position}: contains NaN or infinity")
    return array


def _wrap(array: Any, scalar: Any) -> Any:
    return Scalar(float(array)) if scalar else Tensor(array.copy(), requires_grad=True)


def _evaluate(fn: Any, arrays: Any, scalars: Any, upstream: Any) -> Any:
    """sum(upstream * fn(inputs)) as a plain float, nothing recorded for later."""
    with np.errstate(all="ignore"):  # a non-finite value is reported, not warned about
        output = fn(*[_wrap(a, s) for a, s in zip(arrays, scalars)])
        return float(np.sum(np.asarray(output.data, dtype=np.float64) * upstream))


def numeric_gradient(fn: Any, arrays: Any, scalars: Any, upstream: Any, position: Any, index: Any, eps: float) -> Any:
    """The central difference of ``sum(upstream * fn)`` in one entry of one input."""
    array = arrays[position]
    saved = array[index]
    try:
        array[index] = saved + eps
        plus = _evaluate(fn, arrays, scalars, upstream)
        array[index] = saved - eps
        minus = _evaluate(fn, arrays, scalars, upstream)
    finally:
        array[index] = saved
    return (plus - minus) / (2 * eps)


def _where(array: Any) -> Any:
    """The first non-finite entry of ``array``: ``(index, value)``."""
    index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
    return index, array[index]


def _non_negative(value: Any, name: str, where: str = "gradcheck") -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:  # type: ignore[call-overload]  # numbers.Real: numpy's stubs name concrete types
        raise ValueError(f"{where}({name}={value!r}): expected a non-negative number")
    return float(value)


def _check_options(
    fn: Any,
    inputs: Any,
    eps: float,
    atol: float,
    rtol: float,
    max_entries: Any,
    seed: int,
    raise_exception: Any,
    where: str = "gradcheck",
) -> Any:
    """Refuse bad arguments before anything runs; returns ``(eps, atol, rtol)`` as floats."""
    if not isinstance(raise_exception, (bool, np.bool_)):
        raise TypeError(f"{where}(raise_exception={raise_exception!r}): expected True or False")
    if not callable(fn):
        raise TypeError(f"{where}(fn, ...): fn must be callable, got {type(fn).__name__}")
    if not inputs:
        raise ValueError(f"{where}(fn, *inputs): give at least one input")
    eps, atol, rtol = (
        _non_negative(eps, "eps", where),
        _non_negative(atol, "atol", where),
        _non_negative(rtol, "rtol", where),
    )
    if eps == 0:
        raise ValueError(f"{where}(eps=0): the step must be positive")
    if max_entries is not None and (
        isinstance(max_entries, bool) or not isinstance(max_entries, numbers.Integral) or max_entries < 1
    ):
        raise ValueError(f"{where}(max_entries={max_entries!r}): expected None or a positive integer")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"{where}(seed={seed!r}): expected a non-negative integer")
    return eps, atol, rtol


def _taped(fn: Any, arrays: Any, scalars: Any, rng: np.random.Generator, not_finite: Any) -> Any:
    """The upstream ``v`` and the taped gradient of ``sum(v * fn)`` for each input, by the pure reverse pass.

    What is not finite (the value, a gradient) is said in ``not_finite``.
    """
    wrapped = [_wrap(a, s) for a, s in zip(arrays, scalars)]
    with np.errstate(all="ignore"), Tape() as tape:  # a non-finite value is reported, not warned about
        output = fn(*wrapped)
    if not isinstance(output, Node):
        raise TypeError(f"gradcheck: fn must return a Scalar or Tensor, got {type(output).__name__}")
    out_shape = np.shape(output.data)
    upstream = np.ones(out_shape) if out_shape == () else rng.standard_normal(out_shape)
    value = np.asarray(output.data, dtype=np.float64)
    if not np.isfinite(value).all():
        index, bad = _where(value)
        not_finite.append(f"the function's value is {bad} at index {index}")
        not_finite.append(first_nonfinite_value(tape) or "(it was not finite at an input already)")
    seed_grad = float(upstream) if isinstance(output, Scalar) else upstream.astype(output.data.dtype)
    with np.errstate(all="ignore"):
        found = gradients(output, seed_grad) if output.requires_grad else {}
    taped = [np.asarray(found[w], np.float64) if w in found else np.zeros(np.shape(a)) for a, w in zip(arrays, wrapped)]
    gradient_not_finite = False
    for position, grad in enumerate(taped):
        if not np.isfinite(grad).all():
            index, bad = _where(grad)
            not_finite.append(f"the taped gradient of input {position} is {bad} at index {index}")
            gradient_not_finite = True
    if gradient_not_finite:  # (never without a taped pass: zeros stand in for the gradients then)
        not_finite.append(first_nonfinite_gradient(tape, output, seed_grad) or "(the seed itself was not finite)")
    return upstream, taped


def _entries(shape: Any, max_entries: Any, rng: np.random.Generator) -> Any:
    """Every index of an array of ``shape``, or ``max_entries`` of them drawn at random (in order)."""
    indices = list(np.ndindex(shape))
    if max_entries is not None and len(indices) > max_entries:
        chosen = rng.choice(len(indices), size=max_entries, replace=False)
        indices = [indices[i] for i in sorted(chosen)]
    return indices


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    max_entries: int | None = None,
    seed: int = 0,
    raise_exception: bool = True,
) -> GradcheckResult:
    """Compare the taped gradient of ``fn`` with central finite differences.

    ``fn`` takes one microtape value per input (a ``Scalar`` for a plain
    number or Scalar input, a float64 ``Tensor`` otherwise) and returns a
    Scalar or Tensor. ``max_entries`` checks only that many randomly chosen
    entries per input (seeded), for large inputs. A NaN or infinite value,
    taped gradient or finite difference fails the check and is named in
    ``result.not_finite``.

    A failure raises :class:`GradcheckError` (the worst entry in its
    message, the result as ``error.result``); ``raise_exception=False``
    returns the result instead. A pass returns the result either way.
    """
    eps, atol, rtol = _check_options(fn, inputs, eps, atol, rtol, max_entries, seed, raise_exception)
    # The probes run on tapes of their own: an open tape of the caller's records none of them.
    with paused():
        result = _gradcheck(fn, inputs, eps, atol, rtol, max_entries, seed)
    return _raise_or_return(result, raise_exception)


def _gradcheck(
    fn: Any, inputs: Any, eps: float, atol: float, rtol: float, max_entries: Any, seed: int
) -> GradcheckResult:
    scalars = [isinstance(x, (Scalar, int, float)) and not isinstance(x, np.ndarray) for x in inputs]
    arrays = [_as_float64_array(x, i) for i, x in enumerate(inputs)]
    rng = np.random.default_rng(seed)
    not_finite: list[Any] = []
    upstream, taped = _taped(fn, arrays, scalars, rng, not_finite)

    worst, worst_error, checked, per_input = None, -1.0, 0, []
    ok = not not_finite
    for position, array in enumerate(arrays):
        input_error = 0.0
        for index in _entries(array.shape, max_entries, rng):
            numeric = numeric_gradient(fn, arrays, scalars, upstream, position, index, eps)
            analytic = float(taped[position][index])
            checked += 1
            if not (np.isfinite(numeric) and np.isfinite(analytic)):
                # Never a pass: said in words when the finite difference is the culprit (the taped
                # gradient's was said above).
                if not np.isfinite(numeric):
                    not_finite.append(f"the finite difference of input {position} is {numeric} at index {index}")
                ok = False
                continue
            error = abs(analytic - numeric)
            input_error = max(input_error, error)
            ok = ok and error <= atol + rtol * abs(numeric)
            if error > worst_error:
                worst_error, worst = error, Mismatch(position, index, analytic, numeric)
        per_input.append(input_error)
    max_error = float("inf") if not_finite else max(worst_error, 0.0)
    return GradcheckResult(ok, worst, max_error, checked, eps, atol, rtol, per_input, not_finite)
