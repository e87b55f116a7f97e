"""Progress bars: tqdm's on a terminal (and in Jupyter), nothing in a log or without tqdm.

`microtape train`, the frames of a big tape and `python -m benchmarks` all go
through microtape.viz.progress; these tests drive it with a fake terminal.
"""

import io
import sys
import types

import pytest

from microtape.cli.main import main
from microtape.viz.frames import _drawing
from microtape.viz.progress import Quiet, progress, watched

tqdm = pytest.importorskip("tqdm", reason="the progress extra (make installs it)")


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_tqdms_bar_with_its_count_and_postfix():
    terminal = FakeTerminal()
    with progress(total=4, desc="reverse", unit="step", stream=terminal) as bar:
        assert isinstance(bar, tqdm.tqdm)
        for _ in range(4):
            bar.set_postfix(loss="0.5000", refresh=False)
            bar.update()
    text = terminal.getvalue()
    assert "reverse" in text and "4/4" in text and "loss=0.5000" in text and "step" in text


def test_a_log_gets_nothing_but_the_bar_still_counts_and_iterates():
    log = io.StringIO()
    bar = progress(["a", "b", "c"], desc="grading", stream=log)
    assert isinstance(bar, Quiet) and bar.total == 3
    assert list(bar) == ["a", "b", "c"] and bar.n == 3
    with progress(total=10, stream=log) as moved:
        moved.set_postfix(loss=1.0)
        moved.update(4)
        assert moved.n == 4
    assert log.getvalue() == ""


def test_without_tqdm_a_terminal_gets_the_quiet_bar(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` now raises ImportError
    terminal = FakeTerminal()
    bar = progress(range(5), stream=terminal)
    assert isinstance(bar, Quiet) and sum(bar) == 10
    assert terminal.getvalue() == ""


def test_short_work_stays_quiet_with_at_least():
    terminal = FakeTerminal()
    assert isinstance(progress(range(10), at_least=50, stream=terminal), Quiet)
    assert isinstance(progress(total=None, at_least=50, stream=terminal), Quiet)  # unknown length: no bar
    assert not isinstance(progress(range(50), at_least=50, stream=terminal), Quiet)


def test_a_jupyter_kernel_is_watched_even_though_its_stream_is_no_terminal(monkeypatch):
    log = io.StringIO()
    assert not watched(log)
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert watched(log)
    shell.config = {}  # a terminal IPython: not a kernel
    assert not watched(log)


def test_quiet_write_prints_above_where_a_bar_would_be(capsys):
    Quiet().write("a table row")
    assert capsys.readouterr().out == "a table row\n"


def test_train_draws_its_bar_on_a_terminal(tmp_path, monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    tiny = ["--steps", "12", "--embed", "8", "--heads", "2", "--ff-dim", "8", "--batch", "8", "--held-out", "20"]
    assert main(["train", *tiny, "--eval-every", "6", "--out", str(tmp_path)]) == 0
    text = terminal.getvalue()
    assert "reverse" in text and "12/12" in text and "loss=" in text and "acc=" in text


def test_many_frames_get_a_bar_a_few_do_not(monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert list(_drawing(iter(range(10)), 10)) == list(range(10))
    assert terminal.getvalue() == ""
    assert list(_drawing(iter(range(60)), 60)) == list(range(60))
    assert "drawing frames" in terminal.getvalue()
