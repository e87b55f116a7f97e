"""A student's file checked in the box: every exercise it defines, graded against the tape.

:func:`check_file` loads the file in a boxed child (:mod:`.box`, :mod:`.remote`)
and runs the checker on each exercise function it defines; the
:class:`FileReport` says what was checked, what was not and why, and prints
itself. ``microtape exercises check`` and ``microtape grade`` both call it.
"""

import sys
from typing import Any

from ..exercises.checker import CheckResult, check
from ..exercises.registry import get
from ..exercises.scores import ScoreTable
from .box import BoxStartError
from .remote import BoxedSubmission

__all__ = ["FileReport", "check_file", "DEFAULT_TIMEOUT", "MAX_TIMEOUT", "EXIT_CODES"]

#: What each exit status of `microtape exercises check` means.
EXIT_CODES = {
    0: "every checked exercise is right",
    1: "some exercise is wrong, partly right or not started",
    2: "usage error (no such file, unknown --name, bad option)",
    3: "not checked: the student's code exited, was interrupted, ran past the time limit or crashed at load",
}
#: Seconds for running the student's file, and again for each call of an exercise function.
DEFAULT_TIMEOUT = 10.0
#: The longest --timeout accepted (an hour per call is already far more than any lab needs).
MAX_TIMEOUT = 3600.0
#: How much of the student's own printed output is shown.
_SHOWN_OUTPUT_LINES = 20


class FileReport:
    """What the child process reported about one student file."""

    def __init__(self, file: Any, names: Any) -> None:
        self.file = file
        self.names = names
        self.defined = None  # the exercise functions the file defines (None: it never loaded)
        self.results: dict[Any, Any] = {}  # name -> CheckResult
        self.not_checked: dict[Any, Any] = {}  # name or "import" -> message
        self.output = ""  # what the student's code printed
        self.notes: list[Any] = []  # notebook cells that failed (one line each)
        self.grader_error: str | None = None  # one line when the grader, not the file, failed (no box could start)

    def _not_checked_result(self, name: str, message: str) -> CheckResult:
        exercise = get(name)
        outputs = {output.name: False for output in exercise.outputs}
        return CheckResult(name, False, f"✗ {name}: not checked — {message}.", status="not checked",
                           outputs=outputs, max_score=exercise.max_score)  # fmt: skip

    def print(self, explicit: Any) -> Any:
        """Print the feedback and the score table; return the exit status."""

        if "import" in self.not_checked:
            print(f"✗ {self.file}: not checked — {self.not_checked['import']}.")
            self._print_output()
            print("\nNothing was checked: the file must run to the end and define the exercise functions.")
            return 3
        checked = [name for name in self.names if name in (self.defined or ())]
        missing = [name for name in self.names if name not in (self.defined or ())]
        if explicit and missing:
            print(f"{self.file} does not define {', '.join(missing)}.", file=sys.stderr)
            self._print_output()
            return 1
        if not checked:
            print(f"{self.file} defines none of the exercise functions ({', '.join(self.names)}).", file=sys.stderr)
            self._print_output()
            return 1
        results = []
        for name in checked:
            if name in self.results:
                results.append(self.results[name])
            else:
                message = self.not_checked.get(name, "the checker was stopped before it got to this exercise")
                results.append(self._not_checked_result(name, message))
        for result in results:
            print(result.message)
        self._print_output()
        table = ScoreTable(results)
        print()
        print(table)
        right = sum(result.ok for result in results)
        print(f"\n{right} of {len(results)} exercise{'s' if len(results) != 1 else ''} correct.")
        if any(result.status == "not checked" for result in results):
            return 3
        return 0 if right == len(results) else 1

    def _print_output(self) -> None:
        lines = self.output.rstrip().splitlines()
        if not lines:
            return
        shown = lines[-_SHOWN_OUTPUT_LINES:]
        cut = f" (last {len(shown)} of {len(lines)} lines)" if len(shown) < len(lines) else ""
        print(f"\n--- what your code printed{cut} ---", file=sys.stderr)
        for line in shown:
            print(f"| {line}", file=sys.stderr)


def check_file(file: Any, names: Any, *, trials: int | None = None, seed: int = 0, timeout: float = DEFAULT_TIMEOUT,
               hidden: bool = False, secret: Any = None, total_seconds: float | None = None,
               student: Any = None) -> Any:  # fmt: skip
    """Check the exercise functions of a student's file, run in the box; returns a :class:`FileReport`.

    The student's code runs only in a boxed child (see
    :mod:`microtape.grading.box`): this process draws the trials,
    computes the tape's answers and compares, and the child only ever gets
    input arrays and sends back output arrays. The child gets ``timeout``
    seconds to run the file and ``timeout`` for each call of an exercise function
    (``total_seconds``, when given, bounds the whole submission); a child
    that overstays is killed, and started again for the next exercise.
    """
    report = FileReport(str(file), list(names))
    try:
        # Visible trials are the student's self-check: it also runs where prlimit is missing.
        submission = BoxedSubmission.from_file(
            file, names, load_seconds=timeout, total_seconds=total_seconds, self_check=not hidden
        )
    except (OSError, ValueError) as error:
        report.not_checked["import"] = str(error)
        return report
    try:
        with submission:
            _check_loaded(report, submission, names, trials, seed, timeout, hidden, (secret, student))
    except BoxStartError as error:
        report.grader_error = str(error)
        report.not_checked["import"] = str(error)
    return report


def _check_loaded(
    report: Any, submission: Any, names: Any, trials: Any, seed: int, timeout: Any, hidden: Any, secret_and_student: Any
) -> None:
    secret, student = secret_and_student
    if submission.load_error:
        report.not_checked["import"] = submission.load_error
        report.output = submission.printed()
        return
    report.defined = [name for name in names if name in submission.defined]
    report.notes = submission.notes
    at_load = submission.printed()
    for name in report.defined:
        function = submission.function(name, seconds=timeout)
        report.results[name] = check(name, function, trials=trials, seed=seed, hidden=hidden, secret=secret,
                                     student=student)  # fmt: skip
    # On hidden trials what the functions printed is not kept: it could carry the hidden inputs.
    report.output = at_load if hidden else submission.printed()
