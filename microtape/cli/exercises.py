"""The `microtape exercises` command: list the exercises, hand out stubs, check a student's file.

::

    microtape exercises list                      # what there is to do
    microtape exercises stub > my_answers.py      # a file of stubs to fill in
    microtape exercises check my_answers.py       # check every exercise it defines
    microtape exercises check my_answers.py --name softmax_backward --timeout 5
    microtape exercises check my_answers.py --name batchnorm_backward --picture where.svg
    microtape exercises list --exercises teacher.py   # with a teacher's own exercises (ex.derivation)

``check`` runs the student's file in a *boxed child process* (see
:mod:`microtape.grading.box`), never in this one, with a time limit
(``--timeout`` seconds for running the file, and again for each call of an
exercise function, so ``--trials 5000`` does not share one budget);
this process alone draws the trials, computes the tape's answers and
compares. It prints each exercise's feedback, then a score table with
partial credit. ``--picture OUT.svg`` (or ``.png``, ``.pdf``) writes the
picture of a stepped exercise's check — the tape's backward graph, its
wrong links red, carried steps orange — drawn here from the checker's results
(the student's code is not run for it): the first stepped exercise that is not right, or
the first stepped one. The hidden trials are not reachable from here: they are the
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
import math
import sys
from pathlib import Path
from typing import Any

from ..exercises.catalogue import list_exercises
from ..exercises.registry import EXERCISES, get
from ..grading.box import isolation
from ..grading.submission import DEFAULT_TIMEOUT, EXIT_CODES, MAX_TIMEOUT, check_file

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> Any:
    """Add the `list | stub | check` sub-commands to ``parser`` (an argparse parser)."""
    parser.description = "Derivative exercises: list them, print stubs to fill in, check a student's file."
    actions = parser.add_subparsers(dest="exercises_action", metavar="{list,stub,check}")
    listing = actions.add_parser("list", help="list the exercises (the default)")
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
        help=f"time limit for running the file, and for each call of an exercise (default: {DEFAULT_TIMEOUT:g})",
    )
    checker.add_argument(
        "--picture",
        metavar="OUT.svg",
        help="write the picture of a stepped exercise's check (its wrong links marked) to this file",
    )
    for command in (listing, stub, checker):
        add_exercises_option(command)
    return parser


def add_exercises_option(parser: Any) -> None:
    """``--exercises FILE.py``: a teacher's file of exercises (``ex.derivation``), loaded before the command runs."""
    parser.add_argument(
        "--exercises",
        action="append",
        metavar="FILE.py",
        help="also the exercises a teacher's file registers with ex.derivation (repeatable)",
    )


def load_teachers_files(args: Any, command: Any) -> Any:
    """Load every ``--exercises`` file of ``args``; a message (the usage error) or None."""
    from ..exercises.teacher import load_exercises

    for path in getattr(args, "exercises", None) or ():
        try:
            load_exercises(path)
        except ValueError as error:
            return f"{command}: {error}"
    return None


def run(args: Any) -> Any:
    """Run the parsed command; returns the exit status."""
    action = getattr(args, "exercises_action", None) or "list"
    problem = load_teachers_files(args, f"microtape exercises {action}")
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if action == "list":
        return _list()
    if action == "stub":
        return _stub(args.names)
    return _check(args)


def _list() -> int:
    width = max(len(name) for name in EXERCISES)
    if len(list_exercises()) > 1:
        width = min(width, 40)
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


def _stub(names: Any) -> int:
    from ..exercises import starter_file

    try:
        text = starter_file(names or None)
    except ValueError as error:
        print(f"microtape exercises stub: {error}", file=sys.stderr)
        return 2
    print(text, end="")
    return 0


def _usage(message: object) -> int:
    print(f"microtape exercises check: {message}", file=sys.stderr)
    return 2


def _check(args: argparse.Namespace) -> Any:
    if args.trials is not None and args.trials < 1:
        return _usage(f"--trials must be at least 1, got {args.trials}")
    if args.seed < 0:
        return _usage(f"--seed must be at least 0, got {args.seed}")
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= MAX_TIMEOUT):
        return _usage(f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT:g}, got {args.timeout:g}")
    try:
        wanted = None if not args.name else [get(name).name for name in args.name]
    except ValueError as error:
        return _usage(error)
    if not Path(args.file).is_file():
        return _usage(f"no such file: {args.file}")

    names = wanted or list_exercises()
    how = isolation(self_check=True)
    if not how.startswith("isolation: bubblewrap"):  # said once, when the box is only the limits (or less)
        print(how, file=sys.stderr)
    report = check_file(args.file, names, trials=args.trials, seed=args.seed, timeout=args.timeout)
    status = report.print(explicit=wanted is not None)
    if getattr(args, "picture", None):
        _write_picture(report, args.picture)
    return status


def _write_picture(report: Any, path: Any) -> None:
    """Draw the check of the first stepped exercise that is not right (else the first stepped one) to ``path``."""
    from ..viz.render import GraphvizNotFound, render

    drawable = [r for r in report.results.values() if r.steps and r.trial_key is not None]
    if not drawable:
        stepped = ", ".join(name for name, exercise in EXERCISES.items() if exercise.stepped)
        print(f"--picture: no stepped exercise was checked to its end, so there is no picture to draw "
              f"(the stepped ones: {stepped})", file=sys.stderr)  # fmt: skip
        return
    result = next((r for r in drawable if not r.ok), drawable[0])
    try:
        written = render(result.picture(), path)
    except GraphvizNotFound as error:  # the feedback above said everything; the picture waits for Graphviz
        print(f"--picture: {error}", file=sys.stderr)
        return
    print(f"picture of {result.name}'s check written to {written}", file=sys.stderr)
