"""The site's "Tiled (flash) attention" page (docs/tiled.md): its Python runs, and so does every command it shows."""

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

import microtape as mt
from microtape.cli.main import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tiled.md"


def section_blocks():
    """``(python blocks, command lines)`` of the page."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    python = [body for kind, body in blocks if kind == "python"]
    commands = [line.split("#")[0].strip() for kind, body in blocks if kind == "" for line in body.splitlines()]
    return python, [line for line in commands if line]


def test_the_section_shows_code_and_commands():
    python, commands = section_blocks()
    assert len(python) == 1 and len(commands) == 2


def test_the_python_runs_and_does_what_it_says():
    (code,) = section_blocks()[0]
    names = {"np": np, "mt": mt}
    exec(compile(code, "docs/tiled.md", "exec"), names)
    attn, report = names["attn"], names["report"]
    assert attn.tape.find("context").op.name == "tiled_attention"
    assert names["weights"].shape == (2, 4, 10, 10) and report.ok
    assert names["fig"].axes


@pytest.mark.parametrize("index, status", [(0, 0), (1, 1)])
def test_every_command_runs_with_the_status_it_describes(index, status, capsys):
    command = section_blocks()[1][index]
    argv = shlex.split(command)
    assert argv[0] == "microtape"
    assert main(argv[1:]) == status
    assert "Tiled attention check" in capsys.readouterr().out
