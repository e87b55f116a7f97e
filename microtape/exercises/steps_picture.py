"""The picture of a stepped exercise's check: the tape's backward graph, coloured step by step.

:func:`step_picture` redraws the check's failing trial (its inputs come from
the same seeds the checker used), records the exercise's forward on a tape
(``exercise.record``, nodes named as the steps) and lets
:func:`microtape.viz.report_graph` colour it by the check's per-step
states, and only what was judged: right steps green, wrong links red and
thick, carried steps orange and dashed; a missing step and the nodes that
are not steps stay uncoloured. Only the grader's own tape is drawn: the
student's code is never run for a picture.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from .registry import get

__all__ = ["step_picture"]


@dataclass(frozen=True)
class _Row:
    """One step as :func:`microtape.viz.report_graph` reads a report's row."""

    label: str
    name: str
    passed: bool
    state: str  # the picture's state: right, wrong, carried or unchecked (a missing step)


@dataclass(frozen=True)
class _StepReport:
    rows: tuple
    first_failure: str | None
    note: str
    judged: bool = True  # the rows' states are drawn as they are, nothing inferred from the graph


def step_picture(result: Any) -> Any:
    """A ``graphviz.Digraph`` of ``result``'s (a stepped exercise's CheckResult) check; see the module docstring."""
    from ..viz import report_graph

    if not getattr(result, "steps", ()):
        raise ValueError(f"picture: {getattr(result, 'name', result)!r} is not a stepped exercise's check")
    if result.trial_key is None:
        raise ValueError(f"picture: the check of {result.name} ran no trial, so there is nothing to draw")
    exercise = get(result.name)
    trial = result.trial or 0
    cases = exercise.cases(result.hidden)
    rng = np.random.default_rng([*result.trial_key, trial, int(result.hidden)])
    inputs = exercise.make_inputs(rng, cases[trial % len(cases)])
    tape, _ = exercise.record(inputs)
    states = {"missing": "unchecked"}
    rows = tuple(_Row(step.name, step.node, step.right, states.get(step.state, step.state)) for step in result.steps)
    first = result.first_wrong
    title = f"{result.name}: " + (f"the first wrong step is {first}" if first else result.status)
    carried = ", ".join(result.computed_from_wrong)
    note = (
        "link by link: "
        + (f"wrong links {', '.join(result.wrong_links)}" if result.wrong_links else "every link right")
        + (f"; carried {carried}" if carried else "")
    )
    return report_graph(_StepReport(rows, first, note), tape, expand=None, title=title)
