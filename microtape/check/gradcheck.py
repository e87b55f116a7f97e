"""Finite-difference gradient checking: does backward agree with the definition?

This module lets you test any function built from microtape ops::

    >>> import numpy as np, microtape as mt
    >>> x = np.array([[0.5, -1.0, 2.0]])
    >>> result = mt.check.gradcheck(lambda t: (t * t).tanh().sum(), x)
    >>> result.ok
    True

For a function ``y = f(x1, x2, ...)`` we pick a fixed random upstream
gradient ``v`` (ones for a single-number output) and compare, entry by entry,
the taped gradient of ``sum(v * y)`` with the central difference

    (sum(v * f(x + eps e_i)) - sum(v * f(x - eps e_i))) / (2 eps)

whose error shrinks like eps². Everything runs in float64. An entry passes
when ``|taped - numeric| <= atol + rtol * |numeric|`` (numpy's ``allclose``
rule).
"""

from dataclasses import dataclass, field

import numpy as np

from ..scalar import Scalar
from ..tape import Node
from ..tensor import Tensor

__all__ = ["gradcheck", "GradcheckResult", "numeric_gradient"]


@dataclass
class Mismatch:
    """The worst entry found: where it is and both opinions of it."""

    input: int
    index: tuple
    taped: float
    numeric: float

    @property
    def abs_error(self):
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

    def __bool__(self):
        return self.ok

    def __str__(self):
        verdict = "passed" if self.ok else "FAILED"
        lines = [
            f"gradcheck {verdict}: {self.checked} entries, max |taped - numeric| = {self.max_abs_error:.3e} "
            f"(eps={self.eps:g}, atol={self.atol:g}, rtol={self.rtol:g})"
        ]
        for i, error in enumerate(self.per_input):
            lines.append(f"  input {i}: max abs error {error:.3e}")
        if self.worst is not None:
            w = self.worst
            lines.append(f"  worst: input {w.input} at {w.index}: taped {w.taped:.10g}, numeric {w.numeric:.10g}")
        return "\n".join(lines)

    __repr__ = __str__


def _as_float64_array(value, position):
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


def _wrap(array, scalar):
    return Scalar(float(array)) if scalar else Tensor(array.copy(), requires_grad=True)


def _evaluate(fn, arrays, scalars, upstream):
    """sum(upstream * fn(inputs)) as a plain float, nothing recorded for later."""
    output = fn(*[_wrap(a, s) for a, s in zip(arrays, scalars)])
    return float(np.sum(np.asarray(output.data, dtype=np.float64) * upstream))


def numeric_gradient(fn, arrays, scalars, upstream, position, index, eps):
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


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, max_entries=None, seed=0):
    """Compare the taped gradient of ``fn`` with central finite differences.

    ``fn`` takes one microtape value per input (a ``Scalar`` for a plain
    number or Scalar input, a float64 ``Tensor`` otherwise) and returns a
    Scalar or Tensor. ``max_entries`` checks only that many randomly chosen
    entries per input (seeded), for large inputs.
    """
    if not callable(fn):
        raise TypeError(f"gradcheck(fn, ...): fn must be callable, got {type(fn).__name__}")
    if not inputs:
        raise ValueError("gradcheck(fn, *inputs): give at least one input")
    for name, value in (("eps", eps), ("atol", atol), ("rtol", rtol)):
        if not (isinstance(value, (int, float)) and value >= 0 and np.isfinite(value)):
            raise ValueError(f"gradcheck({name}={value!r}): expected a non-negative number")
    if eps == 0:
        raise ValueError("gradcheck(eps=0): the step must be positive")

    scalars = [isinstance(x, (Scalar, int, float)) and not isinstance(x, np.ndarray) for x in inputs]
    arrays = [_as_float64_array(x, i) for i, x in enumerate(inputs)]
    rng = np.random.default_rng(seed)

    # The taped gradient of sum(upstream * y).
    wrapped = [_wrap(a, s) for a, s in zip(arrays, scalars)]
    output = fn(*wrapped)
    if not isinstance(output, Node):
        raise TypeError(f"gradcheck: fn must return a Scalar or Tensor, got {type(output).__name__}")
    out_shape = np.shape(output.data)
    upstream = np.ones(out_shape) if out_shape == () else rng.standard_normal(out_shape)
    output.backward(float(upstream) if isinstance(output, Scalar) else upstream.astype(output.data.dtype))
    taped = [
        np.zeros(np.shape(a)) if w.grad is None else np.asarray(w.grad, np.float64) for a, w in zip(arrays, wrapped)
    ]

    worst, worst_error, checked, per_input, ok = None, -1.0, 0, [], True
    for position, array in enumerate(arrays):
        indices = list(np.ndindex(array.shape))
        if max_entries is not None and len(indices) > max_entries:
            chosen = rng.choice(len(indices), size=max_entries, replace=False)
            indices = [indices[i] for i in sorted(chosen)]
        input_error = 0.0
        for index in indices:
            numeric = numeric_gradient(fn, arrays, scalars, upstream, position, index, eps)
            analytic = float(taped[position][index])
            error = abs(analytic - numeric)
            checked += 1
            input_error = max(input_error, error)
            if error > atol + rtol * abs(numeric):
                ok = False
            if error > worst_error:
                worst_error = error
                worst = Mismatch(position, index, analytic, numeric)
        per_input.append(input_error)
    return GradcheckResult(ok, worst, max(worst_error, 0.0), checked, eps, atol, rtol, per_input)
