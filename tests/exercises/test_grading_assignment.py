"""The lab assignment in assignment/: built without otter, graded by the boxed checker.

* The source notebook has one question per exercise, in the lab's order, with
  a solution that passes the visible and the hidden trials and a prompt that
  is a stub.
* The student version holds no solution, and one ``ex.check`` cell per exercise.
* Each sample submission, filled into the student notebook and graded as
  ``microtape grade`` grades it (boxed, hidden trials from a secret), earns
  the scores committed in ``assignment/expected_scores.json``.
"""

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

import microtape.exercises as ex
from microtape.grading import gradebook

ROOT = Path(__file__).resolve().parents[2]
GRADING = ROOT / "assignment"
NAMES = ex.list_exercises()


def _autograde_module():
    spec = importlib.util.spec_from_file_location("autograde", GRADING / "autograde.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


AUTOGRADE = _autograde_module()
SOURCE = json.loads((GRADING / "source" / "microtape_lab.ipynb").read_text())


def test_one_question_per_exercise_in_lab_order():
    names = [re.search(r"name: (\w+)", "".join(c["source"])).group(1) for c in SOURCE["cells"]
             if c["cell_type"] == "raw" and "".join(c["source"]).startswith("# BEGIN QUESTION")]  # fmt: skip
    assert names == NAMES
    assert list(AUTOGRADE.solutions(SOURCE)) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_the_source_solution_passes_and_the_prompt_is_a_stub(name):
    source = AUTOGRADE.solutions(SOURCE)[name]
    namespace = {"np": np, "ex": ex}
    exec(compile(source, f"<{name} solution>", "exec"), namespace)
    assert ex.check(name, namespace[name]).ok
    assert ex.check(name, namespace[name], hidden=True, secret="test secret").ok
    student = {"np": np}
    exec(compile(AUTOGRADE._prompt_version(source), f"<{name} stub>", "exec"), student)
    assert ex.check(name, student[name]).status == "not started"


def test_the_student_version_has_no_solution_and_a_check_per_exercise():
    student = AUTOGRADE.student_notebook(SOURCE)
    text = json.dumps(student)
    assert AUTOGRADE.student_version_problems(text) == []
    checks = [c["source"] for c in student["cells"] if c["source"].startswith("ex.check(")]
    assert [re.match(r'ex.check\("(\w+)", (\w+)\)', c).groups() for c in checks] == [(n, n) for n in NAMES]
    assert all(c["cell_type"] != "raw" for c in student["cells"])


def test_the_student_version_check_catches_a_leaked_solution():
    body = AUTOGRADE.solutions(SOURCE)["softmax_backward"]
    leaked = body.split("# BEGIN SOLUTION NO PROMPT", 1)[1].split("# END SOLUTION", 1)[0].strip()
    assert AUTOGRADE.student_version_problems(json.dumps({"cells": [{"source": leaked}]}))
    assert AUTOGRADE.student_version_problems(json.dumps({"cells": [{"source": "# BEGIN SOLUTION"}]}))


@pytest.mark.parametrize("sample", sorted(path.stem for path in (GRADING / "samples").glob("*.py")))
def test_each_sample_earns_its_expected_scores(sample, tmp_path):
    expected = json.loads((GRADING / "expected_scores.json").read_text())[sample]
    student = json.dumps(AUTOGRADE.student_notebook(SOURCE))
    path = tmp_path / f"{sample}.ipynb"
    path.write_text(AUTOGRADE.fill_in(student, AUTOGRADE.sample_sections(GRADING / "samples" / f"{sample}.py")))
    graded = gradebook.grade_one(path, NAMES, secret="test secret", timeout=3.0)
    scores = {name: result.score for name, result in graded.results.items()}
    assert scores == {name: expected.get(name, 0) for name in NAMES}, graded.feedback()


def test_the_samples_cover_the_four_cases():
    expected = json.loads((GRADING / "expected_scores.json").read_text())
    total = {sample: sum(points.values()) for sample, points in expected.items()}
    maximum = sum(ex.get(name).max_score for name in NAMES)
    assert total["correct"] == maximum
    assert total["wrong"] == 0
    assert 0 < total["partly_right"] < maximum
    partly = expected["partly_right"]
    assert any(0 < partly[name] < ex.get(name).max_score for name in NAMES)  # partial credit inside an exercise
    assert 0 <= total["crashes"] < maximum and total["loops"] < maximum
    assert set(expected) == {path.stem for path in (GRADING / "samples").glob("*.py")}
