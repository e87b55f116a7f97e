"""The checker: run a student's derivative against the tape and explain what is wrong.

This module lets you check a hand-written backward pass::

    >>> import numpy as np
    >>> from microtape.exercises import check
    >>> def softmax_backward(p, grad_p):
    ...     return p * grad_p                       # the classic mistake
    >>> result = check("softmax_backward", softmax_backward)
    >>> result.ok, result.mistakes
    (False, ('no_rowsum',))

How it decides
--------------
For each trial it draws seeded float64 inputs, builds the forward with
microtape Tensors and runs the tape's backward pass: that is the right
answer. It calls the student's function on copies of the inputs and compares
each returned array, entry by entry (``|yours − tape| <= ATOL + RTOL·|tape|``).

When an output is wrong it *diagnoses* it by running the exercise's known
mistaken variants (:class:`~microtape.exercises.registry.Mistake`) on the same
inputs: a variant whose output equals the student's names the mistake. If none
does, a few generic comparisons follow (the negative, the transpose, another
output's answer, a constant multiple, all zeros). A hint is printed only when
one of these comparisons holds — never on a guess.
"""

import html
import inspect
import traceback
from dataclasses import dataclass, field

import numpy as np

from .registry import KINDS, get

__all__ = ["check", "assert_correct", "CheckResult", "Problem", "Diagnosis", "RTOL", "ATOL"]

#: Tolerances of the comparison. Everything runs in float64, where a correct
#: formula agrees with the tape to ~1e-15; a real mistake is off by far more.
RTOL = 1e-7
ATOL = 1e-10


@dataclass(frozen=True)
class Diagnosis:
    """A known mistake the student's output was found to equal."""

    name: str  # the mistake's name, or the generic check's kind
    kind: str  # a key of KINDS
    hint: str

    @property
    def label(self):
        return KINDS[self.kind]


@dataclass
class Problem:
    """What is wrong with one output of one trial."""

    output: str
    what: str  # "shape", "values", "not finite" or "type"
    text: str  # one line saying where
    index: tuple | None = None  # the first wrong entry
    got: float | None = None
    expected: float | None = None
    diagnoses: list = field(default_factory=list)


@dataclass
class CheckResult:
    """The verdict of :func:`check`: ``ok``, a readable ``message``, and the details.

    ``mistakes`` names every known mistake the answer matched (empty when none
    did), ``problems`` lists the wrong outputs of the failing ``trial``, and
    ``exception`` holds what the student's function raised, if it raised.
    """

    name: str
    ok: bool
    message: str
    trials_run: int = 0
    trial: int | None = None  # the failing trial (0-based), if any
    problems: list = field(default_factory=list)
    mistakes: tuple = ()
    exception: BaseException | None = None
    max_abs_error: float = 0.0

    @property
    def hints(self):
        """The hint texts of the diagnosed mistakes, each once."""
        seen, hints = set(), []
        for problem in self.problems:
            for diagnosis in problem.diagnoses:
                if diagnosis.hint not in seen:
                    seen.add(diagnosis.hint)
                    hints.append(diagnosis.hint)
        return tuple(hints)

    @property
    def kinds(self):
        """The kinds of the diagnosed mistakes (``"missing_rowsum"``, …), each once."""
        return tuple(dict.fromkeys(d.kind for p in self.problems for d in p.diagnoses))

    def __bool__(self):
        return self.ok

    def __str__(self):
        return self.message

    def __repr__(self):
        verdict = "ok" if self.ok else "wrong"
        return f"<CheckResult {self.name}: {verdict}>\n{self.message}"

    def _repr_html_(self):
        colour, background = ("#2e7d32", "#f1f8f1") if self.ok else ("#c62828", "#fdf3f3")
        return (
            f'<div style="border-left: 4px solid {colour}; background: {background}; '
            'padding: 6px 10px; margin: 4px 0">'
            '<pre style="margin: 0; white-space: pre-wrap; background: transparent">'
            f"{html.escape(self.message)}</pre></div>"
        )


# ---------------------------------------------------------------- the public API


def check(name, student_fn, *, trials=5, seed=0):
    """Check ``student_fn`` against the tape on ``trials`` seeded random inputs.

    Returns a :class:`CheckResult` (``.ok``, ``.message``; printable, and shown
    as a coloured box in Jupyter). Stops at the first trial that fails and
    explains it: which output, the first wrong entry with both values, and a
    hint when the answer matches a known mistake.
    """
    exercise = get(name)
    if not callable(student_fn):
        raise TypeError(f"check({name!r}, student_fn): student_fn must be a function, got {type(student_fn).__name__}")
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"check(trials={trials!r}): expected a positive integer")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"check(seed={seed!r}): expected a non-negative integer")

    signature_problem = _signature_problem(exercise, student_fn)
    if signature_problem:
        return CheckResult(name, False, f"✗ {name}: {signature_problem}")

    worst = 0.0
    for trial in range(int(trials)):
        inputs = exercise.make_inputs(np.random.default_rng([int(seed), trial]), trial)
        args = [inputs[parameter] for parameter in exercise.parameters]
        where = f"trial {trial + 1} of {trials}: " + _describe(exercise.parameters, args)
        expected = [np.asarray(value, dtype=np.float64) for value in exercise.tape_gradients(inputs)]

        try:
            returned = student_fn(*_copies(args))
        except NotImplementedError as error:
            said = f" ({error})" if str(error) else ""
            message = (
                f"✗ {name}: not written yet — your function raised NotImplementedError{said}. "
                "Fill in its body and check again."
            )
            return CheckResult(name, False, message, trial + 1, trial, exception=error)
        except Exception as error:  # the student's bug, reported with its place
            message = _exception_message(name, student_fn, error, where)
            return CheckResult(name, False, message, trial + 1, trial, exception=error)

        outputs, problem = _unpack(exercise, returned)
        if problem:
            return CheckResult(name, False, f"✗ {name}: {problem}\n  ({where})", trial + 1, trial)

        problems, right, error = _compare(exercise, args, outputs, expected)
        if problems:
            mistakes = tuple(dict.fromkeys(d.name for p in problems for d in p.diagnoses))
            message = _failure_message(name, where, problems, right)
            return CheckResult(name, False, message, trial + 1, trial, problems, mistakes)
        worst = max(worst, error)

    message = (
        f"✓ {name}: correct on {trials} random input{'s' if trials > 1 else ''} (max |yours − tape| = {worst:.1e})."
    )
    return CheckResult(name, True, message, int(trials), max_abs_error=worst)


def assert_correct(name, student_fn, *, trials=5, seed=0):
    """Like :func:`check`, but raise ``AssertionError`` with the feedback when wrong.

    For autograder hidden tests (nbgrader, otter): ``assert_correct("softmax_backward",
    softmax_backward)``. Returns the :class:`CheckResult` when correct.
    """
    result = check(name, student_fn, trials=trials, seed=seed)
    if not result.ok:
        raise AssertionError(result.message)
    return result


# ---------------------------------------------------------------- calling the student


def _signature_problem(exercise, student_fn):
    """A message if the function cannot take the exercise's arguments, else None."""
    try:
        signature = inspect.signature(student_fn)
    except (TypeError, ValueError):
        return None  # a builtin or C function: just call it
    try:
        signature.bind(*exercise.parameters)
    except TypeError:
        wanted = ", ".join(exercise.parameters)
        return (
            f"your function takes ({', '.join(signature.parameters)}), but it is called as "
            f"{exercise.name}({wanted}): it needs {len(exercise.parameters)} positional arguments."
        )
    return None


def _copies(args):
    """Fresh copies, so a function that writes into its inputs harms nobody."""
    return [arg.copy() if isinstance(arg, np.ndarray) else arg for arg in args]


def _describe(parameters, args):
    parts = []
    for parameter, arg in zip(parameters, args, strict=True):
        if isinstance(arg, np.ndarray):
            kind = "bool" if arg.dtype == np.bool_ else ""
            parts.append(f"{parameter} {kind}{list(arg.shape)}")
        else:
            parts.append(f"{parameter}={arg!r}")
    return ", ".join(parts)


def _exception_message(name, student_fn, error, where):
    lines = [f"✗ {name} raised {type(error).__name__} ({where}):", f"    {error}"]
    code = getattr(student_fn, "__code__", None)
    frames = traceback.extract_tb(error.__traceback__)
    mine = [frame for frame in frames if code is not None and frame.filename == code.co_filename]
    if mine:
        frame = mine[-1]
        code_line = (frame.line or "").strip()
        lines.append(f"  at line {frame.lineno} of {frame.name}" + (f":  {code_line}" if code_line else ""))
    text = str(error)
    if isinstance(error, ValueError) and "broadcast" in text:
        lines.append(
            "  note: numpy could not line up two shapes. Print the shapes on that line; a sum "
            "without keepdims=True loses an axis, and .T reverses *all* axes of a batch."
        )
    elif isinstance(error, ValueError) and "matmul" in text:
        lines.append(
            "  note: a matrix product's inner sizes differ. Write the shape of each operand next "
            "to it: the transpose is probably on the other operand (use swapaxes(-1, -2) for batches)."
        )
    return "\n".join(lines)


def _unpack(exercise, returned):
    """The returned value as a list of float arrays, one per output, or a problem message."""
    names = [output.name for output in exercise.outputs]
    count = len(names)
    listing = "(" + ", ".join(names) + ")"
    if returned is None:
        return (
            None,
            f"your function returned None — is the `return` missing? Expected {listing if count > 1 else names[0]}.",
        )
    if count == 1:
        if isinstance(returned, tuple) and len(returned) == 1:
            returned = returned[0]
        elif isinstance(returned, tuple):
            return None, f"returned {len(returned)} values; expected one array, {names[0]}."
        values = [returned]
    elif isinstance(returned, dict):
        missing = [n for n in names if n not in returned]
        if missing:
            return None, f"the returned dict lacks {', '.join(missing)}; expected keys {listing}."
        values = [returned[n] for n in names]
    elif isinstance(returned, (tuple, list)):
        if len(returned) != count:
            return None, f"returned {len(returned)} values; expected {count}: {listing}."
        values = list(returned)
    else:
        return None, f"returned one {type(returned).__name__}; expected a tuple of {count}: {listing}."
    arrays = []
    for output, value in zip(exercise.outputs, values, strict=True):
        if value is None:
            return None, f"{output.name} is None; expected an array shaped like {output.like}."
        try:
            array = np.asarray(value)
        except Exception:  # ragged lists and the like
            array = None
        if array is None or array.dtype.kind not in "biuf":
            kind = type(value).__name__ if array is None else f"{type(value).__name__} of dtype {array.dtype}"
            return None, f"{output.name} is a {kind}; expected a float array shaped like {output.like}."
        arrays.append(array)
    return arrays, None


# ---------------------------------------------------------------- comparing and diagnosing


def _close(a, b):
    return a.shape == b.shape and bool(np.all(np.isclose(a, b, rtol=RTOL, atol=ATOL)))


def _compare(exercise, args, outputs, expected):
    """``(problems, names of right outputs, max error of the right ones)`` for one trial."""
    problems, right, worst = [], [], 0.0
    variants = _Variants(exercise, args)
    for i, (output, got, want) in enumerate(zip(exercise.outputs, outputs, expected, strict=True)):
        name = output.name
        if got.shape != want.shape:
            problem = Problem(
                name,
                "shape",
                f"{name} has shape {list(got.shape)}, expected {list(want.shape)} — the shape of {output.like}",
            )
            if got.size == want.size and got.ndim != want.ndim:
                problem.text += " (same number of entries: an axis was added or dropped, e.g. keepdims)"
        elif not np.all(np.isfinite(got)):
            index = tuple(int(n) for n in np.argwhere(~np.isfinite(got))[0])
            problem = Problem(
                name,
                "not finite",
                f"{_at(name, index)} is {got[index]}, tape {want[index]:.6g}",
                index=index,
                got=float(got[index]),
                expected=float(want[index]),
            )
        else:
            got64 = got.astype(np.float64)
            wrong = ~np.isclose(got64, want, rtol=RTOL, atol=ATOL)
            error = float(np.max(np.abs(got64 - want))) if got.size else 0.0
            if not np.any(wrong):
                right.append(name)
                worst = max(worst, error)
                continue
            index = tuple(int(n) for n in np.argwhere(wrong)[0])
            problem = Problem(
                name,
                "values",
                f"{_at(name, index)}: yours {got64[index]:.6g}, tape {want[index]:.6g} "
                "— the first wrong entry "
                f"({int(wrong.sum())} of {wrong.size} differ, max |error| {error:.3g})",
                index=index,
                got=float(got64[index]),
                expected=float(want[index]),
            )
            if got.dtype == np.float32:
                problem.text += "; your array is float32 — compute in float64"
        problem.diagnoses = variants.matching(i, got, want)
        if not problem.diagnoses and problem.what != "not finite":
            problem.diagnoses = _generic(exercise, i, got, expected)
        problems.append(problem)
    return problems, right, worst


def _at(name, index):
    return f"{name}[{', '.join(map(str, index))}]" if index else name


class _Variants:
    """The known mistakes run on one trial's inputs (each at most once, lazily)."""

    def __init__(self, exercise, args):
        self.exercise = exercise
        self.args = args
        self._outputs = {}

    def outputs_of(self, mistake):
        if mistake.name not in self._outputs:
            try:
                returned = mistake.fn(*_copies(self.args))
                if len(self.exercise.outputs) == 1:
                    returned = (returned,)
                self._outputs[mistake.name] = [np.asarray(r, dtype=np.float64) for r in returned]
            except Exception:
                # This mistake cannot even run on these shapes (numpy refuses
                # to line them up), so it is not what the student did.
                self._outputs[mistake.name] = None
        return self._outputs[mistake.name]

    def matching(self, i, got, want):
        """Diagnoses for output ``i``: the mistakes whose output ``i`` equals the student's."""
        found = []
        got = got.astype(np.float64)
        for mistake in self.exercise.mistakes:
            outputs = self.outputs_of(mistake)
            if outputs is None:
                continue
            theirs = outputs[i]
            if _close(theirs, want):
                continue  # this mistake does not affect output i
            if _close(got, theirs):
                found.append(Diagnosis(mistake.name, mistake.kind, mistake.hint))
        return found


def _generic(exercise, i, got, expected):
    """Comparisons that hold for any exercise, tried when no known mistake matched."""
    want = expected[i]
    name = exercise.outputs[i].name
    got = got.astype(np.float64)
    if got.shape == want.shape and got.size and not np.any(got) and np.any(np.abs(want) > ATOL):
        return [Diagnosis("placeholder", "placeholder", f"your {name} is all zeros — is it still a placeholder?")]
    if _close(got, -want):
        return [
            Diagnosis(
                "sign_flipped",
                "sign_flipped",
                f"your {name} is exactly minus the right answer: a sign is flipped somewhere.",
            )
        ]
    if want.ndim >= 2 and _close(got, np.swapaxes(want, -1, -2)) and not _close(want, np.swapaxes(want, -1, -2)):
        return [
            Diagnosis(
                "transposed",
                "transposed",
                f"your {name} is the transpose of the right answer: swap the order of a matrix product "
                "(and transpose its operands), or check which side the transposed factor goes on.",
            )
        ]
    for j, other in enumerate(expected):
        if j != i and _close(got, other):
            order = ", ".join(output.name for output in exercise.outputs)
            return [
                Diagnosis(
                    "swapped_outputs",
                    "swapped_outputs",
                    f"these outputs hold each other's right answers: return them in the order ({order}).",
                )
            ]
    if got.shape != want.shape and got.size == want.size and _close(got.reshape(want.shape), want):
        return [
            Diagnosis(
                "extra_axis",
                "extra_axis",
                f"your {name} has the right numbers in the wrong shape {list(got.shape)}: drop the extra "
                f"axis (a sum with keepdims=True keeps one) so it has shape {list(want.shape)}.",
            )
        ]
    if got.shape == want.shape and np.any(want):
        factor = float(np.sum(got * want) / np.sum(want * want))
        if abs(factor - 1.0) > 1e-6 and _close(got, factor * want):
            return [
                Diagnosis(
                    "constant_factor",
                    "constant_factor",
                    f"your {name} is {factor:.6g} × the right answer: a constant factor is missing or extra.",
                )
            ]
    return []


def _failure_message(name, where, problems, right):
    wrong = [problem.output for problem in problems]
    headline = f"✗ {name}: {_join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong"
    if right:
        headline += f"; {_join(right)} {'is' if len(right) == 1 else 'are'} right"
    lines = [headline + ".", f"  {where}"]
    for problem in problems:
        lines.append(f"  {problem.text}")
    shown = {}
    for problem in problems:
        for diagnosis in problem.diagnoses:
            shown.setdefault(diagnosis.hint, (diagnosis, []))[1].append(problem.output)
    for diagnosis, outputs in shown.values():
        lines.append(f"  hint — {diagnosis.label} ({', '.join(outputs)}): {diagnosis.hint}")
    if not shown:
        lines.append("  (no known mistake matches: go through the chain in the prompt one link at a time)")
    return "\n".join(lines)


def _join(names):
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]
