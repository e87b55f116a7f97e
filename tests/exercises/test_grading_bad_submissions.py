"""`microtape grade`: bad submissions get 0 and a one-line reason, and the run goes on.

Each submission here is broken in one way a real class produces (or a student
tries). It is graded next to a right answer, in one folder, by the command a
teacher runs; the right answer must keep full marks and the broken one must
get 0 for what it touches, with a reason that fits on one line.
"""

import csv
import json
import textwrap

import pytest

import microtape.exercises as ex
from microtape.cli.main import main
from microtape.grading import gradebook

NAMES = ["softmax_backward", "dropout_backward"]
RIGHT = """
import numpy as np

def softmax_backward(p, grad_p):
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))

def dropout_backward(grad_y, mask, p):
    return grad_y * mask / (1 - p)
"""


def _notebook(*cells):
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "metadata": {}, "source": textwrap.dedent(c), "outputs": []} for c in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def _grade(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return gradebook.grade_one(path, NAMES, secret="test secret", timeout=2.0)


def _one_line(result):
    first = result.message.splitlines()[0]
    assert len(first) < 400 and first.startswith("✗"), result.message
    return first


def test_not_valid_python(tmp_path):
    graded = _grade(tmp_path, "syntax.py", "def softmax_backward(p, grad_p)\n    return p\n")
    assert graded.total == 0
    assert "SyntaxError (line 1)" in _one_line(graded.results["softmax_backward"])


def test_a_notebook_whose_json_is_broken(tmp_path):
    graded = _grade(tmp_path, "broken.ipynb", _notebook(RIGHT)[:-40])
    assert graded.total == 0
    assert "not valid notebook JSON" in _one_line(graded.results["dropout_backward"])


def test_a_cell_that_loops_forever_costs_only_that_cell(tmp_path):
    graded = _grade(tmp_path, "loops.ipynb", _notebook(RIGHT, "while True:\n    pass\n"))
    assert graded.total == 2
    assert any("took longer than 2 s" in note for note in graded.notes), graded.notes


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("while True:\n        pass", "did not return within 2 s"),
        ("import os\n    while True:\n        os.fork()", ""),
        ("return np.ones(10**10 // 8 * 10)", "MemoryError"),
        ("open('big', 'wb').write(bytes(10**9)) or open('big', 'ab').write(bytes(10**10))", ""),
        ("import sys, os\n    for _ in range(40):\n        sys.stdout.buffer.write(os.urandom(1 << 20))", ""),
        ("return object()", "not an array of numbers"),
        ("return [[1.0, 2.0]]", "shape"),
        ("return np.full_like(p, np.nan)", "NaN"),
        ("return p.astype(np.float16)", "float16"),
        ("return p.astype(complex)", "real numbers"),
    ],
    ids=[
        "infinite loop",
        "fork bomb",
        "10 GB allocation",
        "10 GB file",
        "binary flood",
        "an object",
        "wrong shape",
        "NaN",
        "float16",
        "complex",
    ],  # fmt: skip
)
def test_a_bad_function_gets_0_and_the_others_are_graded(tmp_path, body, words):
    text = RIGHT + f"\ndef softmax_backward(p, grad_p):\n    {body}\n"
    graded = _grade(tmp_path, "bad.py", text)
    assert graded.results["softmax_backward"].score == 0
    assert words in _one_line(graded.results["softmax_backward"]) or words in graded.results["softmax_backward"].message
    assert graded.results["dropout_backward"].score == 1, graded.results["dropout_backward"].message


def test_closing_stdout_changes_nothing(tmp_path):
    text = "import os, sys\nsys.stdout.close()\nos.close(1)\nos.close(2)\n" + RIGHT
    graded = _grade(tmp_path, "closed.py", text)
    assert graded.total == 2, graded.feedback()


def test_the_command_grades_a_folder_keeps_every_result_and_writes_the_gradebook(tmp_path, capsys):
    folder = tmp_path / "handed_in"
    folder.mkdir()
    (folder / "ada.py").write_text(RIGHT)
    (folder / "bob.ipynb").write_text(
        _notebook("import numpy as np\n", "def softmax_backward(p, grad_p):\n    return p\n")
    )
    (folder / "cy.ipynb").write_text("{ not json")
    (folder / "notes.txt").write_text("not a submission")
    out, book = tmp_path / "grades", tmp_path / "book.csv"
    argv = ["grade", str(folder), "-j", "2", "--csv", str(book), "--out", str(out), "--timeout", "2",
            "--name", "softmax_backward", "--name", "dropout_backward"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "isolation: bubblewrap" in printed and "3 submissions graded" in printed
    rows = list(csv.DictReader(book.open()))
    assert [(r["student"], r["exercise"], r["points"], r["max"]) for r in rows] == [
        ("ada", "softmax_backward", "1", "1"), ("ada", "dropout_backward", "1", "1"), ("ada", "(total)", "2", "2"),
        ("bob", "softmax_backward", "0", "1"), ("bob", "dropout_backward", "0", "1"), ("bob", "(total)", "0", "2"),
        ("cy", "softmax_backward", "0", "1"), ("cy", "dropout_backward", "0", "1"), ("cy", "(total)", "0", "2"),
    ]  # fmt: skip
    assert "not valid notebook JSON" in rows[-2]["message"]
    # The whole feedback, not only its first line.
    (bob,) = [r for r in rows if r["student"] == "bob" and r["exercise"] == "softmax_backward"]
    assert bob["message"].count("\n") >= 3 and bob["message"].endswith("score 0 of 1."), bob["message"]
    assert main(argv) == 0  # a second run: a new folder, the first kept
    runs = sorted(out.iterdir())
    assert len(runs) == 2
    for run in runs:
        assert sorted(path.name for path in run.iterdir()) == [
            "ada.json", "ada.txt", "bob.json", "bob.txt", "cy.json", "cy.txt", "gradebook.csv"
        ]  # fmt: skip
    assert json.loads((runs[0] / "ada.json").read_text())["total"] == 2


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere")]) == 2
    assert main(["grade", str(tmp_path)]) == 2  # no submissions in it
    assert "no .py or .ipynb" in capsys.readouterr().err
    assert ex.list_exercises()  # (the names the default grades)


def test_a_link_is_not_followed(tmp_path):
    """A "submission" that links to the teacher's secret is not read (its text could leak into feedback)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("kept by the teacher\n")
    (tmp_path / "sneaky.py").symlink_to(secret)
    graded = gradebook.grade_one(tmp_path / "sneaky.py", NAMES, secret="test secret", timeout=2.0)
    assert graded.total == 0 and "not a plain file" in graded.load_error
    assert "kept by the teacher" not in graded.feedback()
