"""Build the microtape lab assignment with otter-grader, and grade submissions locally (no Docker).

::

    python grading/autograde.py assign              # source notebook -> grading/dist/{student,autograder}
    python grading/autograde.py grade               # grade the sample submissions, compare with the expected scores
    python grading/autograde.py grade --submissions DIR   # grade a folder of handed-in notebooks

``make assignment`` and ``make grade-sample`` run these with the ``grading``
extra installed. ``assign`` runs ``otter assign`` on
``grading/source/microtape_lab.ipynb`` (which also runs every test on the
solutions), gives the autograder zip a stable name, and checks that the
student version holds neither a solution nor a hidden test.

``grade`` runs ``otter run`` on each submission, each in its own process
with a wall-clock limit (``--timeout``, default 300 s; the process and its
kernel are stopped when it is exceeded, and the submission scores 0). Inside,
each exercise's check has its own 10-second limit (see
``microtape.exercises.autograder``), so a function that never returns costs
only its own exercise. The sample submissions are ``grading/samples/*.py``:
each ``# %% NAME`` section is the answer cell of exercise NAME, put into the
student notebook in place of the stub. It prints a table of points per
exercise and exits 1 when the scores differ from ``grading/expected_scores.json``.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "source" / "microtape_lab.ipynb"
DIST = HERE / "dist"
STUDENT = DIST / "student" / "microtape_lab.ipynb"
AUTOGRADER = DIST / "autograder" / "microtape_lab-autograder.zip"
BUILD = HERE / "build"
SAMPLES = HERE / "samples"
EXPECTED = HERE / "expected_scores.json"
OTTER = Path(sys.executable).parent / "otter"


# ---------------------------------------------------------------- assign


def assign():
    """``otter assign`` the source notebook into grading/dist; returns the exit status."""
    if DIST.exists():
        shutil.rmtree(DIST)
    started = time.monotonic()
    done = subprocess.run([str(OTTER), "assign", SOURCE.name, str(DIST)], cwd=SOURCE.parent, text=True,
                          capture_output=True)  # fmt: skip
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        print("otter assign failed (above): a solution in the source notebook fails its own tests?", file=sys.stderr)
        return 1
    (zipped,) = (DIST / "autograder").glob("microtape_lab-autograder_*.zip")
    zipped.rename(AUTOGRADER)
    problems = student_version_problems(STUDENT.read_text())
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"Built the assignment in {time.monotonic() - started:.0f} s (the solutions pass every test):")
    print(f"  student version     {STUDENT.relative_to(HERE.parent)}   (hand this out)")
    print(f"  autograder version  {DIST.relative_to(HERE.parent) / 'autograder'}/  (keep: hidden tests)")
    print(f"  autograder zip      {AUTOGRADER.relative_to(HERE.parent)}   (for `otter run`)")
    return 0


def student_version_problems(text):
    """What must not be in the student notebook: solution markers, solution lines, hidden tests."""
    problems = []
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "assert_output(", "hidden: true"):
        if marker in text:
            problems.append(f"the student notebook holds {marker!r}")
    source = json.loads(SOURCE.read_text())
    for cell in source["cells"]:
        body = "".join(cell["source"])
        if "# BEGIN SOLUTION NO PROMPT" in body:
            solution = body.split("# BEGIN SOLUTION NO PROMPT", 1)[1].split("# END SOLUTION", 1)[0]
            for line in solution.strip().splitlines():
                if len(line.strip()) > 20 and line.strip() in text:
                    problems.append(f"the student notebook holds the solution line {line.strip()!r}")
    return problems


# ---------------------------------------------------------------- submissions


def sample_sections(path):
    """``{exercise name: cell source}`` from a sample file's ``# %% NAME`` sections."""
    sections, name, lines = {}, None, []
    for line in path.read_text().splitlines():
        match = re.match(r"# %% (\w+)\s*$", line)
        if match:
            if name:
                sections[name] = "\n".join(lines).strip() + "\n"
            name, lines = match.group(1), []
        elif name:
            lines.append(line)
    if name:
        sections[name] = "\n".join(lines).strip() + "\n"
    return sections


def fill_in(student_notebook, sections):
    """The student notebook with each exercise's stub replaced by the sample's cell."""
    notebook = json.loads(student_notebook)
    used = set()
    for cell in notebook["cells"]:
        if "otter_answer_cell" not in cell["metadata"].get("tags", []):
            continue
        match = re.match(r"def (\w+)\(", "".join(cell["source"]))
        if match and match.group(1) in sections:
            cell["source"] = sections[match.group(1)]
            used.add(match.group(1))
    unknown = set(sections) - used
    if unknown:
        raise ValueError(f"sections for exercises the notebook does not have: {', '.join(sorted(unknown))}")
    return json.dumps(notebook, indent=1, ensure_ascii=False)


def _descendants(pid):
    """Every process below ``pid`` (read from /proc; a kernel runs in its own session, not our group)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def grade_one(submission, out, timeout):
    """``otter run`` one submission; ``({question: points}, note)`` — empty points when it did not finish."""
    out.mkdir(parents=True, exist_ok=True)
    command = [str(OTTER), "run", "-a", str(AUTOGRADER), "-o", str(out), str(submission)]
    with open(out / "otter-run.log", "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in [*_descendants(process.pid), process.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
            return {}, f"stopped after {timeout:g} s"
    results = out / "results.json"
    if not results.is_file():
        return {}, f"otter run wrote no results (exit status {process.returncode}; see {out / 'otter-run.log'})"
    points = {}
    for test in json.loads(results.read_text())["tests"]:
        if "score" in test:
            points[test["name"]] = test["score"]
    return points, ""


def _number(value):
    return int(value) if float(value).is_integer() else value


def grade(submissions, expected_path, timeout):
    """Grade every submission, print the table, compare with the expected scores; returns the exit status."""
    import microtape.exercises as ex

    if not AUTOGRADER.is_file():
        print(f"no autograder at {AUTOGRADER}: run `make assignment` first", file=sys.stderr)
        return 2
    names = ex.list_exercises()
    maximum = {name: ex.get(name).max_score for name in names}
    if submissions is None:
        student = STUDENT.read_text()
        folder = BUILD / "submissions"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for sample in sorted(SAMPLES.glob("*.py")):
            (folder / f"{sample.stem}.ipynb").write_text(fill_in(student, sample_sections(sample)))
        submissions = folder
    paths = sorted(Path(submissions).glob("*.ipynb"))
    if not paths:
        print(f"no notebooks in {submissions}", file=sys.stderr)
        return 2

    scores, notes, seconds = {}, {}, {}
    for path in paths:
        started = time.monotonic()
        points, note = grade_one(path, BUILD / "results" / path.stem, timeout)
        seconds[path.stem] = time.monotonic() - started
        scores[path.stem] = {name: _number(points.get(name, 0)) for name in names}
        notes[path.stem] = note

    _print_table(scores, maximum, seconds, notes)
    if expected_path is None:
        return 0
    expected = json.loads(Path(expected_path).read_text())
    differences = []
    for sample in sorted(set(expected) | set(scores)):
        if sample not in scores:
            differences.append(f"{sample}: expected, but there is no such submission")
            continue
        if sample not in expected:
            differences.append(f"{sample}: graded, but {expected_path} has no expected scores for it")
            continue
        for name in names:
            want, got = expected[sample].get(name, 0), scores[sample][name]
            if want != got:
                differences.append(f"{sample}: {name} scored {got}, expected {want}")
    if differences:
        print("\nThe scores differ from the expected ones:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in differences), file=sys.stderr)
        return 1
    print(f"\nEvery score is the expected one ({Path(expected_path).relative_to(HERE.parent)}).")
    return 0


def _print_table(scores, maximum, seconds, notes):
    names = list(maximum)
    short = {name: name.removesuffix("_backward") for name in names}
    header = ["submission", *[short[n] for n in names], "total", "time"]
    rows = []
    for sample, points in scores.items():
        total = sum(points.values())
        rows.append([sample, *[str(points[n]) for n in names], f"{total} / {sum(maximum.values())}",
                     f"{seconds[sample]:.0f} s"])  # fmt: skip
    rows.append(["(max)", *[str(maximum[n]) for n in names], str(sum(maximum.values())), ""])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.rjust(width) if i else cell.ljust(width) for i, (cell, width) in
                        enumerate(zip(row, widths))))  # fmt: skip
    for sample, note in notes.items():
        if note:
            print(f"  note — {sample}: {note}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("assign", help="build the student and autograder versions into grading/dist")
    grading = actions.add_parser("grade", help="grade submissions (default: the samples) and compare the scores")
    grading.add_argument("--submissions", help="a folder of .ipynb submissions (default: build them from the samples)")
    grading.add_argument("--expected", default=None, help="expected scores JSON (default: the samples' own file)")
    grading.add_argument("--timeout", type=float, default=300.0, help="seconds per submission (default: 300)")
    args = parser.parse_args(argv)
    if args.action == "assign":
        return assign()
    expected = args.expected or (EXPECTED if args.submissions is None else None)
    return grade(args.submissions, expected, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
