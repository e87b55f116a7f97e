"""The otter assignment in grading/, checked without otter (`make grade-sample` runs otter itself).

* The source notebook has one question per exercise, in the lab's order,
  with a solution that passes the visible and the hidden trials, a public
  test worth 0 points and one hidden test worth 1 point per output.
* Each sample submission earns, exercise by exercise, the scores committed in
  ``grading/expected_scores.json`` when graded the way the hidden tests do.
"""

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

import microtape.exercises as ex
from microtape.exercises import autograder

ROOT = Path(__file__).resolve().parent.parent
GRADING = ROOT / "grading"
NAMES = ex.list_exercises()


def _autograde_module():
    spec = importlib.util.spec_from_file_location("autograde", GRADING / "autograde.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def questions():
    """``{question name: [cells]}`` of the source notebook, in order."""
    cells = json.loads((GRADING / "source" / "microtape_lab.ipynb").read_text())["cells"]
    found, current = {}, None
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "raw" and source.startswith("# BEGIN QUESTION"):
            current = re.search(r"name: (\w+)", source).group(1)
            found[current] = []
        elif cell["cell_type"] == "raw" and source.startswith("# END QUESTION"):
            current = None
        elif current:
            found[current].append(cell)
    return found


def test_one_question_per_exercise_in_lab_order(questions):
    assert list(questions) == NAMES


def _test_cells(cells):
    tests, inside = [], False
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "raw":
            inside = {"# BEGIN TESTS": True, "# END TESTS": False}.get(source.strip(), inside)
        elif inside:
            config = re.search(r'""" # BEGIN TEST CONFIG\n(.*?)""" # END TEST CONFIG', source, re.S).group(1)
            tests.append((config, source.split("# END TEST CONFIG", 1)[1].strip()))
    return tests


@pytest.mark.parametrize("name", NAMES)
def test_points_per_output_and_hidden_tests(questions, name):
    tests = _test_cells(questions[name])
    public = [code for config, code in tests if "hidden: true" not in config]
    hidden = [(config, code) for config, code in tests if "hidden: true" in config]
    assert public == [f'ex.assert_right("{name}", {name})  # the visible trials, as in notebook 07']
    assert all("points: 0" in config for config, _ in tests if "hidden: true" not in config)
    outputs = [output.name for output in ex.get(name).outputs]
    assert [code for _, code in hidden] == [f'ex.assert_output("{name}", {name}, "{output}")' for output in outputs]
    assert all("points: 1" in config for config, _ in hidden)


def _solution_cell(cells, name):
    (cell,) = [c for c in cells if "".join(c["source"]).startswith(f"def {name}(")]
    return "".join(cell["source"])


@pytest.mark.parametrize("name", NAMES)
def test_the_source_notebook_solution_passes_and_the_prompt_is_a_stub(questions, name):
    source = _solution_cell(questions[name], name)
    assert "# BEGIN SOLUTION NO PROMPT" in source and '""" # BEGIN PROMPT' in source
    namespace = {"np": np, "ex": ex}
    exec(compile(source, f"<{name} solution>", "exec"), namespace)
    assert ex.check(name, namespace[name]).ok
    assert ex.check(name, namespace[name], hidden=True, secret="test secret").ok
    # What students get: the prompt lines only, which raise NotImplementedError.
    stub = re.sub(r"# BEGIN SOLUTION NO PROMPT.*?# END SOLUTION\n", "", source, flags=re.S)
    stub = "\n".join(line for line in stub.splitlines() if "# BEGIN PROMPT" not in line and "# END PROMPT" not in line)
    student = {"np": np}
    exec(compile(stub, f"<{name} stub>", "exec"), student)
    assert ex.check(name, student[name]).status == "not started"


def _run_like_a_notebook(sections):
    """Run each section as a cell: an exception (exit() included) stops that cell only, as in IPython."""
    namespace = {"np": np, "ex": ex}
    for source in sections.values():
        try:
            exec(compile(source, "<cell>", "exec"), namespace)
        except BaseException:  # noqa: BLE001 — IPython reports it and goes on with the next cell
            pass
    return namespace


def _hidden_score(name, namespace):
    fn = namespace.get(name)
    if not callable(fn):
        return 0
    points = 0
    for output in ex.get(name).outputs:
        try:
            autograder.assert_output(name, fn, output.name, time_limit=2)
            points += output.points
        except AssertionError:
            pass
    return points


@pytest.mark.parametrize("sample", sorted(path.stem for path in (GRADING / "samples").glob("*.py")))
def test_each_sample_earns_its_expected_scores(sample):
    expected = json.loads((GRADING / "expected_scores.json").read_text())[sample]
    sections = _autograde_module().sample_sections(GRADING / "samples" / f"{sample}.py")
    assert set(sections) <= set(NAMES)
    namespace = _run_like_a_notebook(sections)
    with np.errstate(all="ignore"):
        scores = {name: _hidden_score(name, namespace) for name in NAMES}
    assert scores == {name: expected.get(name, 0) for name in NAMES}


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


def test_student_version_check_catches_a_leaked_solution(tmp_path):
    module = _autograde_module()
    leaked = json.dumps({"cells": [{"source": "def f():\n    # BEGIN SOLUTION\n    return 1\n"}]})
    assert module.student_version_problems(leaked)
    assert not module.student_version_problems(json.dumps({"cells": [{"source": "def f():\n    raise X\n"}]}))
