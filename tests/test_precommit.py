"""The pre-commit configuration runs what ``make lint`` runs: the same ruff (pinned), both its checks, and mypy."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pins(requirements):
    """``{name: version}`` of the ``name==version`` requirements in ``requirements``."""
    return dict(re.findall(r"\b([A-Za-z0-9_.-]+)==([0-9][^\s\"',\]]*)", " ".join(requirements)))


def test_precommit_names_the_ruff_pinned_in_pyproject():
    # (read as text: tomllib is Python 3.11's, and the package supports 3.10)
    (dev,) = re.findall(r"^dev = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), flags=re.M)
    ruff = _pins([dev])["ruff"]
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    named = re.findall(r"ruff==([^\s\"',\]]+)", config)
    assert named and set(named) == {ruff}, f"pre-commit installs ruff {sorted(set(named))}, pyproject pins {ruff}"


def test_precommit_runs_the_checks_of_make_lint():
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    entries = re.findall(r"^\s*entry:\s*(.+?)\s*$", config, flags=re.M)
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    made = [line.strip().replace("$(BIN)/", "") for line in lint.splitlines()]
    assert made == ["ruff check .", "ruff format --check .", "mypy"], made
    assert [entry.split(" --force-exclude")[0] for entry in entries] == [
        "ruff check",
        "ruff format --check",
        ".venv/bin/mypy",
    ]
    assert re.search(r"^VENV\s*[:?]?=\s*\.venv\s*$", (ROOT / "Makefile").read_text(), flags=re.M), "make's venv"


def test_the_pin_reader_reads_a_pin():
    assert _pins(['"ruff==0.17.6"', "mypy==2.4.1", "pytest>=7"]) == {"ruff": "0.17.6", "mypy": "2.4.1"}
