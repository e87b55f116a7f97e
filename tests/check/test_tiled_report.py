"""mt.check.tiled_report and `microtape check --block-size`: the tile walk, its verdicts, its seeded mistakes."""

import argparse

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_mask

import microtape as mt
from microtape.check import TILED_MISTAKES, tiled_report
from microtape.cli import check as command
from microtape.nn.attention import tiled


def layer_and_input(T=6, embed=8, heads=2, block_size=2, seed=0, batch=1, **options):
    attn = mt.nn.MultiHeadAttention(embed, heads, seed=seed, block_size=block_size, **options)
    return attn, np.random.default_rng(seed).standard_normal((batch, T, embed))


@settings(max_examples=15, deadline=None)
@given(
    q_len=st.integers(1, 6),
    k_len=st.integers(1, 6),
    cross=st.booleans(),
    causal=st.booleans(),
    block_size=st.integers(1, 7),
    dropout=st.sampled_from([0.0, 0.4]),
    data=st.data(),
)
def test_every_row_agrees_on_drawn_configurations(q_len, k_len, cross, causal, block_size, dropout, data):
    """Masks with -inf and -1e9, rows seeing only later keys, dropout, causal, cross: every row agrees."""
    k_len = k_len if cross else q_len
    causal = causal and q_len == k_len
    mask = data.draw(attention_mask(q_len, k_len, causal), label="mask")
    attn = mt.nn.MultiHeadAttention(6, 3, dropout=dropout, causal=causal, block_size=block_size, seed=q_len)
    rng = np.random.default_rng(k_len)
    query = rng.standard_normal((2, q_len, 6))
    key = value = rng.standard_normal((2, k_len, 6)) if cross else None
    report = tiled_report(attn, query, key, value, mask)
    assert report.ok, str(report)


def test_the_rows_follow_the_kernel_tile_by_tile():
    """3·tiles forward rows in forward order, O, L, D, 3·tiles backward rows in backward order, totals, layer."""
    attn, x = layer_and_input(T=7, block_size=3, causal=True)
    report = tiled_report(attn, x)
    schedule = tiled.TileSchedule(7, 7, 3, causal=True)
    tags = lambda tiles: [f"[q{t.q_block},k{t.k_block}]" for t in tiles]  # noqa: E731
    forward = [q + tag for tag in tags(schedule.forward_order()) for q in ("m", "l", "acc")]
    backward = [q + tag for tag in tags(schedule.backward_order()) for q in ("dV", "dK", "dQ")]
    layer = ["dW_o", "db_o", "dW_q", "db_q", "dW_k", "db_k", "dW_v", "db_v", "dx"]
    assert [row.label for row in report] == forward + ["O", "L", "D"] + backward + ["dV", "dK", "dQ"] + layer
    assert report.ok and report.schedule == schedule
    assert report.config["tiles_computed"] == 6 and report.config["tiles_skipped"] == 3
    assert report["acc[q1,k1]"].shape == (2, 3, 4)  # [B·H, rows of the block, D]
    text = str(report)
    assert "|tiled|" in text and "|standard|" in text and "tiles of 3: 6 of 9 computed, 3 skipped (causal)" in text
    assert "max|tiled - standard|" in report._repr_html_()
    assert report.to_dict()["schedule"] == str(schedule)


@pytest.mark.parametrize("name", sorted(TILED_MISTAKES))
def test_each_seeded_mistake_is_caught_where_it_starts(name):
    """The first failing row is the mistake's quantity; every row before it agrees."""
    attn, x = layer_and_input(T=8, block_size=2, seed=3)
    report = tiled_report(attn, x, mistakes=name)
    mistake = TILED_MISTAKES[name]
    assert not report.ok
    first = report.first_failing_row
    assert first.label.split("[")[0] == mistake.quantity
    assert first.formula == mistake.formula and name in first.note
    before = report.rows[: report.rows.index(first)]
    assert before and all(row.passed for row in before)
    assert all(row.passed for row in report.rows[-9:])  # the layer itself is right: the mistake is in the walk


def test_forgot_rescale_fails_exactly_where_the_running_max_grows():
    """The accumulator goes wrong at the first key block that raises some row's max, not before."""
    attn, x = layer_and_input(T=8, block_size=2, seed=3)
    right, wrong = tiled_report(attn, x), tiled_report(attn, x, mistakes={"forgot_rescale"})
    for a in range(4):
        grew = False
        for b in range(4):
            tag = f"[q{a},k{b}]"
            if b:
                grew = grew or bool(np.any(right["m" + tag].analytic > right[f"m[q{a},k{b - 1}]"].analytic))
            assert wrong["m" + tag].passed and wrong["l" + tag].passed
            assert wrong["acc" + tag].passed == (not grew), tag


def test_the_report_leaves_the_layer_as_it_was():
    attn, x = layer_and_input(dropout=0.3)
    attn(x)
    tape, calls = attn.tape, attn._dropout_calls
    report = tiled_report(attn, x)
    assert attn.tape is tape and attn._dropout_calls == calls
    assert report.tiled is not attn and report.tiled.tape.find("context").op.name == "tiled_attention"
    np.testing.assert_array_equal(report.tiled.dropout_keep, report.standard.dropout_keep)


def test_a_standard_layer_is_checked_with_an_explicit_block_size():
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 5, 8))
    with pytest.raises(ValueError, match="block_size=None"):
        tiled_report(attn, x)
    assert tiled_report(attn, x, block_size=2).ok
    assert attn.block_size is None


def test_float32_passes_at_its_tolerance():
    attn, x = layer_and_input(T=9, embed=16, heads=4, block_size=4, causal=True, dtype=np.float32)
    report = tiled_report(attn, x)
    assert report.ok and report.atol == 1e-4


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"mistakes": "forgot_scale"}, ValueError, "unknown mistake 'forgot_scale'; known: forgot_rescale"),
        ({"mistakes": "forgot_rescale", "block_size": 8}, ValueError, "changes nothing when every query block"),
        ({"block_size": 0}, ValueError, r"block_size=0"),
        ({"tolerance": 2}, ValueError, "tolerance=2"),
        ({"seed": 1.5}, ValueError, "seed=1.5"),
        ({"grad_output": np.ones((1, 5, 8))}, ValueError, "grad_output has shape"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(kwargs, error, match):
    attn, x = layer_and_input()
    with pytest.raises(error, match=match):
        tiled_report(attn, x, **kwargs)
    assert attn.tape is None


def test_too_many_tiles_are_refused():
    attn, x = layer_and_input(T=40, block_size=2)
    with pytest.raises(ValueError, match="more than 256 tiles"):
        tiled_report(attn, x)


def test_not_a_layer():
    with pytest.raises(TypeError, match="expected a MultiHeadAttention"):
        tiled_report("attn", np.zeros((1, 2, 8)))


# ---------------------------------------------------------------- microtape check --block-size


def run(capsys, *argv):
    parser = command.add_arguments(argparse.ArgumentParser(prog="microtape check"))
    status = command.run(parser.parse_args(list(argv)))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["--block-size", "16"],
        ["--block-size", "2", "--causal", "--dropout", "0.2", "--mask-prob", "0.3", "--seq", "7"],
        ["--block-size", "3", "--kv-seq", "7", "--dtype", "float32"],
    ],
)
def test_check_block_size_passes(capsys, argv):
    status, out, err = run(capsys, *argv)
    assert status == 0, out + err
    assert "Tiled attention check" in out and "OK: all" in out and err == ""


def test_check_block_size_with_a_mistake_exits_1_naming_the_step(capsys):
    status, out, err = run(capsys, "--block-size", "2", "--mistake", "forgot_rescale")
    assert status == 1
    assert "<-- first failure" in out
    assert "first failing step: acc[" in err and "(quantity running output)" in err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--mistake", "forgot_rescale"], "a mistake of the tiled kernel: add --block-size N"),
        (["--block-size", "2", "--mistake", "forgot_scale"], "with --block-size use one of forgot_delta"),
        (["--block-size", "2", "--fd"], "the tiled check has none"),
        (["--block-size", "16", "--mistake", "forgot_rescale"], "changes nothing when every query block"),
    ],
)
def test_check_block_size_usage_errors_exit_2(capsys, argv, match):
    status, out, err = run(capsys, *argv)
    assert status == 2 and match in err and out == ""


def test_check_block_size_is_wired_into_the_command_line(capsys):
    from microtape.cli.main import main

    assert main(["check", "--block-size", "16"]) == 0
    assert "Tiled attention check" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "--block-size", "zero"])
    assert exit_info.value.code == 2
    assert "argument --block-size: expected an integer, got 'zero'" in capsys.readouterr().err


# ---------------------------------------------------------------- the attention report on a tiled layer


def test_attention_report_checks_a_tiled_layer_against_the_hand_derived_chain():
    """Tape route = the tiled VJP, analytic route = the textbook chain on recomputed weights: they must agree.

    The tiled tape has no score-sized steps, so the report lines up dC, dV, dQ, dK and the layer's
    gradients — with finite differences as a third opinion — and still catches an analytic mistake.
    """
    attn, x = layer_and_input(T=7, block_size=3, causal=True, dropout=0.2)
    report = mt.check.attention_report(attn, x, finite_differences=True)
    assert report.ok, str(report)
    labels = [row.label for row in report]
    assert labels[:4] == ["dC", "dV", "dQ", "dK"] and "dS" not in labels and labels[-1] == "dx"
    assert all(row.fd_agrees for row in report)
    wrong = mt.check.attention_report(attn, x, mistakes={"forgot_scale"})
    assert wrong.first_failure == "dQ"
