"""A lab module's exercise is registered from the module itself: its trials, its truth, its stub's name."""

import importlib
import sys

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
