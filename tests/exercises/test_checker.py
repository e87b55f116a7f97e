"""The checker: numerically fragile answers, one float32 policy, partial credit, ways out other than returning."""

import numpy as np
import pytest
from exercise_helpers import in_float32, naive_softmax

import microtape.exercises as ex
from instructor.solutions import SOLUTIONS

NAMES = ex.list_exercises()
SOFTMAX_INSIDE = ["attention_backward", "masked_softmax_backward", "masked_attention", "attention_dropout_backward"]

# ---------------------------------------------------------------- numerically fragile answers


def _t(x):
    return np.swapaxes(x, -1, -2)


def unstable_attention(q, k, v, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = naive_softmax(q @ _t(k) * scale)
    dp = grad_c @ _t(v)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
    return ds @ k * scale, _t(ds) @ q * scale, _t(p) @ grad_c


def unstable_masked_softmax(s, mask, grad_p):
    p = naive_softmax(s + mask)
    return p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True))


def unstable_masked_attention(q, k, v, mask, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = naive_softmax(q @ _t(k) * scale + mask)
    dp = grad_c @ _t(v)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
    return p @ v, ds @ k * scale, _t(ds) @ q * scale, _t(p) @ grad_c


def unstable_attention_dropout(q, k, v, mask, p, grad_c):
    scale = 1.0 / np.sqrt(q.shape[-1])
    weights = naive_softmax(q @ _t(k) * scale)
    keep = mask / (1 - p)
    dropped = grad_c @ _t(v)
    dp = dropped * keep
    ds = weights * (dp - np.sum(dp * weights, axis=-1, keepdims=True))
    return {
        "grad_dropped_weights": dropped,
        "grad_v": _t(weights * keep) @ grad_c,
        "grad_weights": dp,
        "grad_scaled_scores": ds,
        "grad_q": ds @ k * scale,
        "grad_k": _t(ds) @ q * scale,
    }


UNSTABLE = {
    "attention_backward": unstable_attention,
    "masked_softmax_backward": unstable_masked_softmax,
    "masked_attention": unstable_masked_attention,
    "attention_dropout_backward": unstable_attention_dropout,
}


@pytest.mark.parametrize("name", SOFTMAX_INSIDE)
@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_an_unstabilised_exp_is_rejected(name, hidden):
    with np.errstate(all="ignore"):
        result = ex.check(name, UNSTABLE[name], hidden=hidden, secret="test secret")
    assert not result.ok
    assert result.mistakes == ("exp_not_stabilised",), result.message
    assert "Subtract each row's maximum" in result.message
    assert ex.get(name).cases(hidden)[result.trial].get("large")  # caught by a large-score trial


@pytest.mark.parametrize("name", SOFTMAX_INSIDE)
def test_large_score_trials_keep_the_softmax_informative(name):
    """Rows are shifted, not scaled: the right weights stay soft, so mistakes still show."""
    exercise = ex.get(name)
    for hidden in (False, True):
        large = [case for case in exercise.cases(hidden) if case.get("large")]
        assert large, f"{name}: no large-score trial ({'hidden' if hidden else 'visible'})"
    case = next(case for case in exercise.visible if case.get("large"))
    inputs = exercise.make_inputs(np.random.default_rng(0), case)
    if "s" in inputs:
        scores = inputs["s"]
    else:
        scores = inputs["q"] @ _t(inputs["k"]) / np.sqrt(inputs["q"].shape[-1])
    assert np.max(np.abs(scores)) > 750  # exp overflows float64 above ~709
    spread = scores - scores.max(axis=-1, keepdims=True)
    assert np.median(np.abs(spread)) < 20  # yet each row's softmax is not one-hot


def ignores_eps(x, gamma, grad_y, eps):
    return SOLUTIONS["layernorm_backward"](x, gamma, grad_y, 1e-5)


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_a_layer_norm_that_ignores_eps_is_rejected(hidden):
    result = ex.check("layernorm_backward", ignores_eps, hidden=hidden, secret="test secret")
    assert not result.ok and result.mistakes == ("eps_ignored",), result.message
    assert result.status == "partly right" and result.right_outputs == ("grad_beta",)
    epsilons = {case["eps"] for case in ex.get("layernorm_backward").cases(hidden)}
    assert len(epsilons) >= 4 and 1e-5 in epsilons


@pytest.mark.parametrize("drop", [0.1, 0.25, 0.5])
def test_dropout_with_p_written_in_is_rejected(drop):
    def fixed_p(grad_y, mask, p):
        return grad_y * mask / (1 - drop)

    def fixed_p_attention(q, k, v, mask, p, grad_c):
        return SOLUTIONS["attention_dropout_backward"](q, k, v, mask, drop, grad_c)

    for hidden in (False, True):
        assert not ex.check("dropout_backward", fixed_p, hidden=hidden, secret="test secret").ok
        assert not ex.check("attention_dropout_backward", fixed_p_attention, hidden=hidden, secret="test secret").ok


@pytest.mark.parametrize("name", NAMES)
def test_hidden_trials_differ_from_the_visible_ones(name):
    exercise = ex.get(name)
    assert exercise.hidden != exercise.visible
    assert len(exercise.hidden) >= len(exercise.visible)
    visible = exercise.make_inputs(np.random.default_rng([0, 0, 0]), exercise.visible[0])
    hidden_shapes = []
    for trial, case in enumerate(exercise.hidden):
        inputs = exercise.make_inputs(np.random.default_rng([0, trial, 1]), case)
        hidden_shapes.append(tuple(np.shape(inputs[p]) for p in exercise.parameters))
        for parameter in exercise.parameters:
            if isinstance(visible[parameter], np.ndarray) and visible[parameter].dtype.kind == "f":
                assert not np.array_equal(inputs[parameter], visible[parameter])
    visible_shapes = []
    for trial, case in enumerate(exercise.visible):
        inputs = exercise.make_inputs(np.random.default_rng([0, trial, 0]), case)
        visible_shapes.append(tuple(np.shape(inputs[p]) for p in exercise.parameters))
    assert set(hidden_shapes) - set(visible_shapes), "the hidden trials need shapes the visible ones lack"


def test_an_answer_fitted_to_the_visible_trials_fails_the_hidden_ones():
    # Memorise the visible answers by input shape: right on every visible trial.
    exercise = ex.get("softmax_backward")
    table = {}
    for trial, case in enumerate(exercise.visible):
        inputs = exercise.make_inputs(np.random.default_rng([0, trial, 0]), case)
        table[inputs["p"].shape] = exercise.tape_gradients(inputs)[0]

    def memorised(p, grad_p):
        return table.get(p.shape, np.zeros_like(p))

    assert ex.check("softmax_backward", memorised).ok
    assert not ex.check("softmax_backward", memorised, hidden=True, secret="test secret").ok


# ---------------------------------------------------------------- one float32 policy


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("cast_back", [False, True], ids=["float32-returned", "float32-inside"])
def test_float32_is_rejected_everywhere_as_a_precision_problem(name, cast_back):
    student = in_float32(name, cast_back=cast_back)
    result = ex.check(name, student)
    # A stepped exercise's link that only copies or adds its upstream steps (a sum's, a negation's) is
    # exact in float32 too: right from the student's own upstream step, carried. Every other step is wrong.
    carried = sum(step.points for step in result.steps if step.state == "carried")
    assert all(step.state in ("wrong", "carried") for step in result.steps), result.message
    assert not result.ok and result.score == carried
    assert result.status == ("wrong" if carried == 0 else "partly right")
    assert result.trial == 0  # the same verdict, on the first trial, in every exercise
    assert result.kinds == ("precision",), result.message
    assert "a precision problem, not the maths" in result.message
    assert "go through the chain" not in result.message
    hidden = ex.check(name, student, hidden=True, secret="test secret")
    assert not hidden.ok and hidden.kinds == ("precision",)


def test_a_float32_softmax_that_agrees_to_1e8_is_a_precision_problem():
    def softmax_backward(p, grad_p):
        p32, g32 = p.astype(np.float32), grad_p.astype(np.float32)
        return (p32 * (g32 - np.sum(g32 * p32, axis=-1, keepdims=True))).astype(np.float64)

    result = ex.check("softmax_backward", softmax_backward)
    assert not result.ok
    (problem,) = result.problems
    assert abs(problem.got - problem.expected) < 1e-6
    assert "a precision problem, not the maths: compute in float64" in result.message


def test_a_real_mistake_is_not_called_a_precision_problem():
    result = ex.check("softmax_backward", lambda p, grad_p: p * grad_p)
    assert "precision" not in result.kinds


# ---------------------------------------------------------------- partial credit and the score table


def test_partial_credit_per_output():
    def half_right(q, k, v, grad_c):
        grad_q, grad_k, grad_v = SOLUTIONS["attention_backward"](q, k, v, grad_c)
        return grad_q, grad_k, 2 * grad_v

    result = ex.check("attention_backward", half_right)
    assert result.status == "partly right"
    assert result.outputs == {"grad_q": True, "grad_k": True, "grad_v": False}
    assert (result.score, result.max_score) == (2, 3)
    assert result.right_outputs == ("grad_q", "grad_k") and result.wrong_outputs == ("grad_v",)


def test_an_output_right_on_some_trials_only_earns_nothing():
    def batch_bug(q, k, v, grad_c):
        grad_q, grad_k, grad_v = SOLUTIONS["attention_backward"](q, k, v, grad_c)
        return grad_q, grad_k, grad_v if q.ndim == 2 else grad_v * 0.5

    result = ex.check("attention_backward", batch_bug)
    assert result.trial == 2 and result.outputs["grad_v"] is False and result.score == 2


def test_score_table_separates_not_started_partly_right_and_right():
    def linear_backward(x, weight, grad_y):
        grad_x, grad_weight, _ = SOLUTIONS["linear_backward"](x, weight, grad_y)
        return grad_x, grad_weight, grad_y  # bias not summed

    namespace = {
        "softmax_backward": SOLUTIONS["softmax_backward"],
        "linear_backward": linear_backward,
        "attention_backward": ex.get("attention_backward").stub,
        "dropout_backward": lambda grad_y, mask, p: grad_y,
    }
    names = ["softmax_backward", "linear_backward", "attention_backward", "dropout_backward", "layernorm_backward"]
    table = ex.score(namespace, names)
    assert table.by_status("right") == ["softmax_backward"]
    assert table.by_status("partly right") == ["linear_backward"]
    assert table.by_status("not started") == ["attention_backward", "layernorm_backward"]
    assert table.by_status("wrong") == ["dropout_backward"]
    assert (table.total, table.max_total) == (1 + 2 + 0 + 0 + 0, 1 + 3 + 3 + 1 + 3)
    text = str(table)
    lines = {line.split()[0]: line for line in text.splitlines()}
    assert "right" in lines["softmax_backward"] and "1 / 1" in lines["softmax_backward"]
    assert "partly right" in lines["linear_backward"] and "2 / 3" in lines["linear_backward"]
    assert "right: grad_x, grad_weight; not yet: grad_bias" in lines["linear_backward"]
    assert "not started" in lines["attention_backward"] and "not started" in lines["layernorm_backward"]
    assert lines["total"].endswith("3 / 11")
    html = table._repr_html_()
    assert html.count("<tr") == len(names) + 2 and "partly right" in html


def test_score_of_a_whole_notebook_namespace_and_of_results():
    table = ex.score(dict(SOLUTIONS))
    assert table.total == table.max_total == sum(ex.get(name).max_score for name in NAMES)
    assert list(table.results) == NAMES
    again = ex.score_table({name: ex.check(name, SOLUTIONS[name]) for name in NAMES[:2]})
    assert again.total == ex.get(NAMES[0]).max_score + ex.get(NAMES[1]).max_score
    with pytest.raises(TypeError, match="score\\(namespace\\): expected a dict"):
        ex.score(42)


# ---------------------------------------------------------------- ways out other than returning


def test_a_function_that_never_returns_is_not_checked():
    def forever(p, grad_p):
        while True:
            pass

    result = ex.check("softmax_backward", forever, time_limit=0.3)
    assert result.status == "not checked" and not result.ok and result.score == 0
    assert "did not return within 0.3 s" in result.message


def test_a_loop_that_swallows_exceptions_is_still_stopped():
    def stubborn(p, grad_p):
        while True:
            try:
                while True:
                    pass
            except Exception:  # TimeLimitExceeded is not an Exception
                continue

    result = ex.check("softmax_backward", stubborn, time_limit=0.2)
    assert result.status == "not checked"


@pytest.mark.parametrize("code", [None, 0, 1, "bye"])
def test_a_function_that_exits_is_not_checked(code):
    def exits(p, grad_p):
        raise SystemExit(code)

    result = ex.check("softmax_backward", exits)
    assert result.status == "not checked" and not result.ok
    assert "called exit() or sys.exit(" in result.message
    with pytest.raises(AssertionError, match="not checked"):
        ex.assert_correct("softmax_backward", exits)


def test_keyboard_interrupt_stops_the_check_in_process():
    """In a notebook, Ctrl-C (or a KeyboardInterrupt) must stop the cell, not become a verdict."""

    def interrupted(p, grad_p):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ex.check("softmax_backward", interrupted)


def test_the_time_limit_leaves_no_alarm_behind():
    import signal

    before = signal.getsignal(signal.SIGALRM)
    assert ex.check("softmax_backward", SOLUTIONS["softmax_backward"], time_limit=5).ok
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
