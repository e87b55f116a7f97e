"""A stepped exercise's check, explored: the recorded forward of its failing trial, each step's link compared.

This module lets ``mt.viz.explore(result)`` open a check result::

    result = ex.check("attention_backward_steps", mine)
    view = mt.viz.explore(result, student=mine)   # the red link: yours, the tape's, what your upstream implies

Like the check's picture (:mod:`.steps_picture`) it redraws the check's
failing trial (the same seeds) and records the exercise's forward on a new
tape, nodes named as the steps. For each step it gives the explorer
(:mod:`microtape.viz.explorer.links`) three arrays: **yours** — your
function's answer on that trial, only when you pass ``student=`` (your own
function, in your own notebook: the grader never runs it for a picture);
**the tape's** — the true gradient; and **what your upstream steps imply**
— the tape's reverse pass from the steps this one is computed from, seeded
with your values there (the tape's where you returned none): a step that
matches it is a right link, wrong only if what it came from was
(``carried``). The verdicts are the check's own (``result.steps[i].state``);
the explorer shows the distances that let you see each link for yourself.
"""

from typing import Any

import numpy as np

from ..engine import gradients
from .registry import get

__all__ = ["explorer_data"]


def trial_inputs(result: Any, exercise: Any) -> Any:
    """The inputs of the check's failing trial (the first one when none failed), drawn as the checker drew them."""
    trial = result.trial or 0
    cases = exercise.cases(result.hidden)
    rng = np.random.default_rng([*result.trial_key, trial, int(result.hidden)])
    return exercise.make_inputs(rng, cases[trial % len(cases)])


def _seed(inputs: Any, output: Any) -> Any:
    """The upstream gradient the exercise gives (``grad_c``: an input of the output's shape), or None for a loss."""
    if np.size(output.data) == 1:
        return None
    for name, value in inputs.items():
        if name.startswith("grad") and np.shape(value) == np.shape(output.data):
            return value
    return None


def _yours(student: Any, exercise: Any, inputs: Any) -> Any:
    """Your function's steps on the trial (a dict), and what went wrong calling it (or "")."""
    if student is None:
        return {}, "pass student=your_function to see your own numbers beside the tape's"
    try:
        # fresh copies, as the checker gives them: a function that writes into its inputs harms nobody
        args = [inputs[name] for name in exercise.parameters]
        returned = student(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    except Exception as error:  # your code: whatever it raises is reported, not raised here
        return {}, f"your function raised {type(error).__name__}: {error}"
    if not isinstance(returned, dict):
        return {}, f"your function returned {type(returned).__name__}, not a dict of steps"
    return returned, ""


def _implied(step: Any, exercise: Any, tape: Any, yours: Any, tape_values: Any) -> Any:
    """The tape's reverse pass into ``step`` from the steps it is computed from, seeded with your values there."""
    if not step.after:
        return tape_values[step.name]  # computed from the given upstream gradient alone
    total = None
    for name in step.after:
        source = exercise.output(name)
        seed = yours.get(name, tape_values[name])
        if np.shape(seed) != np.shape(tape_values[name]):
            return None  # a wrong shape: nothing to propagate
        found = gradients(tape.variable(source.node), np.asarray(seed, dtype=np.float64), tape=tape)
        part = found.get(tape.variable(step.node))
        if part is None:
            continue
        total = part if total is None else total + part
    return total


def explorer_data(result: Any, *, student: Any = None, title: str | None = None) -> Any:
    """The explorer's data for a stepped exercise's check result (see the module docstring)."""
    from ..viz.explorer.links import checked_data

    exercise = get(result.name)
    if not result.steps or exercise.record is None:
        raise ValueError(f"explore: {result.name!r} is not a stepped exercise's check (no steps to compare)")
    if result.trial_key is None:
        raise ValueError(f"explore: the check of {result.name} ran no trial, so there is nothing to explore")
    inputs = trial_inputs(result, exercise)
    tape, output = exercise.record(inputs)
    tape_values = dict(zip((o.name for o in exercise.outputs), exercise.tape_gradients(inputs), strict=True))
    yours, note = _yours(student, exercise, inputs)
    links = []
    for verdict in result.steps:
        step = exercise.output(verdict.name)
        mine = yours.get(step.name)
        implied = _implied(step, exercise, tape, yours, tape_values)
        links.append(
            {
                "step": step.name,
                "node": step.node,
                "state": "missing" if student is not None and mine is None else verdict.state,
                "after": step.after,
                "yours": None if mine is None else np.asarray(mine, dtype=np.float64),
                "tape": tape_values[step.name],
                "implied": implied,
            }
        )
    heading = title or f"{result.name}: {result.status}, {result.score}/{result.max_score}"
    return checked_data(tape, output, _seed(inputs, output), links, title=heading, note=note)
