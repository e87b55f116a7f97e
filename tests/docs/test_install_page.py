"""The install page's commands (docs/install.md), run as far as this machine can run them.

The page shows three routes: the wheel from the site, a clone with `make`, and
Windows (no `make`). Here: every `python -m microtape …` line runs with the
exit status a reader would see; the wheel's `pip install` line installs a
wheel built from this source (its dependencies are this environment's: the
test is offline) and microtape imports from where it went; the venv line makes
a venv; each Windows line is the same command as a line of another route with
Windows paths. `make demo` and `make test` are run by test_readme.py, and the
site's own wheel link by tests/docs/test_docs_site.py. `jupyter lab` opens a
browser: only its presence in the [notebooks] extra is checked.
"""

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

from microtape.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "install.md"


def lines():
    text = PAGE.read_text(encoding="utf-8")
    found = []
    for body in re.findall(r"^```\n(.*?)^```$", text, flags=re.S | re.M):
        found += [line.split("#", 1)[0].strip() for line in body.splitlines()]
    return [line for line in found if line]


def test_the_landing_pages_lines_are_the_install_pages():
    """The landing page (docs/index.md) shows the wheel's first three lines: the install page's own, run here,
    and the interpreter they installed (in which the README's first example runs, as tests/docs/test_readme.py
    runs it)."""
    landing = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    start = landing.index("## Start here")
    block = re.search(r"^```\n(.*?)^```$", landing[start:], flags=re.S | re.M)
    assert block, "the landing page shows its install lines"
    shown = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    assert len(shown) == 3, shown
    install = set(lines())
    for line in shown:
        assert line in install or line == "mt-env/bin/python", line


def posix(line):
    """A Windows line as the same command elsewhere: `X\\Scripts\\` is `X/bin/`, `py` is `python`."""
    line = re.sub(r"([\w.-]+)\\Scripts\\", r"\1/bin/", line)
    return re.sub(r"^py -m ", "python -m ", line)


def test_the_windows_lines_are_the_other_routes_commands_with_windows_paths():
    shown = lines()
    windows = [line for line in shown if "\\Scripts\\" in line or line.startswith("py ")]
    assert len(windows) >= 4
    for line in windows:
        command = posix(line)
        assert "make" not in command
        # The same program and sub-command as a line shown for Linux and macOS, or a venv's own tool.
        assert command.split()[0].split("/")[-1] in ("python", "pip", "jupyter"), line


def test_every_microtape_line_exits_as_a_reader_would_see(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = 0
    for line in dict.fromkeys(posix(line) for line in lines()):
        words = shlex.split(line.split(">")[0])
        if "microtape" not in words or words[words.index("microtape") - 1] != "-m":
            continue
        argv = words[words.index("microtape") + 1 :]
        status = main(argv)
        out = capsys.readouterr().out
        if ">" in line:  # `... stub > answers.py`: the reader's shell writes the file
            (tmp_path / line.split(">")[1].strip()).write_text(out)
        # The stubs are not started yet: check says so with exit 1; everything else exits 0.
        assert status == (1 if argv[:2] == ["exercises", "check"] else 0), line
        ran += 1
    assert ran >= 3  # demo, exercises stub, exercises check


def test_the_wheel_line_installs_a_wheel_of_this_source_and_the_venv_line_makes_a_venv(tmp_path):
    shown = lines()
    assert any(re.search(r'pip install "MICROTAPE_WHEEL\[notebooks\]"', line) for line in shown)
    # The [notebooks] extra has Jupyter, which the page's `jupyter lab` lines open.
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(line.split()[0].endswith("jupyter") for line in map(posix, shown)) and "jupyter" in extras["notebooks"]
    venv = next(posix(line) for line in shown if " -m venv " in line)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / venv.split()[-1])], check=True)
    assert (tmp_path / venv.split()[-1] / "bin" / "python").exists()
    wheels, source = tmp_path / "wheels", tmp_path / "source"  # built from a copy: no build/ left in the repository
    shutil.copytree(ROOT / "microtape", source / "microtape", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, source],
        check=True,
    )
    (wheel,) = wheels.glob("microtape-*.whl")
    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True,
    )
    done = subprocess.run(
        [sys.executable, "-m", "microtape", "exercises", "list"],
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "softmax_backward" in done.stdout, done.stderr[-1000:]
    assert not (target / "instructor").exists()  # the reference solutions are not in the wheel
