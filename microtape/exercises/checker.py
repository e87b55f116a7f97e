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
import hmac
from collections.abc import Callable
from typing import Any

import numpy as np

from .diagnose import ATOL, PRECISION_RTOL, RTOL, compare_outputs, in_own_words
from .links import compare_steps
from .registry import get
from .result import (
    STATUSES,
    CheckResult,
    Diagnosis,
    NotAnArray,
    NotChecked,
    Problem,
    SubmissionTooLong,
    TimeLimitExceeded,
)
from .student_call import (
    Clock,
    copies,
    describe,
    exception_message,
    exit_code,
    key_notes,
    signature_problem,
    time_limit,
    unpack,
)
from .verdict import Verdict

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

# ---------------------------------------------------------------- the public API


def check(
    name: str,
    student_fn: Any,
    *,
    trials: Any = None,
    seed: int = 0,
    hidden: bool = False,
    time_limit: Any = None,
    secret: Any = None,
    student: Any = None,
) -> Any:
    """Check ``student_fn`` against the tape on seeded random inputs.

    ``trials`` defaults to the exercise's number of trials (more cycle through
    them with fresh random numbers); ``hidden=True`` uses the hidden trials,
    which differ from the visible ones and whose numbers are drawn from
    ``secret`` (a string or bytes the teacher keeps: nobody without it can
    know them; ``microtape grade`` always grades with one). With ``student`` (a name) the hidden
    trials are drawn from the secret *and* the name, so one student's trials are no other's answer
    key — all but the one large trial each exercise has (``"shared"``: the same for the class, so
    the grader computes its answer once; no source file could hold its answer). ``time_limit`` (seconds, for all the
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
    trials = _checked_arguments(name, student_fn, exercise.cases(hidden), trials, seed, time_limit)
    key = _trial_key(seed, hidden, secret, student)
    shared_key = _trial_key(seed, hidden, secret)
    cases = exercise.cases(hidden)

    verdict = Verdict(exercise, hidden)
    verdict.key = key
    mismatch = signature_problem(exercise, student_fn)
    if mismatch:
        return verdict.finish(f"✗ {name}: {mismatch}", trials_run=0)

    clock = Clock(time_limit)
    label = "hidden trial" if hidden else "trial"
    for trial in range(trials):
        shared = cases[trial % len(cases)].get("shared", False)
        if shared:
            args, expected, inputs = _shared_trial(name, hidden, shared_key, trial)
        elif student is None:
            args, expected, inputs = _trial(name, hidden, key, trial)
        else:  # drawn for this student alone and used once: not kept (a class's worth would fill memory)
            args, expected, inputs = _drawn_trial(name, hidden, key, trial)
        where = f"{label} {trial + 1} of {trials}: " + describe(exercise.parameters, args)

        try:
            with clock.running():
                returned = student_fn(*copies(args))
        except (Exception, TimeLimitExceeded, SystemExit) as error:  # not KeyboardInterrupt: that stops us
            stopped = _raised(verdict, student_fn, error, trial, where, time_limit)
            if stopped is not None:
                return stopped
            break

        outputs, problem = unpack(exercise, returned, hidden=hidden)
        if problem:
            verdict.crashed(f"✗ {name}: {problem}\n  ({where})", trial, None)
            break
        verdict.notes = verdict.notes or key_notes(exercise, returned, hidden=hidden)
        diagnose = verdict.first is None
        states = None
        if exercise.stepped:
            problems, error, states = compare_steps(exercise, args, inputs, outputs, expected, diagnose=diagnose)
        else:
            problems, error = compare_outputs(exercise, args, outputs, expected, diagnose=diagnose)
        if hidden:  # which output failed and why, never a value (the student's values may carry the inputs)
            problems = [in_own_words(exercise, problem) for problem in problems]
        verdict.trial_done(trial, where, problems, error, states)

    return verdict.finish(trials_run=verdict.trials_run)


def _checked_arguments(name: str, student_fn: Any, cases: Any, trials: Any, seed: int, time_limit: Any) -> Any:
    """The number of trials to run, once every argument of :func:`check` is checked."""
    if not callable(student_fn):
        raise TypeError(f"check({name!r}, student_fn): student_fn must be a function, got {type(student_fn).__name__}")
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
    return int(trials)


def _raised(verdict: Any, student_fn: Any, error: Any, trial: Any, where: str, time_limit: Any) -> Any:
    """The student's function raised ``error``: the finished result when that ends the check, else None.

    Not written yet (``NotImplementedError`` on the first trial), too slow,
    or left (``exit()``) end the check with their own status; any other
    exception is the student's bug, reported with its place, and no output is
    right.
    """
    name = verdict.exercise.name
    hidden = verdict.hidden
    if isinstance(error, NotImplementedError) and trial == 0:
        said = f" ({error})" if str(error) and not hidden else ""
        message = (
            f"✗ {name}: not written yet — your function raised NotImplementedError{said}. "
            "Fill in its body and check again."
        )
        return verdict.finish(message, trial + 1, trial, exception=error, status="not started")
    if isinstance(error, TimeLimitExceeded):
        seconds = f"{time_limit:g} s" if time_limit else str(error).removeprefix("no answer within ")
        message = (
            f"✗ {name}: not checked — your function did not return within {seconds} "
            f"({where}). Look for a loop that never ends, or an answer computed entry by entry "
            "(e.g. numerical differentiation) instead of from the derivation."
        )
        return verdict.finish(message, trial + 1, trial, exception=error, status="not checked")
    if isinstance(error, SubmissionTooLong):
        message = f"✗ {name}: not checked — {error} ({where})."
        return verdict.finish(message, trial + 1, trial, exception=error, status="not checked")
    if isinstance(error, (SystemExit, NotChecked)):
        how = error if isinstance(error, NotChecked) else (
            f"your function called exit() or sys.exit({exit_code(error)}) instead of returning")  # fmt: skip
        if hidden:  # an exit code or the way a process ended can carry a hidden input
            how = "your function ended its process (exit, a crash or a limit) instead of returning"
        message = f"✗ {name}: not checked — {how} ({where}). Return your answer instead."
        return verdict.finish(message, trial + 1, trial, exception=error, status="not checked")
    if hidden:  # the grader's words only: an exception's text can carry the hidden inputs
        kind = getattr(error, "type_name", type(error).__name__)
        kind = kind if kind.isidentifier() and len(kind) <= 40 else "an exception"
        message = (f"✗ {name} raised {kind} ({where}); on hidden trials the text of the error is not shown — "
                   "run `microtape exercises check` on your file to see it on the visible trials.")  # fmt: skip
        verdict.crashed(message, trial, error)
        return None
    verdict.crashed(exception_message(name, student_fn, error, where), trial, error)
    return None


def student_secret(secret: Any, student: Any) -> Any:
    """The secret one student's hidden trials are drawn from: the class secret and the student's name."""
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    return hmac.new(key, b"student:" + student.encode("utf-8", "surrogateescape"), hashlib.sha256).digest()


def _trial_key(seed: int, hidden: Any, secret: Any, student: Any = None) -> Any:
    """What seeds the trials: the seed, and for hidden trials the instructor's secret (and the student) too."""
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
    if student is not None:
        secret = student_secret(secret, str(student))
    digest = hashlib.sha256(secret).digest()
    return (int(seed), *(int.from_bytes(digest[i : i + 4], "big") for i in range(0, 32, 4)))


def _drawn_trial(name: str, hidden: Any, key: Any, trial: Any) -> Any:
    """``(args, expected, inputs)`` of one trial: read-only arrays (the student gets copies).

    ``inputs`` is the whole trial as drawn (what ``exercise.record`` takes: a stepped exercise's
    links are computed from it).
    """
    exercise = get(name)
    cases = exercise.cases(hidden)
    inputs = exercise.make_inputs(np.random.default_rng([*key, trial, int(hidden)]), cases[trial % len(cases)])
    expected = [np.asarray(value, dtype=np.float64) for value in exercise.tape_gradients(inputs)]
    args = [inputs[parameter] for parameter in exercise.parameters]
    for array in [*expected, *args]:
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
    return args, expected, inputs


#: Trials drawn from a key that is not a student's (the visible trials, a seed): kept, so
#: checking again, or a test run, does not recompute the tape's answers. Small arrays.
_trial = functools.lru_cache(maxsize=4096)(_drawn_trial)

#: The one large hidden trial of each exercise (``"shared"``: the same for the whole class):
#: kept, so a grading run computes its answer once, not once per student. A few MB each, so few.
_shared_trial = functools.lru_cache(maxsize=64)(_drawn_trial)


def assert_correct(name: str, student_fn: Callable[..., Any], *, trials: int | None = None, seed: int = 0,
                   hidden: bool = False, time_limit: float | None = None, secret: Any = None,
                   student: Any = None) -> Any:  # fmt: skip
    """Like :func:`check`, but raise ``AssertionError`` with the feedback when wrong.

    For hand-written tests (nbgrader-style): ``assert_correct("softmax_backward",
    softmax_backward, hidden=True, secret=...)``. Returns the :class:`CheckResult` when
    correct.
    """
    result = check(name, student_fn, trials=trials, seed=seed, hidden=hidden, time_limit=time_limit, secret=secret,
                   student=student)  # fmt: skip
    if not result.ok:
        raise AssertionError(result.message)
    return result
