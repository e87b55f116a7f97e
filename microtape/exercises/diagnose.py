"""Comparing a student's outputs with the tape's, and diagnosing what is wrong.

An output agrees when ``|yours − tape| <= RTOL·|tape| + ATOL·scale``; a
wrong one is compared with the exercise's known mistaken variants, then with
a few generic slips (see "Diagnosis" in :mod:`microtape.exercises.checker`).
"""

from typing import Any

import numpy as np

from .result import Diagnosis, Problem
from .student_call import copies

__all__ = ["RTOL", "ATOL", "PRECISION_RTOL", "compare_outputs", "compare_one", "generic", "same", "in_own_words"]

#: Tolerances of the float64 comparison. A correct formula agrees with the
#: tape to ~1e-13 even on the large-score trials; float32 arithmetic is off by
#: ~1e-7 and a real mistake by far more.
RTOL = 1e-9
ATOL = 1e-11
#: Agreement to this (relative to the output's largest entry) but not to RTOL
#: is "a precision problem, not the maths".
PRECISION_RTOL = 1e-3

_LOW_PRECISION = (np.dtype(np.float16), np.dtype(np.float32))


def _scale(want: Any) -> Any:
    """The size of an output: its largest entry, at least 1."""
    return max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0


def _agrees(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Entry by entry: does ``got`` agree with ``want`` to float64 precision?"""
    return np.abs(got - want) <= ATOL * _scale(want) + RTOL * np.abs(want)


def same(a: Any, b: Any) -> Any:
    """Same shape, non-finite in the same places, and the finite entries agree (to float64 precision)."""
    if a.shape != b.shape:
        return False
    finite = np.isfinite(a)
    if not np.array_equal(finite, np.isfinite(b)):
        return False
    return bool(np.all(_agrees(a[finite], b[finite])))


def _precision_only(got: Any, want: Any) -> Any:
    """Off, but only by what float32 arithmetic costs: within PRECISION_RTOL of the output's size."""
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return False
    size = float(np.max(np.abs(want))) if want.size else 0.0
    return bool(np.max(np.abs(got - want), initial=0.0) <= PRECISION_RTOL * max(size, 1e-300))


def compare_outputs(exercise: Any, args: Any, outputs: Any, expected: Any, *, diagnose: bool = True) -> Any:
    """``(problems, max error of the right outputs)`` for one trial.

    ``diagnose=False``: the problems without hints (the feedback explains the
    first failing trial only, so later ones need not run the known mistakes).
    An output that is ``None`` was not returned (a missing key): its problem
    is ``"missing"``, with no hint.
    """
    problems, worst = [], 0.0
    variants = None  # the known mistakes are run only once an output is wrong: a right answer skips them
    for i, (output, got, want) in enumerate(zip(exercise.outputs, outputs, expected, strict=True)):
        problem, error = compare_one(output, got, want)
        if problem is None:
            worst = max(worst, error)
            continue
        if diagnose and problem.what != "missing":
            if variants is None:
                variants = _Variants(exercise, args, outputs, expected)
            problem.diagnoses = variants.diagnoses(i)
            if not problem.diagnoses:
                problem.diagnoses = _generic(exercise, i, got, expected, got.dtype in _LOW_PRECISION)
        problems.append(problem)
    return problems, worst


def compare_one(output: Any, got: Any, want: Any, source: str = "") -> Any:
    """``(None, max |error|)`` when ``got`` agrees with ``want``, else ``(Problem without hints, 0)``.

    ``source`` says where ``want`` came from when it is not the true gradient
    (``" (from your grad_scores)"``): the feedback's "tape" then reads so.
    """
    name = output.name
    if got is None:
        return Problem(name, "missing", f"{name} is missing: the returned dict has no key {name!r}"), 0.0
    low_precision = got.dtype in _LOW_PRECISION
    if got.shape != want.shape:
        problem = Problem(
            name,
            "shape",
            f"{name} has shape {list(got.shape)}, expected {list(want.shape)} — the shape of {output.like}",
        )
        if got.size == want.size and got.ndim != want.ndim:
            problem.text += " (same number of entries: an axis was added or dropped, e.g. keepdims)"
        return problem, 0.0
    if not np.all(np.isfinite(got)):
        index = tuple(int(n) for n in np.argwhere(~np.isfinite(got))[0])
        text = f"{_at(name, index)} is {got[index]}, tape{source} {want[index]:.6g}"
        return Problem(name, "not finite", text, index=index, got=float(got[index]), expected=float(want[index])), 0.0
    got64 = got.astype(np.float64)
    wrong = ~_agrees(got64, want)
    error = float(np.max(np.abs(got64 - want))) if got.size else 0.0
    if not np.any(wrong) and not low_precision:
        return None, error
    if low_precision and not np.any(wrong):
        problem = Problem(name, "precision", f"{name} is a {got.dtype} array (max |error| {error:.3g})")
    else:
        index = tuple(int(n) for n in np.argwhere(wrong)[0])
        problem = Problem(
            name,
            "values",
            f"{_at(name, index)}: yours {got64[index]:.10g}, tape{source} {want[index]:.10g} "
            "— the first wrong entry "
            f"({int(wrong.sum())} of {wrong.size} differ, max |error| {error:.3g})",
            index=index,
            got=float(got64[index]),
            expected=float(want[index]),
        )
    if low_precision:
        problem.text += f"; your array is {got.dtype}"
    return problem, 0.0


def _at(name: str, index: Any) -> Any:
    return f"{name}[{', '.join(map(str, index))}]" if index else name


class _Variants:
    """The known mistakes run on one trial's inputs, and which of them the student's answer holds.

    A variant returns the outputs its mistake changes, by name. On this trial
    it *changes* those of them that differ from the tape; the student's answer
    *holds* the mistake when each changed output equals the student's.
    """

    def __init__(self, exercise: Any, args: Any, outputs: Any, expected: Any) -> None:
        self.exercise = exercise
        names = [output.name for output in exercise.outputs]
        got = {name: np.asarray(value).astype(np.float64) for name, value in zip(names, outputs, strict=True)
               if value is not None}  # fmt: skip
        want = dict(zip(names, expected, strict=True))
        self.held = []  # (mistake, names of the outputs it changes)
        for mistake in exercise.mistakes:
            changed = self._changes(mistake, args, want)
            if exercise.stepped:
                # Matched step by step: the steps the mistake breaks itself (computed from steps it leaves
                # right) must be the student's; the later ones it computes from its own wrong values, so the
                # student's may differ there (the checker does not blame them).
                changed = _roots(exercise, changed)
                if mistake.step not in changed:
                    continue
            if changed and all(name in got and same(got[name], value) for name, value in changed.items()):
                self.held.append((mistake, (mistake.step,) if exercise.stepped else tuple(changed)))

    def _changes(self, mistake: Any, args: Any, want: Any) -> Any:
        try:
            with np.errstate(all="ignore"):
                returned = mistake.fn(*copies(args))
            values = {name: np.asarray(value, dtype=np.float64) for name, value in returned.items()}
        except Exception:
            # This mistake cannot even run on these shapes (numpy refuses to
            # line them up), so it is not what the student did.
            return {}
        return {name: value for name, value in values.items() if not same(value, want[name])}

    def diagnoses(self, i: Any) -> Any:
        name = self.exercise.outputs[i].name
        return [Diagnosis(m.name, m.kind, m.hint, m.kind_label) for m, changed in self.held if name in changed]


def _roots(exercise: Any, changed: Any) -> Any:
    """The changed steps none of whose sources (direct or not) changed: where a mistake broke the chain."""
    return {name: value for name, value in changed.items() if not set(exercise.depends_on(name)) & set(changed)}


def generic(exercise: Any, i: Any, got: Any, expected: Any) -> Any:
    """The generic slips ``got`` (output ``i``) shows against ``expected`` (one value per output), as Diagnoses."""
    return _generic(exercise, i, got, expected, got.dtype in _LOW_PRECISION)


def _generic(exercise: Any, i: Any, got: Any, expected: Any, low_precision: Any) -> Any:
    """Comparisons that hold for any exercise, tried when no known mistake matched."""
    got64 = got.astype(np.float64)
    if not np.all(np.isfinite(got64)):
        return []
    found = _generic_slip(exercise, i, got64, expected, f"it is a {got.dtype} array: " if low_precision else "")
    return [Diagnosis(found[0], found[0], found[1])] if found else []


def _generic_slip(exercise: Any, i: Any, got: Any, expected: Any, cast: Any) -> Any:
    """``(kind, hint)`` of the first generic slip ``got`` (float64, finite) shows, or None."""
    want = expected[i]
    name = exercise.outputs[i].name
    if _precision_only(got, want):
        return "precision", (
            f"your {name} agrees with the tape to about {_relative(got, want):.0e} — {cast}a precision "
            "problem, not the maths: compute in float64 throughout (no float32 / astype(np.float32))."
        )
    if got.shape == want.shape and got.size and not np.any(got) and np.any(np.abs(want) > ATOL):
        return "placeholder", f"your {name} is all zeros — is it still a placeholder?"
    if same(got, -want):
        return "sign_flipped", f"your {name} is exactly minus the right answer: a sign is flipped somewhere."
    if want.ndim >= 2 and same(got, np.swapaxes(want, -1, -2)) and not same(want, np.swapaxes(want, -1, -2)):
        return "transposed", (
            f"your {name} is the transpose of the right answer: swap the order of a matrix product "
            "(and transpose its operands), or check which side the transposed factor goes on."
        )
    if any(j != i and same(got, other) for j, other in enumerate(expected)):
        order = ", ".join(output.name for output in exercise.outputs)
        return "swapped_outputs", (
            f"these outputs hold each other's right answers: return them in the order ({order})."
        )
    if got.shape != want.shape and got.size == want.size and same(got.reshape(want.shape), want):
        return "extra_axis", (
            f"your {name} has the right numbers in the wrong shape {list(got.shape)}: drop the extra "
            f"axis (a sum with keepdims=True keeps one) so it has shape {list(want.shape)}."
        )
    if got.shape == want.shape and np.any(want):
        factor = float(np.sum(got * want) / np.sum(want * want))
        if abs(factor - 1.0) > 1e-6 and same(got, factor * want):
            return "constant_factor", (
                f"your {name} is {factor:.6g} × the right answer: a constant factor is missing or extra."
            )
    return None


def _relative(got: Any, want: Any) -> Any:
    size = float(np.max(np.abs(want))) if want.size else 0.0
    return float(np.max(np.abs(got - want), initial=0.0)) / max(size, 1e-300)


# On hidden trials a hint carries no number the student's answer chose (a factor, a shape, an error size).
_HIDDEN_HINTS = {
    "precision": "agrees only to low precision: compute in float64 throughout.",
    "placeholder": "is all zeros — is it still a placeholder?",
    "sign_flipped": "is minus the right answer: a sign is flipped somewhere.",
    "transposed": "is the transpose of the right answer.",
    "swapped_outputs": "these outputs hold each other's right answers: check the order you return them in.",
    "extra_axis": "has the right numbers in the wrong shape: an axis was added or dropped.",
    "constant_factor": "is a constant multiple of the right answer: a factor is missing or extra.",
}
_HIDDEN_TEXT = {
    "shape": "{name} has the wrong shape (expected the shape of {like})",
    "not finite": "{name} holds NaN or inf where the tape's answer does not",
    "missing": "{name} is missing from the returned dict",
    "link": "{name} differs from what the tape computes from your own earlier steps",
    "values": "{name} differs from the tape's answer",
    "precision": "{name} is a float32 or float16 array: graded answers are float64",
}


def in_own_words(exercise: Any, problem: Any) -> Problem:
    """``problem`` told in the grader's words only: which output failed and why, no value, index or shape."""
    output = next(output for output in exercise.outputs if output.name == problem.output)
    text = _HIDDEN_TEXT.get(problem.what, "{name} is wrong").format(name=output.name, like=output.like)
    if problem.what != "precision" and "; your array is float" in problem.text:
        text += " (and it is not a float64 array: graded answers are float64, never float16 or float32)"
    known = {mistake.name for mistake in exercise.mistakes}
    diagnoses = [
        d
        if d.name in known
        else Diagnosis(d.name, d.kind, f"your {output.name} {_HIDDEN_HINTS.get(d.name, 'is wrong.')}")
        for d in problem.diagnoses
    ]
    return Problem(problem.output, problem.what, text + " on a hidden trial", diagnoses=diagnoses)
