"""Build the microtape lab assignment, and grade submissions with the boxed checker.

::

    python assignment/autograde.py assign      # source notebook -> assignment/dist/{student,autograder}
    python assignment/autograde.py grade       # grade the samples, compare with the expected scores, check the bundle

``make assignment`` and ``make grade-sample`` run these.

``assign`` turns ``assignment/source/microtape_lab.ipynb`` (one question per
exercise: the solution between ``# BEGIN SOLUTION NO PROMPT`` and ``# END
SOLUTION``, the prompt between ``# BEGIN PROMPT`` / ``# END PROMPT``) into

* ``dist/student/microtape_lab.ipynb`` — hand this out: the prompts, and after
  each a cell ``ex.check(NAME, NAME)`` (the visible trials, with feedback);
* ``dist/autograder/`` and ``dist/microtape_lab-autograder.zip`` — keep these:
  a fresh instructor secret (the hidden trials are drawn from it), microtape
  as a wheel, and the Gradescope entry scripts ``setup.sh`` and
  ``run_autograder`` (which install microtape from the bundle and run
  ``microtape grade`` on the submission, writing Gradescope's results.json).

It checks that every solution passes the visible and hidden trials, and that
the student version holds no solution.

``grade`` fills the student notebook with each sample's answers
(``assignment/samples/*.py``: one ``# %% NAME`` section per answer cell), grades
them with ``microtape grade`` (boxed, hidden trials from the bundle's secret),
prints the table, and exits 1 when a score differs from
``assignment/expected_scores.json``. ``--bundle`` then runs the bundle's
``run_autograder`` on a sample in a fresh virtual environment, as Gradescope
would.
"""

import argparse
import csv
import json
import re
import secrets
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCE = HERE / "source" / "microtape_lab.ipynb"
DIST = HERE / "dist"
STUDENT = DIST / "student" / "microtape_lab.ipynb"
BUNDLE = DIST / "autograder"
ZIPPED = DIST / "microtape_lab-autograder.zip"
SECRET = BUNDLE / "secret.txt"
BUILD = HERE / "build"
SAMPLES = HERE / "samples"
EXPECTED = HERE / "expected_scores.json"
BUNDLE_FILES = HERE / "bundle"  # setup.sh and run_autograder, copied into the bundle
TEACHERS_FILE = "teacher_exercises.py"  # a teacher's own exercises in the bundle (run_autograder looks for it)


# ---------------------------------------------------------------- assign


def _source(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _prompt_version(code):
    """A solution cell as students get it: the solution lines out, the prompt lines in."""
    code = re.sub(r"[ \t]*# BEGIN SOLUTION NO PROMPT.*?# END SOLUTION\n", "", code, flags=re.S)
    lines = [line for line in code.splitlines() if "# BEGIN PROMPT" not in line and "# END PROMPT" not in line]
    return "\n".join(lines).rstrip() + "\n"


def student_notebook(source):
    """The student version of the source notebook (a dict): markers and solutions out, a check per question in."""
    cells, question = [], None
    for cell in source["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "raw":
            first = text.strip().splitlines()[0] if text.strip() else ""
            if first == "# BEGIN QUESTION":
                question = re.search(r"name: (\w+)", text).group(1)
            elif first == "# END QUESTION":
                cells.append(_code(f'ex.check("{question}", {question})  # your answer against the tape'))
                question = None
            continue  # every raw cell is a marker for the build
        if cell["cell_type"] == "code" and "# BEGIN SOLUTION" in text:
            text = _prompt_version(text)
        cells.append({**cell, "source": text, **({"outputs": [], "execution_count": None}
                                                  if cell["cell_type"] == "code" else {})})  # fmt: skip
    return {**source, "cells": cells}


def _code(text):
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": [], "execution_count": None}


def solutions(source):
    """``{exercise name: solution source}`` of the source notebook."""
    found = {}
    for cell in source["cells"]:
        text = _source(cell)
        match = re.match(r"def (\w+)\(", text)
        if cell["cell_type"] == "code" and match and "# BEGIN SOLUTION" in text:
            found[match.group(1)] = text
    return found


def student_version_problems(text):
    """What must not be in the student notebook: solution markers, solution lines, test configuration."""
    problems = []
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "assert_output(", "hidden: true", "TEST CONFIG"):
        if marker in text:
            problems.append(f"the student notebook holds {marker!r}")
    for body in solutions(json.loads(SOURCE.read_text())).values():
        solution = body.split("# BEGIN SOLUTION NO PROMPT", 1)[1].split("# END SOLUTION", 1)[0]
        for line in solution.strip().splitlines():
            if len(line.strip()) > 20 and line.strip() in text:
                problems.append(f"the student notebook holds the solution line {line.strip()!r}")
    return problems


def _solutions_pass(source, secret):
    """Every solution right on the visible and the hidden trials (else the assignment is broken)."""
    import numpy as np

    import microtape.exercises as ex

    failures = []
    for name, body in solutions(source).items():
        namespace = {"np": np, "ex": ex}
        exec(compile(body, f"<{name} solution>", "exec"), namespace)
        for hidden in (False, True):
            result = ex.check(name, namespace[name], hidden=hidden, secret=secret)
            if not result.ok:
                failures.append(result.message)
    return failures


def _teachers_file(path):
    """Check a teacher's file of exercises (``ex.derivation``) by loading it here; a message, or None."""
    from microtape.exercises.teacher import load_exercises

    try:
        names = load_exercises(path)
    except ValueError as error:
        return str(error)
    print(f"  with the teacher's exercises of {path}: {', '.join(names)}")
    return None


def assign(exercises=None):
    """Build the student notebook and the autograder bundle; returns the exit status.

    ``exercises``: a teacher's file of exercises (``ex.derivation``), copied into the bundle as
    ``teacher_exercises.py``; the bundle's ``run_autograder`` grades them too (``--exercises``).
    """
    started = time.monotonic()
    problem = exercises and _teachers_file(exercises)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    source = json.loads(SOURCE.read_text())
    if DIST.exists():
        shutil.rmtree(DIST)
    BUNDLE.mkdir(parents=True)
    STUDENT.parent.mkdir(parents=True)
    secret = secrets.token_hex(32)
    failures = _solutions_pass(source, secret)
    if failures:
        print("\n".join(failures), file=sys.stderr)
        print("a solution in the source notebook fails its own trials (above)", file=sys.stderr)
        return 1
    text = json.dumps(student_notebook(source), indent=1, ensure_ascii=False) + "\n"
    problems = student_version_problems(text)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    STUDENT.write_text(text)
    SECRET.write_text(secret + "\n")
    SECRET.chmod(0o600)
    wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "-w", str(BUNDLE), str(ROOT)], capture_output=True, text=True)  # fmt: skip
    if wheel.returncode != 0:
        print(wheel.stdout + wheel.stderr, file=sys.stderr)
        return 1
    for script in ("setup.sh", "run_autograder"):
        shutil.copy(BUNDLE_FILES / script, BUNDLE / script)
        (BUNDLE / script).chmod(0o755)
    if exercises:
        shutil.copy(exercises, BUNDLE / TEACHERS_FILE)
    with zipfile.ZipFile(ZIPPED, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(BUNDLE.iterdir()):
            archive.write(path, path.name)
    print(f"Built the assignment in {time.monotonic() - started:.0f} s (every solution passes its trials):")
    print(f"  student version  {STUDENT.relative_to(ROOT)}   (hand this out)")
    print(f"  autograder       {ZIPPED.relative_to(ROOT)}   (keep it: it holds the secret; Gradescope-ready)")
    return 0


# ---------------------------------------------------------------- grade


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


def fill_in(student_notebook_text, sections):
    """The student notebook with each exercise's stub replaced by the sample's cell."""
    notebook = json.loads(student_notebook_text)
    used = set()
    for cell in notebook["cells"]:
        match = re.match(r"def (\w+)\(", _source(cell))
        if cell["cell_type"] == "code" and match and match.group(1) in sections:
            cell["source"] = sections[match.group(1)]
            used.add(match.group(1))
    unknown = set(sections) - used
    if unknown:
        raise ValueError(f"sections for exercises the notebook does not have: {', '.join(sorted(unknown))}")
    return json.dumps(notebook, indent=1, ensure_ascii=False)


def _sample_submissions():
    folder = BUILD / "submissions"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    student = STUDENT.read_text()
    for sample in sorted(SAMPLES.glob("*.py")):
        (folder / f"{sample.stem}.ipynb").write_text(fill_in(student, sample_sections(sample)))
    return folder


def _scores(gradebook):
    scores = {}
    with open(gradebook, newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            scores.setdefault(row["student"], {})[row["exercise"]] = int(row["points"])
    return scores


def _differences(scores, expected):
    differences = []
    for sample in sorted(set(expected) | set(scores)):
        if sample not in scores or sample not in expected:
            differences.append(f"{sample}: graded but not expected, or expected but not graded")
            continue
        for name, want in expected[sample].items():
            if scores[sample].get(name) != want:
                differences.append(f"{sample}: {name} scored {scores[sample].get(name)}, expected {want}")
    return differences


def grade(jobs, bundle):
    """Grade the samples with `microtape grade`; compare; optionally check the bundle. Exit status."""
    if not SECRET.is_file():
        print(f"no autograder bundle in {BUNDLE}: run `make assignment` first", file=sys.stderr)
        return 2
    folder = _sample_submissions()
    gradebook = BUILD / "gradebook.csv"
    command = [sys.executable, "-m", "microtape", "grade", str(folder), "-j", str(jobs), "--secret", str(SECRET),
               "--csv", str(gradebook), "--out", str(BUILD / "results")]  # fmt: skip
    if subprocess.run(command).returncode != 0:
        return 1
    expected = json.loads(EXPECTED.read_text())
    differences = _differences(_scores(gradebook), expected)
    if differences:
        print("\nThe scores differ from the expected ones:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in differences), file=sys.stderr)
        return 1
    print(f"\nEvery score is the expected one ({EXPECTED.relative_to(ROOT)}).")
    return check_bundle(expected) if bundle else 0


def check_bundle(expected, sample="partly_right"):
    """Run the bundle as Gradescope would: its setup in a fresh venv, its entry script on one sample."""
    started = time.monotonic()
    place = BUILD / "gradescope"
    if place.exists():
        shutil.rmtree(place)
    source, submission, results = place / "source", place / "submission", place / "results"
    for folder in (submission, results):
        folder.mkdir(parents=True)
    with zipfile.ZipFile(ZIPPED) as archive:
        archive.extractall(source)
    for script in ("setup.sh", "run_autograder"):
        (source / script).chmod(0o755)
    shutil.copy(BUILD / "submissions" / f"{sample}.ipynb", submission / f"{sample}.ipynb")
    env = {"PATH": "/usr/bin:/bin", "AUTOGRADER": str(place), "PYTHON": sys.executable}
    for script in ("setup.sh", "run_autograder"):
        done = subprocess.run(["bash", str(source / script)], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
            print(f"the bundle's {script} failed (above)", file=sys.stderr)
            return 1
    report = json.loads((results / "results.json").read_text())
    want = sum(expected[sample].values())
    if report.get("score") != want:
        print(f"the bundle scored {sample} {report.get('score')}, expected {want}", file=sys.stderr)
        return 1
    print(f"The Gradescope bundle, installed in a fresh venv, scored {sample} {want} as expected "
          f"({time.monotonic() - started:.0f} s).")  # fmt: skip
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    building = actions.add_parser("assign", help="build the student notebook and the autograder bundle (dist/)")
    building.add_argument("--exercises", metavar="FILE.py", help="a teacher's exercises (ex.derivation), graded too")
    grading = actions.add_parser("grade", help="grade the samples and compare the scores")
    grading.add_argument("-j", "--jobs", type=int, default=2, help="submissions graded at once (default: 2)")
    grading.add_argument("--bundle", action="store_true", help="also run the bundle in a fresh venv")
    args = parser.parse_args(argv)
    if args.action == "assign":
        return assign(args.exercises)
    return grade(args.jobs, args.bundle)


if __name__ == "__main__":
    sys.exit(main())
