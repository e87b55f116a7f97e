"""The classroom exercises: solutions pass, known mistakes get their own hint, bad answers get clear words.

The checker's reference is the tape (each exercise builds its forward from
microtape Tensors); the reference solutions in ``microtape.exercises.solutions``
are plain numpy. So "every solution passes" is also an independent check of
the engine, and "every mistaken variant is diagnosed as itself" checks that
the hints come from comparisons that tell the mistakes apart.
"""

import argparse
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import microtape.exercises as ex
from microtape.exercises import command, solutions

NAMES = ex.list_exercises()
MISTAKES = [(name, mistake.name) for name in NAMES for mistake in ex.get(name).mistakes]


def test_catalogue():
    assert NAMES == [
        "softmax_backward",
        "linear_backward",
        "attention_backward",
        "masked_softmax_backward",
        "dropout_backward",
        "layernorm_backward",
    ]
    assert "layernorm_backward" not in ex.list_exercises(include_stretch=False)
    assert list(ex.EXERCISES) == NAMES
    assert set(solutions.SOLUTIONS) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_stub_is_a_prompt_and_reports_not_implemented(name):
    exercise = ex.get(name)
    assert exercise.prompt and "Return" in exercise.prompt
    source = ex.stub_source(name)
    assert source.startswith(f"def {name}(") and "raise NotImplementedError" in source
    result = ex.check(name, exercise.stub)
    assert not result.ok
    assert "not written yet" in result.message
    assert isinstance(result.exception, NotImplementedError)


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes(name):
    result = ex.check(name, solutions.SOLUTIONS[name], trials=5)
    assert result.ok, result.message
    assert result.trials_run == 5
    assert result.max_abs_error < 1e-12
    assert result.message.startswith(f"✓ {name}")
    assert ex.assert_correct(name, solutions.SOLUTIONS[name]).ok


@pytest.mark.parametrize("name", NAMES)
def test_more_trials_and_other_seeds_pass(name):
    assert ex.check(name, solutions.SOLUTIONS[name], trials=12, seed=7).ok


@pytest.mark.parametrize(("name", "mistake_name"), MISTAKES)
def test_each_known_mistake_fails_with_its_hint(name, mistake_name):
    mistake = ex.get(name).mistake(mistake_name)
    result = ex.check(name, mistake.fn)
    assert not result.ok
    assert mistake_name in result.mistakes, result.message
    assert mistake.hint in result.message
    assert f"hint — {mistake.label}" in result.message
    assert result.problems and all(problem.index is not None or problem.what == "shape" for problem in result.problems)
    with pytest.raises(AssertionError, match="hint"):
        ex.assert_correct(name, mistake.fn)


def test_required_kinds_of_mistake_are_covered():
    kinds = {(name, ex.get(name).mistake(m).kind) for name, m in MISTAKES}
    for pair in [
        ("attention_backward", "missing_scale"),
        ("attention_backward", "missing_rowsum"),
        ("attention_backward", "transposed"),
        ("attention_backward", "wrong_axis"),
        ("softmax_backward", "missing_rowsum"),
        ("softmax_backward", "wrong_axis"),
        ("linear_backward", "transposed"),
        ("linear_backward", "wrong_axis"),
        ("masked_softmax_backward", "mask_not_applied"),
        ("dropout_backward", "dropout_scale_missing"),
        ("dropout_backward", "mask_not_applied"),
    ]:
        assert pair in kinds


def test_feedback_names_the_output_and_the_first_wrong_entry():
    def student(q, k, v, grad_c):
        grad_q, grad_k, grad_v = solutions.attention_backward(q, k, v, grad_c)
        grad_v = grad_v.copy()
        grad_v[..., 1, 2] += 0.5  # one wrong entry
        return grad_q, grad_k, grad_v

    result = ex.check("attention_backward", student)
    assert not result.ok
    assert [problem.output for problem in result.problems] == ["grad_v"]
    problem = result.problems[0]
    assert problem.index == (1, 2)
    assert problem.got == pytest.approx(problem.expected + 0.5)
    assert "grad_v[1, 2]" in result.message and "1 of 16 differ" in result.message
    assert "grad_q and grad_k are right" in result.message
    assert "no known mistake matches" in result.message


def test_generic_diagnoses():
    def negated(p, grad_p):
        return -solutions.softmax_backward(p, grad_p)

    def swapped(q, k, v, grad_c):
        grad_q, grad_k, grad_v = solutions.attention_backward(q, k, v, grad_c)
        return grad_k, grad_q, grad_v

    def doubled(grad_y, mask, p):
        return 2 * solutions.dropout_backward(grad_y, mask, p)

    def kept_axis(x, weight, grad_y):
        grad_x, grad_weight, _ = solutions.linear_backward(x, weight, grad_y)
        return grad_x, grad_weight, grad_y.sum(axis=0, keepdims=True)

    def transposed(x, weight, grad_y):
        grad_x, grad_weight, grad_bias = solutions.linear_backward(x, weight, grad_y)
        return grad_x, grad_weight.T, grad_bias

    assert ex.check("softmax_backward", negated).mistakes == ("sign_flipped",)
    assert ex.check("attention_backward", swapped).mistakes == ("swapped_outputs",)
    result = ex.check("dropout_backward", doubled)
    assert result.mistakes == ("constant_factor",) and "2 × the right answer" in result.message
    result = ex.check("linear_backward", kept_axis)
    assert result.mistakes == ("extra_axis",) and "shape [1, 3], expected [3]" in result.message
    assert ex.check("linear_backward", transposed).kinds == ("transposed",)
    assert ex.check("softmax_backward", lambda p, grad_p: np.zeros_like(p)).mistakes == ("placeholder",)


def test_shape_error_gives_a_shape_message_not_a_traceback():
    def wrong_shape(x, weight, grad_y):
        return grad_y @ weight, np.zeros((2, 2)), grad_y.sum(axis=0)

    result = ex.check("linear_backward", wrong_shape)
    assert not result.ok and result.exception is None
    assert "grad_weight has shape [2, 2], expected [3, 3] — the shape of weight" in result.message
    assert "Traceback" not in result.message


@pytest.mark.parametrize(
    ("returned", "words"),
    [
        (None, "returned None — is the `return` missing?"),
        ((np.zeros(3), np.zeros(3)), "returned 2 values; expected 3: (grad_x, grad_weight, grad_bias)"),
        (np.zeros(3), "returned one ndarray; expected a tuple of 3"),
        (("a", "b", "c"), "grad_x is a str"),
        ({"grad_x": 1}, "the returned dict lacks grad_weight, grad_bias"),
    ],
)
def test_malformed_returns_are_explained(returned, words):
    result = ex.check("linear_backward", lambda x, weight, grad_y: returned)
    assert not result.ok
    assert words in result.message


def test_exception_inside_the_student_function_is_reported_with_the_exercise_name():
    def softmax_backward(p, grad_p):
        rowsum = np.sum(grad_p * p, axis=-1)
        return p * (grad_p - rowsum[:, :, None])  # fails on 2-D input

    result = ex.check("softmax_backward", softmax_backward)
    assert not result.ok
    assert isinstance(result.exception, IndexError)
    assert result.message.startswith("✗ softmax_backward raised IndexError (trial 1 of 5: p [4, 4], grad_p [4, 4])")
    assert "rowsum[:, :, None]" in result.message  # the line of the student's code


def test_batch_only_failure_names_the_trial_and_shapes():
    def one_head_only(q, k, v, grad_c):
        if q.ndim == 3:
            q = q.T  # a classic: .T reverses every axis
        return solutions.attention_backward(q, k, v, grad_c)

    result = ex.check("attention_backward", one_head_only)
    assert not result.ok and result.trial == 2
    assert "trial 3 of 5: q [2, 4, 3]" in result.message


def test_a_function_with_the_wrong_arguments_is_told_so():
    result = ex.check("softmax_backward", lambda p: p)
    assert not result.ok
    assert "it needs 2 positional arguments" in result.message


def test_inputs_are_not_shared_with_the_student():
    seen = []

    def greedy(p, grad_p):
        seen.append(p.copy())
        p[...] = 0.0  # vandalise the input
        grad_p[...] = 0.0
        return np.zeros_like(p)

    ex.check("softmax_backward", greedy, trials=1)
    # A fresh check still sees the original inputs and passes the right answer.
    assert ex.check("softmax_backward", solutions.softmax_backward).ok
    assert np.allclose(seen[0].sum(axis=-1), 1.0)


def test_bad_arguments_to_check():
    with pytest.raises(ValueError, match="Did you mean 'softmax_backward'"):
        ex.check("softmax", solutions.softmax_backward)
    with pytest.raises(TypeError, match="must be a function"):
        ex.check("softmax_backward", 3)
    with pytest.raises(ValueError, match="trials"):
        ex.check("softmax_backward", solutions.softmax_backward, trials=0)


def test_result_renders():
    good = ex.check("dropout_backward", solutions.dropout_backward)
    bad = ex.check("dropout_backward", lambda grad_y, mask, p: grad_y * mask)
    assert bool(good) and not bool(bad)
    assert str(bad) == bad.message
    assert "<pre" in good._repr_html_() and "&lt;" not in good._repr_html_()
    assert "dropout scale missing" in bad._repr_html_()
    assert bad.hints and bad.kinds == ("dropout_scale_missing",)


def test_starter_file_is_valid_python_with_every_stub(tmp_path):
    text = ex.starter_file()
    compile(text, "starter.py", "exec")
    for name in NAMES:
        assert f"def {name}(" in text


# ---------------------------------------------------------------- the command


def _run(*argv):
    parser = argparse.ArgumentParser(prog="microtape")
    sub = parser.add_subparsers(dest="command")
    command.add_arguments(sub.add_parser("exercises"))
    return command.run(parser.parse_args(["exercises", *argv]))


def test_command_list(capsys):
    assert _run("list") == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert name in out
    assert _run() == 0  # list is the default


def test_command_checks_a_student_file(tmp_path, capsys):
    student = tmp_path / "answers.py"
    student.write_text(
        textwrap.dedent(
            """
            import numpy as np

            def softmax_backward(p, grad_p):
                return p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True))

            def dropout_backward(grad_y, mask, p):
                return grad_y * mask          # forgot the scale

            def helper():                     # not an exercise: ignored
                return 1
            """
        )
    )
    assert _run("check", str(student)) == 1
    out = capsys.readouterr().out
    assert "✓ softmax_backward" in out and "✗ dropout_backward" in out
    assert "dropout scale missing" in out and "1 of 2 exercises correct" in out

    assert _run("check", str(student), "--name", "softmax_backward") == 0
    assert "1 of 1 exercise correct" in capsys.readouterr().out


def test_command_check_errors(tmp_path, capsys):
    assert _run("check", str(tmp_path / "missing.py")) == 1
    assert "no such file" in capsys.readouterr().err
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert _run("check", str(empty)) == 1
    assert "defines none of the exercise functions" in capsys.readouterr().err
    broken = tmp_path / "broken.py"
    broken.write_text("def softmax_backward(p, grad_p)\n    return p\n")
    assert _run("check", str(broken)) == 1
    assert "SyntaxError" in capsys.readouterr().err
    assert _run("check", str(empty), "--name", "nope") == 1
    assert "no exercise named 'nope'" in capsys.readouterr().err


def test_command_stub_round_trip(tmp_path, capsys):
    assert _run("stub") == 0
    starter = tmp_path / "starter.py"
    starter.write_text(capsys.readouterr().out)
    # Fresh stubs all fail as "not written yet"; the exit status says so.
    assert _run("check", str(starter)) == 1
    out = capsys.readouterr().out
    assert out.count("not written yet") == len(NAMES)


# ---------------------------------------------------------------- the notebooks' storage

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_notebook_07_has_a_stub_and_a_check_for_every_exercise():
    (notebook,) = [path for path in NOTEBOOKS if path.name == "07_exercises.ipynb"]
    sources = ["".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"]]
    for name in NAMES:
        assert any(s.startswith(f"def {name}(") and "raise NotImplementedError" in s for s in sources), name
        assert f'ex.check("{name}", {name})' in sources, name


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_notebooks_are_stored_without_outputs(notebook):
    """The notebooks are committed clean (see notebooks/README.md); `make test` executes them."""
    cells = json.loads(notebook.read_text())["cells"]
    dirty = [i for i, cell in enumerate(cells) if cell.get("outputs") or cell.get("execution_count")]
    assert not dirty, (
        f"{notebook.name}: cells {dirty} have stored outputs; clear them with "
        "`jupyter nbconvert --clear-output --inplace notebooks/*.ipynb`"
    )
