"""The `microtape exercises` command: list the exercises, hand out stubs, check a student's file.

::

    microtape exercises list                      # what there is to do
    microtape exercises stub > my_answers.py      # a file of stubs to fill in
    microtape exercises check my_answers.py       # check every exercise it defines
    microtape exercises check my_answers.py --name softmax_backward

``check`` imports the file (running its code, as ``python`` would) and checks
each function whose name is an exercise's. The exit status is 0 when every
checked exercise passes, 1 otherwise — so a grading script can use it.

``microtape/cli.py`` wires this in with ``add_arguments(subparser)`` and
``run(args)``.
"""

import importlib.util
import sys
import uuid
from pathlib import Path

from .checker import check
from .registry import EXERCISES, get

__all__ = ["add_arguments", "run", "load_student_file"]


def add_arguments(parser):
    """Add the `list | stub | check` sub-commands to ``parser`` (an argparse parser)."""
    parser.description = "Derivative exercises: list them, print stubs to fill in, check a student's file."
    actions = parser.add_subparsers(dest="exercises_action", metavar="{list,stub,check}")
    actions.add_parser("list", help="list the exercises (the default)")
    stub = actions.add_parser("stub", help="print a Python file of stubs to fill in")
    stub.add_argument("names", nargs="*", metavar="NAME", help="only these exercises (default: all)")
    checker = actions.add_parser("check", help="check the exercise functions defined in a .py file")
    checker.add_argument("file", help="the student's Python file (it is run, as `python FILE` would)")
    checker.add_argument(
        "--name", action="append", metavar="NAME", help="check only this exercise (repeat for several)"
    )
    checker.add_argument("--trials", type=int, default=5, help="random inputs per exercise (default: 5)")
    checker.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    return parser


def run(args):
    """Run the parsed command; returns the exit status."""
    action = getattr(args, "exercises_action", None) or "list"
    if action == "list":
        return _list()
    if action == "stub":
        return _stub(args.names)
    return _check(args.file, args.name, args.trials, args.seed)


def _list():
    from . import list_exercises

    width = max(len(name) for name in EXERCISES)
    for name in list_exercises():
        exercise = EXERCISES[name]
        signature = f"{name}({', '.join(exercise.parameters)})"
        outputs = ", ".join(output.name for output in exercise.outputs)
        print(f"{signature:<{width + 24}} -> {outputs}")
        print(f"    {exercise.title}")
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
        return 1
    print(text, end="")
    return 0


def load_student_file(path):
    """Import a student's ``.py`` file as a fresh module and return it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    module_name = f"microtape_student_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(file, names, trials, seed):
    if trials < 1:
        print(f"microtape exercises check: --trials must be at least 1, got {trials}", file=sys.stderr)
        return 1
    try:
        wanted = None if not names else [get(name).name for name in names]
    except ValueError as error:
        print(f"microtape exercises check: {error}", file=sys.stderr)
        return 1
    try:
        module = load_student_file(file)
    except FileNotFoundError as error:
        print(f"microtape exercises check: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # a syntax error or a crash at import: the student's to fix
        print(
            f"microtape exercises check: could not run {file}: {type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return 1

    from . import list_exercises

    defined = [name for name in list_exercises() if callable(getattr(module, name, None))]
    if wanted is None:
        chosen = defined
        if not chosen:
            print(
                f"{file} defines none of the exercise functions ({', '.join(list_exercises())}).",
                file=sys.stderr,
            )
            return 1
    else:
        missing = [name for name in wanted if name not in defined]
        if missing:
            print(f"{file} does not define {', '.join(missing)}.", file=sys.stderr)
            return 1
        chosen = wanted

    passed = 0
    for name in chosen:
        result = check(name, getattr(module, name), trials=trials, seed=seed)
        passed += result.ok
        print(result.message)
    print(f"\n{passed} of {len(chosen)} exercise{'s' if len(chosen) != 1 else ''} correct.")
    return 0 if passed == len(chosen) else 1
