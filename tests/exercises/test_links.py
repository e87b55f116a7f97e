"""Link by link: every step judged against the true gradient and against the tape run from the student's own steps.

A step is right (the true gradient), carried (what the tape computes from the
student's own wrong upstream steps: the link is right), wrong (an error at this
link) or missing (not returned). These tests build a small chain with
``ex.derivation`` (so every state can be produced on purpose), and check the
states, the points with ``carry_forward`` on and off, that two independent
errors are both named, that answers are taken as written (a misspelled key
named, extra keys ignored), and that the link values are the tape's own.
"""

import numpy as np
import pytest
from exercise_helpers import making_mistake, teachers_exercises

import microtape as mt
import microtape.exercises as ex
from microtape.exercises.links import link_values


def forward(x, w):
    """a = x w, h = tanh(a), loss = mean(h²): three links."""
    a = x @ w
    h = a.tanh()
    return {"a": a, "h": h, "loss": (h * h).mean()}


def inputs(rng, size):
    n = {"visible": 3, "hidden": 5, "large": 300}[size]
    return {"x": rng.standard_normal((n, 4)), "w": rng.standard_normal((4, 2))}


@pytest.fixture(autouse=True, scope="module")
def chain():
    """The chain, registered for this file's tests only (and once more, not carrying errors forward)."""
    steps = ["h", "a", "w", "x"]
    with teachers_exercises(
        lambda: ex.derivation("links_chain", forward, inputs=inputs, steps=steps),
        lambda: ex.derivation("links_chain_strict", forward, inputs=inputs, steps=steps, carry_forward=False),
    ) as made:
        yield made


def answer(x, w, *, h_factor=1.0, a_factor=1.0, w_factor=1.0, from_true=False):
    """The chain by hand: grad_h = 2h/size, grad_a = grad_h (1 − h²), grad_w = xᵀ grad_a, grad_x = grad_a wᵀ.

    ``*_factor`` puts an error at that link; later steps are computed from the student's own values,
    unless ``from_true`` (then from the true ones, as a student who computed each step separately).
    """
    h = np.tanh(x @ w)
    true_h = 2 * h / h.size
    grad_h = true_h * h_factor
    true_a = true_h * (1 - h**2)
    grad_a = (true_h if from_true else grad_h) * (1 - h**2) * a_factor
    used_a = true_a if from_true else grad_a
    return {"grad_h": grad_h, "grad_a": grad_a, "grad_w": x.T @ used_a * w_factor, "grad_x": used_a @ w.T}


def states(result):
    return {step.name: step.state for step in result.steps}


def test_every_step_right():
    result = ex.check("links_chain", answer)
    assert result.ok and result.score == 4 and set(states(result).values()) == {"right"}
    assert result.wrong_links == () and result.computed_from_wrong == () and result.first_wrong is None


def test_a_wrong_link_then_carried_steps_credited():
    result = ex.check("links_chain", lambda x, w: answer(x, w, h_factor=3.0))
    assert states(result) == {"grad_h": "wrong", "grad_a": "carried", "grad_w": "carried", "grad_x": "carried"}
    assert result.first_wrong == "grad_h" and result.wrong_links == ("grad_h",)
    assert result.computed_from_wrong == ("grad_a", "grad_w", "grad_x")
    assert result.score == 3 and result.status == "partly right" and not result.ok
    assert [step.points for step in result.steps] == [0, 1, 1, 1]


def test_carry_forward_off_gives_carried_steps_no_points():
    result = ex.check("links_chain_strict", lambda x, w: answer(x, w, h_factor=3.0))
    assert states(result) == {"grad_h": "wrong", "grad_a": "carried", "grad_w": "carried", "grad_x": "carried"}
    assert result.score == 0 and result.status == "wrong"
    assert "does not carry errors forward" in result.message


def test_two_independent_wrong_links_are_both_named_in_order():
    result = ex.check("links_chain", lambda x, w: answer(x, w, h_factor=3.0, w_factor=-1.0))
    assert states(result) == {"grad_h": "wrong", "grad_a": "carried", "grad_w": "wrong", "grad_x": "carried"}
    assert result.wrong_links == ("grad_h", "grad_w") and result.first_wrong == "grad_h"
    assert "grad_h is the first wrong step (grad_w is wrong too, at its own link)" in result.message
    # The second one is told against what the tape computes from the student's own steps, with its slip.
    assert "grad_w[" in result.message and "tape from your grad_a " in result.message
    assert "hint — sign flipped (at grad_w)" in result.message
    # And without the first error, the second is still found: never hidden behind the first.
    alone = ex.check("links_chain", lambda x, w: answer(x, w, w_factor=-1.0))
    assert alone.wrong_links == ("grad_w",) and states(alone)["grad_x"] == "right"


def test_on_hidden_trials_a_wrong_link_is_told_in_the_graders_words():
    result = ex.check("links_chain", lambda x, w: answer(x, w, h_factor=3.0, w_factor=-1.0), hidden=True,
                      secret="s3cret")  # fmt: skip
    assert result.wrong_links == ("grad_h", "grad_w") and result.computed_from_wrong == ("grad_a", "grad_x")
    assert "grad_w differs from what the tape computes from your own earlier steps on a hidden trial" in result.message
    assert "grad_w[" not in result.message and "tape from your" not in result.message  # no value, no index


def test_a_step_computed_from_the_true_values_is_right_even_after_a_wrong_one():
    result = ex.check("links_chain", lambda x, w: answer(x, w, h_factor=3.0, from_true=True))
    assert states(result) == {"grad_h": "wrong", "grad_a": "right", "grad_w": "right", "grad_x": "right"}


def test_a_missing_step_takes_the_tapes_value_and_the_others_are_graded():
    def student(x, w):
        values = answer(x, w, a_factor=2.0)
        del values["grad_a"]  # not returned: the later steps are judged from the tape's grad_a
        return values

    result = ex.check("links_chain", student)
    # grad_w, grad_x came from the student's (wrong) grad_a, which the check does not have: wrong links.
    assert states(result) == {"grad_h": "right", "grad_a": "missing", "grad_w": "wrong", "grad_x": "wrong"}
    assert [step.points for step in result.steps] == [1, 0, 0, 0]
    assert "grad_a is missing from the returned dict (0 points for it)" in result.message
    assert "grad_a is missing" in result.message.splitlines()[0]


def test_a_misspelled_key_is_named_with_the_right_one_and_extra_keys_are_ignored():
    def student(x, w):
        values = answer(x, w)
        values["grad_ha"] = values.pop("grad_h")
        values["notes"] = np.zeros(3)
        return values

    result = ex.check("links_chain", student)
    assert states(result) == {"grad_h": "missing", "grad_a": "right", "grad_w": "right", "grad_x": "right"}
    assert result.score == 3
    assert "'grad_ha': did you mean grad_h? (grad_h is missing: not graded under that name)" in result.message
    assert "ignored: 'notes' — not a step of links_chain" in result.message
    # On hidden trials no key the student's code wrote is shown (a key is text it chose).
    hidden = ex.check("links_chain", student, hidden=True, secret="s3cret")
    assert "grad_ha" not in hidden.message and "notes" not in hidden.message
    assert "grad_h is missing (a returned key is close to it: misspelled?)" in hidden.message
    assert "1 other key ignored" in hidden.message


def test_the_link_values_are_the_tapes_reverse_pass_with_the_students_steps_put_in():
    rng = np.random.default_rng(5)
    trial = inputs(rng, "visible")
    exercise = ex.get("links_chain")
    true = dict(zip([o.name for o in exercise.outputs], exercise.tape_gradients(trial), strict=True))
    mine_h = rng.standard_normal(true["grad_h"].shape)
    link = link_values(exercise, trial, {"grad_h": mine_h, "grad_a": None}, true)
    # By the tape directly: h = tanh(x w) seeded with the student's grad_h, a differentiated from there.
    x = mt.Tensor(trial["x"], requires_grad=True)
    w = mt.Tensor(trial["w"], requires_grad=True)
    a = x @ w
    h = a.tanh()
    found = mt.gradients(h, mine_h)
    np.testing.assert_allclose(link["grad_a"], found[a], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(link["grad_w"], found[w], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(link["grad_x"], found[x], rtol=1e-12, atol=1e-15)
    assert link["grad_h"] is true["grad_h"] or np.array_equal(link["grad_h"], true["grad_h"])


def test_the_picture_colours_only_the_judged_steps():
    result = ex.check("links_chain", lambda x, w: answer(x, w, h_factor=3.0, w_factor=-1.0))
    source = result.picture().source
    assert "wrong links grad_h, grad_w; carried grad_a, grad_x" in source
    assert "wrong link" in source and "carried (right from a wrong step)" in source
    missing = ex.check("links_chain", lambda x, w: {k: v for k, v in answer(x, w).items() if k != "grad_a"})
    drawn = missing.picture().source
    assert "wrong link" not in drawn and "carried (right" not in drawn  # right and missing only: nothing red


def test_the_score_table_lists_the_steps_by_state():
    result = ex.check("links_chain", lambda x, w: answer(x, w, h_factor=3.0))
    table = str(ex.score_table([result]))
    assert "carried: grad_a, grad_w, grad_x; wrong: grad_h" in table


@pytest.mark.parametrize("name", ["layernorm_backward_steps", "batchnorm_backward"])
def test_a_wrong_first_step_with_everything_after_it_computed_from_it_is_carried_in_the_lab(name):
    first = ex.get(name).outputs[0].name
    mistake = next(m for m in ex.get(name).mistakes if m.step == first)
    result = ex.check(name, making_mistake(name, mistake.name))
    assert result.wrong_links == (first,), result.message
    assert result.computed_from_wrong and all(states(result)[s] == "carried" for s in result.computed_from_wrong)
    assert result.score == result.max_score - ex.get(name).output(first).points
