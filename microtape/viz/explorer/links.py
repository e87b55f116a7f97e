"""A student's stepped answer on the explorer's graph: each step's node coloured by its verdict, link by link.

This module lets an exercise's check result be explored like any tape::

    data = checked_data(tape, output, grad, links, title="attention_backward_steps")
    data["nodes"]["scaled_scores"]["check"]   # the link into it: yours, the tape's, what your upstream implies

``links`` comes from the exercise (:mod:`microtape.exercises.explored`,
which knows how the check drew its trial): one dict per step — ``step``
(the student's name, ``grad_scores``), ``node`` (the tape node's name),
``state``, ``after`` (the steps it is computed from) and the arrays
``yours``, ``tape`` and ``implied`` (the tape's reverse pass with your own
upstream steps put in; None when unknown). The verdicts are the
checker's (judged link by link); the panel also gives the largest
difference of yours from the tape's and from what your upstream implies. A step is ``right``,
``carried`` (wrong only because a step it comes from is wrong: the link
itself is right), ``wrong`` (an error at this link) or ``missing`` — the
checker's own words (``"first wrong"``, ``"computed from wrong"``) are read
as those. The wrong links are drawn in red; a click on one opens the
comparison.
"""

from typing import Any

import numpy as np

from ..picture import STATE
from ..program import collect, trace_backward
from .data import program_data
from .values import show

__all__ = ["checked_data", "link_state", "STATES"]

STATES = ("right", "carried", "wrong", "missing")
# The checker's words before the link-by-link check (a step's ``state``), read as the link states.
_SAID = {"first wrong": "wrong", "computed from wrong": "carried", "first_wrong": "wrong"}
PALETTE = {
    "right": STATE["agreed"][0],
    "carried": STATE["depends"][0],
    "wrong": STATE["first"][0],
    "missing": STATE["unchecked"][0],
}


def link_state(state: Any) -> Any:
    """A step's state as a link's: right, carried, wrong or missing."""
    state = _SAID.get(state, state)
    if state not in STATES:
        raise ValueError(f"link state: expected one of {', '.join(STATES)} (or the checker's words), got {state!r}")
    return state


def _largest_difference(a: Any, b: Any) -> Any:
    if a is None or b is None or np.shape(a) != np.shape(b):
        return None
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)), initial=0.0))


def _said(link: Any, state: Any) -> str:
    step, after = link["step"], ", ".join(link["after"])
    if state == "right":
        return f"{step} is right"
    if state == "missing":
        return f"{step} was not returned: the tape's value stands in for it"
    if state == "carried":
        return f"{step} differs from the tape's only because {after} does: from your {after}, this link is right"
    upstream = f"your {after}" if after else "the given upstream gradient"
    return f"the link into {step} is wrong: {step} is not what {upstream} implies"


def link_panel(link: Any) -> Any:
    """The comparison a click on a step's node opens (see the module docstring)."""
    state = link_state(link["state"])
    yours, tape, implied = link.get("yours"), link.get("tape"), link.get("implied")
    return {
        "step": link["step"],
        "state": state,
        "after": list(link["after"]),
        "text": _said(link, state),
        "yours": None if yours is None else show(np.asarray(yours)),
        "tape": None if tape is None else show(np.asarray(tape)),
        "implied": None if implied is None else show(np.asarray(implied)),
        "off_tape": _largest_difference(yours, tape),
        "off_implied": _largest_difference(yours, implied),
    }


def checked_data(tape: Any, output: Any, grad: Any, links: Any, *, title: str | None = None, note: str = "") -> Any:
    """The explorer's data for a recorded exercise, each step's node carrying its link's comparison."""
    program = collect(tape, output)
    data = program_data(program, trace_backward(program, grad), title=title)
    verdicts = {}
    for link in links:
        panel = data["nodes"].get(link["node"])
        if panel is None:
            raise ValueError(f"links: no node {link['node']!r} on the exercise's tape (step {link['step']!r})")
        panel["check"] = link_panel(link)
        verdicts[link["node"]] = panel["check"]["state"]
    data["verdicts"] = verdicts
    data["verdict_palette"] = PALETTE
    wrong = [link["step"] for link in links if verdicts[link["node"]] == "wrong"]
    said = f"wrong links: {', '.join(wrong)} (red: click one)" if wrong else "no wrong link"
    data["note"] = f"{said}; {note}" if note else said
    return data
