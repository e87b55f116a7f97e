"""What a check returns: :class:`CheckResult`, its problems and diagnoses, and the ways a check stops.

Plain records: :mod:`microtape.exercises.checker` fills them in, the score
tables, the gradebook and the command line read them.
"""

import html
from dataclasses import dataclass, field

from .registry import KINDS

__all__ = [
    "CheckResult",
    "StepResult",
    "Problem",
    "Diagnosis",
    "TimeLimitExceeded",
    "NotChecked",
    "SubmissionTooLong",
    "NotAnArray",
    "STATUSES",
]

#: The verdicts of a check, from best to worst.
STATUSES = ("right", "partly right", "wrong", "not started", "not checked", "not graded")


class TimeLimitExceeded(BaseException):
    """The student's function ran past the time limit.

    A ``BaseException``, like ``KeyboardInterrupt``: a student's
    ``except Exception`` must not swallow it.
    """


class NotChecked(Exception):
    """The student's code left without an answer (it exited, or its process ended); ``str`` says how."""


class SubmissionTooLong(NotChecked):
    """The submission used up its whole time budget (loading, every exercise and every rerun together)."""


class NotAnArray:
    """A returned value that is not numbers (it came back from the box described, not as an object)."""

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return f"<{self.what}>"


@dataclass(frozen=True)
class Diagnosis:
    """A known mistake the student's output was found to equal."""

    name: str  # the mistake's name, or the generic check's kind
    kind: str  # a key of KINDS
    hint: str

    @property
    def label(self):
        return KINDS[self.kind]


@dataclass
class Problem:
    """What is wrong with one output of one trial."""

    output: str
    what: str  # "shape", "values", "not finite", "precision" or "type"
    text: str  # one line saying where
    index: tuple | None = None  # the first wrong entry
    got: float | None = None
    expected: float | None = None
    diagnoses: list = field(default_factory=list)


@dataclass(frozen=True)
class StepResult:
    """One step of a stepped exercise after all trials: right or not, its points, and who is to blame.

    ``state`` is ``"right"``, ``"first wrong"`` (the first wrong step whose
    own sources were right: fix this one first), ``"wrong"`` (wrong although
    computed from right steps, after the first) or ``"computed from wrong"``
    (wrong, but computed — directly or not — from a wrong step: not blamed).
    """

    name: str
    right: bool
    points: int
    max_points: int
    after: tuple  # the steps it is computed from (directly)
    state: str
    node: str | None = None  # the tape node whose gradient it is


@dataclass
class CheckResult:
    """The verdict of :func:`check`: ``ok``, ``status``, ``score``, a readable ``message``, and the details.

    ``outputs`` maps each output's name to True when it was right on every
    trial; ``score`` adds up the points of the right ones (of ``max_score``).
    ``mistakes`` names every known mistake the first failing trial matched
    (empty when none did), ``problems`` lists the wrong outputs of that
    ``trial``, and ``exception`` holds what the student's function raised, if
    it raised.
    """

    name: str
    ok: bool
    message: str
    trials_run: int = 0
    trial: int | None = None  # the first failing trial (0-based), if any
    problems: list = field(default_factory=list)
    mistakes: tuple = ()
    exception: BaseException | None = None
    max_abs_error: float = 0.0
    status: str = "wrong"
    outputs: dict = field(default_factory=dict)  # output name -> right on every trial
    score: int = 0
    max_score: int = 0
    hidden: bool = False
    # A stepped exercise: its steps in derivation order, the first wrong one, the later ones not blamed.
    steps: tuple = ()
    first_wrong: str | None = None
    computed_from_wrong: tuple = ()
    trial_key: tuple | None = None  # what drew the trials (the picture redraws the failing one)

    def picture(self):
        """The recorded forward's backward graph, each step's node and edge coloured by this check (graphviz).

        For a stepped exercise only; drawn here, in the grader's process, from
        the tape's own forward on the failing trial's inputs — never by
        running the student's code. The broken edge (into the first wrong
        step) is red and thick, the steps computed from it orange and dashed.
        """
        from .steps_picture import step_picture

        return step_picture(self)

    @property
    def right_outputs(self):
        return tuple(name for name, right in self.outputs.items() if right)

    @property
    def wrong_outputs(self):
        return tuple(name for name, right in self.outputs.items() if not right)

    @property
    def hints(self):
        """The hint texts of the diagnosed mistakes, each once."""
        seen, hints = set(), []
        for problem in self.problems:
            for diagnosis in problem.diagnoses:
                if diagnosis.hint not in seen:
                    seen.add(diagnosis.hint)
                    hints.append(diagnosis.hint)
        return tuple(hints)

    @property
    def kinds(self):
        """The kinds of the diagnosed mistakes (``"missing_rowsum"``, …), each once."""
        return tuple(dict.fromkeys(d.kind for p in self.problems for d in p.diagnoses))

    def __bool__(self):
        return self.ok

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"<CheckResult {self.name}: {self.status}, {self.score}/{self.max_score}>\n{self.message}"

    def _repr_html_(self):
        colours = {
            "right": ("#2e7d32", "#f1f8f1"),
            "partly right": ("#ef6c00", "#fff6ec"),
            "not started": ("#757575", "#f5f5f5"),
        }
        colour, background = colours.get(self.status, ("#c62828", "#fdf3f3"))
        return (
            f'<div style="border-left: 4px solid {colour}; background: {background}; '
            'padding: 6px 10px; margin: 4px 0">'
            '<pre style="margin: 0; white-space: pre-wrap; background: transparent">'
            f"{html.escape(self.message)}</pre>{self._picture_html()}</div>"
        )

    def _picture_html(self):
        """The picture of a stepped exercise's check as inline SVG ('' when there is none, or no graphviz)."""
        if not self.steps or self.status in ("not started", "not checked") or self.trial_key is None:
            return ""
        try:
            from ..viz.render import fit_svg  # scaled to the cell, never below 8 px text (the cell scrolls)

            return fit_svg(self.picture().pipe(format="svg").decode("utf-8"))
        except Exception:  # no graphviz binary here: the text says everything the picture would
            return ""
