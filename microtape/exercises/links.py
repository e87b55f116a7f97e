r"""Link by link: each step of a derivation judged twice, so an error is blamed on the link where it was made.

A stepped exercise's student returns the derivation's intermediate
gradients, from the loss back (``grad_weights`` → ``grad_scaled_scores`` →
``grad_q`` …). Compared with the true gradients only, one wrong step makes
every step computed from it wrong too, and a second, independent error
further down hides behind the first. So each step is judged twice:

1. against the **true gradient** (the tape's reverse pass): equal — *right*;
2. against **the link**: the tape's reverse pass run with the student's own
   upstream steps put in, each in place of the tape's value (a step not
   returned, not of the right shape or not finite keeps the tape's). Equal — the link
   into this step is right and the error came from upstream: *carried*.
   Different — an error at this very link: *wrong*.

How the link is computed, for any tape
--------------------------------------
The reverse pass is linear in its seed. Walk the steps from the loss back (in
reverse tape order). When the pass reaches step ``u`` its gradient ``g_u`` is
complete; putting the student's ``h_u`` in its place changes every gradient
upstream of ``u`` by the reverse pass seeded at ``u`` with ``h_u − g_u``::

    link(s) = true(s) + Σ_{u after s on the way back}  VJP_{u → s}(h_u − g_u),    g_u = link(u)

one :func:`microtape.gradients` call (``gradients(u, h_u − g_u, tape=tape)``)
per step whose value differs from its link — so a right or carried step costs
nothing, and an answer that is right everywhere never records a tape at all.
A leaf step (an input, ``grad_x``) sends nothing further back.
"""

from typing import Any

import numpy as np

from ..engine import gradients
from .diagnose import compare_one, compare_outputs, generic, same
from .result import Diagnosis
from .student_call import MISSING

__all__ = ["link_values", "compare_steps"]


def _nodes_from_the_loss_back(exercise: Any, tape: Any) -> Any:
    """``[(step name, tape node)]``: computed nodes in reverse tape order, then the leaves (in step order)."""
    found = [(step.name, tape.variable(step.node or step.name.removeprefix("grad_"))) for step in exercise.outputs]
    computed = [(name, node) for name, node in found if node.op is not None]
    computed.sort(key=lambda pair: tape.index_of(pair[1]), reverse=True)
    return computed + [(name, node) for name, node in found if node.op is None]


def _usable(value: Any, like: Any) -> Any:
    """The student's step as a float64 array that can stand in for the tape's value, or None (it cannot)."""
    if value is MISSING or value.shape != like.shape or not np.all(np.isfinite(value)):
        return None
    return value.astype(np.float64)


def link_values(exercise: Any, inputs: dict[str, Any], got: Any, true: Any) -> Any:
    """``{step: the link's value}``: each step's gradient by the tape, from the student's own upstream steps.

    ``inputs`` is the trial (what ``exercise.record`` takes), ``got`` the
    student's steps by name (``None`` where missing), ``true`` the tape's. See
    the module docstring for the rule.
    """
    tape, _ = exercise.record(inputs)
    corrections: dict[Any, Any]
    corrections, link = {}, {}
    order = _nodes_from_the_loss_back(exercise, tape)
    for name, node in order:
        link[name] = true[name] + corrections[name] if name in corrections else true[name]
        mine = _usable(got.get(name), link[name])
        if node.op is None or mine is None or same(mine, link[name]):
            continue  # nothing to put in, or nothing it would change
        sent = gradients(node, mine - link[name], tape=tape)
        for other, upstream in order:
            if other not in link and upstream in sent:
                change = np.asarray(sent[upstream], dtype=np.float64)
                corrections[other] = corrections[other] + change if other in corrections else change
    return link


def compare_steps(
    exercise: Any, args: Any, inputs: dict[str, Any], outputs: Any, expected: Any, *, diagnose: bool = True
) -> Any:
    """``(problems, max error of the right steps, {step: state})`` for one trial of a stepped exercise.

    The states are ``"right"``, ``"carried"``, ``"wrong"`` and ``"missing"``
    (see :class:`~microtape.exercises.result.StepResult`); the problems are
    the wrong links only, each told against what the tape computes from the
    student's upstream steps when those differ from the true ones.
    """
    problems, worst = compare_outputs(exercise, args, outputs, expected, diagnose=diagnose)
    names = [output.name for output in exercise.outputs]
    states = dict.fromkeys(names, "right")
    if not problems:
        return problems, worst, states
    by_name = {problem.output: problem for problem in problems}
    for name, problem in by_name.items():
        if problem.what == "missing":
            states[name] = "missing"
    if all(problem.what == "missing" for problem in problems):
        return [], worst, states
    true = dict(zip(names, expected, strict=True))
    got = dict(zip(names, outputs, strict=True))
    link = link_values(exercise, inputs, got, true)
    links_in_order = [link[name] for name in names]
    kept = []
    for i, output in enumerate(exercise.outputs):
        problem = by_name.get(output.name)
        if problem is None or problem.what == "missing":
            continue
        if same(link[output.name], true[output.name]):  # its upstream steps are the tape's: judged already
            states[output.name] = "wrong"
            kept.append(problem)
            continue
        # The steps it is computed from directly (else any earlier) that are not the true ones.
        upstream = [step for step in output.after if states[step] in ("carried", "wrong")] or [
            step for step in exercise.depends_on(output.name) if states[step] in ("carried", "wrong")
        ]
        source = f" from your {_join(upstream)}" if upstream else " from your upstream steps"
        at_link, _ = compare_one(output, got[output.name], link[output.name], source)
        if at_link is None:
            states[output.name] = "carried"
            continue
        states[output.name] = "wrong"
        if at_link.what == "values":
            at_link.what = "link"  # (an error at the link, told against the student's own upstream steps)
        known = [d for d in problem.diagnoses if d.name in {m.name for m in exercise.mistakes}]
        if diagnose and at_link.what != "missing":
            at_link.diagnoses = known or _against_your_steps(generic(exercise, i, got[output.name], links_in_order))
        kept.append(at_link)
    return kept, worst, states


def _against_your_steps(diagnoses: Any) -> Any:
    """Generic hints found against the link: "the right answer" there is what the tape makes of your own steps."""
    return [
        Diagnosis(d.name, d.kind, d.hint.replace("the right answer", "what the tape computes from your earlier steps"))
        for d in diagnoses
    ]


def _join(names: Any) -> Any:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
