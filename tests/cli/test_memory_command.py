"""`microtape memory`: the default attention's memory pictures, written where asked."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def microtape(*args):
    """Run `python -m microtape ARGS` as a user would; the finished process (text output)."""
    return subprocess.run(
        [sys.executable, "-m", "microtape", *args],
        capture_output=True,
        text=True,
        env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin:/usr/local/bin", "PYTHONPATH": str(REPO)},
        timeout=300,
    )


def test_memory_writes_timeline_and_saved_values_graph(tmp_path):
    out = tmp_path / "memory"
    done = microtape("memory", "--out", str(out))
    assert done.returncode == 0, done.stderr
    for name in ("memory_timeline.png", "memory_compare.png", "memory_scaling.png"):
        path = out / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert str(path) in done.stdout
    svg = (out / "saved_values.svg").read_text()
    assert svg.lstrip().startswith(("<?xml", "<svg"))
    assert "saved for backward" in svg and "weights" in svg
    # Readable where the docs and a notebook cell show it: 900 px wide.
    from microtape.viz.fit import NOTEBOOK_WIDTH, READABLE_PX, smallest_text_px

    assert smallest_text_px(svg, NOTEBOOK_WIDTH) >= READABLE_PX
    assert "at its peak" in done.stdout


def test_memory_refuses_an_output_it_cannot_write(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = microtape("memory", "--out", str(blocker))
    assert done.returncode == 2
    assert "a-file" in done.stderr and "Traceback" not in done.stderr
