"""The boxed child: run a student's code, then answer the grader's calls with arrays only.

Started by :mod:`microtape.grading.box` as ``python -I -S -B child.py
LIBDIR --fds R W``, with ``sys.path`` holding only the standard library, this
folder and ``LIBDIR`` (numpy). It talks through two pipes, fd R (requests) and
fd W (replies) — or, with ``--stdio`` instead (Windows), its stdin and stdout —
in the format of ``wire.py``:

``{"op": "load", "mode": "file" | "cells", "cells": [source, ...], "filename": ..., "names": [...]}``
    run the submission — a ``.py`` file as one piece (stopping at the first
    error), a notebook cell by cell (a cell that fails is noted and skipped) —
    and reply ``{"event": "loaded", "defined": {name: signature}, "notes": [...]}``
    or ``{"event": "load_failed", "message": ...}``.
``{"op": "begin", "name": ...}``, then calls, then ``{"op": "end"}``
    one exercise's calls, served by a fresh copy (a fork) of the loaded
    submission: replies ``{"event": "begun"}``, and ``{"event": "ended"}`` once
    the copy and everything it started are gone (see :func:`exercise`).
``{"op": "call", "name": ..., "args": [{"array": i} | {"value": x}, ...]}`` + arrays
    call one exercise function; reply ``{"event": "returned", "kind": ...,
    "items": [...]}`` + arrays, ``{"event": "raised", ...}`` or ``{"event": "exited", ...}``.

It never sees an expected answer, and nothing it replies is believed beyond
the arrays themselves: the grader compares them with its own tape.
"""

import builtins
import inspect
import linecache
import os
import signal
import sys
import time
import traceback
from typing import Any

# `python -I` puts neither the script's folder nor the current one on the path: the
# helper folder (wire, the stand-in microtape) and numpy's folder are the only additions.
HELPER_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HELPER_DIR, sys.argv[1]]

import numpy as np  # noqa: E402
import wire  # noqa: E402
from ipython import runs_as_python, strip_magics  # noqa: E402
from landlock import restrict_writes  # noqa: E402

#: The most bytes of numbers one call may return (all its arrays together): no count of values is
#: fixed, so a derivation may have as many steps as it likes (a key is cut to MAX_KEY characters).
MAX_RETURNED_BYTES = 64 << 20
MAX_KEY = 200
#: Characters of a message that are sent back (an exception's text, a note).
MAX_TEXT = 400


#: What a missing module means here: the box holds only these, on purpose.
ONLY = "graded code has only the standard library, numpy and mt.ops.define"


class CellTimeLimit(BaseException):
    """A notebook cell ran past its share of the time (raised by SIGALRM)."""


def _text(value: Any) -> Any:
    text = str(value).replace("\n", " ").strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _how_it_left(error: Any, seconds: float = 0.0) -> str:
    if isinstance(error, SystemExit):
        code = "" if error.code is None else repr(error.code)
        return f"called exit() or sys.exit({code})"
    if isinstance(error, KeyboardInterrupt):
        return "raised KeyboardInterrupt"
    if isinstance(error, CellTimeLimit):
        return f"took longer than {seconds:g} s"
    if isinstance(error, ModuleNotFoundError) and error.name:
        student = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in linecache.cache
                   and not f.filename.startswith(HELPER_DIR)]  # fmt: skip
        line = f" (line {student[-1].lineno})" if student else ""
        return f"imports {error.name}{line}, which is not in the box ({ONLY})"
    return f"raised {type(error).__name__}: {_text(error)}"


def _compile(source: Any, filename: Any) -> Any:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec", dont_inherit=True)


def load(request: Any, namespace: Any) -> Any:
    """Run the submission into ``namespace``; the reply header."""
    cells, mode = request["cells"], request["mode"]
    seconds = float(request.get("load_seconds", 0))
    deadline = time.monotonic() + seconds  # one budget for the whole file, however many cells
    notes = []
    for number, source in enumerate(cells, start=1):
        left = deadline - time.monotonic()
        if seconds > 0 and left <= 0:
            notes.append(f"cells {number}–{len(cells)} not run: the notebook used up its {seconds:g} s")
            break
        filename = request["filename"] if mode == "file" else f"{request['filename']} [cell {number}]"
        where = "" if mode == "file" else f"cell {number}: "
        if mode != "file" and not runs_as_python(source):
            notes.append(f"{where}not run: a cell magic that is not Python (e.g. %%writefile)")
            continue
        try:
            code = _compile(source if mode == "file" else strip_magics(source), filename)
        except (SyntaxError, ValueError) as error:
            line = f" (line {error.lineno})" if getattr(error, "lineno", None) else ""  # type: ignore[union-attr]  # a ValueError has none: getattr
            message = f"{where}{type(error).__name__}{line}: {getattr(error, 'msg', error)}"
            if mode == "file":
                return {"event": "load_failed", "message": message}
            notes.append(message + " — cell skipped")
            continue
        if seconds > 0 and TIMER:
            signal.setitimer(signal.ITIMER_REAL, left)
        try:
            exec(code, namespace)
        except BaseException as error:  # the student's code: any way out is a note, never our crash
            if mode == "file":
                return {"event": "load_failed", "message": f"running the file {_how_it_left(error, seconds)}"}
            notes.append(f"{where}{_how_it_left(error, seconds)} — the rest of the cell skipped")
        finally:
            if TIMER:
                signal.setitimer(signal.ITIMER_REAL, 0)
    absent = sys.modules.get("microtape._absent")
    noted: list[Any] = []
    for name in getattr(absent, "USED", []):
        if len(noted) < 5 and not any(name.startswith(f"{parent}.") for parent in noted):  # one line per package
            noted.append(name)
            notes.append(f"uses {name}, which is not in the box ({ONLY}): an exercise that calls it fails")
    defined = {}
    for name in request["names"]:
        fn = namespace.get(name)
        if callable(fn):
            defined[name] = _signature(fn)
    return {"event": "loaded", "defined": defined, "notes": notes[:20], "observed": observed(namespace)}


#: Libraries that compute gradients (their answer is not a derivation); the grader flags them.
AUTOGRAD_LIBRARIES = ("torch", "jax", "autograd", "mygrad", "micrograd", "tinygrad", "microtape")
_ARITHMETIC = ("__add__", "__mul__", "__sub__", "__truediv__", "__matmul__", "__pow__", "__neg__")


def observed(namespace: Any) -> list[Any]:
    """What the box saw after loading that the source may hide: ``[{"kind", "evidence"}]`` (for the teacher).

    A library module that appeared without coming from this helper folder (decoded and run, or
    imported from a zip the file wrote), a use of the absent parts of microtape, and classes whose
    values overload arithmetic and keep a backward rule (an autograd, perhaps decoded from a blob).
    """
    found = []
    for name, module in list(sys.modules.items()):
        top = name.split(".")[0]
        origin = str(getattr(module, "__file__", "") or "")
        if top in AUTOGRAD_LIBRARIES and not origin.startswith(HELPER_DIR) and "_absent" not in type(module).__name__:
            if not origin and top == "microtape" and type(module).__name__ == "_AbsentModule":
                continue
            found.append({"kind": "autograd library", "evidence": _text(f"module {name} was loaded in the box")})
    absent = sys.modules.get("microtape._absent")
    for name in getattr(absent, "USED", [])[:3]:
        found.append({"kind": "autograd library", "evidence": _text(f"uses {name} (not in the box)")})
    classes = [value for value in list(namespace.values()) if isinstance(value, type)]
    for module in list(sys.modules.values()):
        if not str(getattr(module, "__file__", "") or "").startswith((HELPER_DIR, sys.argv[1], sys.prefix)):
            classes += [value for value in list(vars(module).values())[:500] if isinstance(value, type)]
    for cls in classes[:2000]:
        try:
            members = set(vars(cls))
        except TypeError:
            continue
        overloads = [name for name in _ARITHMETIC if name in members]
        backward = [name for name in members if "backward" in name.lower() or "vjp" in name.lower()]
        if len(overloads) >= 2 and backward:
            evidence = f"class {cls.__qualname__} in the box overloads {', '.join(overloads[:3])} and has {backward[0]}"
            found.append({"kind": "own autograd", "evidence": _text(evidence)})
    return found[:10]


def _signature(fn: Any) -> Any:
    """``[[name, kind, has_default], ...]`` or None when Python cannot tell (a builtin)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return [[p.name, int(p.kind), p.default is not p.empty] for p in list(parameters)[:32]]


def _as_array(value: Any) -> Any:
    """``(array, None)`` when ``value`` is numbers, else ``(None, what it is)``."""
    try:
        array = np.asarray(value)
    except Exception:  # ragged lists, objects that refuse
        return None, type(value).__name__
    if array.dtype.hasobject or array.dtype.kind not in "biufc":
        return None, f"{type(value).__name__} of dtype {array.dtype}"
    return array, None


def call(request: Any, arrays: Any, namespace: Any) -> Any:
    """Call one exercise function on the request's arguments; ``(reply header, arrays)``."""
    args = []
    for spec in request["args"]:
        if "array" in spec:
            array = arrays[spec["array"]]
            args.append(array[()] if spec.get("scalar") else array)
        else:
            args.append(spec["value"])
    fn = namespace.get(request["name"])
    try:
        returned = fn(*args)
    except (SystemExit, KeyboardInterrupt) as error:
        return {"event": "exited", "how": _how_it_left(error)}, []
    except BaseException as error:  # the student's bug, reported with its place
        return _raised(error), []
    if returned is None:
        return {"event": "returned", "kind": "none", "items": []}, []
    if isinstance(returned, dict):
        kind, keys, values = "dict", [str(key)[:MAX_KEY] for key in returned], list(returned.values())
    elif isinstance(returned, (tuple, list)):
        kind, keys, values = type(returned).__name__, None, list(returned)
    else:
        kind, keys, values = "single", None, [returned]
    items: list[dict[str, Any]]
    out: list[Any]
    items, out, size = [], [], 0
    for value in values:
        if value is None:
            items.append({"none": True})
            continue
        array, what = _as_array(value)
        if array is None:
            items.append({"describe": _text(what)})
        else:
            size += array.nbytes
            if size > MAX_RETURNED_BYTES or len(out) >= wire.MAX_ARRAYS:
                return {"event": "returned", "kind": "too_large", "count": len(values), "items": []}, []
            items.append({"array": len(out)})
            out.append(array)
    return {"event": "returned", "kind": kind, "keys": keys, "items": items}, out


def _raised(error: Any) -> Any:
    text = f"{_text(error)}: {ONLY}" if isinstance(error, ModuleNotFoundError) else _text(error)
    reply = {"event": "raised", "type": type(error).__name__, "message": text}
    frames = traceback.extract_tb(error.__traceback__)
    # A package that is not in the box, by its name alone (the grader shows it on hidden trials too).
    stand_in = os.path.join(HELPER_DIR, "microtape")
    if isinstance(error, ModuleNotFoundError) and error.name:
        reply["package"] = error.name.split(".")[0]
    elif any(frame.filename.startswith(stand_in) for frame in frames[-2:]):
        reply["package"] = "microtape"
    # The student's frames only: not this helper folder's (child.py, the stand-in microtape).
    student = [f for f in frames if f.filename in linecache.cache and not f.filename.startswith(HELPER_DIR)]
    if student:
        frame = student[-1]
        reply.update(filename=_text(frame.filename), lineno=frame.lineno, function=frame.name,
                     line=_text(frame.line or ""))  # fmt: skip
    return reply


def _only_the_first_process() -> None:
    """A copy made by the student's ``os.fork()`` leaves here: only the process the grader started replies."""
    if os.getpid() != FIRST_PID:
        os._exit(0)


FIRST_PID = os.getpid()
#: How an exercise's copy leaves when the grader says "end" (any other way: it left mid-call).
ENDED = 86
#: A timer that interrupts a cell (not on Windows: there a slow cell uses up the whole file's time).
TIMER = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")


def _pipes() -> Any:
    """The two pipes: the fds named after ``--fds``, or (``--stdio``, Windows) stdin and stdout.

    With ``--stdio`` what the student prints must not reach the reply pipe: fd 1
    is pointed at fd 2 (the grader's output file) once the reply end is kept,
    and stdin reads nothing.
    """
    if "--stdio" not in sys.argv:
        at = sys.argv.index("--fds")
        return os.fdopen(int(sys.argv[at + 1]), "rb", buffering=0), os.fdopen(int(sys.argv[at + 2]), "wb", buffering=0)
    requests, replies = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    if os.name == "nt":  # bytes as they are, no newline translation
        import msvcrt

        for fd in (requests, replies):
            msvcrt.setmode(fd, os.O_BINARY)  # type: ignore[attr-defined]  # Windows only
    return os.fdopen(requests, "rb", buffering=0), os.fdopen(replies, "wb", buffering=0)


def main() -> Any:
    requests, replies = _pipes()
    if "--writable" in sys.argv:  # no bubblewrap: give up writing anywhere but here and /dev (Landlock)
        restrict_writes([os.getcwd(), "/dev"])

    def read_exactly(n: Any) -> Any:
        data = bytearray(n)  # filled in place: a large array arrives in many pipe-sized pieces
        view, got = memoryview(data), 0
        while got < n:
            count = requests.readinto(view[got:])
            if not count:
                raise EOFError("the grader closed the pipe")
            got += count
        return bytes(data)

    def ring(signum: Any, frame: Any) -> None:
        raise CellTimeLimit()

    if TIMER:
        signal.signal(signal.SIGALRM, ring)
    replies.write(wire.encode({"event": "ready"}))  # Python and numpy are up: the box has started
    builtins.exit = builtins.quit = sys.exit  # type: ignore[assignment]  # what `site` adds (the box runs without it)
    # Not "__main__": an `if __name__ == "__main__":` self-test does not run, as under `import answers`.
    namespace = {"__name__": "submission", "__builtins__": builtins}
    while True:
        try:
            request, arrays = wire.read_message(read_exactly)
        except EOFError:
            return 0
        if request["op"] == "load":
            out: list[Any]
            reply, out = load(request, namespace), []
        elif request["op"] == "begin":
            reply, out = exercise(read_exactly, replies, namespace), []
        else:
            reply, out = call(request, arrays, namespace)
        _reply(replies, reply, out)


def _reply(replies: Any, reply: Any, out: Any = ()) -> None:
    _only_the_first_process()
    for stream in (sys.stdout, sys.stderr):  # what the student printed, before the reply
        try:
            stream.flush()
        except Exception:  # closed or replaced by the student's code: not our concern
            pass
    replies.write(wire.encode(reply, out))


def exercise(read_exactly: Any, replies: Any, namespace: Any) -> Any:
    """``begin``: one exercise's calls, served by a fresh copy of the loaded submission; the ``ended`` reply.

    The copy (a fork) answers ``call`` requests until ``end``, then leaves; nothing it started —
    a thread, a changed global, a cache — reaches the next exercise, which gets its own copy of
    the submission as it was after loading. With ``--end-all`` (the box is the only thing this
    user can signal: its own pid namespace, or a uid of its own) every other process of the box
    is killed after it, so a grandchild in a session of its own does not outlive the exercise
    either. Without ``fork`` (Windows) the calls are served here.
    """
    global FIRST_PID
    if not hasattr(os, "fork"):
        return {"event": "begun", "forked": False}
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()  # so the copy does not print the loader's buffered output again
        except Exception:
            pass
    pid = os.fork()
    if pid == 0:
        FIRST_PID = os.getpid()
        _reply(replies, {"event": "begun", "forked": True})
        while True:
            try:
                request, arrays = wire.read_message(read_exactly)
            except EOFError:
                os._exit(0)
            if request["op"] != "call":
                _only_the_first_process()
                os._exit(ENDED)  # "end": the loader replies, once every process of this exercise is gone
            _reply(replies, *call(request, arrays, namespace))
    _, status = os.waitpid(pid, 0)
    if "--end-all" in sys.argv:
        try:
            os.kill(-1, signal.SIGKILL)  # every process this user can signal but this one
        except OSError:  # none left
            pass
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == ENDED:
        return {"event": "ended"}
    # The copy left in the middle of a call (os._exit, a signal, a limit): this process leaves the
    # same way, so the grader reads how the call ended, as when the calls were served here.
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: not catchable, already the default
            pass
        os.kill(os.getpid(), number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    sys.exit(main())
