"""The `microtape` command line, run as a user would: `python -m microtape ...` in a subprocess."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def microtape(*args, cwd=None):
    """Run `python -m microtape ARGS`; return the finished process (stdout/stderr as text)."""
    return subprocess.run(
        [sys.executable, "-m", "microtape", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin:/usr/local/bin", "PYTHONPATH": str(REPO)},
        timeout=300,
    )


def test_demo_writes_every_file_it_promises(tmp_path):
    """`microtape demo --out DIR` writes the graphs, frames and heatmaps, and prints the check table."""
    out = tmp_path / "pictures"
    done = microtape("demo", "--out", str(out))
    assert done.returncode == 0, done.stderr
    for name in ("graph_forward.svg", "graph_backward.svg", "attention_heatmaps.png", "grad_heatmaps.png"):
        path = out / name
        assert path.is_file() and path.stat().st_size > 1000, name
        assert str(path) in done.stdout  # it says where each file went
    frames = sorted((out / "backward_frames").glob("frame_*.svg"))
    assert len(frames) > 5
    assert (out / "backward_frames" / "index.html").is_file()
    assert (out / "graph_forward.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert (out / "attention_heatmaps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The step-check table and the tape listing.
    for text in ("dS", "dQ", "scaled_scores", "all 15 rows agree", "softmax("):
        assert text in done.stdout


def test_check_exits_0_when_every_step_agrees():
    done = microtape("check")
    assert done.returncode == 0, done.stderr
    assert "dS" in done.stdout and "dK" in done.stdout


@pytest.mark.parametrize(("mistake", "row"), [("forgot_scale", "dQ"), ("forgot_rowsum", "dS")])
def test_check_exits_1_and_names_the_first_failing_step(mistake, row):
    """The teaching hook `--mistake` injects a wrong formula: exit 1, first failing step on stderr."""
    done = microtape("check", "--mistake", mistake)
    assert done.returncode == 1
    assert row in done.stderr


def test_check_options_cross_causal_fd():
    assert microtape("check", "--kv-seq", "7", "--fd").returncode == 0
    assert microtape("check", "--causal", "--dropout", "0.2", "--dtype", "float32").returncode == 0


def test_heatmap_of_dropped_weights_needs_dropout(tmp_path):
    # Without dropout the "dropped" weights are the weights: say so instead of drawing them.
    done = microtape("heatmap", str(tmp_path / "none.png"), "--which", "dropped")
    assert done.returncode == 2 and "no dropout" in done.stderr and "--dropout" in done.stderr
    assert not (tmp_path / "none.png").exists()
    done = microtape("heatmap", str(tmp_path / "d.png"), "--which", "weights", "dropped", "--dropout", "0.2")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "d.png").stat().st_size > 1000


def test_graph_and_heatmap_write_one_picture_each(tmp_path):
    done = microtape("graph", str(tmp_path / "g.svg"), "--backward")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "g.svg").read_text().count('<g id="node') > 10
    done = microtape("heatmap", str(tmp_path / "h.png"), "--which", "grad_scores")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "h.png").stat().st_size > 1000


def test_demo_without_dot_still_writes_heatmaps_and_dot_sources(tmp_path):
    """No Graphviz on PATH: heatmaps and .dot sources are written, and the message says how to install it."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    out = tmp_path / "pictures"
    done = subprocess.run(
        [sys.executable, "-m", "microtape", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        env={"MPLBACKEND": "Agg", "PATH": str(bare), "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "attention_heatmaps.png").is_file()
    assert (out / "graph_forward.svg.dot").is_file() or list(out.glob("*.dot"))
    assert "apt-get install graphviz" in done.stderr
    assert "Traceback" not in done.stderr


def test_exercises_list_and_help():
    done = microtape("exercises", "list")
    assert done.returncode == 0
    assert "softmax_backward" in done.stdout
    done = microtape("--help")
    assert done.returncode == 0 and "demo" in done.stdout and "check" in done.stdout


def test_console_script_is_the_same_program():
    """`microtape` (the installed console script) exists when the package is installed."""
    script = Path(sys.executable).parent / "microtape"
    if not script.exists():
        pytest.skip("microtape is not pip-installed in this interpreter (make test installs it)")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "exercises" in done.stdout


def test_graph_and_heatmap_take_the_layer_options_of_check(tmp_path):
    """--embed/--heads/--batch/--seq/--causal/--dropout/--seed choose the layer drawn, as for `check`."""
    import microtape as mt
    from microtape.viz.demo import demo_attention

    options = ["--embed", "8", "--heads", "2", "--seq", "3"]
    done = microtape("graph", str(tmp_path / "full.dot"), *options, "--no-causal")
    assert done.returncode == 0, done.stderr
    assert microtape("graph", str(tmp_path / "causal.dot"), *options).returncode == 0
    full, causal = (tmp_path / "full.dot").read_text(), (tmp_path / "causal.dot").read_text()
    assert "[1,3,8]" in full, "the drawn input has the chosen [batch, seq, embed]"
    assert "causal_mask" in causal and "causal_mask" not in full, "--no-causal draws attention without the mask"
    attn, _, _ = demo_attention(embed=8, heads=2, seq=3, causal=False)
    weights = tmp_path / "w.png"
    done = microtape("heatmap", str(weights), "--heads", "2", "--seq", "4", "--batch", "2", "--seed", "5")
    assert done.returncode == 0, done.stderr
    default = tmp_path / "d.png"
    assert microtape("heatmap", str(default), "--heads", "2", "--seq", "4", "--batch", "2").returncode == 0
    assert weights.read_bytes() != default.read_bytes(), "--seed changes the layer drawn"
    assert isinstance(attn, mt.nn.MultiHeadAttention)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["demo", "--out", "FILE"], "--out"),
        (["demo", "--out", "/proc/microtape-cannot-write-here"], "demo"),
        (["graph", "--step", "99999"], "step"),
        (["graph", "--step", "-1"], "--step"),
        (["graph", "--seq", "0"], "--seq"),
        (["graph", "--seq", "100000"], "--seq"),
        (["heatmap", "--seq", "0"], "--seq"),
        (["graph", "picture.txt"], "file"),
        (["heatmap", "picture.dot"], "file"),
        (["heatmap", "--which", "dropped"], "no dropout"),
        (["heatmap", "--dropout", "1.5"], "--dropout"),
        (["graph", "--embed", "8", "--heads", "3"], "--heads"),
        (["heatmap", "--heads", "0"], "--heads"),
        (["heatmap", "--seed", "-2"], "--seed"),
        (["check", "--seed", "-1"], "--seed"),
        (["check", "--embed", "100000", "--heads", "1"], "embed"),
        (["train", "--steps", "0"], "--steps"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(argv, named, tmp_path):
    """Every bad option or path: one line on stderr naming it, exit 2 (1 means a check failed), no traceback."""
    existing = tmp_path / "existing.txt"
    existing.write_text("a file, not a folder")
    argv = [str(existing) if a == "FILE" else a for a in argv]
    done = microtape(*argv, cwd=tmp_path)
    assert done.returncode == 2, (argv, done.stderr)
    assert "Traceback" not in done.stderr and named in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    with_debug = microtape("--debug", *argv, cwd=tmp_path)
    if argv[0] in ("demo", "graph") and "--step" in argv and argv[-1] == "99999":
        assert "Traceback" in with_debug.stderr  # --debug shows where a run-time refusal came from
