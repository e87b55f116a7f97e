"""The benchmark harness's own logic (never timings): what it calls, in which order, how often."""

from benchmarks._harness import time_alternating


def test_time_alternating_takes_turns_and_times_each_call_alone():
    calls = []
    steps = {"tape": lambda: calls.append("tape"), "numpy": lambda: calls.append("numpy")}
    times = time_alternating(steps, repeats=4, budget=60.0, warmup=1)
    # One warm-up round, then four rounds, each calling every step once, in order: turns, not blocks.
    assert calls == ["tape", "numpy"] * 5
    assert {name: len(t["cpu"]) for name, t in times.items()} == {"tape": 4, "numpy": 4}
    assert all(len(t["wall"]) == 4 and min(t["wall"]) >= 0 for t in times.values())


def test_time_alternating_stops_at_the_budget_but_not_before_min_repeats():
    calls = []
    times = time_alternating({"only": lambda: calls.append(1)}, repeats=1000, budget=0.0, min_repeats=3, warmup=0)
    assert len(times["only"]["cpu"]) == 3 and len(calls) == 3
