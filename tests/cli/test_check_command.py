"""`microtape check` (microtape.cli.check): options, table on stdout, exit status."""

import argparse

import numpy as np
import pytest

from microtape.check import MISTAKES
from microtape.cli import check as command
from microtape.nn import masks


def run(capsys, *argv):
    parser = command.add_arguments(argparse.ArgumentParser(prog="microtape check"))
    status = command.run(parser.parse_args(list(argv)))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_default_passes_and_prints_the_table(capsys):
    status, out, err = run(capsys)
    assert status == 0, out + err
    assert "Attention backward check" in out
    assert "self-attention: B=2, Tq=5, Tk=5, E=16, H=4 (D=4)" in out
    for label in ("dC", "dP", "dV", "dS", "dQ", "dK", "dW_o", "db_v", "dx"):
        assert f"\n{label} " in out
    assert "OK: all 15 rows agree" in out
    assert err == ""


def test_an_injected_mistake_exits_1_and_names_the_step(capsys):
    status, out, err = run(capsys, "--mistake", "forgot_scale")
    assert status == 1
    assert "FAIL" in out and "<-- first failure" in out
    assert "first failing step: dQ" in err and "Q_heads" in err


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_every_mistake_can_be_shown_from_the_command_line(capsys, name):
    extra = {"dropout": ["--dropout", "0.2"], "mask": ["--causal"]}.get(MISTAKES[name].needs, [])
    status, out, err = run(capsys, "--mistake", name, *extra)
    assert status == 1
    assert f"first failing step: {MISTAKES[name].row} " in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--kv-seq", "3"],
        ["--cross"],
        ["--causal", "--mask-prob", "0.4"],
        ["--dropout", "0.25", "--seed", "5"],
        ["--dtype", "float32", "--kv-seq", "7", "--mask-prob", "0.5"],
        ["--embed", "6", "--heads", "3", "--batch", "1", "--seq", "2", "--fd"],
    ],
)
def test_options_pass(capsys, argv):
    status, out, err = run(capsys, *argv)
    assert status == 0, out + err


def test_cross_and_float32_are_described(capsys):
    status, out, _ = run(capsys, "--kv-seq", "3", "--dtype", "float32")
    assert status == 0
    assert "cross-attention: B=2, Tq=5, Tk=3" in out and "float32" in out and "0.0001" in out
    assert "\ndq " in out and "\ndk " in out and "\ndv " in out


def test_fd_adds_the_third_opinion(capsys):
    status, out, _ = run(capsys, "--fd", "--seq", "3")
    assert status == 0
    assert "FD err" in out and "finite differences" in out


def _main(capsys, *argv):
    """`microtape check ARGV` through the real entry point: (exit status, stderr)."""
    from microtape.cli.main import main

    try:
        status = main(["check", *argv])
    except SystemExit as done:  # the parser's own refusals
        status = done.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--heads", "3"], "--heads"),
        (["--causal", "--kv-seq", "3"], "--causal"),
        (["--mask-prob", "1.5"], "--mask-prob"),
        (["--seq", "0"], "--seq"),
        (["--seed", "-1"], "--seed"),
        (["--embed", "abc"], "--embed"),
        (["--seq", "100000"], "refused"),
        (["--embed", "100000", "--heads", "1"], "embed"),
        (["--mistake", "dropout_mask_not_applied"], "--dropout"),
    ],
)
def test_options_that_make_no_sense_exit_2_in_one_line(capsys, argv, named):
    """A bad option: exit 2 (not 1, which means a row failed), one line naming it, no traceback."""
    status, err = _main(capsys, *argv)
    assert status == 2, argv
    assert err.startswith("microtape check: error:") and named in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unknown_mistake_is_refused_by_the_parser(capsys):
    parser = command.add_arguments(argparse.ArgumentParser())
    with pytest.raises(SystemExit):
        parser.parse_args(["--mistake", "nonsense"])


@pytest.mark.parametrize("causal", [False, True])
def test_random_mask_never_leaves_a_row_empty(causal):
    for seed in range(20):
        rng = np.random.default_rng(seed)
        mask = command.random_mask(6, 6, 0.95, rng, causal=causal)
        total = mask + (masks.causal_mask(6) if causal else 0)
        assert not np.any(np.all(masks.suppressed(total), axis=-1))
        assert set(np.unique(mask)) <= {0.0, masks.NEG_INF}
