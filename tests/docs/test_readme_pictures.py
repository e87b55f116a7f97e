"""Every command the site's "Pictures" page (docs/pictures.md) shows runs, and writes what it says."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from pictures import needs_dot

ROOT = Path(__file__).resolve().parents[2]


def pictures_commands():
    page = (ROOT / "docs" / "pictures.md").read_text(encoding="utf-8")
    block = re.search(r"```\n(.*?)```", page, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_the_section_shows_the_commands_we_run():
    assert [shlex.split(c)[:2] for c in pictures_commands()] == [
        ["microtape", "demo"],
        ["microtape", "graph"],
        ["microtape", "heatmap"],
        ["microtape", "memory"],
        ["python", "-m"],
    ]


@needs_dot
@pytest.mark.parametrize("command", pictures_commands())
def test_each_command_runs(command, tmp_path):
    words = [tmp_path.joinpath("demo").as_posix() if w == "DIR" else w for w in shlex.split(command)]
    if words[0] == "microtape":
        words = [sys.executable, "-m", "microtape", *words[1:]]
    elif words[0] == "python":
        words[0] = sys.executable
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    expected = {
        "demo": {"demo/graph_forward.svg", "demo/graph_backward.svg", "demo/backward_frames/index.html"},
        "graph": {"graph.svg"},
        "heatmap": {"h.png"},
        "memory": {"demo/memory_timeline.png", "demo/saved_values.svg", "demo/memory_compare.png"},
        "-m": {"docs/images/attention_backward_graph.png", "docs/images/attention_heatmaps.png"},
    }[shlex.split(command)[1]]
    assert expected <= written


@needs_dot
def test_the_pages_python_runs_and_writes_the_slide(tmp_path, monkeypatch):
    """The page's Python blocks (not executed by the site's build: they write files), run in a fresh folder."""
    import numpy as np

    import microtape as mt

    monkeypatch.chdir(tmp_path)
    page = (ROOT / "docs" / "pictures.md").read_text(encoding="utf-8")
    python = re.findall(r"```python\n(.*?)```", page, re.S)
    assert python
    names = {"np": np, "mt": mt}
    for code in python:
        exec(compile(code, "docs/pictures.md", "exec"), names)
    assert all(path.is_file() for path in names["paths"].values()) and names["fig"].axes
    assert not names["wrong"].ok and len(names["frames"]) > 1
