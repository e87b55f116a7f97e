"""The `microtape grade` command: grade a folder of submissions, keep every result, export a gradebook.

::

    microtape grade SUBMISSIONS_DIR                      # every .py and .ipynb in it
    microtape grade SUBMISSIONS_DIR -j 2 --csv grades.csv --secret secret.txt

Each submission is graded by the same boxed checker as ``microtape exercises
check`` (:func:`microtape.exercises.grading.submission.check_file`), on the *hidden*
trials, drawn from the instructor's secret (``--secret FILE``; without it a
fresh random secret, so nobody can know the trials). Its code runs only in
the box; this process computes each trial's expected answer once for the
whole class and compares. A submission that does not parse, loops, crashes,
floods its output or fills the disk gets 0 for what it touches and a
one-line reason; the run goes on.

What it writes, in a new folder per run (``--out``, default ``grades/``;
nothing is overwritten): ``STUDENT.json`` (every exercise's status, points,
feedback, and the cells that failed) and ``STUDENT.txt`` (the feedback as the
student would read it) per submission, and ``gradebook.csv`` (student,
exercise, points, max, the whole feedback; and per student a ``(total)`` row). It prints a summary table.
"""

import csv
import json
import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from ...viz.progress import progress
from ..catalogue import list_exercises
from ..checker import CheckResult, _trial, _trial_key
from ..registry import get
from ..scores import ScoreTable
from .box import isolation
from .submission import check_file

__all__ = [
    "add_arguments",
    "run",
    "grade_folder",
    "grade_one",
    "write_gradebook",
    "write_gradescope",
    "Graded",
    "DEFAULT_TIMEOUT",
    "SUFFIXES",
]

#: Seconds for running a submission, and again for each exercise's trials.
DEFAULT_TIMEOUT = 5.0
#: The files graded in the folder.
SUFFIXES = (".py", ".ipynb")


def add_arguments(parser):
    parser.description = "Grade every .py and .ipynb submission in a folder (boxed), on hidden trials."
    parser.add_argument("submissions", metavar="SUBMISSIONS_DIR", help="the folder of handed-in files")
    parser.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="grade N submissions at once")
    parser.add_argument("--csv", metavar="FILE", help="also write the gradebook (student, exercise, points, …) here")
    parser.add_argument("--out", default="grades", metavar="DIR", help="results go in a new folder in DIR")
    parser.add_argument("--secret", metavar="FILE", help="the instructor's secret the hidden trials are drawn from")
    seconds = f"seconds to run a file, and for each exercise (default: {DEFAULT_TIMEOUT:g})"
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS", help=seconds)
    parser.add_argument("--gradescope", metavar="FILE", help="also write Gradescope's results.json (best file)")
    parser.add_argument("--name", action="append", metavar="NAME", help="grade only this exercise (repeatable)")
    return parser


class Graded:
    """One submission's grade: a CheckResult per exercise, the notes, what it printed, how long it took."""

    def __init__(self, student, path, results, notes=(), load_error=None, printed="", seconds=0.0):
        self.student = student
        self.path = path
        self.table = ScoreTable(list(results.values()))  # its .results: exercise name -> CheckResult
        self.notes = list(notes)
        self.load_error = load_error
        self.printed = printed
        self.seconds = seconds

    @property
    def results(self):
        return self.table.results

    @property
    def total(self):
        return self.table.total

    @property
    def max_total(self):
        return self.table.max_total

    def to_json(self):
        return {
            "student": self.student,
            "file": str(self.path),
            "total": self.total,
            "max": self.max_total,
            "seconds": round(self.seconds, 3),
            "not_run": self.load_error,
            "notes": self.notes,
            "exercises": {
                name: {
                    "status": r.status,
                    "points": r.score,
                    "max": r.max_score,
                    "message": r.message,
                    "outputs": r.outputs,
                    # A stepped exercise's steps: points and who is to blame, in derivation order.
                    **(
                        {
                            "steps": {
                                s.name: {"points": s.points, "max": s.max_points, "state": s.state} for s in r.steps
                            },
                            "first_wrong": r.first_wrong,
                        }
                        if r.steps
                        else {}
                    ),
                }  # fmt: skip
                for name, r in self.results.items()
            },
            "printed": self.printed[-4000:],
        }

    def feedback(self):
        lines = [f"{self.student}: {self.total} / {self.max_total}"]
        if self.load_error:
            lines.append(f"  not run: {self.load_error}")
        lines += [f"  note — {note}" for note in self.notes]
        lines += ["", *(result.message for result in self.results.values())]
        return "\n".join(lines) + "\n"


def _not_counted(name, status, message):
    exercise = get(name)
    outputs = {output.name: False for output in exercise.outputs}
    return CheckResult(name, False, f"✗ {name}: {status} — {message}.", status=status, outputs=outputs,
                       max_score=exercise.max_score)  # fmt: skip


def grade_one(path, names, *, secret, timeout=DEFAULT_TIMEOUT):
    """Grade one file on the hidden trials; a :class:`Graded` (never raises for anything the file does)."""
    started = time.monotonic()
    report = check_file(path, names, timeout=timeout, hidden=True, secret=secret)
    results = {}
    load_error = report.not_checked.get("import")
    for name in names:
        if load_error:
            results[name] = _not_counted(name, "not checked", f"the submission did not run: {load_error}")
        elif name in report.results:
            results[name] = report.results[name]
        else:
            results[name] = _not_counted(name, "not started", f"there is no function called {name}")
    return Graded(Path(path).stem, path, results, report.notes, load_error, report.output, time.monotonic() - started)


def _expected_once(names, secret):
    """Compute every hidden trial's expected answer before the class is graded (the checker caches them)."""
    key = _trial_key(0, True, secret)
    for name in names:
        for trial in range(len(get(name).hidden)):
            _trial(name, True, key, trial)


def grade_folder(folder, names, *, secret, jobs=1, timeout=DEFAULT_TIMEOUT):
    """Grade every submission in ``folder`` (``jobs`` at once); ``[Graded, ...]`` in file-name order."""
    paths = sorted(path for path in Path(folder).iterdir() if path.suffix in SUFFIXES and path.is_file())
    _expected_once(names, secret)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(grade_one, path, names, secret=secret, timeout=timeout) for path in paths]
        return [future.result() for future in progress(futures, desc="grading", unit="submission")]


def _new_run_folder(out):
    stamp = datetime.now(timezone.utc).strftime("run-%Y%m%d-%H%M%S")
    for suffix in ["", *(f"-{n}" for n in range(2, 1000))]:
        folder = Path(out) / f"{stamp}{suffix}"
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
    raise RuntimeError(f"could not make a new results folder in {out}")


#: The "exercise" of a student's total row in the gradebook.
TOTAL = "(total)"


def write_gradebook(graded, path):
    """The CSV gradebook: per student, one row per exercise, then one row with the total.

    Columns: student, exercise, points, max, message. The message is the
    whole feedback, hint included (a cell may hold several lines); the total
    row's exercise is ``(total)`` and its message is empty.
    """
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "exercise", "points", "max", "message"])
        for grade in graded:
            for name, result in grade.results.items():
                writer.writerow([grade.student, name, result.score, result.max_score, result.message or ""])
            writer.writerow([grade.student, TOTAL, grade.total, grade.max_total, ""])


def write_gradescope(graded, path):
    """Gradescope's ``results.json`` for one student's upload: the best-scoring file, one test per exercise."""
    best = max(graded, key=lambda grade: grade.total)
    tests = [{"name": name, "score": r.score, "max_score": r.max_score, "output": r.message}
             for name, r in best.results.items()]  # fmt: skip
    notes = [f"graded {best.path.name}"] + ([f"not run: {best.load_error}"] if best.load_error else []) + best.notes
    report = {"score": best.total, "tests": tests, "output": "\n".join(notes)}
    Path(path).write_text(json.dumps(report, indent=1, ensure_ascii=False))


def summary(graded, names):
    """The printed table: one row per student, points per exercise, total and time."""
    short = [name.removesuffix("_backward") for name in names]
    header = ["student", *short, "total", "time"]
    maximum = [str(get(name).max_score) for name in names]
    rows = [
        [g.student, *(str(g.results[name].score) for name in names), f"{g.total} / {g.max_total}", f"{g.seconds:.1f} s"]
        for g in graded
    ]
    rows.append(["(max)", *maximum, str(sum(get(name).max_score for name in names)), ""])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in [header, *rows]]  # fmt: skip
    return "\n".join(line.rstrip() for line in lines)


def _read_secret(path):
    text = Path(path).read_text(encoding="utf-8").strip()
    if not text:
        raise ValueError(f"--secret {path}: the file is empty")
    return text


def run(args):
    """Run the parsed command; returns the exit status (0 graded, 2 usage error)."""

    def usage(message):
        print(f"microtape grade: {message}", file=sys.stderr)
        return 2

    folder = Path(args.submissions)
    if not folder.is_dir():
        return usage(f"SUBMISSIONS_DIR: no such folder: {folder}")
    if args.jobs < 1:
        return usage(f"-j must be at least 1, got {args.jobs}")
    if not args.timeout > 0:
        return usage(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        names = [get(name).name for name in args.name] if args.name else list_exercises()
        secret = _read_secret(args.secret) if args.secret else secrets.token_hex(16)
    except (ValueError, OSError) as error:
        return usage(error)
    if not any(path.suffix in SUFFIXES for path in folder.iterdir()):
        return usage(f"no .py or .ipynb files in {folder}")

    print(isolation())
    if not args.secret:
        print("hidden trials: drawn from a fresh random secret (pass --secret FILE to grade reproducibly)")
    started = time.monotonic()
    graded = grade_folder(folder, names, secret=secret, jobs=args.jobs, timeout=args.timeout)
    elapsed = time.monotonic() - started

    out = _new_run_folder(args.out)
    for grade in graded:
        (out / f"{grade.student}.json").write_text(json.dumps(grade.to_json(), indent=1, ensure_ascii=False))
        (out / f"{grade.student}.txt").write_text(grade.feedback(), encoding="utf-8")
    write_gradebook(graded, out / "gradebook.csv")
    if args.csv:
        write_gradebook(graded, args.csv)
    if args.gradescope:
        write_gradescope(graded, args.gradescope)
    print(summary(graded, names))
    for grade in graded:
        reason = grade.load_error or (grade.notes[0] if grade.notes else "")
        if reason:
            print(f"  note — {grade.student}: {reason}")
    count = len(graded)
    print(f"\n{count} submission{'s' if count != 1 else ''} graded in {elapsed:.1f} s "
          f"({elapsed / max(count, 1):.2f} s each, -j {args.jobs}); results in {out}{os.sep}")  # fmt: skip
    return 0
