"""Calling a student's function: its signature, fresh copies of the inputs, a time limit, what it returned.

The checker (:mod:`microtape.exercises.checker`) calls the student through
these; everything here is about the *call*, nothing about the maths.
"""

import difflib
import inspect
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..engine.boundary import vjp_arity_problem
from .result import NotAnArray, TimeLimitExceeded

__all__ = [
    "Clock",
    "time_limit",
    "signature_problem",
    "copies",
    "describe",
    "exception_message",
    "where_in_file",
    "unpack",
    "key_notes",
    "MISSING",
    "exit_code",
]

#: What :func:`unpack` puts in place of an output the returned dict does not hold (a missing step).
MISSING = None


def exit_code(error: Any) -> Any:
    return "" if error.code is None else repr(error.code)


class Clock:
    """The time limit of one check, shared by all its trials."""

    def __init__(self, limit: Any) -> None:
        self.limit = limit
        self.used = 0.0

    @contextmanager
    def running(self) -> Iterator[Any]:
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
def time_limit(seconds: Any, message: str = "time limit exceeded") -> Iterator[Any]:
    """Raise :class:`TimeLimitExceeded` in the block if it runs longer than ``seconds``.

    Uses SIGALRM, so it works in the main thread of a Unix process (a
    notebook kernel, a script, the command line's child process); elsewhere
    the block runs without a limit.
    """
    if not (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()):
        yield
        return

    def ring(signum: Any, frame: Any) -> None:
        raise TimeLimitExceeded(message)

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def signature_problem(exercise: Any, student_fn: Any) -> Any:
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


def copies(args: Any) -> Any:
    """Fresh copies, so a function that writes into its inputs harms nobody."""
    return [arg.copy() if isinstance(arg, np.ndarray) else arg for arg in args]


def describe(parameters: Any, args: Any) -> Any:
    parts = []
    for parameter, arg in zip(parameters, args, strict=True):
        if isinstance(arg, np.ndarray):
            kind = "bool" if arg.dtype == np.bool_ else ""
            parts.append(f"{parameter} {kind}{list(arg.shape)}")
        else:
            parts.append(f"{parameter}={arg!r}")
    return ", ".join(parts)


def exception_message(name: str, student_fn: Any, error: Any, where: str) -> Any:
    kind = getattr(error, "type_name", type(error).__name__)  # a StudentError from the box names the real type
    lines = [f"✗ {name} raised {kind} ({where}):", f"    {error}"]
    location = getattr(error, "location", None) or _where_raised(student_fn, error)
    if location:
        lines.append(where_in_file(location))
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


def where_in_file(location: Any) -> Any:
    """The feedback's line naming where the student's code raised: file, line number, function and code.

    ``location`` is ``(file name, line number, function, code line)`` (the
    file name may be empty when it is not known).
    """
    filename, lineno, function, code_line = location
    place = f"line {lineno} of {filename}" if filename else f"line {lineno}"
    return f"  at {place}, in {function}" + (f":  {code_line}" if code_line else "")


def _where_raised(student_fn: Any, error: Any) -> Any:
    """``(file name, line number, function, code line)`` of the innermost frame in the student's file, or None."""
    code = getattr(student_fn, "__code__", None)
    frames = traceback.extract_tb(error.__traceback__)
    mine = [frame for frame in frames if code is not None and frame.filename == code.co_filename]
    if not mine:
        return None
    frame = mine[-1]
    return frame.filename, frame.lineno, frame.name, (frame.line or "").strip()


def unpack(exercise: Any, returned: Any, *, hidden: bool = False) -> Any:
    """The returned value as a list of numeric arrays, one per output, or a problem message.

    A returned dict is taken as the student wrote it: an output whose key is
    absent comes back as :data:`MISSING` (``None``) and the others are still
    graded (:func:`key_notes` names the absent, misspelled and extra keys).
    With ``hidden=True`` the message names no type or description the student's code chose.
    """
    values, problem = _values(exercise, returned, hidden)
    if problem:
        return None, problem
    arrays: list[Any] = []
    absent = _absent(exercise, returned)
    for output, value in zip(exercise.outputs, values, strict=True):
        if output.name in absent:
            arrays.append(MISSING)
            continue
        if value is None:
            return None, f"{output.name} is None; expected an array shaped like {output.like}."
        if isinstance(value, NotAnArray):
            what = "not an array of numbers" if hidden else f"a {value.what}"
            return None, f"{output.name} is {what}; expected a float array shaped like {output.like}."
        try:
            array = np.asarray(value)
        except Exception:  # ragged lists and the like
            array = None
        if array is None or array.dtype.kind not in "biuf":
            kind = type(value).__name__ if array is None else f"{type(value).__name__} of dtype {array.dtype}"
            kind = "not an array of real numbers" if hidden else f"a {kind}"
            return None, f"{output.name} is {kind}; expected a float array shaped like {output.like}."
        arrays.append(array)
    return arrays, None


def _absent(exercise: Any, returned: Any) -> Any:
    """The outputs a returned dict holds no key for (none when it is not a dict)."""
    if not isinstance(returned, dict):
        return set()
    return {output.name for output in exercise.outputs if output.name not in returned}


def key_notes(exercise: Any, returned: Any, *, hidden: bool = False) -> Any:
    """One line per key of a returned dict that is not as asked: missing, misspelled or extra.

    ``"grad_score: did you mean grad_scores? (not graded under that name)"``;
    an absent output no key resembles is named missing, an extra key is named
    and ignored. With ``hidden=True`` no key the student's code wrote is
    shown (a key is text it chose): only the expected names, and a count.
    """
    if not isinstance(returned, dict):
        return []
    names = [output.name for output in exercise.outputs]
    extra = [str(key) for key in returned if key not in names]
    missing = [name for name in names if name not in returned]
    notes, matched = [], set()
    for name in missing:
        close = [key for key in difflib.get_close_matches(name, extra, n=1, cutoff=0.75) if key not in matched]
        if close and not hidden:
            matched.add(close[0])
            notes.append(f"{close[0]!r}: did you mean {name}? ({name} is missing: not graded under that name)")
        elif close:
            matched.add(close[0])
            notes.append(f"{name} is missing (a returned key is close to it: misspelled?)")
        else:
            notes.append(f"{name} is missing from the returned dict (0 points for it)")
    others = [key for key in extra if key not in matched]
    if others and hidden:
        notes.append(f"{len(others)} other key{'s' if len(others) > 1 else ''} ignored (not {', '.join(names)})")
    elif others:
        shown = ", ".join(repr(key[:40]) for key in others[:8]) + (", …" if len(others) > 8 else "")
        notes.append(f"ignored: {shown} — not {'a step' if exercise.stepped else 'an output'} of {exercise.name}")
    return notes


def _values(exercise: Any, returned: Any, hidden: bool = False) -> Any:
    """``(one value per output, None)``, or ``(None, a problem message)`` when the count or form is off."""
    names = [output.name for output in exercise.outputs]
    count = len(names)
    listing = "(" + ", ".join(names) + ")"
    if returned is None:
        expected = listing if count > 1 else names[0]
        return None, f"your function returned None — is the `return` missing? Expected {expected}."
    if exercise.is_vjp:
        # The rule mt.ops applies to every VJP it runs: a tuple with one gradient per input.
        problem = vjp_arity_problem(returned, count)
        if problem:
            return None, f"{problem} — {listing} (mt.ops.define's op would refuse it when it runs backward)."
    if isinstance(returned, NotAnArray):
        what = "something that is not an array of numbers" if hidden else returned.what
        return None, f"returned {what}; expected {listing if count > 1 else 'one array, ' + names[0]}."
    if isinstance(returned, dict):
        if not any(n in returned for n in names):
            keys = "" if hidden else f" ({', '.join(repr(str(key)[:40]) for key in list(returned)[:8])})"
            return None, f"the returned dict has none of the keys {listing}{keys}."
        return [returned.get(n) for n in names], None
    if count == 1:
        if isinstance(returned, tuple) and len(returned) != 1:
            return None, f"returned {len(returned)} values; expected one array, {names[0]}."
        # A VJP's one gradient comes as (grad_x,) or [grad_x]: the sequences mt.ops.define accepts.
        one = isinstance(returned, tuple) or (exercise.is_vjp and isinstance(returned, list))
        return [returned[0] if one else returned], None
    if not isinstance(returned, (tuple, list)):
        kind = "value" if hidden else type(returned).__name__
        return None, f"returned one {kind}; expected a tuple of {count}: {listing}."
    if len(returned) != count:
        return None, f"returned {len(returned)} values; expected {count}: {listing}."
    return list(returned), None
