"""Stepped exercises: each step of a derivation checked on its own, the first wrong one named, later ones not blamed.

A stepped exercise's student returns the intermediate gradients by name
(``grad_scaled_scores``, ``grad_var``, …). The checker compares every step with the
tape's value for it, names the first wrong step whose own sources were right,
does not blame the steps computed from a wrong one, gives per-step points,
matches named mistakes at their step, and draws the check (the broken edge
marked) without running the student's code again.
"""

import argparse
import csv
import textwrap

import numpy as np
import pytest
from exercise_helpers import making_mistake

import microtape.exercises as ex
from instructor.solutions import SOLUTIONS
from microtape.cli import exercises as command
from microtape.exercises.registry import Exercise, Mistake, Step, register
from microtape.grading.gradebook import Graded, write_gradebook
from microtape.grading.submission import check_file

STEPPED = ["attention_backward_steps", "layernorm_backward_steps", "batchnorm_backward"]
STEPPED_MISTAKES = [(name, mistake.name) for name in STEPPED for mistake in ex.get(name).mistakes]


def _points(result):
    return {step.name: step.points for step in result.steps}


def _changing(name, **factors):
    """The reference solution with some steps multiplied by a factor (a wrong step, and what it was passed to)."""

    def student(*args):
        values = dict(SOLUTIONS[name](*args))
        for step, factor in factors.items():
            values[step] = values[step] * factor
        return values

    return student


def test_the_stepped_exercises_are_in_the_lab_with_their_steps_in_derivation_order():
    assert sorted(name for name in ex.list_exercises() if ex.get(name).stepped) == sorted(STEPPED)
    assert ex.list_exercises()[-1] == "layernorm_backward"  # the stretch exercise stays last
    attention = ex.get("attention_backward_steps")
    assert [o.name for o in attention.outputs] == ["grad_weights", "grad_scaled_scores", "grad_q", "grad_k", "grad_v"]
    assert attention.depends_on("grad_q") == ("grad_weights", "grad_scaled_scores")
    for name in ("layernorm_backward_steps", "batchnorm_backward"):
        steps = [o.name for o in ex.get(name).outputs]
        assert steps == ["grad_xhat", "grad_var", "grad_mean", "grad_x", "grad_gamma", "grad_beta"]
        assert ex.get(name).depends_on("grad_x") == ("grad_xhat", "grad_var", "grad_mean")
        assert len(ex.get(name).mistakes) >= 5
    # The unstepped exercises keep their names and their returns.
    assert not ex.get("attention_backward").stepped and not ex.get("layernorm_backward").stepped


@pytest.mark.parametrize("name", STEPPED)
def test_the_reference_solution_gets_every_step_right(name):
    result = ex.check(name, SOLUTIONS[name], hidden=True, secret="test secret")
    assert result.ok and result.score == result.max_score == len(result.steps)
    assert all(step.state == "right" for step in result.steps)
    assert result.first_wrong is None and result.computed_from_wrong == ()


@pytest.mark.parametrize(("name", "mistake_name"), STEPPED_MISTAKES)
def test_each_named_mistake_is_diagnosed_at_its_step(name, mistake_name):
    mistake = ex.get(name).mistake(mistake_name)
    result = ex.check(name, making_mistake(name, mistake_name))
    assert mistake_name in result.mistakes, result.message
    (at_step,) = [problem for problem in result.problems if problem.output == mistake.step]
    assert mistake_name in [d.name for d in at_step.diagnoses]
    # Diagnosed at its own step only: not at the steps computed from it.
    assert all(mistake_name not in [d.name for d in p.diagnoses] for p in result.problems if p is not at_step)
    assert f"(at {mistake.step}): {mistake.hint}" in result.message
    assert mistake.step not in result.computed_from_wrong
    assert f"{mistake.step} is wrong too" not in result.message
    if "and later:" not in result.message:  # (a crash on a later trial takes every step's verdict)
        assert result.first_wrong == mistake.step, result.message
    assert _points(result)[mistake.step] == 0 and result.score < result.max_score


def test_a_wrong_step_in_the_middle_is_named_and_the_steps_computed_from_it_are_carried_and_credited():
    # The case: a wrong dS scored 2/5, grad_q and grad_k at 0 although computed right from it.
    student = making_mistake("attention_backward_steps", "no_rowsum")
    result = ex.check("attention_backward_steps", student)
    assert result.status == "partly right"
    assert result.first_wrong == "grad_scaled_scores" and result.wrong_links == ("grad_scaled_scores",)
    assert result.computed_from_wrong == ("grad_q", "grad_k")
    assert [(s.name, s.state) for s in result.steps] == [
        ("grad_weights", "right"), ("grad_scaled_scores", "wrong"), ("grad_q", "carried"), ("grad_k", "carried"),
        ("grad_v", "right"),
    ]  # fmt: skip
    assert _points(result) == {"grad_weights": 1, "grad_scaled_scores": 0, "grad_q": 1, "grad_k": 1, "grad_v": 1}
    assert result.score == 4 and not result.ok
    message = result.message
    assert message.startswith("✗ attention_backward_steps: grad_scaled_scores is the first wrong step; "
                              "grad_q and grad_k are carried; grad_weights and grad_v are right.")  # fmt: skip
    assert "grad_q and grad_k are right from your grad_scaled_scores" in message and "error carried forward" in message
    # Only the wrong link's entry is shown; the carried ones are not reported as mistakes.
    assert "grad_scaled_scores[" in message and "grad_q[" not in message and "grad_k[" not in message


def test_a_second_independent_error_is_named_after_the_first():
    # dS without its rowsum term, and dQ without its 1/√d on top: before, the same feedback as dS alone.
    mistake = ex.get("attention_backward_steps").mistake("no_rowsum")

    def student(q, k, v, grad_c):
        values = dict(SOLUTIONS["attention_backward_steps"](q, k, v, grad_c))
        values.update(mistake.fn(q, k, v, grad_c))
        values["grad_q"] = values["grad_q"] * np.sqrt(q.shape[-1])  # the backward scale forgotten
        return values

    result = ex.check("attention_backward_steps", student)
    assert result.wrong_links == ("grad_scaled_scores", "grad_q") and result.computed_from_wrong == ("grad_k",)
    assert "grad_scaled_scores is the first wrong step (grad_q is wrong too, at its own link)" in result.message
    # grad_q is told against what the tape computes from the student's own grad_scaled_scores.
    assert "grad_q[" in result.message and "tape from your grad_scaled_scores" in result.message
    assert _points(result) == {"grad_weights": 1, "grad_scaled_scores": 0, "grad_q": 0, "grad_k": 1, "grad_v": 1}
    alone = ex.check("attention_backward_steps", making_mistake("attention_backward_steps", "no_rowsum"))
    assert alone.message != result.message and alone.score == result.score + 1


def test_in_a_longer_chain_each_wrong_link_is_named_and_the_carried_steps_follow_the_graph():
    # Layer norm: grad_var wrong (its power); grad_mean and grad_x computed right from it: carried.
    result = ex.check("layernorm_backward_steps", making_mistake("layernorm_backward_steps", "var_power_wrong"))
    # (grad_mean does not use grad_var: the path through the variance adds grad_var · mean(−2(x − mu)) = 0)
    assert result.wrong_links == ("grad_var",) and result.computed_from_wrong == ("grad_x",)
    assert {s.name: s.state for s in result.steps}["grad_mean"] == "right" and result.score == 5
    # Three steps each scaled on their own: three wrong links, in derivation order, none hidden.
    student = _changing("layernorm_backward_steps", grad_var=2.0, grad_mean=3.0, grad_x=0.5)
    result = ex.check("layernorm_backward_steps", student)
    assert result.wrong_links == ("grad_var", "grad_mean", "grad_x") and result.computed_from_wrong == ()
    assert "grad_var is the first wrong step (grad_mean and grad_x are wrong too" in result.message
    assert _points(result) == {"grad_xhat": 1, "grad_var": 0, "grad_mean": 0, "grad_x": 0, "grad_gamma": 1,
                               "grad_beta": 1}  # fmt: skip


def test_a_step_right_from_the_true_values_stays_right_when_an_earlier_one_is_wrong():
    student = _changing("attention_backward_steps", grad_scaled_scores=2.0, grad_v=-1.0)
    result = ex.check("attention_backward_steps", student)
    states = {s.name: s.state for s in result.steps}
    assert states == {"grad_weights": "right", "grad_scaled_scores": "wrong", "grad_q": "right", "grad_k": "right",
                      "grad_v": "wrong"}  # fmt: skip
    assert result.wrong_links == ("grad_scaled_scores", "grad_v")
    assert "grad_v is wrong too" in result.message and "grad_v[" in result.message


def test_the_picture_marks_the_broken_edge_and_is_shown_in_a_notebook():
    wrong = ex.check("batchnorm_backward", making_mistake("batchnorm_backward", "var_power_wrong"))
    source = wrong.picture().source
    assert "the first wrong step is grad_var" in source
    assert "wrong link" in source and "carried (right from a wrong step)" in source
    right = ex.check("batchnorm_backward", SOLUTIONS["batchnorm_backward"]).picture().source
    assert "wrong link" not in right and "carried" not in right
    html = wrong._repr_html_()
    assert "<svg" in html and "grad_var" in html
    # An exercise without steps has no picture, and says so.
    with pytest.raises(ValueError, match="not a stepped exercise"):
        ex.check("softmax_backward", SOLUTIONS["softmax_backward"]).picture()


STEPPED_FILE = """
def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

def attention_backward_steps(q, k, v, grad_c):
    scale = 1 / np.sqrt(q.shape[-1])
    p = _softmax(q @ np.swapaxes(k, -1, -2) * scale)
    grad_p = grad_c @ np.swapaxes(v, -1, -2)
    grad_s = p * grad_p                     # the rowsum term forgotten
    return {"grad_weights": grad_p, "grad_scaled_scores": grad_s, "grad_q": grad_s @ k * scale,
            "grad_k": np.swapaxes(grad_s, -1, -2) @ q * scale, "grad_v": np.swapaxes(p, -1, -2) @ grad_c}
"""


def _run(*argv):
    """``microtape exercises ARGV``, parsed as the command line parses it."""
    parser = argparse.ArgumentParser(prog="microtape")
    command.add_arguments(parser.add_subparsers(dest="command").add_parser("exercises"))
    return command.run(parser.parse_args(["exercises", *argv]))


def test_the_command_writes_the_picture_of_the_check(tmp_path, capsys):
    answers = tmp_path / "answers.py"
    answers.write_text("import numpy as np\n" + STEPPED_FILE)
    picture = tmp_path / "where.svg"
    assert _run("check", str(answers), "--name", "attention_backward_steps", "--picture", str(picture)) == 1
    out = capsys.readouterr()
    assert (
        "grad_scaled_scores is the first wrong step" in out.out
        and "hint — missing rowsum term (at grad_scaled_scores)" in out.out
    )
    svg = picture.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    assert "first wrong step is grad_scaled_scores" in svg and "wrong link" in svg
    assert "picture of attention_backward_steps" in out.err
    # A file with no stepped exercise checked to its end: said, and no picture.
    stub = tmp_path / "stub.py"
    stub.write_text(ex.stub_source("batchnorm_backward"))
    assert _run("check", str(stub), "--picture", str(tmp_path / "none.svg")) == 1
    assert "no stepped exercise was checked to its end" in capsys.readouterr().err
    assert not (tmp_path / "none.svg").exists()


def test_a_crash_on_a_later_trial_names_the_line_in_the_students_file(tmp_path):
    answers = tmp_path / "answers.py"
    answers.write_text(
        textwrap.dedent("""
        import numpy as np

        def batchnorm_backward(x, gamma, grad_y, eps):
            if x.shape[0] == 3:
                return np.ones(2) @ np.ones(3)   # crashes on the third trial only
            steps = ("grad_xhat", "grad_var", "grad_mean", "grad_x", "grad_gamma", "grad_beta")
            return {step: np.zeros_like(x) for step in steps}
        """)
    )
    report = check_file(answers, ["batchnorm_backward"], timeout=10)
    message = report.results["batchnorm_backward"].message
    # The first trial is wrong (steps missing), the third crashes: the crash still names the file and line.
    assert "and later: batchnorm_backward raised ValueError (trial 3 of 5" in message
    assert "at line 6 of answers.py, in batchnorm_backward" in message, message

    def softmax_backward(p, grad_p):
        if p.shape[0] == 3:
            raise IndexError("only on the second trial")
        return p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True))

    local = ex.check("softmax_backward", softmax_backward)
    assert "trial 2 of 5" in local.message and f"of {__file__}, in softmax_backward" in local.message
    assert 'raise IndexError("only on the second trial")' in local.message


def test_the_gradebook_has_a_total_row_per_student_and_the_whole_feedback(tmp_path):
    results = {
        "batchnorm_backward": ex.check("batchnorm_backward", making_mistake("batchnorm_backward", "count_minus_one")),
        "softmax_backward": ex.check("softmax_backward", SOLUTIONS["softmax_backward"]),
    }
    book = tmp_path / "book.csv"
    write_gradebook([Graded("ada", tmp_path / "ada.py", results)], book)
    rows = list(csv.DictReader(book.open(encoding="utf-8")))
    assert [(r["student"], r["exercise"], r["points"], r["max"]) for r in rows] == [
        ("ada", "batchnorm_backward", "5", "6"), ("ada", "softmax_backward", "1", "1"), ("ada", "(total)", "6", "7"),
    ]  # fmt: skip
    feedback = rows[0]["message"]
    assert feedback == results["batchnorm_backward"].message
    assert "hint — divided by the wrong count (at grad_x)" in feedback
    kept = Graded("ada", tmp_path / "ada.py", results).to_json()["exercises"]["batchnorm_backward"]
    assert kept["first_wrong"] == "grad_x"
    assert kept["steps"]["grad_x"] == {"points": 0, "max": 1, "state": "wrong"}
    # A pair of columns per step (points, state), filled on the stepped exercise's row only.
    assert rows[0]["grad_x points"] == "0" and rows[0]["grad_x state"] == "wrong"
    assert rows[0]["grad_var state"] == "right" and rows[1]["grad_x state"] == "" and rows[2]["grad_x state"] == ""
    # A grade resumed from its JSON (a rerun) keeps its steps, and so its columns.
    resumed = Graded.from_json(Graded("ada", tmp_path / "ada.py", results).to_json(), tmp_path / "ada.py")
    write_gradebook([resumed], book)
    again = list(csv.DictReader(book.open(encoding="utf-8")))
    assert again[0]["grad_x state"] == "wrong" and again[0]["grad_var points"] == "1"
    assert resumed.results["batchnorm_backward"].wrong_links == ("grad_x",)


def test_a_stepped_exercise_is_refused_when_its_steps_are_out_of_order_or_a_mistake_names_no_step():
    def stub(x):
        raise NotImplementedError

    def make(outputs, mistakes=()):
        return Exercise("stub", "t", stub, lambda rng, case: {}, lambda inputs: (), outputs, mistakes,
                        ({},), ({},), record=lambda inputs: None)  # fmt: skip

    with pytest.raises(AssertionError, match="not before it"):
        register(make((Step("grad_b", "x", after=("grad_a",)), Step("grad_a", "x"))))
    with pytest.raises(AssertionError, match="names no step"):
        register(make((Step("grad_a", "x"),), (Mistake("m", "sign_flipped", "hint", lambda x: {}),)))
    assert "stub" not in ex.EXERCISES
    np.testing.assert_equal(ex.get("batchnorm_backward").depends_on("grad_gamma"), ())
