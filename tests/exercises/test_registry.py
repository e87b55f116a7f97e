"""Every exercise is declared explicitly with the framework's public names; one registered later is listed too."""

import importlib
import inspect

import numpy as np
import pytest

import microtape.exercises as ex
from microtape.exercises.registry import EXERCISES


@pytest.mark.parametrize("module_name", ex.LAB)
def test_each_lab_module_declares_its_exercise_with_its_own_trials_and_truth(module_name):
    module = importlib.import_module(f"microtape.exercises.lab.{module_name}")
    (name,) = [name for name, exercise in EXERCISES.items() if exercise.stub.__module__ == module.__name__]
    exercise = EXERCISES[name]
    assert exercise is module.EXERCISE, "the module's declaration is the exercise registered"
    assert exercise.name == exercise.stub.__name__ == name
    assert exercise.visible is module.VISIBLE and exercise.hidden is module.HIDDEN
    # (a family declared once — conv, norm — takes these from its shared chain)
    for truth in ("make_inputs", "tape_gradients", "record"):
        if hasattr(module, truth):
            assert getattr(exercise, truth) is getattr(module, truth), truth
    assert (exercise.record is not None) == exercise.stepped
    assert "sys.modules" not in inspect.getsource(module), "declared explicitly, never read by convention"


def _toy_exercise(name):
    """A teacher's exercise, written as a notebook cell would: d(3x²)/dx = 6x, and a known mistake."""

    def stub(x, grad_y):
        """Backward of y = 3 x²: return grad_x."""
        raise NotImplementedError

    stub.__name__ = name

    def tape_gradients(inputs):
        return [6 * inputs["x"] * inputs["grad_y"]]

    return ex.Exercise(
        name=name,
        title="A teacher's own: y = 3x²",
        stub=stub,
        make_inputs=lambda rng, case: {"x": rng.standard_normal(case["n"]), "grad_y": rng.standard_normal(case["n"])},
        tape_gradients=tape_gradients,
        outputs=(ex.Output("grad_x", "x"),),
        mistakes=(
            ex.Mistake("factor_three", "wrong_derivative", "3x² gives 6x, not 3x", lambda x, g: {"grad_x": 3 * x * g}),
        ),
        visible=({"n": 3}, {"n": 5}),
        hidden=({"n": 4},),
    )


def test_an_exercise_registered_after_import_is_listed_and_checked_like_the_labs():
    name = "teachers_square_backward"
    before = list(ex.ORDER)
    exercise = ex.register(_toy_exercise(name))
    try:
        assert list(ex.ORDER) == [*before, name] and ex.list_exercises()[-1] == name
        assert name in ex.EXERCISES and ex.get(name) is exercise
        assert ex.check(name, lambda x, grad_y: 6 * x * grad_y).ok
        wrong = ex.check(name, lambda x, grad_y: 3 * x * grad_y)
        assert not wrong.ok and wrong.mistakes == ("factor_three",)
        assert ex.prompt(name) == "Backward of y = 3 x²: return grad_x." and "3 x²" in ex.starter_file([name])
        with pytest.raises(ValueError, match="already registered"):
            ex.register(_toy_exercise(name))
        from microtape.exercises.lab import unit

        assert name not in unit.unit_plan(), "the course's sessions hold the lab's exercises, not a teacher's"
    finally:
        del EXERCISES[name]
    assert list(ex.ORDER) == before


@pytest.mark.parametrize("name", ex.list_exercises())
def test_every_exercise_has_one_large_hidden_trial_shared_by_the_class(name):
    """Issue #35: each of the 31 exercises has exactly one hidden trial with at least 40 000 float inputs (a
    derivation answers it in milliseconds; one forward pass per input entry does not fit in the time limit), drawn
    from the class's secret alone so the grader computes its answer once; the visible trials stay small."""
    exercise = ex.get(name)
    large = [case for case in exercise.cases(hidden=True) if case.get("shared")]
    assert len(large) == 1
    assert not any(case.get("shared") for case in exercise.cases(hidden=False))
    inputs = exercise.make_inputs(np.random.default_rng(0), large[0])
    floats = [inputs[p] for p in exercise.parameters if isinstance(inputs[p], np.ndarray)]
    # (benchmarks/numeric_cheat.py times the forward differentiated entry by entry on these: minutes)
    assert sum(a.size for a in floats if a.dtype.kind == "f") >= 40_000


def test_a_class_shares_the_large_trial_and_keeps_no_students_own(monkeypatch):
    """The large trial is drawn from the secret alone (the same for every student, its answer computed once);
    the others are each student's own and are not kept: a class of 200 would otherwise hold GBs of them."""
    from microtape.exercises import checker

    secret = "7c1d0e4f9a2b3c5d6e7f8091a2b3c4d5"
    right = lambda p, grad_p: p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))  # noqa: E731
    drawn = []
    real = checker._drawn_trial
    monkeypatch.setattr(checker, "_drawn_trial", lambda *a: drawn.append(a) or real(*a))
    checker._shared_trial.cache_clear()
    seen = {}
    for student in ("ada", "bob", "cy"):
        args = []
        spy = lambda p, grad_p, args=args: args.append(p) or right(p, grad_p)  # noqa: E731
        assert ex.check("softmax_backward", spy, hidden=True, secret=secret, student=student).ok
        seen[student] = args
    trials = len(ex.get("softmax_backward").cases(hidden=True))
    large = [case.get("shared", False) for case in ex.get("softmax_backward").cases(hidden=True)].index(True)
    # the large trial: the same numbers for everyone; a small one: each student's own
    assert np.array_equal(seen["ada"][large], seen["bob"][large]) and seen["ada"][large].size >= 10_000
    assert not np.allclose(seen["ada"][0], seen["bob"][0])
    # drawn (and its tape answer computed) once for the class, each student's small trials once per student
    assert len(drawn) == 3 * (trials - 1)
    assert checker._shared_trial.cache_info().currsize == 1
