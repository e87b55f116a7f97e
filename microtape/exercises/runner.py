"""The child process of ``microtape exercises check``: run a student's file, report each verdict.

``microtape exercises check FILE`` never runs student code in its own
process. It starts this module in a child::

    python -m microtape.exercises.runner FD SETTINGS_JSON FILE

which imports ``FILE`` (as ``python FILE`` would run it), checks each
requested exercise, and writes one JSON object a line to the pipe ``FD``:

``{"event": "loaded", "defined": [...]}``
    the file ran; these exercise functions exist in it.
``{"event": "start", "name": ...}``
    the check of one exercise begins (the parent times it).
``{"event": "result", "name": ..., "status": ..., "score": ..., ...}``
    its verdict (a :class:`~microtape.exercises.checker.CheckResult` as JSON).
``{"event": "not_checked", "stage": "import" | NAME, "message": ...}``
    the student's code left by another way than returning: ``exit()`` /
    ``sys.exit()``, ``KeyboardInterrupt``, the time limit, an error at import.

Every way out other than returning a value is reported as *not checked*; the
parent also stops this process if it goes silent for longer than the time
limit (a loop that swallows the alarm), and treats a process that ends
without reporting (``os._exit``) the same way. The student's own output goes
to this process's stdout and stderr, which the parent shows separately.
"""

import json
import os
import sys

__all__ = ["main", "result_to_json"]


def result_to_json(result):
    """The parts of a CheckResult the parent needs, as plain JSON values."""
    return {
        "event": "result",
        "name": result.name,
        "ok": result.ok,
        "status": result.status,
        "message": result.message,
        "score": result.score,
        "max_score": result.max_score,
        "outputs": result.outputs,
        "mistakes": list(result.mistakes),
    }


def _describe_exit(error):
    if isinstance(error, SystemExit):
        code = "" if error.code is None else repr(error.code)
        return f"called exit() or sys.exit({code})"
    if isinstance(error, KeyboardInterrupt):
        return "raised KeyboardInterrupt"
    return f"raised {type(error).__name__}: {error}"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    fd, settings, path = int(argv[0]), json.loads(argv[1]), argv[2]
    report = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def send(**message):
        report.write(json.dumps(message) + "\n")
        report.flush()

    # Imported before the student's code runs, so that a file which breaks
    # numpy or microtape cannot break the checker's own imports.
    from .checker import TimeLimitExceeded, check, time_limit
    from .command import load_student_file

    timeout = settings["timeout"]
    try:
        with time_limit(timeout, f"the file did not finish running within {timeout:g} s"):
            module = load_student_file(path)
    except TimeLimitExceeded:
        send(event="not_checked", stage="import", message=f"running the file took longer than {timeout:g} s")
        return 0
    except SyntaxError as error:
        where = f" (line {error.lineno})" if error.lineno else ""
        send(event="not_checked", stage="import", message=f"SyntaxError{where}: {error.msg}")
        return 0
    except BaseException as error:  # exit(), KeyboardInterrupt, any crash at import: the student's
        send(event="not_checked", stage="import", message=f"running the file {_describe_exit(error)}")
        return 0

    defined = [name for name in settings["names"] if callable(getattr(module, name, None))]
    send(event="loaded", defined=defined)
    for name in defined:
        send(event="start", name=name)
        try:
            result = check(
                name,
                getattr(module, name),
                trials=settings["trials"],
                seed=settings["seed"],
                hidden=settings["hidden"],
                time_limit=timeout,
            )
        except BaseException as error:  # KeyboardInterrupt, or worse, from inside the student's function
            send(event="not_checked", stage=name, message=f"{name} {_describe_exit(error)}")
            continue
        send(**result_to_json(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
