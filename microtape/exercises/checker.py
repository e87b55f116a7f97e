"""The checker: run a student's derivative against the tape and explain what is wrong.

This module lets you check a hand-written backward pass::

    >>> import numpy as np
    >>> from microtape.exercises import check
    >>> def softmax_backward(p, grad_p):
    ...     return p * grad_p                       # the classic mistake
    >>> result = check("softmax_backward", softmax_backward)
    >>> result.ok, result.mistakes, result.status
    (False, ('no_rowsum',), 'wrong')

How it decides
--------------
For each trial it draws seeded float64 inputs, builds the forward with
microtape Tensors and runs the tape's backward pass: that is the right
answer. It calls the student's function on copies of the inputs and compares
each returned array, entry by entry, with it. An output is *right* when it
agrees on every trial; each right output earns its points (partial credit),
and :attr:`CheckResult.status` says ``"right"``, ``"partly right"``,
``"wrong"``, ``"not started"`` (the stub still raises
``NotImplementedError``) or ``"not checked"`` (the function called
``exit()``, or did not return within ``time_limit`` seconds).

The visible trials are the ones a notebook shows; ``hidden=True`` runs other
trials (other shapes, ``eps`` and ``p``, and large scores where a softmax must
be stabilised), their numbers drawn from the teacher's ``secret`` — what
``microtape grade`` uses.

Precision
---------
Everything is graded in float64, the same way in every exercise: an output
agrees when ``|yours − tape| <= RTOL·|tape| + ATOL·scale`` (``scale`` the
output's largest entry, at least 1), and an output returned as float32 or
float16 is never right. An answer computed in float32 is off by ~1e-7
relative, far more than float64 rounding (~1e-15) and far less than a wrong
formula: when an output misses the float64 tolerance but agrees to
``PRECISION_RTOL``, the feedback says it is a precision problem, not the maths.

Diagnosis
---------
When an output is wrong the checker runs the exercise's known mistaken
variants (:class:`~microtape.exercises.registry.Mistake`) on the same inputs.
Each variant returns the outputs its mistake changes; a variant is named only
when the student's answer holds *all* of its changes — so a hint never talks
about an output the student got right. If none does, a few generic
comparisons follow (the precision band, the negative, the transpose, another
output's answer, a constant multiple, all zeros). A hint is printed only when
one of these comparisons holds — never on a guess.
"""

import functools
import hashlib
import html
import inspect
import signal
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..tape import vjp_arity_problem
from .registry import KINDS, get

__all__ = [
    "check",
    "assert_correct",
    "CheckResult",
    "Problem",
    "Diagnosis",
    "TimeLimitExceeded",
    "NotChecked",
    "NotAnArray",
    "time_limit",
    "STATUSES",
    "RTOL",
    "ATOL",
    "PRECISION_RTOL",
]

#: Tolerances of the float64 comparison. A correct formula agrees with the
#: tape to ~1e-13 even on the large-score trials; float32 arithmetic is off by
#: ~1e-7 and a real mistake by far more.
RTOL = 1e-9
ATOL = 1e-11
#: Agreement to this (relative to the output's largest entry) but not to RTOL
#: is "a precision problem, not the maths".
PRECISION_RTOL = 1e-3

#: The verdicts of a check, from best to worst.
STATUSES = ("right", "partly right", "wrong", "not started", "not checked")

_LOW_PRECISION = (np.dtype(np.float16), np.dtype(np.float32))


class TimeLimitExceeded(BaseException):
    """The student's function ran past the time limit.

    A ``BaseException``, like ``KeyboardInterrupt``: a student's
    ``except Exception`` must not swallow it.
    """


class NotChecked(Exception):
    """The student's code left without an answer (it exited, or its process ended); ``str`` says how."""


class NotAnArray:
    """A returned value that is not numbers (it came back from the box described, not as an object)."""

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return f"<{self.what}>"


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
    what: str  # "shape", "values", "not finite", "precision" or "type"
    text: str  # one line saying where
    index: tuple | None = None  # the first wrong entry
    got: float | None = None
    expected: float | None = None
    diagnoses: list = field(default_factory=list)


@dataclass
class CheckResult:
    """The verdict of :func:`check`: ``ok``, ``status``, ``score``, a readable ``message``, and the details.

    ``outputs`` maps each output's name to True when it was right on every
    trial; ``score`` adds up the points of the right ones (of ``max_score``).
    ``mistakes`` names every known mistake the first failing trial matched
    (empty when none did), ``problems`` lists the wrong outputs of that
    ``trial``, and ``exception`` holds what the student's function raised, if
    it raised.
    """

    name: str
    ok: bool
    message: str
    trials_run: int = 0
    trial: int | None = None  # the first failing trial (0-based), if any
    problems: list = field(default_factory=list)
    mistakes: tuple = ()
    exception: BaseException | None = None
    max_abs_error: float = 0.0
    status: str = "wrong"
    outputs: dict = field(default_factory=dict)  # output name -> right on every trial
    score: int = 0
    max_score: int = 0
    hidden: bool = False

    @property
    def right_outputs(self):
        return tuple(name for name, right in self.outputs.items() if right)

    @property
    def wrong_outputs(self):
        return tuple(name for name, right in self.outputs.items() if not right)

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
        return f"<CheckResult {self.name}: {self.status}, {self.score}/{self.max_score}>\n{self.message}"

    def _repr_html_(self):
        colours = {
            "right": ("#2e7d32", "#f1f8f1"),
            "partly right": ("#ef6c00", "#fff6ec"),
            "not started": ("#757575", "#f5f5f5"),
        }
        colour, background = colours.get(self.status, ("#c62828", "#fdf3f3"))
        return (
            f'<div style="border-left: 4px solid {colour}; background: {background}; '
            'padding: 6px 10px; margin: 4px 0">'
            '<pre style="margin: 0; white-space: pre-wrap; background: transparent">'
            f"{html.escape(self.message)}</pre></div>"
        )


# ---------------------------------------------------------------- the public API


def check(name, student_fn, *, trials=None, seed=0, hidden=False, time_limit=None, secret=None):
    """Check ``student_fn`` against the tape on seeded random inputs.

    ``trials`` defaults to the exercise's number of trials (more cycle through
    them with fresh random numbers); ``hidden=True`` uses the hidden trials,
    which differ from the visible ones and whose numbers are drawn from
    ``secret`` (a string or bytes the teacher keeps: nobody without it can
    know them; ``microtape grade`` always grades with one). ``time_limit`` (seconds, for all the
    trials together) stops a function that does not return — it needs the
    main thread of a Unix process, as in a notebook, a script or
    ``microtape exercises check``; elsewhere it is not enforced.

    Returns a :class:`CheckResult` (``.ok``, ``.status``, ``.score``,
    ``.message``; printable, and shown as a coloured box in Jupyter). The
    message explains the first failing trial: which output, the first wrong
    entry with both values, and a hint when the answer matches a known
    mistake; then which outputs were right on every trial.
    """
    exercise = get(name)
    if not callable(student_fn):
        raise TypeError(f"check({name!r}, student_fn): student_fn must be a function, got {type(student_fn).__name__}")
    cases = exercise.cases(hidden)
    if trials is None:
        trials = len(cases)
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"check(trials={trials!r}): expected a positive integer")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"check(seed={seed!r}): expected a non-negative integer")
    if time_limit is not None and (
        isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0
    ):
        raise ValueError(f"check(time_limit={time_limit!r}): expected a positive number of seconds, or None")
    key = _trial_key(seed, hidden, secret)

    verdict = _Verdict(exercise, hidden)
    signature_problem = _signature_problem(exercise, student_fn)
    if signature_problem:
        return verdict.finish(f"✗ {name}: {signature_problem}", trials_run=0)

    clock = _Clock(time_limit)
    trials = int(trials)
    label = "hidden trial" if hidden else "trial"
    for trial in range(trials):
        args, expected = _trial(name, hidden, key, trial)
        where = f"{label} {trial + 1} of {trials}: " + _describe(exercise.parameters, args)

        try:
            with clock.running():
                returned = student_fn(*_copies(args))
        except NotImplementedError as error:
            if trial == 0:
                said = f" ({error})" if str(error) else ""
                message = (
                    f"✗ {name}: not written yet — your function raised NotImplementedError{said}. "
                    "Fill in its body and check again."
                )
                return verdict.finish(message, trial + 1, trial, exception=error, status="not started")
            verdict.crashed(_exception_message(name, student_fn, error, where), trial, error)
            break
        except TimeLimitExceeded as error:
            seconds = f"{time_limit:g} s" if time_limit else str(error).removeprefix("no answer within ")
            message = (
                f"✗ {name}: not checked — your function did not return within {seconds} "
                f"({where}). Look for a loop that never ends."
            )
            return verdict.finish(message, trial + 1, trial, exception=error, status="not checked")
        except (SystemExit, NotChecked) as error:
            how = error if isinstance(error, NotChecked) else (
                f"your function called exit() or sys.exit({_exit_code(error)}) instead of returning")  # fmt: skip
            message = f"✗ {name}: not checked — {how} ({where}). Return your answer instead."
            return verdict.finish(message, trial + 1, trial, exception=error, status="not checked")
        except Exception as error:  # the student's bug, reported with its place
            verdict.crashed(_exception_message(name, student_fn, error, where), trial, error)
            break

        outputs, problem = _unpack(exercise, returned)
        if problem:
            verdict.crashed(f"✗ {name}: {problem}\n  ({where})", trial, None)
            break
        problems, right, error = _compare(exercise, args, outputs, expected)
        verdict.trial_done(trial, where, problems, right, error)

    return verdict.finish(trials_run=verdict.trials_run)


def _trial_key(seed, hidden, secret):
    """What seeds the trials: the seed, and for hidden trials the instructor's secret too."""
    if not hidden:
        return (int(seed),)
    if secret is None:
        raise ValueError(
            "check(hidden=True): the hidden trials are drawn from the teacher's secret — pass "
            "secret=... (a string or bytes kept away from students; `make assignment` makes one)"
        )
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, bytes) or not secret:
        raise TypeError(f"check(secret=...): expected a non-empty string or bytes, got {type(secret).__name__}")
    digest = hashlib.sha256(secret).digest()
    return (int(seed), *(int.from_bytes(digest[i : i + 4], "big") for i in range(0, 32, 4)))


@functools.lru_cache(maxsize=4096)
def _trial(name, hidden, key, trial):
    """``(args, expected)`` of one trial, made once: read-only arrays (the student gets copies).

    Cached, so a class's submissions share the tape's answers: a grading run
    computes each trial's expected values once, not once per student.
    """
    exercise = get(name)
    cases = exercise.cases(hidden)
    inputs = exercise.make_inputs(np.random.default_rng([*key, trial, int(hidden)]), cases[trial % len(cases)])
    expected = [np.asarray(value, dtype=np.float64) for value in exercise.tape_gradients(inputs)]
    args = [inputs[parameter] for parameter in exercise.parameters]
    for array in [*expected, *args]:
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
    return args, expected


def assert_correct(name, student_fn, *, trials=None, seed=0, hidden=False, time_limit=None, secret=None):
    """Like :func:`check`, but raise ``AssertionError`` with the feedback when wrong.

    For hand-written tests (nbgrader-style): ``assert_correct("softmax_backward",
    softmax_backward, hidden=True, secret=...)``. Returns the :class:`CheckResult` when
    correct.
    """
    result = check(name, student_fn, trials=trials, seed=seed, hidden=hidden, time_limit=time_limit, secret=secret)
    if not result.ok:
        raise AssertionError(result.message)
    return result


# ---------------------------------------------------------------- the verdict over all trials


class _Verdict:
    """Collects the trials: which outputs stayed right, and the first failure to explain."""

    def __init__(self, exercise, hidden):
        self.exercise = exercise
        self.hidden = hidden
        self.right = {output.name: True for output in exercise.outputs}
        self.trials_run = 0
        self.first = None  # (trial, message or where, problems, exception) of the first failing trial
        self.later_crash = None
        self.worst = 0.0

    def crashed(self, message, trial, exception):
        """The function raised or returned something unusable: no output is right."""
        self.trials_run = trial + 1
        for name in self.right:
            self.right[name] = False
        if self.first is None:
            self.first = (trial, message, [], exception)
        else:
            self.later_crash = message

    def trial_done(self, trial, where, problems, right, error):
        self.trials_run = trial + 1
        for problem in problems:
            self.right[problem.output] = False
        if problems and self.first is None:
            # The message is written at the end, when it is known which outputs stayed right
            # on *every* trial: the headline must say what the score table says.
            self.first = (trial, where, problems, None)
        if not problems:
            self.worst = max(self.worst, error)

    def finish(self, message=None, trials_run=None, trial=None, *, exception=None, status=None):
        exercise = self.exercise
        name = exercise.name
        trials_run = self.trials_run if trials_run is None else trials_run
        if status is not None:  # not started / not checked: no output earns its points
            outputs = {output.name: False for output in exercise.outputs}
            return CheckResult(name, False, message, trials_run, trial, exception=exception, status=status,
                               outputs=outputs, max_score=exercise.max_score, hidden=self.hidden)  # fmt: skip
        if message is not None:  # the function could not even be called
            outputs = {output.name: False for output in exercise.outputs}
            return CheckResult(name, False, message, trials_run, outputs=outputs,
                               max_score=exercise.max_score, hidden=self.hidden)  # fmt: skip
        score = sum(output.points for output in exercise.outputs if self.right[output.name])
        if self.first is None:
            inputs = f"{'hidden ' if self.hidden else ''}random input{'s' if trials_run > 1 else ''}"
            message = f"✓ {name}: correct on {trials_run} {inputs} (max |yours − tape| = {self.worst:.1e})."
            return CheckResult(name, True, message, trials_run, max_abs_error=self.worst, status="right",
                               outputs=dict(self.right), score=score, max_score=exercise.max_score,
                               hidden=self.hidden)  # fmt: skip
        trial, message, problems, exception = self.first
        right = [output.name for output in exercise.outputs if self.right[output.name]]
        if problems:
            message = _failure_message(name, message, problems, right)
        if self.later_crash:
            message += "\n  and later: " + " ".join(self.later_crash.lstrip("✗ ").split("\n")[:2])
        status = "partly right" if right else "wrong"
        message += "\n  " + _score_line(exercise, self.right, score, trials_run)
        mistakes = tuple(dict.fromkeys(d.name for p in problems for d in p.diagnoses))
        return CheckResult(name, False, message, trials_run, trial, problems, mistakes, exception, status=status,
                           outputs=dict(self.right), score=score, max_score=exercise.max_score,
                           hidden=self.hidden)  # fmt: skip


def _score_line(exercise, right, score, trials_run):
    names = [output.name for output in exercise.outputs]
    good = [n for n in names if right[n]]
    bad = [n for n in names if not right[n]]
    line = f"score {score} of {exercise.max_score}"
    if good and bad:
        line += f": {_join(good)} right on all {trials_run} trials; {_join(bad)} not yet."
    elif bad:
        line += "."
    return line


def _exit_code(error):
    return "" if error.code is None else repr(error.code)


# ---------------------------------------------------------------- calling the student


class _Clock:
    """The time limit of one check, shared by all its trials."""

    def __init__(self, limit):
        self.limit = limit
        self.used = 0.0

    @contextmanager
    def running(self):
        if self.limit is None:
            yield
            return
        started = time.perf_counter()
        try:
            with time_limit(max(self.limit - self.used, 1e-3), f"no answer within {self.limit:g} s"):
                yield
        finally:
            self.used += time.perf_counter() - started


@contextmanager
def time_limit(seconds, message="time limit exceeded"):
    """Raise :class:`TimeLimitExceeded` in the block if it runs longer than ``seconds``.

    Uses SIGALRM, so it works in the main thread of a Unix process (a
    notebook kernel, a script, the command line's child process); elsewhere
    the block runs without a limit.
    """
    if not (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()):
        yield
        return

    def ring(signum, frame):
        raise TimeLimitExceeded(message)

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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
    kind = getattr(error, "type_name", type(error).__name__)  # a StudentError from the box names the real type
    lines = [f"✗ {name} raised {kind} ({where}):", f"    {error}"]
    location = getattr(error, "location", None) or _where_raised(student_fn, error)
    if location:
        lineno, function, code_line = location
        lines.append(f"  at line {lineno} of {function}" + (f":  {code_line}" if code_line else ""))
    text = str(error)
    if kind == "ValueError" and "broadcast" in text:
        lines.append(
            "  note: numpy could not line up two shapes. Print the shapes on that line; a sum "
            "without keepdims=True loses an axis, and .T reverses *all* axes of a batch."
        )
    elif kind == "ValueError" and "matmul" in text:
        lines.append(
            "  note: a matrix product's inner sizes differ. Write the shape of each operand next "
            "to it: the transpose is probably on the other operand (use swapaxes(-1, -2) for batches)."
        )
    return "\n".join(lines)


def _where_raised(student_fn, error):
    """``(line number, function, code line)`` of the student's last frame in the traceback, or None."""
    code = getattr(student_fn, "__code__", None)
    frames = traceback.extract_tb(error.__traceback__)
    mine = [frame for frame in frames if code is not None and frame.filename == code.co_filename]
    if not mine:
        return None
    frame = mine[-1]
    return frame.lineno, frame.name, (frame.line or "").strip()


def _unpack(exercise, returned):
    """The returned value as a list of numeric arrays, one per output, or a problem message."""
    names = [output.name for output in exercise.outputs]
    count = len(names)
    listing = "(" + ", ".join(names) + ")"
    if returned is None:
        return (
            None,
            f"your function returned None — is the `return` missing? Expected {listing if count > 1 else names[0]}.",
        )
    if exercise.is_vjp:
        # The rule mt.ops applies to every VJP it runs: a tuple with one gradient per input.
        problem = vjp_arity_problem(returned, count)
        if problem:
            return None, f"{problem} — {listing} (mt.ops.define's op would refuse it when it runs backward)."
    if isinstance(returned, NotAnArray):
        return None, f"returned {returned.what}; expected {listing if count > 1 else 'one array, ' + names[0]}."
    if isinstance(returned, dict):
        missing = [n for n in names if n not in returned]
        if missing:
            return None, f"the returned dict lacks {', '.join(missing)}; expected keys {listing}."
        values = [returned[n] for n in names]
    elif count == 1:
        if isinstance(returned, tuple) and len(returned) == 1:
            returned = returned[0]
        elif isinstance(returned, tuple):
            return None, f"returned {len(returned)} values; expected one array, {names[0]}."
        values = [returned]
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
        if isinstance(value, NotAnArray):
            return None, f"{output.name} is a {value.what}; expected a float array shaped like {output.like}."
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


def _scale(want):
    """The size of an output: its largest entry, at least 1."""
    return max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0


def _agrees(got, want):
    """Entry by entry: does ``got`` agree with ``want`` to float64 precision?"""
    return np.abs(got - want) <= ATOL * _scale(want) + RTOL * np.abs(want)


def _same(a, b):
    """Same shape, non-finite in the same places, and the finite entries agree (to float64 precision)."""
    if a.shape != b.shape:
        return False
    finite = np.isfinite(a)
    if not np.array_equal(finite, np.isfinite(b)):
        return False
    return bool(np.all(_agrees(a[finite], b[finite])))


def _precision_only(got, want):
    """Off, but only by what float32 arithmetic costs: within PRECISION_RTOL of the output's size."""
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return False
    size = float(np.max(np.abs(want))) if want.size else 0.0
    return bool(np.max(np.abs(got - want), initial=0.0) <= PRECISION_RTOL * max(size, 1e-300))


def _compare(exercise, args, outputs, expected):
    """``(problems, names of right outputs, max error of the right ones)`` for one trial."""
    problems, right, worst = [], [], 0.0
    variants = _Variants(exercise, args, outputs, expected)
    for i, (output, got, want) in enumerate(zip(exercise.outputs, outputs, expected, strict=True)):
        name = output.name
        low_precision = got.dtype in _LOW_PRECISION
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
            wrong = ~_agrees(got64, want)
            error = float(np.max(np.abs(got64 - want))) if got.size else 0.0
            if not np.any(wrong) and not low_precision:
                right.append(name)
                worst = max(worst, error)
                continue
            if low_precision and not np.any(wrong):
                problem = Problem(name, "precision", f"{name} is a {got.dtype} array (max |error| {error:.3g})")
            else:
                index = tuple(int(n) for n in np.argwhere(wrong)[0])
                problem = Problem(
                    name,
                    "values",
                    f"{_at(name, index)}: yours {got64[index]:.10g}, tape {want[index]:.10g} "
                    "— the first wrong entry "
                    f"({int(wrong.sum())} of {wrong.size} differ, max |error| {error:.3g})",
                    index=index,
                    got=float(got64[index]),
                    expected=float(want[index]),
                )
            if low_precision:
                problem.text += f"; your array is {got.dtype}"
        problem.diagnoses = variants.diagnoses(i)
        if not problem.diagnoses:
            problem.diagnoses = _generic(exercise, i, got, expected, low_precision)
        problems.append(problem)
    return problems, right, worst


def _at(name, index):
    return f"{name}[{', '.join(map(str, index))}]" if index else name


class _Variants:
    """The known mistakes run on one trial's inputs, and which of them the student's answer holds.

    A variant returns the outputs its mistake changes, by name. On this trial
    it *changes* those of them that differ from the tape; the student's answer
    *holds* the mistake when each changed output equals the student's.
    """

    def __init__(self, exercise, args, outputs, expected):
        self.exercise = exercise
        names = [output.name for output in exercise.outputs]
        got = {name: np.asarray(value).astype(np.float64) for name, value in zip(names, outputs, strict=True)}
        want = dict(zip(names, expected, strict=True))
        self.held = []  # (mistake, names of the outputs it changes)
        for mistake in exercise.mistakes:
            changed = self._changes(mistake, args, want)
            if changed and all(_same(got[name], value) for name, value in changed.items()):
                self.held.append((mistake, tuple(changed)))

    def _changes(self, mistake, args, want):
        try:
            with np.errstate(all="ignore"):
                returned = mistake.fn(*_copies(args))
            values = {name: np.asarray(value, dtype=np.float64) for name, value in returned.items()}
        except Exception:
            # This mistake cannot even run on these shapes (numpy refuses to
            # line them up), so it is not what the student did.
            return {}
        return {name: value for name, value in values.items() if not _same(value, want[name])}

    def diagnoses(self, i):
        name = self.exercise.outputs[i].name
        return [Diagnosis(m.name, m.kind, m.hint) for m, changed in self.held if name in changed]


def _generic(exercise, i, got, expected, low_precision):
    """Comparisons that hold for any exercise, tried when no known mistake matched."""
    want = expected[i]
    name = exercise.outputs[i].name
    dtype = got.dtype
    got = got.astype(np.float64)
    if not np.all(np.isfinite(got)):
        return []
    if _precision_only(got, want):
        cast = f"it is a {dtype} array: " if low_precision else ""
        return [
            Diagnosis(
                "precision",
                "precision",
                f"your {name} agrees with the tape to about {_relative(got, want):.0e} — {cast}a precision "
                "problem, not the maths: compute in float64 throughout (no float32 / astype(np.float32)).",
            )
        ]
    if got.shape == want.shape and got.size and not np.any(got) and np.any(np.abs(want) > ATOL):
        return [Diagnosis("placeholder", "placeholder", f"your {name} is all zeros — is it still a placeholder?")]
    if _same(got, -want):
        return [
            Diagnosis(
                "sign_flipped",
                "sign_flipped",
                f"your {name} is exactly minus the right answer: a sign is flipped somewhere.",
            )
        ]
    if want.ndim >= 2 and _same(got, np.swapaxes(want, -1, -2)) and not _same(want, np.swapaxes(want, -1, -2)):
        return [
            Diagnosis(
                "transposed",
                "transposed",
                f"your {name} is the transpose of the right answer: swap the order of a matrix product "
                "(and transpose its operands), or check which side the transposed factor goes on.",
            )
        ]
    for j, other in enumerate(expected):
        if j != i and _same(got, other):
            order = ", ".join(output.name for output in exercise.outputs)
            return [
                Diagnosis(
                    "swapped_outputs",
                    "swapped_outputs",
                    f"these outputs hold each other's right answers: return them in the order ({order}).",
                )
            ]
    if got.shape != want.shape and got.size == want.size and _same(got.reshape(want.shape), want):
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
        if abs(factor - 1.0) > 1e-6 and _same(got, factor * want):
            return [
                Diagnosis(
                    "constant_factor",
                    "constant_factor",
                    f"your {name} is {factor:.6g} × the right answer: a constant factor is missing or extra.",
                )
            ]
    return []


def _relative(got, want):
    size = float(np.max(np.abs(want))) if want.size else 0.0
    return float(np.max(np.abs(got - want), initial=0.0)) / max(size, 1e-300)


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
    names = list(names)
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]
