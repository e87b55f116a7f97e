"""A student install holds no reference solution.

setuptools builds the wheel from what ``build_py`` collects; we run that step
on a copy of the repository (no network, no ``wheel`` package needed) and
look at every file it would install. The solutions live in ``instructor/``
and the autograder's source notebook in ``assignment/``; neither may appear.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed_files(tmp_path_factory):
    copy = tmp_path_factory.mktemp("repo")
    for name in ("pyproject.toml", "README.md", "microtape", "instructor", "assignment"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        elif source.exists():
            shutil.copy(source, copy / name)
    out = copy / "wheel-contents"
    done = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py", "--build-lib", str(out)],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    files = sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())
    assert files, "build_py collected nothing"
    return out, files


def test_the_wheel_holds_the_package_and_only_the_package(installed_files):
    _, files = installed_files
    assert "microtape/exercises/checker.py" in files and "microtape/exercises/lab/attention.py" in files
    assert all(path.startswith("microtape/") for path in files), [p for p in files if not p.startswith("microtape/")]
    assert not [path for path in files if re.search(r"solution|instructor|autograde\.py|_lab\.ipynb", path)]


def test_no_file_of_the_wheel_holds_a_solution(installed_files):
    out, files = installed_files
    solutions = (ROOT / "instructor" / "solutions.py").read_text()
    # A line that only a solution has: the attention answer's last statements.
    fingerprints = [
        "grad_k = _t(grad_scores) @ q * scale  # dK = dSᵀ Q / √d",
        "SOLUTIONS = {name: globals()[name]",
        "BEGIN SOLUTION",
    ]
    assert fingerprints[0] in solutions
    for path in files:
        if path.endswith(".py"):
            text = (out / path).read_text()
            for fingerprint in fingerprints:
                assert fingerprint not in text, f"{path} holds {fingerprint!r}"


def test_the_installed_package_has_no_solutions_module():
    import microtape.exercises as ex

    package = Path(ex.__file__).parent
    names = {path.stem for path in package.glob("*.py")}
    assert not {name for name in names if re.search("solution|answer|reference", name)}
