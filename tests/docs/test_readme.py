"""The README and the pages of the site, run as a reader would: every Python block, every command, every link.

The README is short; what it used to say lives in the site's pages (docs/).
Their executed cells (``{code-cell}``) run when `make docs` builds the site;
this file runs the rest: the README's Python, and every command line of the
README and of the pages. Four pages have tests of their own that run their
commands and check what they write (``test_readme_pictures.py``,
``test_readme_tiled.py``, ``test_train.py``, ``test_readme_grading.py``); this
file runs everything else, and checks that no command is left to nobody.
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

from microtape.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

#: Pages whose commands another test file runs (and checks more closely).
RUN_ELSEWHERE = {
    "docs/pictures.md": "test_readme_pictures.py",
    "docs/tiled.md": "test_readme_tiled.py",
    "docs/transformer.md": "test_train.py",
    "docs/grading.md": "test_readme_grading.py",
    "docs/install.md": "test_install_page.py",
    "docs/index.md": "test_install_page.py",
    "docs/own-exercises.md": "test_own_exercises_page.py",
}


def blocks(page=README):
    """``[(language, body)]`` for every fenced block of ``page``, in order."""
    found = re.findall(r"^```([^\n]*)\n(.*?)^```$", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [(language.strip(), body) for language, body in found]


def commands():
    """``[(page, command)]``: every line of the unlabelled (shell) blocks, comments dropped."""
    lines = []
    for page in PAGES:
        name = page.relative_to(ROOT).as_posix()
        for language, body in blocks(page):
            if language == "":
                lines += [(name, line.split("#", 1)[0].strip()) for line in body.splitlines()]
    return [(page, line) for page, line in lines if line]


def expected_status(command):
    """What the page says each command exits with: 1 for an injected mistake, else 0."""
    return 1 if "--mistake" in command else 0


# ---------------------------------------------------------------- Python


def test_every_python_block_runs_in_order(tmp_path, monkeypatch):
    """The README's Python blocks, run one after another in one namespace (as a reader pastes them)."""
    monkeypatch.chdir(tmp_path)
    python = [body for language, body in blocks() if language == "python"]
    assert len(python) == 4
    names = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for number, code in enumerate(python):
            exec(compile(code, f"README.md python block {number}", "exec"), names)
    out = printed.getvalue()
    # The first block prints the listing the README shows under it.
    listing = next(body for language, body in blocks() if language == "text")
    for line in listing.strip().splitlines():
        assert line.strip() in out, line
    a, b = names["a"], names["b"]
    assert a.grad == pytest.approx(0.0706508, rel=1e-5) and b.grad == pytest.approx(0.1413017, rel=1e-5)
    assert names["report"].ok and "\nTrue\nTrue\n" in out  # the attention report agrees; lean gives dx exactly
    assert names["lean"].tape.lean
    # numpy's own functions recorded: d/dx Σ e^x sin x = e^x (sin x + cos x); 3 entries below 0.5.
    x = names["x"].data
    np.testing.assert_allclose(names["x"].grad, np.exp(x) * (np.sin(x) + np.cos(x)), rtol=1e-13)
    assert out.strip().endswith(" 3")
    # The explorer: the first example's a, as its panel reads, and the two pages saved.
    view = names["view"]  # the widget (anywidget installed) or the Explorer: both read the same data
    uses = {use["symbol"]: use for use in getattr(view, "explorer", view).data["nodes"]["a"]["uses"]}
    assert (uses["∂(a·b)/∂a"]["text"], uses["∂(a·b)/∂a"]["local"]) == ("b", -3.0)
    assert (uses["∂(a²)/∂a"]["text"], uses["∂(a²)/∂a"]["local"]) == ("2a", 4.0)
    for page in ("first_look.html", "attention.html"):
        assert "mtExplore(document" in (tmp_path / page).read_text(encoding="utf-8")


# ---------------------------------------------------------------- commands


def test_no_command_is_left_to_nobody():
    run_here = {line for page, line in commands() if page not in RUN_ELSEWHERE}
    assert run_here, "the README shows commands"
    for page, test_file in RUN_ELSEWHERE.items():
        assert list((ROOT / "tests").rglob(test_file)), test_file
        assert any(p == page for p, _ in commands()), f"no commands left in {page}"
    assert {"make demo", "make test"} <= run_here
    # Everything else shown here is a `microtape` command, run below.
    assert all(line.startswith("microtape ") for line in run_here - {"make demo", "make test"}), run_here


@pytest.mark.parametrize(
    "command",
    sorted({line for page, line in commands() if page not in RUN_ELSEWHERE and line.startswith("microtape ")}),
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
    """`make test` runs the suite this test is part of: CI (.ci/run) runs it, then the rest (the site too)."""
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    assert steps[0] == "make test" and "make test-torch" in steps and "make docs" in steps


# ---------------------------------------------------------------- links


def test_every_link_stays_in_the_repository():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert targets
    for target in targets:
        assert "://" not in target and not target.startswith(".."), target
        assert (ROOT / target.split("#")[0]).exists(), target
