"""The README, run as a reader would: every Python block, every command, every link.

Three sections have tests of their own that run their commands and check what
they write (``test_readme_pictures.py``, ``test_readme_tiled.py``,
``test_train.py``); this file runs everything else, and checks that no command
of the README is left to nobody.
"""

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import microtape as mt
from microtape.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

#: Sections whose commands another test file runs (and checks more closely).
RUN_ELSEWHERE = {
    "Pictures": "test_readme_pictures.py",
    "Tiled (flash) attention": "test_readme_tiled.py",
    "A Transformer block that learns": "test_train.py",
    "Grading a class": "test_readme_grading.py",
}


def blocks():
    """``[(section, language, body)]`` for every fenced block, in order."""
    found, section = [], "(top)"
    for part in re.split(r"(^## [^\n]*$|^```\w*\n.*?^```$)", README.read_text(encoding="utf-8"), flags=re.S | re.M):
        if part.startswith("## "):
            section = part[3:].strip()
        elif part.startswith("```"):
            language, _, body = part[3:].partition("\n")
            found.append((section, language.strip(), body.rsplit("```", 1)[0]))
    return found


def commands():
    """``[(section, command)]``: every line of the README's unlabelled (shell) blocks, comments dropped."""
    lines = []
    for section, language, body in blocks():
        if language == "":
            lines += [(section, line.split("#", 1)[0].strip()) for line in body.splitlines()]
    return [(section, line) for section, line in lines if line]


def expected_status(command):
    """What the README says each command exits with: 1 for an injected mistake, else 0."""
    return 1 if "--mistake" in command else 0


# ---------------------------------------------------------------- Python


def test_every_python_block_runs_in_order(tmp_path, monkeypatch):
    """The Python blocks, run one after another in one namespace (as a reader pastes them)."""
    monkeypatch.chdir(tmp_path)
    python = [body for _, language, body in blocks() if language == "python"]
    assert len(python) >= 5
    names = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for number, code in enumerate(python):
            exec(compile(code, f"README.md python block {number}", "exec"), names)
    mt.ops.OPS.pop("logistic", None)  # the README's own op: forget it again
    out = printed.getvalue()
    # The first block prints the listing the README shows under it.
    listing = next(body for _, language, body in blocks() if language == "text")
    for line in listing.strip().splitlines():
        assert line.strip() in out, line
    a, b = names["a"], names["b"]
    assert a.grad == pytest.approx(0.0706508, rel=1e-5) and b.grad == pytest.approx(0.1413017, rel=1e-5)
    assert "True" in out  # the logistic op passes gradcheck
    np.testing.assert_allclose(names["dx2"], names["dx"], atol=1e-12)  # the encoder layer: both routes agree
    assert names["report"].first_failure == "d_residual1"  # the layer report's seeded mistake


def test_the_report_table_shown_is_what_the_report_prints():
    """The table under "Checking each derivative" is the default attention report's (first rows)."""
    table = [body for _, language, body in blocks() if language == "text"][1]
    attn = mt.nn.MultiHeadAttention(16, 4, causal=True, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 6, 16))
    printed = str(mt.check.attention_report(attn, x))
    header, *rows = [line for line in table.strip().splitlines() if line != "..."]
    assert header.split()[:4] == ["gradient", "tape", "node", "formula"]
    for row in rows:
        label, node = row.split()[:2]
        assert any(line.split()[:2] == [label, node] for line in printed.splitlines()), row


# ---------------------------------------------------------------- commands


def test_no_command_is_left_to_nobody():
    run_here = {line for section, line in commands() if section not in RUN_ELSEWHERE}
    assert run_here, "the README shows commands"
    for section, test_file in RUN_ELSEWHERE.items():
        assert (ROOT / "tests" / test_file).is_file(), test_file
        assert any(s == section for s, _ in commands()), f"no commands left in section {section!r}"
    assert {"make demo", "make test"} <= run_here


@pytest.mark.parametrize(
    "command",
    [line for section, line in commands() if section not in RUN_ELSEWHERE and line.startswith("microtape ")],
)
def test_each_command_exits_as_the_readme_says(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = [str(tmp_path / "out") if word == "DIR" else word for word in shlex.split(command)[1:]]
    assert main(argv) == expected_status(command), capsys.readouterr().err


def test_make_demo_writes_the_pictures(tmp_path):
    """`make demo`, as the README's first line (the venv exists: it only renders)."""
    out = tmp_path / "demo"
    done = subprocess.run(
        ["make", "demo", f"OUT={out}", f"PYTHON={sys.executable}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (out / "attention_heatmaps.png").is_file() and (out / "grad_heatmaps.png").is_file()
    assert (out / "graph_forward.svg").is_file() or (out / "graph_forward.dot").is_file()


def test_make_test_is_what_ci_runs():
    """`make test` runs the suite this test is part of: CI (.ci/run) runs it, then the rest."""
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    assert steps[0] == "make test" and "make test-torch" in steps


# ---------------------------------------------------------------- links


def test_every_link_stays_in_the_repository():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert targets
    for target in targets:
        assert "://" not in target and not target.startswith(".."), target
        assert (ROOT / target.split("#")[0]).exists(), target
