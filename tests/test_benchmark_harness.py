"""The benchmark harness's own logic (never timings): what it calls, in which order, how often."""

from benchmarks._harness import time_alternating


def test_time_alternating_takes_turns_and_times_each_call_alone():
    calls = []
    steps = {"tape": lambda: calls.append("tape"), "numpy": lambda: calls.append("numpy")}
    times = time_alternating(steps, repeats=4, budget=60.0, warmup=1)
    # One warm-up round, then four rounds, each calling every step once: turns, not blocks, and the
    # order rotating from round to round, so that neither always runs right after the other.
    assert calls == ["tape", "numpy"] * 2 + ["numpy", "tape", "tape", "numpy", "numpy", "tape"]
    assert {name: len(t["cpu"]) for name, t in times.items()} == {"tape": 4, "numpy": 4}
    assert all(len(t["wall"]) == 4 and min(t["wall"]) >= 0 for t in times.values())


def test_time_alternating_rotates_the_order_of_three():
    calls = []
    steps = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    time_alternating(steps, repeats=3, budget=60.0, warmup=0)
    # Each step follows each other one equally often: a b c, b c a, c a b.
    assert "".join(calls) == "abcbcacab"


def test_time_alternating_stops_at_the_budget_but_not_before_min_repeats():
    calls = []
    times = time_alternating({"only": lambda: calls.append(1)}, repeats=1000, budget=0.0, min_repeats=3, warmup=0)
    assert len(times["only"]["cpu"]) == 3 and len(calls) == 3


def test_replay_tape_is_the_seed_calls_arithmetic_bit_for_bit():
    # tape-ops is only a fair split of the seed path's time if it computes exactly what the seed call does.
    import numpy as np

    from benchmarks.attention import _case, _layer, replay_tape

    for dtype in (np.float32, np.float64):
        x, grad_y, params = _case(2, 5, 8, dtype)
        replay = replay_tape(_layer(x, params, 2), x, grad_y)
        attn = _layer(x, params, 2)
        for _ in range(2):  # the replay runs its ops again on each call: the second call must agree too
            expected = attn.forward(x, mask=None), attn.backward(grad_y)
            got = replay()
            assert got.dtype == dtype and np.array_equal(got, expected[1])


def test_replay_tape_runs_every_op_of_the_tape_again():
    import numpy as np

    from benchmarks.attention import _case, _layer, replay_tape

    x, grad_y, params = _case(1, 4, 8, np.float64)
    attn = _layer(x, params, 2)
    replay = replay_tape(attn, x, grad_y)
    before = [node.data for node in attn.tape.nodes]
    replay()
    after = [node.data for node in attn.tape.nodes]
    # Each value is computed anew (a new array) and equal to the recorded one.
    assert all(new is not old and np.array_equal(new, old) for old, new in zip(before, after, strict=True))


def test_python_m_benchmarks_quick_runs_every_part(tmp_path):
    # The smoke test `python -m benchmarks --quick`: every part's code runs (tiny sizes, few repeats) and
    # writes its section; a part that breaks fails here, not in the next full run. Times are not looked at.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "quick.md"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--markdown", str(out)],
        cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = out.read_text(encoding="utf-8")
    for heading in ("## Machine", "## Attention: forward + backward", "## Tiled (flash) attention",
                    "## Scalar engine vs micrograd", "## Graph rendering", "## Transformer"):  # fmt: skip
        assert heading in report, heading
    assert "failed" not in report.lower(), [line for line in report.splitlines() if "failed" in line.lower()]


def test_the_numeric_cheat_benchmark_times_a_forward_on_each_large_trial():
    """benchmarks/numeric_cheat.py: each forward runs in complex arithmetic on its exercise's large trial."""
    from benchmarks.numeric_cheat import FORWARDS, large_trial, measure

    for name in FORWARDS:
        exercise, inputs = large_trial(name)
        assert set(FORWARDS[name][1]) | set(FORWARDS[name][2]) <= set(exercise.parameters) | set(inputs), name
        entries, per_forward, tape = measure(name, repeats=1)
        assert entries >= 40_000 and per_forward > 0 and tape > 0, name
