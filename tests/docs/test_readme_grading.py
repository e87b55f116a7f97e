"""The grading guide's "Grading a class" (docs/grading.md): the students' and the teacher's commands, run as shown.

The page's shell lines are taken from the page itself, so a command that
changes there is run here as it now reads.
"""

import json
import shlex

from test_readme import commands

from microtape.cli.main import main
from microtape.exercises.registry import get

PAGE = "docs/grading.md"


def _lines():
    return [line for page, line in commands() if page == PAGE]


def test_the_section_shows_the_student_and_teacher_commands():
    words = [shlex.split(line)[:3] for line in _lines()]
    assert ["microtape", "exercises", "list"] in words
    assert ["microtape", "exercises", "stub"] in words
    assert ["microtape", "exercises", "check"] in words
    assert ["microtape", "grade", "handed_in"] in words


def test_the_students_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for line in _lines():
        argv = shlex.split(line)
        if argv[1] != "exercises":
            continue
        capsys.readouterr()  # only this command's output below
        if ">" in argv:  # `stub > answers.py`: the shell's redirection, done here
            at = argv.index(">")
            assert main(argv[1:at]) == 0
            (tmp_path / argv[at + 1]).write_text(capsys.readouterr().out)
        elif argv[2] == "check":
            assert main(argv[1:]) == 1  # the stubs are not started yet: exit 1, feedback on each
            assert "not written yet" in capsys.readouterr().out
        else:
            assert main(argv[1:]) == 0


def test_the_teachers_grade_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "handed_in").mkdir()
    (tmp_path / "handed_in" / "ada.py").write_text(
        "import numpy as np\n\ndef dropout_backward(grad_y, mask, p):\n    return grad_y * mask / (1 - p)\n"
    )
    # 256 bits in hex, as `make assignment` writes (a fixed one: the test is reproducible)
    (tmp_path / "secret.txt").write_text("b1946ac92492d2347c6235b4d26111845e1b4f25e37a4e1d9c9f27b2e2d3a7c0\n")
    (line,) = [line for line in _lines() if line.startswith("microtape grade")]
    assert main([*shlex.split(line)[1:], "--name", "dropout_backward"]) == 0
    assert "1 submission graded" in capsys.readouterr().out
    rows = (tmp_path / "grades.csv").read_text().splitlines()
    hidden_trials = len(get("dropout_backward").cases(hidden=True))
    # The flags column (a teacher's, never the student's) is empty for an honest answer.
    assert rows == ["student,exercise,points,max,message,flags",
                    f"ada,dropout_backward,1,1,✓ dropout_backward: correct on {hidden_trials} hidden random inputs "
                    + rows[1].split("hidden random inputs ", 1)[1],
                    "ada,(total),1,1,,"]  # fmt: skip
    assert rows[1].endswith(",")
    (run,) = (tmp_path / "grades").iterdir()
    assert json.loads((run / "ada.json").read_text())["total"] == 1
