"""Assertions for tests in a student's own kernel: one per output, with a time limit.

This module lets a hand-written test cell (nbgrader-style) check one output
of one exercise::

    >>> import microtape.exercises as ex
    >>> def dropout_backward(grad_y, mask, p):
    ...     return grad_y * mask / (1 - p)
    >>> ex.assert_output("dropout_backward", dropout_backward, "grad_x")   # passes silently

Such a test runs where the student's code runs, so it is feedback, not a
grade: a cell can rebind it. A recorded grade comes from ``microtape grade``,
which runs the student's code in a box and compares outside it. The check
behind these runs once per function (remembered), under a time limit: a
function that never returns costs ``time_limit`` seconds once, not once per
output, and every test of it fails with "not checked" — as do ``exit()`` and
a ``KeyboardInterrupt`` raised by the student's code.
"""

import weakref
from typing import Any

from .checker import CheckResult, check
from .registry import get

__all__ = ["assert_output", "assert_right", "DEFAULT_TIME_LIMIT"]

#: Seconds a student's function gets for all the trials of one check.
DEFAULT_TIME_LIMIT = 10.0

# function -> {(exercise name, hidden, seed): CheckResult}. Weak keys: a
# redefined function is a new object and is checked afresh.
_checked: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def _check(name: str, student_fn: Any, hidden: Any, time_limit: Any, seed: int, secret: Any) -> Any:
    """The check, where even a KeyboardInterrupt from the student's code is a verdict.

    In a notebook a KeyboardInterrupt stops the cell (check re-raises it);
    in a grading run it would abort every test after it, so here it fails
    this exercise only.
    """
    try:
        return check(name, student_fn, hidden=hidden, time_limit=time_limit, seed=seed, secret=secret)
    except KeyboardInterrupt:
        exercise = get(name)
        outputs = {output.name: False for output in exercise.outputs}
        message = f"✗ {name}: not checked — your function raised KeyboardInterrupt instead of returning."
        return CheckResult(name, False, message, status="not checked", outputs=outputs, max_score=exercise.max_score)


def _result(name: str, student_fn: Any, hidden: Any, time_limit: Any, seed: int = 0, secret: Any = None) -> Any:
    try:
        memory = _checked.setdefault(student_fn, {})
    except TypeError:  # not weak-referenceable (a builtin): check without remembering
        return _check(name, student_fn, hidden, time_limit, seed, secret)
    stopped = [result for result in memory.values() if result.name == name and result.status == "not checked"]
    if stopped:
        return stopped[0]  # it already ran past the limit (or exited): do not wait for it again
    key = (name, hidden, seed, secret)
    if key not in memory:
        memory[key] = _check(name, student_fn, hidden, time_limit, seed, secret)
    return memory[key]


def assert_output(
    name: str,
    student_fn: Any,
    output: Any,
    *,
    hidden: bool = False,
    time_limit: Any = DEFAULT_TIME_LIMIT,
    secret: Any = None,
) -> None:
    """Pass when ``output`` of ``student_fn`` is right on every (hidden) trial; else ``AssertionError``.

    The message says why (the checker's feedback, with its hint). Returns
    nothing, so that a doctest-style test (otter's) expects no output.
    """
    get(name).output(output)  # a clear error for a misspelt output name
    result = _result(name, student_fn, hidden, time_limit, secret=secret)
    if not result.outputs.get(output):
        raise AssertionError(f"{name}: {output} is not right ({result.status}).\n{result.message}")


def assert_right(
    name: str, student_fn: Any, *, hidden: bool = False, time_limit: Any = DEFAULT_TIME_LIMIT, secret: Any = None
) -> None:
    """Pass when every output is right (the visible trials by default); else ``AssertionError``."""
    result = _result(name, student_fn, hidden, time_limit, secret=secret)
    if not result.ok:
        raise AssertionError(result.message)
