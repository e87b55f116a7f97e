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
import json
import time
from pathlib import Path

import numpy as np

from ..result import NotAnArray, NotChecked, TimeLimitExceeded
from .box import BoxTimeout, ChildGone, Sandbox

__all__ = ["BoxedSubmission", "StudentError", "read_submission", "MAX_SUBMISSION_BYTES"]

#: A submission file larger than this is not read (no honest answer file is near it).
MAX_SUBMISSION_BYTES = 4 << 20


class StudentError(Exception):
    """What the student's function raised in the box: its type's name, its text, and where."""

    def __init__(self, type_name, text, location=None):
        super().__init__(text)
        self.type_name = type_name
        self.location = location  # (line number, function, code line) in the student's code, or None


def read_submission(path):
    """``(mode, cells)`` of a ``.py`` file (one piece) or a notebook (its code cells); ValueError saying why not."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():  # a link could point the grader at its own secret
        raise ValueError("the submission is not a plain file (a link, a folder or a device)")
    size = path.stat().st_size
    if size > MAX_SUBMISSION_BYTES:
        raise ValueError(f"the file is {size >> 20} MB; a submission may be at most {MAX_SUBMISSION_BYTES >> 20} MB")
    text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return "file", [text]
    try:
        notebook = json.loads(text)
        cells = notebook["cells"]
        sources = []
        for cell in cells:
            if cell.get("cell_type") == "code":
                source = cell.get("source", "")
                sources.append("".join(source) if isinstance(source, list) else str(source))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"the notebook is not valid notebook JSON ({type(error).__name__}: {error})") from None
    return "cells", sources


def _signature(spec):
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
    """A student's code, run in a :class:`~microtape.exercises.grading.box.Sandbox` (again after each kill)."""

    def __init__(self, mode, cells, filename, names, *, load_seconds=10.0, limits=None, self_check=False):
        self.request = {"op": "load", "mode": mode, "cells": cells, "filename": filename, "names": list(names),
                        "cell_seconds": load_seconds}  # fmt: skip
        self.load_seconds = load_seconds
        self.box = Sandbox(limits, self_check=self_check)
        self.defined = {}  # exercise name -> inspect.Signature (None: unknown)
        self.notes = []  # one line per notebook cell that failed
        self.load_error = None  # one line when the submission did not load at all
        self._loaded = False

    @classmethod
    def from_file(cls, path, names, **options):
        mode, cells = read_submission(path)
        return cls(mode, cells, Path(path).name, names, **options)

    def __enter__(self):
        self.load()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.box.close()

    def printed(self):
        return self.box.printed()

    def load(self):
        """Run the submission in a (new) child; sets ``defined``, ``notes`` or ``load_error``."""
        seconds = self.load_seconds * max(1, len(self.request["cells"])) + 5.0  # + starting Python and numpy
        try:
            reply, _ = self.box.request(self.request, timeout=seconds)
        except BoxTimeout:
            self.load_error = f"running it did not finish within {self.load_seconds:g} s (the process was stopped)"
            return
        except ChildGone as error:
            self.load_error = f"running it failed: {error}"
            return
        self._loaded = True
        if reply.get("event") != "loaded":
            self.load_error = str(reply.get("message", "it did not load"))[:400]
            return
        defined = reply.get("defined")
        self.defined = {name: _signature(spec) for name, spec in defined.items()} if isinstance(defined, dict) else {}
        self.notes = [str(note)[:400] for note in reply.get("notes", [])][:20]

    def function(self, name, seconds):
        """The boxed function ``name`` as a callable, with ``seconds`` for all its calls together."""
        return BoxedFunction(self, name, seconds, self.defined.get(name))

    def call(self, name, args, seconds):
        if not self.box.running:  # killed after an earlier exercise: run the submission again
            self.load()
            if self.load_error:
                raise NotChecked(f"the submission could not be run again ({self.load_error})")
        specs, arrays = [], []
        for arg in args:
            if isinstance(arg, (np.ndarray, np.generic)):  # a numpy scalar travels as a 0-d array, comes out a scalar
                specs.append({"array": len(arrays), "scalar": isinstance(arg, np.generic)})
                arrays.append(np.asarray(arg))
            else:
                specs.append({"value": arg})
        try:
            reply, returned = self.box.request({"op": "call", "name": name, "args": specs}, arrays, timeout=seconds)
        except BoxTimeout:
            raise TimeLimitExceeded(f"no answer within {seconds:g} s") from None
        except ChildGone as error:
            raise NotChecked(str(error)) from None
        return _rebuild(reply, returned)


class BoxedFunction:
    """Calls one exercise function in the box; its time budget is shared by all the trials."""

    def __init__(self, submission, name, seconds, signature):
        self.submission = submission
        self.__name__ = name
        self.seconds = seconds
        self.used = 0.0
        if signature is not None:
            self.__signature__ = signature

    def __call__(self, *args):
        remaining = self.seconds - self.used
        if remaining <= 0:
            raise TimeLimitExceeded(f"no answer within {self.seconds:g} s")
        started = time.monotonic()
        try:
            return self.submission.call(self.__name__, args, remaining)
        except TimeLimitExceeded:
            raise TimeLimitExceeded(f"no answer within {self.seconds:g} s") from None
        finally:
            self.used += time.monotonic() - started


def _rebuild(reply, arrays):
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
    if kind == "too_many":
        return NotAnArray(f"{reply.get('count')} values")
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


def _raise_as_student(reply):
    """Raise what the student's function raised in the box (``NotImplementedError`` as itself: a stub)."""
    type_name = str(reply.get("type", "Exception"))[:80]
    text = str(reply.get("message", ""))[:400]
    if type_name == "NotImplementedError":
        raise NotImplementedError(text)
    location = None
    if isinstance(reply.get("lineno"), int):
        location = (reply["lineno"], str(reply.get("function", ""))[:80], str(reply.get("line", ""))[:200])
    raise StudentError(type_name, text, location)


def _item(item, arrays):
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
