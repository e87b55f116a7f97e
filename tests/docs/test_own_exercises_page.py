"""The page "Write your own exercise" (docs/own-exercises.md), run as a teacher would.

Its example file (docs/examples/teacher_mlp.py) goes through every command the
page shows — ``microtape exercises list|stub|check --exercises`` and
``microtape grade --exercises`` — and the feedback the page prints is the
feedback the command prints for the page's answer file.
"""

import csv
import re
import shlex
import shutil
from pathlib import Path

import pytest
from exercise_helpers import teachers_exercises

from microtape.cli.main import main
from microtape.exercises import teacher

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "own-exercises.md"
EXAMPLES = ROOT / "docs" / "examples"


def _blocks(language):
    text = PAGE.read_text(encoding="utf-8")
    return [body for lang, body in re.findall(r"^```([^\n]*)\n(.*?)^```$", text, flags=re.S | re.M)
            if lang.strip() == language]  # fmt: skip


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A teacher's folder: the example file, the student's answer, a class of one and a secret."""
    monkeypatch.chdir(tmp_path)
    for file in ("teacher_mlp.py", "answers_two_errors.py"):
        shutil.copy(EXAMPLES / file, tmp_path / file)
    (tmp_path / "handed_in").mkdir()
    shutil.copy(EXAMPLES / "answers_two_errors.py", tmp_path / "handed_in" / "ada.py")
    (tmp_path / "secret.txt").write_text("b1946ac92492d2347c6235b4d26111845e1b4f25e37a4e1d9c9f27b2e2d3a7c0\n")
    with teachers_exercises():
        yield tmp_path
    teacher._LOADED.clear()


def test_every_command_of_the_page_runs(folder, capsys):
    (commands,) = _blocks("")
    lines = [line.split("#", 1)[0].strip() for line in commands.splitlines() if line.strip()]
    assert len(lines) == 4 and all("--exercises teacher_mlp.py" in line for line in lines)
    for line in lines:
        argv = shlex.split(line)[1:]
        assert main(argv) == (1 if argv[:2] == ["exercises", "check"] else 0), capsys.readouterr().err
    assert (folder / "where.svg").read_text().count("<svg") == 1
    rows = list(csv.DictReader((folder / "grades.csv").open(encoding="utf-8")))
    (ada,) = [row for row in rows if row["exercise"] == "mlp_cross_entropy_steps"]
    assert ada["points"] == "7" and ada["grad_counts state"] == "wrong" and ada["grad_w1 state"] == "wrong"
    assert ada["grad_logits state"] == "carried" and ada["grad_logits points"] == "1"


def test_the_feedback_the_page_shows_is_the_commands(folder, capsys):
    (shown,) = _blocks("text")
    assert main(["exercises", "check", "answers_two_errors.py", "--exercises", "teacher_mlp.py"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(shown), out


def test_the_page_is_in_the_sites_table_of_contents_and_the_readme_points_to_it():
    assert re.search(r"^own-exercises$", (ROOT / "docs" / "index.md").read_text(), flags=re.M)
    assert "(docs/own-exercises.md)" in (ROOT / "README.md").read_text()
