"""Students the exercise tests impersonate: a solution with one known mistake, float32, p written in, ….

Each helper returns a function with the exercise's signature, built from the
reference solution in ``instructor/solutions.py`` (outside the package).
"""

import contextlib

import numpy as np

import microtape.exercises as ex
from instructor.solutions import SOLUTIONS


def as_dict(name, returned):
    """A student's return value as ``{output name: array}``."""
    outputs = [output.name for output in ex.get(name).outputs]
    if isinstance(returned, dict):
        return dict(returned)
    if len(outputs) == 1:
        # One output, returned bare or as a 1-tuple (an op's VJP returns ``(grad_x,)``).
        return {outputs[0]: returned[0] if isinstance(returned, tuple) else returned}
    return dict(zip(outputs, returned, strict=True))


def as_returned(name, values):
    """``{output name: array}`` back into what the exercise returns (a tuple, or one array; a VJP a 1-tuple)."""
    outputs = [output.name for output in ex.get(name).outputs]
    if len(outputs) == 1:
        return (values[outputs[0]],) if ex.get(name).is_vjp else values[outputs[0]]
    return tuple(values[output] for output in outputs)


def making_mistake(name, mistake_name):
    """A student whose answer is right except for exactly this known mistake."""
    solution = SOLUTIONS[name]
    mistake = ex.get(name).mistake(mistake_name)

    def student(*args):
        values = as_dict(name, solution(*args))
        values.update(mistake.fn(*args))
        return as_returned(name, values)

    return student


def replacing(name, **changes):
    """A student whose answer is right except for the outputs ``changes`` computes (functions of the args)."""
    solution = SOLUTIONS[name]

    def student(*args):
        values = as_dict(name, solution(*args))
        for output, change in changes.items():
            values[output] = change(*args)
        return as_returned(name, values)

    return student


def in_float32(name, *, cast_back):
    """The solution run on float32 copies of the inputs; its outputs cast back to float64 if ``cast_back``."""
    solution = SOLUTIONS[name]
    dtype = np.float64 if cast_back else np.float32

    def student(*args):
        args32 = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args]
        with np.errstate(all="ignore"):
            values = as_dict(name, solution(*args32))
        return as_returned(name, {key: np.asarray(value, dtype=dtype) for key, value in values.items()})

    return student


def naive_softmax(s):
    """exp without the row maximum subtracted: the numerically fragile answer."""
    e = np.exp(s)
    return e / np.sum(e, axis=-1, keepdims=True)


@contextlib.contextmanager
def teachers_exercises(*made):
    """Exercises made in a test (``ex.derivation(...)`` calls, run lazily): registered inside, removed after.

    So a test's own exercise never shows in another test's list of the lab.
    """
    from microtape.exercises import checker

    before = set(ex.EXERCISES)
    try:
        yield [make() for make in made]
    finally:
        for name in set(ex.EXERCISES) - before:
            del ex.EXERCISES[name]
        checker._trial.cache_clear()
        checker._shared_trial.cache_clear()
