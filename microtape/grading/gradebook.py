"""The `microtape grade` command: grade a folder of submissions, keep every result, export a gradebook.

::

    microtape grade SUBMISSIONS_DIR                      # every .py and .ipynb in it
    microtape grade SUBMISSIONS_DIR -j 2 --csv grades.csv --secret secret.txt

Each submission is graded by the same boxed checker as ``microtape exercises
check`` (:func:`microtape.grading.submission.check_file`), on the *hidden*
trials, drawn from the instructor's secret (``--secret FILE``; without it a
fresh random secret, so nobody can know the trials). Its code runs only in
the box; this process computes each trial's expected answer once for the
whole class and compares. A submission that does not parse, loops, crashes,
floods its output or fills the disk gets 0 for what it touches and a
one-line reason; the run goes on.

What it writes, in a new folder per run (``--out``, default ``grades/``;
nothing is overwritten): ``STUDENT.json`` (every exercise's status, points,
feedback, and the cells that failed) and ``STUDENT.txt`` (the feedback as the
student would read it) per submission, each written as soon as it is known,
and ``gradebook.csv`` (student, exercise, points, max, the whole feedback;
and per student a ``(total)`` row). It prints a summary table. A failure of the grader on one submission is that
submission's "not graded" row (exit status 1); a rerun with the same secret
skips the students already graded. Each student's hidden trials are drawn
from the secret and the student's name; the secret must carry 128 bits.
"""

import csv
import hashlib
import hmac
import json
import math
import os
import secrets
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..exercises.catalogue import list_exercises
from ..exercises.checker import CheckResult
from ..exercises.registry import get
from ..exercises.result import StepResult
from ..exercises.scores import ScoreTable
from ..exercises.teacher import load_exercises
from ..viz.progress import progress
from .box import isolation
from .remote import MAX_SUBMISSION_BYTES
from .submission import MAX_TIMEOUT, check_file
from .untrusted import file_stem, safe_text, spreadsheet_cell

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

#: Seconds for running a submission, and again for each call of an exercise function.
DEFAULT_TIMEOUT = 5.0
#: The files graded in the folder.
SUFFIXES = (".py", ".ipynb")
#: Bits of randomness a --secret must carry (what `make assignment` writes has 256).
SECRET_BITS = 128
#: Seconds on top of the per-exercise budgets for a whole submission (starting boxes, reruns).
SUBMISSION_MARGIN = 10.0


def add_arguments(parser: Any) -> Any:
    parser.description = "Grade every .py and .ipynb submission in a folder (boxed), on hidden trials."
    parser.add_argument("submissions", metavar="SUBMISSIONS_DIR", help="the folder of handed-in files")
    parser.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="grade N submissions at once")
    parser.add_argument("--csv", metavar="FILE", help="also write the gradebook (student, exercise, points, …) here")
    parser.add_argument("--out", default="grades", metavar="DIR", help="results go in a new folder in DIR")
    parser.add_argument("--secret", metavar="FILE", help="the instructor's secret the hidden trials are drawn from")
    seconds = f"seconds to run a file, and for each call of an exercise (default: {DEFAULT_TIMEOUT:g}, at most 3600)"
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS", help=seconds)
    parser.add_argument("--gradescope", metavar="FILE", help="also write Gradescope's results.json (best file)")
    parser.add_argument("--name", action="append", metavar="NAME", help="grade only this exercise (repeatable)")
    teachers = "also the exercises a teacher's file registers with ex.derivation (repeatable)"
    parser.add_argument("--exercises", action="append", metavar="FILE.py", help=teachers)
    return parser


class Graded:
    """One submission's grade: a CheckResult per exercise, the notes, what it printed, how long it took."""

    def __init__(
        self,
        student: Any,
        path: Any,
        results: Any,
        notes: Any = (),
        load_error: Any = None,
        printed: str = "",
        seconds: float = 0.0,
        not_graded: Any = None,
    ) -> None:
        self.student = student
        self.path = Path(path)
        self.not_graded = not_graded  # one line when the grader could not grade it (no score was given)
        self.fingerprint = None
        self.table = ScoreTable(list(results.values()))  # its .results: exercise name -> CheckResult
        self.notes = list(notes)
        self.load_error = load_error
        self.printed = printed
        self.seconds = seconds

    @property
    def results(self) -> Any:
        return self.table.results

    @property
    def total(self) -> Any:
        return self.table.total

    @property
    def max_total(self) -> Any:
        return self.table.max_total

    def to_json(self) -> Any:
        return {
            "student": safe_text(self.student),
            "file": safe_text(self.path),
            "not_graded": self.not_graded,
            "fingerprint": self.fingerprint,
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
                            "wrong_links": list(r.wrong_links),
                            "carried": list(r.computed_from_wrong),
                        }
                        if r.steps
                        else {}
                    ),
                }  # fmt: skip
                for name, r in self.results.items()
            },
            "printed": self.printed[-4000:],
        }

    @classmethod
    def from_json(cls, data: Any, path: Any) -> Any:
        """A grade written by an earlier run (to resume it), or None when it is not a complete one."""
        try:
            results = {
                name: CheckResult(
                    name,
                    item["status"] == "right",
                    item["message"],
                    status=item["status"],
                    outputs=item["outputs"],
                    score=item["points"],
                    max_score=item["max"],
                    **_steps_from_json(item),
                )  # fmt: skip
                for name, item in data["exercises"].items()
            }
            grade = cls(data["student"], path, results, data.get("notes", []), data.get("not_run"),
                        data.get("printed", ""), float(data.get("seconds", 0.0)))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            return None
        grade.fingerprint = data.get("fingerprint")
        return grade

    def feedback(self) -> Any:
        lines = [f"{safe_text(self.student)}: {self.total} / {self.max_total}"]
        if self.not_graded:
            lines.append(f"  not graded: {self.not_graded}")
        if self.load_error:
            lines.append(f"  not run: {self.load_error}")
        lines += [f"  note — {note}" for note in self.notes]
        lines += ["", *(result.message for result in self.results.values())]
        return "\n".join(lines) + "\n"


def _steps_from_json(item: Any) -> Any:
    """A stepped exercise's steps and links as an earlier run wrote them (so a resumed grade keeps its columns)."""
    steps = item.get("steps")
    if not steps:
        return {}
    return {
        "steps": tuple(
            StepResult(name, step["state"] == "right", step["points"], step["max"], (), step["state"])
            for name, step in steps.items()
        ),  # fmt: skip
        "first_wrong": item.get("first_wrong"),
        "wrong_links": tuple(item.get("wrong_links", ())),
        "computed_from_wrong": tuple(item.get("carried", ())),
    }


def _not_counted(name: str, status: Any, message: str) -> CheckResult:
    exercise = get(name)
    outputs = {output.name: False for output in exercise.outputs}
    return CheckResult(name, False, f"✗ {name}: {status} — {message}.", status=status, outputs=outputs,
                       max_score=exercise.max_score)  # fmt: skip


def _not_graded(path: Any, names: Any, reason: Any, started: Any) -> "Graded":
    """The row of a submission the grader could not grade: no points given, and the reason."""
    reason = safe_text(reason, 300)
    results = {name: _not_counted(name, "not graded", reason) for name in names}
    return Graded(Path(path).stem, path, results, seconds=time.monotonic() - started, not_graded=reason)


def grade_one(path: Any, names: Any, *, secret: Any, timeout: Any = DEFAULT_TIMEOUT) -> Any:
    """Grade one file on the hidden trials; a :class:`Graded` (never raises for anything the file does).

    A failure of the grader itself (no box could start, an error of ours) gives a "not graded" row
    with the reason, never a 0 as if the student had failed.
    """
    started = time.monotonic()
    student = Path(path).stem
    try:
        report = check_file(path, names, timeout=timeout, hidden=True, secret=secret, student=student,
                            total_seconds=timeout * (len(names) + 1) + SUBMISSION_MARGIN)  # fmt: skip
    except Exception as error:  # ours, not the student's: this submission is not graded, the class goes on
        return _not_graded(path, names, f"{type(error).__name__}: {error}", started)
    if report.grader_error:
        return _not_graded(path, names, report.grader_error, started)
    results = {}
    load_error = report.not_checked.get("import")
    for name in names:
        if load_error:
            results[name] = _not_counted(name, "not checked", f"the submission did not run: {load_error}")
        elif name in report.results:
            results[name] = report.results[name]
        else:
            results[name] = _not_counted(name, "not started", f"there is no function called {name}")
    return Graded(student, path, results, report.notes, load_error, report.output, time.monotonic() - started)


def fingerprint(path: Any, names: Any, secret: Any, timeout: Any) -> Any:
    """What makes a grade reusable by a rerun: the student, the file's bytes, the exercises, the secret, the time limit.

    Keyed by the secret, so the fingerprint tells nothing about it.
    """
    try:
        content = hashlib.sha256(Path(path).read_bytes()[: MAX_SUBMISSION_BYTES + 1]).hexdigest()
    except OSError:
        content = "unreadable"
    student = Path(path).stem.encode("utf-8", "surrogateescape").hex()
    # A teacher's own exercise (ex.derivation) changes with its file: its stub's source (the forward in it) counts.
    made = [get(name).source or "" for name in names]
    text = json.dumps([student, content, list(names), float(timeout), 2] + ([made] if any(made) else []))
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def submissions(folder: Any) -> Any:
    """``(files to grade, {student: reason})``: two files for one student are refused, by name."""
    paths = sorted(path for path in Path(folder).iterdir() if path.suffix in SUFFIXES and path.is_file())
    by_student: dict[Any, Any] = {}
    for path in paths:
        by_student.setdefault(path.stem, []).append(path)
    refused = {}
    for student, files in by_student.items():
        if len(files) > 1:
            listed = " and ".join(file.name for file in files)
            refused[student] = f"two files for one student ({listed}): hand in one, or rename one"
    return [path for path in paths if path.stem not in refused], refused


def _earlier_grades(out: Any, names: Any, secret: Any, timeout: Any) -> Any:
    """The complete grades earlier runs in ``out`` wrote, by fingerprint (newest run first)."""
    found: dict[Any, Any] = {}
    out = Path(out)
    if not out.is_dir():
        return found
    for run_folder in sorted(out.glob("run-*"), reverse=True):
        for file in run_folder.glob("*.json"):
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError):
                continue
            if not isinstance(data, dict) or data.get("not_graded") or not data.get("fingerprint"):
                continue
            found.setdefault(data["fingerprint"], data)
    return found


def grade_folder(
    folder: Any,
    names: Any,
    *,
    secret: Any,
    jobs: int = 1,
    timeout: Any = DEFAULT_TIMEOUT,
    out: Any = None,
    resume: Any = None,
) -> Any:
    """Grade every submission in ``folder`` (``jobs`` at once); ``[Graded, ...]`` in file-name order.

    With ``out`` (a run folder) each student's files are written there as soon as the grade is
    known; ``resume`` (``{fingerprint: earlier grade}``) skips the submissions already graded
    with the same file, exercises, secret and time limit.
    """
    paths, refused = submissions(folder)
    graded = [_not_graded(Path(folder) / f"{student}.*", names, reason, time.monotonic())
              for student, reason in refused.items()]  # fmt: skip
    pending = []
    for path in paths:
        mark = fingerprint(path, names, secret, timeout)
        earlier = Graded.from_json(resume[mark], path) if resume and mark in resume else None
        if earlier is not None:
            earlier.fingerprint = mark
            graded.append(earlier)
            if out is not None:
                write_student(earlier, out)
        else:
            pending.append((path, mark))
    for grade in graded[: len(refused)]:
        if out is not None:
            write_student(grade, out)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(grade_one, path, names, secret=secret, timeout=timeout): mark for path, mark in pending}
        for future in progress(as_completed(futures), total=len(futures), desc="grading", unit="submission"):
            grade = future.result()
            grade.fingerprint = futures[future]
            if out is not None:
                write_student(grade, out)
            graded.append(grade)
    return sorted(graded, key=lambda grade: grade.student)


def write_student(grade: Any, out: Any) -> None:
    """``STUDENT.json`` and ``STUDENT.txt`` in the run folder ``out`` (names made safe and short)."""
    stem = file_stem(grade.student)
    text = json.dumps(grade.to_json(), indent=1, ensure_ascii=False)
    (Path(out) / f"{stem}.json").write_bytes(text.encode("utf-8", "backslashreplace"))
    (Path(out) / f"{stem}.txt").write_bytes(grade.feedback().encode("utf-8", "backslashreplace"))


def _new_run_folder(out: Any) -> Any:
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


def write_gradebook(graded: Any, path: Any) -> None:
    """The CSV gradebook: per student, one row per exercise, then one row with the total.

    Columns: student, exercise, points, max, message, then two per step of
    the stepped exercises graded (``grad_x points``, ``grad_x state``: right,
    carried, wrong or missing), filled on that exercise's rows. The message
    is the whole feedback, hint included (a cell may hold several lines); the
    total row's exercise is ``(total)`` and its message is empty.
    """
    steps = _step_names(graded)
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "exercise", "points", "max", "message",
                         *(f"{step} {what}" for step in steps for what in ("points", "state"))])  # fmt: skip
        for grade in graded:
            for name, result in grade.results.items():
                message = safe_text(result.message or "", lines=True)  # the whole feedback, on its lines
                cells = [safe_text(grade.student), name, result.score, result.max_score, message]
                by_step = {step.name: (step.points, step.state) for step in result.steps}
                cells += [cell for step in steps for cell in by_step.get(step, ("", ""))]
                writer.writerow([spreadsheet_cell(cell) for cell in cells])
            total = [spreadsheet_cell(safe_text(grade.student)), TOTAL, grade.total, grade.max_total, ""]
            writer.writerow(total + [""] * (2 * len(steps)))


def _step_names(graded: Any) -> Any:
    """Every step name of the graded stepped exercises, in the order they first come (a column pair each)."""
    return list(dict.fromkeys(output.name for grade in graded for result in grade.results.values()
                              if get(result.name).stepped for output in get(result.name).outputs))  # fmt: skip


def write_gradescope(graded: Any, path: Any) -> None:
    """Gradescope's ``results.json`` for one student's upload: the best-scoring file, one test per exercise."""
    best = max(graded, key=lambda grade: grade.total)
    tests = [{"name": name, "score": r.score, "max_score": r.max_score, "output": r.message}
             for name, r in best.results.items()]  # fmt: skip
    notes = (
        [f"graded {safe_text(best.path.name)}"]
        + ([f"not run: {best.load_error}"] if best.load_error else [])
        + best.notes
    )
    report = {"score": best.total, "tests": tests, "output": "\n".join(notes)}
    Path(path).write_bytes(json.dumps(report, indent=1, ensure_ascii=False).encode("utf-8", "backslashreplace"))


#: The printed summary's width: a terminal of 120 columns shows it whole.
SUMMARY_WIDTH = 120


def summary(graded: Any, names: Any, width: Any = SUMMARY_WIDTH) -> Any:
    """The printed table, at most ``width`` columns: per student the total, the time, the exercises short of full marks.

    Then one line per exercise short of full marks somewhere: its class
    average (``mlp 2.5/4``), wrapped to the same width.
    """
    rows = [[safe_text(g.student, 24), f"{g.total} / {g.max_total}", f"{g.seconds:.1f} s", _short_of_full(g, names)]
            for g in graded]  # fmt: skip
    header = ["student", "total", "time", "short of full marks (points / max)"]
    maximum = sum(get(name).max_score for name in names)
    rows.append(["(max)", f"{maximum}", "", ""])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    lines = []
    for row in [header, *rows]:
        line = "  ".join([row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].rjust(widths[2]), row[3]])
        lines.append(_cut(line.rstrip(), width))
    averages = [_average(graded, name) for name in names]
    short = [text for text in averages if text]
    if short and graded:
        lines.append("")
        lines += textwrap.wrap("class average: " + ", ".join(short), width, subsequent_indent="  ")
    return "\n".join(lines)


def _short_of_full(grade: Any, names: Any) -> Any:
    """``mlp 2/4, gru 0/3 …``: the exercises below full marks, in lab order (``—`` when none)."""
    short = [f"{name.removesuffix('_backward')} {grade.results[name].score}/{grade.results[name].max_score}"
             for name in names if grade.results[name].score < grade.results[name].max_score]  # fmt: skip
    return ", ".join(short) or "—"


def _average(graded: Any, name: str) -> str:
    """``"mlp 2.5/4"`` when some student is below full marks on ``name``, else ''."""
    scores = [g.results[name].score for g in graded]
    maximum = get(name).max_score
    if not scores or min(scores) >= maximum:
        return ""
    return f"{name.removesuffix('_backward')} {sum(scores) / len(scores):.3g}/{maximum}"


def _cut(line: Any, width: Any) -> Any:
    return line if len(line) <= width else line[: width - 1] + "…"


def secret_bits(text: str) -> Any:
    """A cautious estimate of the bits of randomness in ``text`` (a secret).

    A generated token counts by its alphabet: 4 bits a character in hex, 6 in
    base64 (upper and lower case and digits mixed, no spaces). Anything else
    — words, a phrase, one case only — counts like English text, 2 bits a
    character. Never more than a compressed copy's bits, so a repeated
    pattern counts for little.
    """
    import string
    import zlib

    if not text:
        return 0.0
    chars = set(text)
    base64 = set(string.ascii_letters + string.digits + "+/=-_")
    if chars <= set(string.hexdigits) and (text.lower() == text or text.upper() == text):
        per_char = 4.0
    elif chars <= base64 and all(chars & set(kind) for kind in (string.ascii_lowercase, string.ascii_uppercase,
                                                                string.digits)):  # fmt: skip
        per_char = 6.0
    else:
        per_char = 2.0
    compressed = len(zlib.compress(text.encode("utf-8", "surrogateescape"), 9)) - 6  # zlib's header and checksum
    return min(len(text) * per_char, max(compressed, 0) * 8)


def _read_secret(path: Any) -> Any:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"--secret {path}: cannot read it ({error.strerror or error})") from None
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(
            f"--secret {path}: not a text file (a binary file?); the secret is one line of text, "
            "e.g. what `make assignment` writes to assignment/bundle/secret.txt"
        ) from None
    if not text:
        raise ValueError(f"--secret {path}: the file is empty")
    bits = secret_bits(text)
    if bits < SECRET_BITS:
        raise ValueError(
            f"--secret {path}: the secret looks guessable (about {bits:.0f} bits of randomness; at least "
            f"{SECRET_BITS} are needed, or a dictionary and one leaked trial recover it): use a random one, "
            "e.g. `python -c 'import secrets; print(secrets.token_hex(32))'` (what `make assignment` writes)"
        )
    return text


def _writable_file(option: Any, path: Any) -> Any:
    """None if ``path`` can be written as a file, else a message naming ``option``."""
    path = Path(path)
    if path.is_dir():
        return f"{option} {path}: is a folder; expected a file name"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"{option} {path}: the folder {parent} does not exist"
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{option} {path}: cannot be written (no permission)"
    return None


def _timeout_problem(timeout: Any) -> Any:
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
        return f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT:g}, got {timeout:g}"
    return None


def _usage_problem(args: Any, folder: Any) -> Any:
    """``(problem, names, secret)``: the first usage error (a message) or None, checked before anything runs."""
    if not folder.is_dir():
        return f"SUBMISSIONS_DIR: no such folder: {folder}", None, None
    if args.jobs < 1:
        return f"-j must be at least 1, got {args.jobs}", None, None
    problem = _timeout_problem(args.timeout)
    if problem:
        return problem, None, None
    try:
        names = [get(name).name for name in args.name] if args.name else list_exercises()
        secret = _read_secret(args.secret) if args.secret else secrets.token_hex(32)
    except (ValueError, OSError) as error:
        return str(error), None, None
    if not any(path.suffix in SUFFIXES for path in folder.iterdir()):
        return f"no .py or .ipynb files in {folder}", None, None
    # Every path checked before the first submission runs: a typo costs nothing.
    for option, path in (("--csv", args.csv), ("--gradescope", args.gradescope)):
        problem = path and _writable_file(option, path)
        if problem:
            return problem, None, None
    return None, names, secret


def run(args: Any) -> Any:
    """Run the parsed command; returns the exit status (0 graded, 1 some not graded by our fault, 2 usage error)."""

    def usage(message: object) -> int:
        print(f"microtape grade: {message}", file=sys.stderr)
        return 2

    folder = Path(args.submissions)
    try:  # a teacher's own exercises first: --name and the default list may name them
        for path in args.exercises or ():
            load_exercises(path)
    except ValueError as error:
        return usage(error)
    problem, names, secret = _usage_problem(args, folder)
    if problem:
        return usage(problem)
    try:
        out = _new_run_folder(args.out)
    except (OSError, RuntimeError) as error:
        return usage(f"--out {args.out}: cannot make a results folder there ({error})")

    print(isolation())
    if not args.secret:
        print("hidden trials: drawn from a fresh random secret (pass --secret FILE to grade reproducibly)")
    earlier = _earlier_grades(args.out, names, secret, args.timeout) if args.secret else {}
    started = time.monotonic()
    graded = grade_folder(folder, names, secret=secret, jobs=args.jobs, timeout=args.timeout, out=out,
                          resume=earlier)  # fmt: skip
    elapsed = time.monotonic() - started

    write_gradebook(graded, out / "gradebook.csv")
    if args.csv:
        write_gradebook(graded, args.csv)
    if args.gradescope:
        write_gradescope(graded, args.gradescope)
    print(summary(graded, names))
    for grade in graded:
        reason = grade.not_graded or grade.load_error or (grade.notes[0] if grade.notes else "")
        if reason:
            label = "not graded" if grade.not_graded else "note"
            print(f"  {label} — {safe_text(grade.student, 80)}: {safe_text(reason, 300)}")
    count = len(graded)
    print(f"\n{count} submission{'s' if count != 1 else ''} graded in {elapsed:.1f} s "
          f"({elapsed / max(count, 1):.2f} s each, -j {args.jobs}); results in {out}{os.sep}")  # fmt: skip
    if any(grade.not_graded for grade in graded):
        print("some submissions were not graded (see 'not graded' above): fix the cause and run again — "
              "the graded ones are kept and skipped", file=sys.stderr)  # fmt: skip
        return 1
    return 0
