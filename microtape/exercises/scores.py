"""Score tables: where a student stands on every exercise, with partial credit.

This module lets a notebook's last cell (or a grading script) show progress::

    >>> import microtape.exercises as ex
    >>> def softmax_backward(p, grad_p):
    ...     return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))
    >>> table = ex.score({"softmax_backward": softmax_backward}, ["softmax_backward", "linear_backward"])
    >>> table.total, table.max_total
    (1, 4)
    >>> print(table)                                   # doctest: +SKIP
    exercise          status       points  outputs
    softmax_backward  right        1 / 1   grad_s
    linear_backward   not started  0 / 3   —
    total                          1 / 4

Each row is one :class:`~microtape.exercises.result.CheckResult`: *not
started* (no function, or the stub still raises ``NotImplementedError``),
*partly right* (naming the right and the wrong outputs), *right*, *wrong*,
or *not checked* (it exited or ran past the time limit).
"""

import html
from types import ModuleType
from typing import Any

from .catalogue import list_exercises
from .checker import CheckResult, check
from .registry import get
from .result import STEP_STATES

__all__ = ["ScoreTable", "score", "score_table", "not_defined"]


def not_defined(name: str) -> CheckResult:
    """The result for an exercise whose function is not there at all: not started, no points."""
    exercise = get(name)
    outputs = {output.name: False for output in exercise.outputs}
    message = f"✗ {name}: not started — there is no function called {name}."
    return CheckResult(name, False, message, status="not started", outputs=outputs, max_score=exercise.max_score)


def score(
    namespace: Any, names: Any = None, *, hidden: bool = False, time_limit: Any = None, secret: Any = None
) -> "ScoreTable":
    """Check every exercise whose function ``namespace`` defines, and return the :class:`ScoreTable`.

    ``namespace`` is a dict of functions by name (``globals()`` in a
    notebook) or a module. ``names`` defaults to every exercise of the lab.
    """
    if isinstance(namespace, ModuleType):
        namespace = vars(namespace)
    if not hasattr(namespace, "get"):
        raise TypeError(
            f"score(namespace): expected a dict such as globals(), or a module; got {type(namespace).__name__}"
        )
    names = list_exercises() if names is None else [get(name).name for name in names]
    results = []
    for name in names:
        fn = namespace.get(name)
        if callable(fn):
            results.append(check(name, fn, hidden=hidden, time_limit=time_limit, secret=secret))
        else:
            results.append(not_defined(name))
    return ScoreTable(results)


def score_table(results: Any) -> "ScoreTable":
    """A :class:`ScoreTable` of ``results`` (CheckResults, or a dict of them by name)."""
    if isinstance(results, dict):
        results = list(results.values())
    return ScoreTable(list(results))


def _outputs_text(result: Any) -> Any:
    if result.status in ("not started", "not checked", "not graded"):
        return "—"
    if result.steps and not result.ok:  # a stepped exercise: its steps by state, link by link
        groups: dict[Any, Any] = {}
        for step in result.steps:
            groups.setdefault(step.state, []).append(step.name)
        return "; ".join(f"{state}: {', '.join(groups[state])}" for state in STEP_STATES if state in groups)
    if result.status == "partly right":
        return f"right: {', '.join(result.right_outputs)}; not yet: {', '.join(result.wrong_outputs)}"
    if result.status == "wrong":
        return f"not yet: {', '.join(result.outputs)}"
    return ", ".join(result.outputs)


class ScoreTable:
    """One row per exercise: status, points and which outputs are right; ``str`` and HTML."""

    def __init__(self, results: Any) -> None:
        for result in results:
            if not isinstance(result, CheckResult):
                raise TypeError(f"ScoreTable: expected CheckResults, got {type(result).__name__}")
        self.results = {result.name: result for result in results}

    @property
    def total(self) -> Any:
        return sum(result.score for result in self.results.values())

    @property
    def max_total(self) -> Any:
        return sum(result.max_score for result in self.results.values())

    def by_status(self, status: Any) -> Any:
        """The names of the exercises with this status (``"right"``, ``"partly right"``, …)."""
        return [name for name, result in self.results.items() if result.status == status]

    def rows(self) -> Any:
        """``(exercise, status, "score / max", outputs)`` per exercise, as text."""
        return [
            (name, result.status, f"{result.score} / {result.max_score}", _outputs_text(result))
            for name, result in self.results.items()
        ]

    def __str__(self) -> str:
        header = ("exercise", "status", "points", "outputs")
        rows = self.rows()
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]

        def line(row: Any) -> Any:
            return "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths)) + "  " + row[3]

        lines = [line(header).rstrip(), *[line(row).rstrip() for row in rows]]
        total = f"{self.total} / {self.max_total}"
        lines.append(("total".ljust(widths[0]) + "  " + "".ljust(widths[1]) + "  " + total).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ScoreTable {self.total}/{self.max_total}>\n{self}"

    def _repr_html_(self) -> str:
        colours = {"right": "#e8f5e9", "partly right": "#fff3e0", "not started": "#f5f5f5"}
        body = []
        for name, status, points, outputs in self.rows():
            colour = colours.get(status, "#ffebee")
            cells = "".join(f"<td>{html.escape(cell)}</td>" for cell in (name, status, points, outputs))
            body.append(f'<tr style="background: {colour}">{cells}</tr>')
        head = "".join(f"<th>{cell}</th>" for cell in ("exercise", "status", "points", "outputs"))
        total = f"<tr><th>total</th><td></td><th>{self.total} / {self.max_total}</th><td></td></tr>"
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}{total}</tbody></table>"
