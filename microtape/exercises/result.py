"""What a check returns: :class:`CheckResult`, its problems and diagnoses, and the ways a check stops.

Plain records: :mod:`microtape.exercises.checker` fills them in, the score
tables, the gradebook and the command line read them.
"""

import html
from dataclasses import dataclass, field
from typing import Any

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
    "TooSlowForDerivation",
    "STATUSES",
    "STEP_STATES",
]

#: The verdicts of a check, from best to worst.
STATUSES = ("right", "partly right", "wrong", "not started", "not checked", "not graded")


class TimeLimitExceeded(BaseException):
    """The student's function ran past the time limit.

    A ``BaseException``, like ``KeyboardInterrupt``: a student's
    ``except Exception`` must not swallow it.
    """


class TooSlowForDerivation(TimeLimitExceeded):
    """The function answered, but many times slower than the reference solution on the same inputs.

    Raised by the grader (``microtape grade``), which times each call against the instructor's
    solution in an identical box at the same moment: a derivation runs within a small multiple of
    it, differentiating the forward numerically (one forward per input entry, or per colour of
    entries) does not. ``str`` says both times and the limit.
    """


class NotChecked(Exception):
    """The student's code left without an answer (it exited, or its process ended); ``str`` says how."""


class SubmissionTooLong(NotChecked):
    """The submission used up its whole time budget (loading, every exercise and every rerun together)."""


class NotAnArray:
    """A returned value that is not numbers (it came back from the box described, not as an object)."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<{self.what}>"


@dataclass(frozen=True)
class Diagnosis:
    """A known mistake the student's output was found to equal."""

    name: str  # the mistake's name, or the generic check's kind
    kind: str  # a key of KINDS, or a teacher's own kind with its ``kind_label``
    hint: str
    kind_label: str | None = None

    @property
    def label(self) -> Any:
        return self.kind_label or KINDS[self.kind]


@dataclass
class Problem:
    """What is wrong with one output of one trial."""

    output: str
    # "shape", "values", "link" (values, against the student's own upstream steps), "not finite",
    # "precision", "missing" or "type"
    what: str
    text: str  # one line saying where
    index: tuple | None = None  # the first wrong entry
    got: float | None = None
    expected: float | None = None
    diagnoses: list = field(default_factory=list)


#: The states of a step of a stepped exercise, judged link by link (see :class:`StepResult`).
STEP_STATES = ("right", "carried", "wrong", "missing")


@dataclass(frozen=True)
class StepResult:
    """One step of a stepped exercise after all trials: its state, its points, and what it is computed from.

    Each step is judged twice against the tape: against the true gradient,
    and against the tape's reverse pass run with the student's own upstream
    steps put in (the *link* into this step). ``state`` is

    * ``"right"`` — equal to the true gradient on every trial;
    * ``"carried"`` — not the true gradient, but exactly what the link gives
      from the student's own (wrong) upstream steps: the error was carried
      forward, the link itself is right. It earns its points when the
      exercise's ``carry_forward`` is on (the default);
    * ``"wrong"`` — an error at this link: it differs from what the tape
      computes from the student's upstream steps;
    * ``"missing"`` — not returned (its key is absent, perhaps misspelled).
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
    # A stepped exercise: its steps in derivation order (StepResults), the first wrong link, every wrong
    # link in derivation order, and the steps carried (right from wrong upstream steps).
    steps: tuple = ()
    first_wrong: str | None = None
    computed_from_wrong: tuple = ()
    wrong_links: tuple = ()
    trial_key: tuple | None = None  # what drew the trials (the picture redraws the failing one)

    def _microtape_explore_(self, *, student: Any = None, title: str | None = None) -> Any:
        """The data :func:`microtape.viz.explore` shows for this check (see :mod:`.explored`)."""
        from .explored import explorer_data

        return explorer_data(self, student=student, title=title)

    def picture(self) -> Any:
        """The recorded forward's backward graph, each step's node and edge coloured by this check (graphviz).

        For a stepped exercise only; drawn here, in the grader's process, from
        the tape's own forward on the failing trial's inputs — never by
        running the student's code. Only the judged steps are coloured: right
        ones green, wrong links red and thick, carried ones orange and dashed.
        """
        from .steps_picture import step_picture

        return step_picture(self)

    @property
    def right_outputs(self) -> Any:
        return tuple(name for name, right in self.outputs.items() if right)

    @property
    def wrong_outputs(self) -> Any:
        return tuple(name for name, right in self.outputs.items() if not right)

    @property
    def hints(self) -> Any:
        """The hint texts of the diagnosed mistakes, each once."""
        seen, hints = set(), []
        for problem in self.problems:
            for diagnosis in problem.diagnoses:
                if diagnosis.hint not in seen:
                    seen.add(diagnosis.hint)
                    hints.append(diagnosis.hint)
        return tuple(hints)

    @property
    def kinds(self) -> Any:
        """The kinds of the diagnosed mistakes (``"missing_rowsum"``, …), each once."""
        return tuple(dict.fromkeys(d.kind for p in self.problems for d in p.diagnoses))

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"<CheckResult {self.name}: {self.status}, {self.score}/{self.max_score}>\n{self.message}"

    def _repr_html_(self) -> str:
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

    def _picture_html(self) -> Any:
        """The picture of a stepped exercise's check as inline SVG ('' when there is none, or no graphviz)."""
        if not self.steps or self.status in ("not started", "not checked") or self.trial_key is None:
            return ""
        try:
            from ..viz.render import fit_svg  # scaled to the cell, never below 8 px text (the cell scrolls)

            return fit_svg(self.picture().pipe(format="svg").decode("utf-8"))
        except Exception:  # no graphviz binary here: the text says everything the picture would
            return ""
