"""The `microtape exercises` command: list the exercises, hand out stubs, check a student's file.

::

    microtape exercises list                      # what there is to do
    microtape exercises stub > my_answers.py      # a file of stubs to fill in
    microtape exercises check my_answers.py       # check every exercise it defines
    microtape exercises check my_answers.py --name softmax_backward --timeout 5

``check`` runs the student's file in a *boxed child process* (see
:mod:`microtape.exercises.sandbox`), never in this one, with a time limit
(``--timeout`` seconds for running the file, and again for each exercise);
this process alone draws the trials, computes the tape's answers and
compares. It prints each exercise's feedback, then a score table with
partial credit. The hidden trials are not reachable from here: they are the
instructor's (``microtape grade --secret``).

Exit status of ``check``:

* 0 — every checked exercise is right;
* 1 — some exercise is wrong, partly right or not started (all were checked);
* 2 — a usage error: no such file, an unknown ``--name``, a bad option;
* 3 — not checked: the student's code did not return an answer — it called
  ``exit()`` / ``sys.exit()`` (whatever the code), raised
  ``KeyboardInterrupt``, ran past the time limit, crashed while the file was
  loading (e.g. a ``SyntaxError``), or ended the process.

``microtape/cli.py`` wires this in with ``add_arguments(subparser)`` and
``run(args)``.
"""

import argparse
import sys
from pathlib import Path

from .checker import CheckResult, check
from .registry import EXERCISES, get
from .remote import BoxedSubmission
from .sandbox import isolation

__all__ = ["add_arguments", "run", "check_file", "EXIT_CODES", "DEFAULT_TIMEOUT"]

#: What each exit status of `microtape exercises check` means.
EXIT_CODES = {
    0: "every checked exercise is right",
    1: "some exercise is wrong, partly right or not started",
    2: "usage error (no such file, unknown --name, bad option)",
    3: "not checked: the student's code exited, was interrupted, ran past the time limit or crashed at load",
}
#: Seconds for running the student's file, and again for each exercise's check.
DEFAULT_TIMEOUT = 10.0
#: How much of the student's own printed output is shown.
_SHOWN_OUTPUT_LINES = 20


def add_arguments(parser):
    """Add the `list | stub | check` sub-commands to ``parser`` (an argparse parser)."""
    parser.description = "Derivative exercises: list them, print stubs to fill in, check a student's file."
    actions = parser.add_subparsers(dest="exercises_action", metavar="{list,stub,check}")
    actions.add_parser("list", help="list the exercises (the default)")
    stub = actions.add_parser("stub", help="print a Python file of stubs to fill in")
    stub.add_argument("names", nargs="*", metavar="NAME", help="only these exercises (default: all)")
    epilog = "exit status:\n" + "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items())
    checker = actions.add_parser(
        "check",
        help="check the exercise functions defined in a .py file (in a child process, with a time limit)",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    checker.add_argument("file", help="the student's Python file (it is run, as `python FILE` would)")
    checker.add_argument(
        "--name", action="append", metavar="NAME", help="check only this exercise (repeat for several)"
    )
    checker.add_argument("--trials", type=int, default=None, help="random inputs per exercise (default: all trials)")
    checker.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    checker.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit for running the file, and for each exercise (default: {DEFAULT_TIMEOUT:g})",
    )
    return parser


def run(args):
    """Run the parsed command; returns the exit status."""
    action = getattr(args, "exercises_action", None) or "list"
    if action == "list":
        return _list()
    if action == "stub":
        return _stub(args.names)
    return _check(args)


def _list():
    from . import list_exercises

    width = max(len(name) for name in EXERCISES)
    for name in list_exercises():
        exercise = EXERCISES[name]
        signature = f"{name}({', '.join(exercise.parameters)})"
        outputs = ", ".join(output.name for output in exercise.outputs)
        print(f"{signature:<{width + 24}} -> {outputs}")
        print(f"    {exercise.title}{' (stretch)' if exercise.stretch else ''}")
    print(
        "\nGet stubs with `microtape exercises stub > answers.py`, check with `microtape exercises check answers.py`."
    )
    return 0


def _stub(names):
    from . import starter_file

    try:
        text = starter_file(names or None)
    except ValueError as error:
        print(f"microtape exercises stub: {error}", file=sys.stderr)
        return 2
    print(text, end="")
    return 0


def _usage(message):
    print(f"microtape exercises check: {message}", file=sys.stderr)
    return 2


def _check(args):
    if args.trials is not None and args.trials < 1:
        return _usage(f"--trials must be at least 1, got {args.trials}")
    if args.seed < 0:
        return _usage(f"--seed must be at least 0, got {args.seed}")
    if not args.timeout > 0:
        return _usage(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        wanted = None if not args.name else [get(name).name for name in args.name]
    except ValueError as error:
        return _usage(error)
    if not Path(args.file).is_file():
        return _usage(f"no such file: {args.file}")

    from . import list_exercises

    names = wanted or list_exercises()
    if not isolation().startswith("isolation: bubblewrap"):  # say it when the box is only the limits
        print(isolation(), file=sys.stderr)
    report = check_file(args.file, names, trials=args.trials, seed=args.seed, timeout=args.timeout)
    return report.print(explicit=wanted is not None)


class FileReport:
    """What the child process reported about one student file."""

    def __init__(self, file, names):
        self.file = file
        self.names = names
        self.defined = None  # the exercise functions the file defines (None: it never loaded)
        self.results = {}  # name -> CheckResult
        self.not_checked = {}  # name or "import" -> message
        self.output = ""  # what the student's code printed
        self.notes = []  # notebook cells that failed (one line each)

    def _not_checked_result(self, name, message):
        exercise = get(name)
        outputs = {output.name: False for output in exercise.outputs}
        return CheckResult(name, False, f"✗ {name}: not checked — {message}.", status="not checked",
                           outputs=outputs, max_score=exercise.max_score)  # fmt: skip

    def print(self, explicit):
        """Print the feedback and the score table; return the exit status."""
        from .scores import ScoreTable

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

    def _print_output(self):
        lines = self.output.rstrip().splitlines()
        if not lines:
            return
        shown = lines[-_SHOWN_OUTPUT_LINES:]
        cut = f" (last {len(shown)} of {len(lines)} lines)" if len(shown) < len(lines) else ""
        print(f"\n--- what your code printed{cut} ---", file=sys.stderr)
        for line in shown:
            print(f"| {line}", file=sys.stderr)


def check_file(file, names, *, trials=None, seed=0, timeout=DEFAULT_TIMEOUT, hidden=False, secret=None):
    """Check the exercise functions of a student's file, run in the box; returns a :class:`FileReport`.

    The student's code runs only in a boxed child (see
    :mod:`microtape.exercises.sandbox`): this process draws the trials,
    computes the tape's answers and compares, and the child only ever gets
    input arrays and sends back output arrays. The child gets ``timeout``
    seconds to run the file and ``timeout`` more for each exercise; a child
    that overstays is killed, and started again for the next exercise.
    """
    report = FileReport(str(file), list(names))
    try:
        submission = BoxedSubmission.from_file(file, names, load_seconds=timeout)
    except (OSError, ValueError) as error:
        report.not_checked["import"] = str(error)
        return report
    with submission:
        if submission.load_error:
            report.not_checked["import"] = submission.load_error
        else:
            report.defined = [name for name in names if name in submission.defined]
            report.notes = submission.notes
            for name in report.defined:
                function = submission.function(name, seconds=timeout)
                report.results[name] = check(name, function, trials=trials, seed=seed, hidden=hidden, secret=secret)
        report.output = submission.printed()
    return report
