"""A submission loaded in the box, and its exercise functions as callables the checker can grade.

This module lets the grader treat a student's boxed code like a local function::

    with BoxedSubmission.from_file("answers.py", names) as submission:
        fn = submission.function("softmax_backward", seconds=10)
        check("softmax_backward", fn)       # the same checker as in a notebook

Calling ``fn`` sends the input arrays to the child and returns the arrays it
sent back, rebuilt as the tuple, list or dict the student returned (anything
that was not numbers arrives as a :class:`~microtape.exercises.result.NotAnArray`).
The child's exceptions come back as :class:`StudentError` (with the type, the
text and the student's line), its exits and crashes as
:class:`~microtape.exercises.result.NotChecked`, and running past the
exercise's seconds as :class:`~microtape.exercises.result.TimeLimitExceeded`.
A child that was killed is started again, and the submission run again in
it, for the next exercise.
"""

import inspect
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..exercises.result import NotAnArray, NotChecked, SubmissionTooLong, TimeLimitExceeded
from .box import BoxTimeout, ChildGone, Sandbox
from .boxed.wire import loads_limited
from .untrusted import safe_text, safe_tree

__all__ = [
    "BoxedSubmission",
    "StudentError",
    "SubmissionTooLong",
    "read_submission",
    "MAX_SUBMISSION_BYTES",
    "MAX_NOTEBOOK_DEPTH",
]

#: A submission file larger than this is not read: a lab's answers are a few KB, and a limit
#: this low leaves no room to smuggle in a whole library (zipped microtape is ~550 KB).
MAX_SUBMISSION_BYTES = 256 << 10
#: A notebook's JSON nests ~5 deep; deeper is refused before it is parsed.
MAX_NOTEBOOK_DEPTH = 32
#: Seconds for starting Python and numpy in a new box, on top of the submission's own budget.
START_SECONDS = 5.0


class StudentError(Exception):
    """What the student's function raised in the box: its type's name, its text, and where."""

    def __init__(self, type_name: Any, text: str, location: Any = None) -> None:
        super().__init__(text)
        self.type_name = type_name
        self.location = location  # (file name, line number, function, code line) in the student's code, or None


def read_submission(path: Any) -> Any:
    """``(mode, cells)`` of a ``.py`` file (one piece) or a notebook (its code cells); ValueError saying why not."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():  # a link could point the grader at its own secret
        raise ValueError("the submission is not a plain file (a link, a folder or a device)")
    size = path.stat().st_size
    if size > MAX_SUBMISSION_BYTES:
        raise ValueError(f"the file is {size >> 10} KB; a submission may be at most {MAX_SUBMISSION_BYTES >> 10} KB")
    data = path.read_bytes()
    if path.suffix != ".ipynb":
        # utf-8-sig: a file saved with a byte-order mark (some Windows editors) reads as Python does.
        return "file", [data.decode("utf-8-sig", errors="replace")]
    try:
        notebook = loads_limited(data.removeprefix(b"\xef\xbb\xbf"), max_depth=MAX_NOTEBOOK_DEPTH)
        cells = notebook["cells"]
        sources = []
        for cell in cells:
            if cell.get("cell_type") == "code":
                source = cell.get("source", "")
                if isinstance(source, list):
                    source = "".join(str(line) for line in source)
                sources.append(str(source))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        message = safe_text(f"{type(error).__name__}: {error}", 200)
        raise ValueError(f"the notebook is not valid notebook JSON ({message})") from None
    return "cells", sources


def _signature(spec: Any) -> Any:
    """An inspect.Signature from the child's ``[[name, kind, has_default], ...]`` (None: unknown)."""
    if not isinstance(spec, list):
        return None
    try:
        parameters = [
            inspect.Parameter(
                str(name), inspect._ParameterKind(int(kind)), default=0 if has_default else inspect._empty
            )
            for name, kind, has_default in spec
        ]
        return inspect.Signature(parameters)
    except (TypeError, ValueError):
        return None


class BoxedSubmission:
    """A student's code, run in a :class:`~microtape.grading.box.Sandbox` (again after each kill)."""

    def __init__(
        self,
        mode: Any,
        cells: Any,
        filename: Any,
        names: Any,
        *,
        load_seconds: float = 10.0,
        limits: Any = None,
        total_seconds: Any = None,
        self_check: bool = False,
    ) -> None:
        self.request = {"op": "load", "mode": mode, "cells": cells, "filename": filename, "names": list(names),
                        "load_seconds": load_seconds}  # fmt: skip
        self.load_seconds = load_seconds
        # The whole submission's time: loading it, every exercise, and every rerun after a kill.
        self.total_seconds = total_seconds
        self._deadline = None if total_seconds is None else time.monotonic() + total_seconds
        self.box = Sandbox(limits, self_check=self_check)
        self.defined: dict[Any, Any] = {}  # exercise name -> inspect.Signature (None: unknown)
        self.notes: list[Any] = []  # one line per notebook cell that failed
        self.load_error: str | None = None  # one line when the submission did not load at all
        self._loaded = False

    @classmethod
    def from_file(cls, path: Any, names: Any, **options: Any) -> Any:
        mode, cells = read_submission(path)
        return cls(mode, cells, Path(path).name, names, **options)

    def __enter__(self) -> Any:
        self.load()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.box.close()

    def printed(self) -> Any:
        return safe_text(self.box.printed(), lines=True)

    def _within_budget(self, seconds: Any) -> Any:
        """``seconds``, or what is left of the submission's whole budget when that is less."""
        if self._deadline is None:
            return seconds
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise SubmissionTooLong(f"the submission took too long (over {self.total_seconds:g} s in all)")
        return min(seconds, left)

    def load(self) -> None:
        """Run the submission in a (new) child; sets ``defined``, ``notes`` or ``load_error``.

        Raises :class:`~microtape.grading.box.BoxStartError` when no box could be
        started (the grader's problem, not the student's).
        """
        # One budget for the whole file, however many cells it has (+ starting Python and numpy).
        try:
            seconds = self._within_budget(self.load_seconds + START_SECONDS)
            reply, _ = self.box.request(self.request, timeout=seconds)
        except SubmissionTooLong as error:
            self.load_error = str(error)
            return
        except BoxTimeout:
            self.load_error = f"running it did not finish within {self.load_seconds:g} s (the process was stopped)"
            return
        except ChildGone as error:
            self.load_error = f"running it failed: {safe_text(error, 300)}"
            return
        reply = safe_tree(reply)
        self._loaded = True
        if reply.get("event") != "loaded":
            self.load_error = str(reply.get("message", "it did not load"))[:400]
            return
        defined = reply.get("defined")
        self.defined = {name: _signature(spec) for name, spec in defined.items()} if isinstance(defined, dict) else {}
        notes = reply.get("notes")
        self.notes = [str(note)[:400] for note in notes][:20] if isinstance(notes, list) else []

    def function(self, name: str, seconds: Any) -> "BoxedFunction":
        """The boxed function ``name`` as a callable, with ``seconds`` for each of its calls."""
        return BoxedFunction(self, name, seconds, self.defined.get(name))

    def call(self, name: str, args: Any, seconds: Any) -> Any:
        if not self.box.running:  # killed after an earlier exercise: run the submission again
            self.load()
            if self.load_error:
                raise NotChecked(f"the submission could not be run again ({self.load_error})")
        arrays: list[Any]
        specs, arrays = [], []
        for arg in args:
            if isinstance(arg, (np.ndarray, np.generic)):  # a numpy scalar travels as a 0-d array, comes out a scalar
                specs.append({"array": len(arrays), "scalar": isinstance(arg, np.generic)})
                arrays.append(np.asarray(arg))
            else:
                specs.append({"value": arg})
        limited = self._within_budget(seconds)
        try:
            reply, returned = self.box.request({"op": "call", "name": name, "args": specs}, arrays, timeout=limited)
        except BoxTimeout:
            if limited < seconds:
                raise SubmissionTooLong(
                    f"the submission took too long (over {self.total_seconds:g} s in all)"
                ) from None
            raise TimeLimitExceeded(f"no answer within {seconds:g} s") from None
        except ChildGone as error:
            raise NotChecked(safe_text(error, 300)) from None
        return _rebuild(safe_tree(reply), returned)


class BoxedFunction:
    """Calls one exercise function in the box; ``seconds`` is the time limit of *each* call.

    Per call, so more trials never make a fast answer too slow; the whole
    submission's time is bounded by :class:`BoxedSubmission`'s ``total_seconds``.
    """

    def __init__(self, submission: Any, name: str, seconds: Any, signature: Any) -> None:
        self.submission = submission
        self.__name__ = name
        self.seconds = seconds
        if signature is not None:
            self.__signature__ = signature

    def __call__(self, *args: Any) -> Any:
        try:
            return self.submission.call(self.__name__, args, self.seconds)
        except SubmissionTooLong:
            raise
        except TimeLimitExceeded:
            raise TimeLimitExceeded(f"no answer within {self.seconds:g} s (the time limit of one call)") from None


def _rebuild(reply: Any, arrays: Any) -> Any:
    """The student's return value from the child's reply: numbers as arrays, anything else a NotAnArray."""
    event = reply.get("event")
    if event == "raised":
        _raise_as_student(reply)
    if event == "exited":
        raise NotChecked(f"your function {str(reply.get('how', 'exited'))[:200]} instead of returning")
    if event != "returned":
        raise NotChecked(f"the process sent an unknown reply {str(event)[:40]!r}")
    kind = reply.get("kind")
    if kind == "none":
        return None
    if kind == "too_large":  # (the box's limit: MAX_RETURNED_BYTES of numbers, however many values)
        return NotAnArray(f"{reply.get('count')} values of more than 64 MB in all")
    values = [_item(item, arrays) for item in reply.get("items", [])]
    if kind == "single" and len(values) == 1:
        return values[0]
    if kind == "tuple":
        return tuple(values)
    if kind == "list":
        return values
    if kind == "dict" and isinstance(reply.get("keys"), list) and len(reply["keys"]) == len(values):
        return dict(zip([str(key) for key in reply["keys"]], values))
    raise NotChecked("the process sent a malformed reply")


def _raise_as_student(reply: Any) -> None:
    """Raise what the student's function raised in the box (``NotImplementedError`` as itself: a stub)."""
    type_name = str(reply.get("type", "Exception"))[:80]
    text = str(reply.get("message", ""))[:400]
    if type_name == "NotImplementedError":
        raise NotImplementedError(text)
    location = None
    if isinstance(reply.get("lineno"), int):
        filename = str(reply.get("filename", ""))[:200]
        location = (filename, reply["lineno"], str(reply.get("function", ""))[:80], str(reply.get("line", ""))[:200])
    raise StudentError(type_name, text, location)


def _item(item: Any, arrays: Any) -> Any:
    """One returned value from its description: None, the array it names, or a NotAnArray."""
    if not isinstance(item, dict):
        raise NotChecked("the process sent a malformed reply")
    if item.get("none"):
        return None
    if "array" in item:
        index = item["array"]
        if not isinstance(index, int) or not 0 <= index < len(arrays):
            raise NotChecked("the process sent a malformed reply")
        return arrays[index]
    return NotAnArray(str(item.get("describe", "an object"))[:200])
