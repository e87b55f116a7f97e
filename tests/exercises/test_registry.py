"""A lab module's exercise is registered from the module itself: its trials, its truth, its stub's name."""

import importlib
import sys

import numpy as np
import pytest

import microtape.exercises as ex
from microtape.exercises.registry import EXERCISES, Mistake, Output, register_lab_exercise


@pytest.mark.parametrize("module_name", ex.LAB)
def test_each_lab_module_registers_its_own_trials_and_truth(module_name):
    module = importlib.import_module(f"microtape.exercises.{module_name}")
    (name,) = [name for name, exercise in EXERCISES.items() if exercise.stub.__module__ == module.__name__]
    exercise = EXERCISES[name]
    assert exercise.name == exercise.stub.__name__ == name
    assert exercise.visible is module.VISIBLE and exercise.hidden is module.HIDDEN
    assert exercise.make_inputs is module.make_inputs and exercise.tape_gradients is module.tape_gradients


def test_register_lab_exercise_reads_the_stubs_module(monkeypatch):
    module = type(sys)("microtape_test_lab_module")
    exec(
        "VISIBLE = ({'n': 1},)\nHIDDEN = ({'n': 2},)\n"
        "def make_inputs(rng, case):\n    return {'x': rng.standard_normal(case['n'])}\n"
        "def tape_gradients(inputs):\n    return [inputs['x']]\n"
        "def toy_backward(x):\n    raise NotImplementedError\n",
        module.__dict__,
    )
    module.toy_backward.__module__ = module.__name__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr("microtape.exercises.registry.EXERCISES", dict(EXERCISES))
    wrong = Mistake("double", "constant_factor", "twice", lambda x: {"grad_x": 2 * x})
    exercise = register_lab_exercise(module.toy_backward, "a toy", (Output("grad_x", "x"),), (wrong,), stretch=True)
    assert exercise.name == "toy_backward" and exercise.title == "a toy" and exercise.stretch
    assert exercise.visible is module.VISIBLE and exercise.hidden is module.HIDDEN
    assert exercise.make_inputs is module.make_inputs and exercise.tape_gradients is module.tape_gradients
    from microtape.exercises import registry

    assert registry.EXERCISES["toy_backward"] is exercise
    with pytest.raises(ValueError, match="already registered"):
        register_lab_exercise(module.toy_backward, "again", (Output("grad_x", "x"),), (wrong,))


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
