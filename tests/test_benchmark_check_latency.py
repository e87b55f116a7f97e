"""benchmarks/check_latency.py runs: the right answers check right, each stepped wrong link is timed."""

from benchmarks import check_latency


def test_the_notebook_figures_check_every_exercise_of_the_correct_sample_right():
    rows = check_latency.notebook_figures()
    assert len(rows) >= 31 and {status for *_, status in rows} == {"right"}
    assert all(first > 0 and again > 0 for _, first, again, _, _ in rows)


def test_the_wrong_link_figures_time_each_stepped_exercise_with_its_first_mistake():
    rows = {name: score for name, _, _, score in check_latency.wrong_link_figures()}
    # gamma forgotten breaks grad_xhat; every later step is carried and credited: 5 of 6.
    assert rows["layernorm_backward_steps"] == "5/6" and rows["batchnorm_backward"] == "5/6"
    assert "attention_backward_steps" in rows
