"""Rows and reports: one gradient, two opinions, and a table that shows them.

This module holds the machinery every step-by-step check shares. A
:class:`Row` lines up two opinions of one gradient — the hand-derived
(*analytic*) value and the *taped* value — and, optionally, a third: a
finite-difference estimate at a few sampled entries. A
:class:`GradientReport` is a list of rows in backward order, printable as an
aligned text table (``str(report)``), an HTML table in Jupyter
(``report._repr_html_()``) and a plain dict (``report.to_dict()``).

When does a row pass? With ``t`` the taped gradient and ``a`` the analytic one,

    max |a − t|  <=  atol + rtol · max |t|

— numpy's ``allclose`` rule, except that the relative part uses the *row's*
largest entry: a gradient entry that should be 0 and is 1e-17 is agreement,
not an infinite relative error. ``max_rel_error`` is reported the same way:
``max |a − t| / max |t|``.
"""

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..nn.checks import gradient_array
from .report_text import columns, report_html, report_text, text_table

__all__ = [
    "Row",
    "GradientReport",
    "ConfiguredReport",
    "make_row",
    "default_tolerance",
    "inherits_from",
    "add_finite_differences",
    "upstream_gradient",
]

#: The default tolerance per dtype: float64 checks are exact to rounding;
#: float32 keeps about 7 digits, and a backward chain loses a few of them.
DEFAULT_TOLERANCE = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-4}


def default_tolerance(dtype: Any) -> Any:
    """The tolerance a check uses for gradients of ``dtype`` (1e-10 or 1e-4)."""
    return DEFAULT_TOLERANCE.get(np.dtype(dtype), 1e-10)


@dataclass
class Row:
    """One gradient checked two (or three) ways.

    ``label`` is the name a student knows (``dQ``), ``name`` the tape node it
    belongs to (``Q_heads``). ``passed`` is the verdict: the two routes agree
    and, when finite differences ran, the estimate agrees with the tape too.
    ``step`` is the tape index of the backward step after which the taped value
    is complete (what :func:`microtape.check.walk` attaches the row to).
    """

    label: str
    name: str
    formula: str
    latex: str
    shape: tuple
    analytic_norm: float
    taped_norm: float
    max_abs_error: float
    max_rel_error: float
    routes_agree: bool
    step: int | None = None
    note: str = ""
    fd_error: float | None = None  # max |finite difference − taped| over the sampled entries
    fd_agrees: bool | None = None
    fd_entries: list = field(default_factory=list, repr=False)  # (index, fd, taped, analytic)
    analytic: np.ndarray = field(default=None, repr=False)  # type: ignore[arg-type]  # set by every report
    taped: np.ndarray = field(default=None, repr=False)  # type: ignore[arg-type]  # set by every report

    @property
    def passed(self) -> Any:
        return self.routes_agree and self.fd_agrees is not False

    @property
    def fd_samples(self) -> Any:
        return len(self.fd_entries)

    def to_dict(self) -> Any:
        """The row as plain Python values (no arrays), e.g. for JSON."""
        return {
            "label": self.label,
            "name": self.name,
            "formula": self.formula,
            "latex": self.latex,
            "shape": list(self.shape),
            "analytic_norm": self.analytic_norm,
            "taped_norm": self.taped_norm,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "routes_agree": self.routes_agree,
            "fd_error": self.fd_error,
            "fd_samples": self.fd_samples,
            "fd_agrees": self.fd_agrees,
            "passed": self.passed,
            "step": self.step,
            "note": self.note,
        }


def make_row(
    label: str,
    name: str,
    formula: Any,
    latex: Any,
    analytic: Any,
    taped: Any,
    *,
    atol: float,
    rtol: float,
    step: Any = None,
    note: str = "",
) -> "Row":
    """Compare ``analytic`` with ``taped`` (same shape) and return a :class:`Row`."""
    analytic = np.asarray(analytic)
    taped = np.asarray(taped)
    assert analytic.shape == taped.shape, f"{label}: analytic {analytic.shape} vs taped {taped.shape}"
    a = analytic.astype(np.float64)
    t = taped.astype(np.float64)
    # A wrong formula may produce inf or NaN: that is a failed row, not a warning.
    with np.errstate(invalid="ignore", over="ignore"):
        difference = np.abs(a - t)
        max_abs = float(np.max(difference)) if difference.size else 0.0
        scale = float(np.max(np.abs(t))) if t.size else 0.0
        passed = bool(max_abs <= atol + rtol * scale)
        if max_abs == 0.0:
            max_rel = 0.0
        elif scale > 0.0:
            max_rel = max_abs / scale
        else:
            max_rel = float("inf")
        analytic_norm = float(np.linalg.norm(a)) if a.size else 0.0
        taped_norm = float(np.linalg.norm(t)) if t.size else 0.0
    return Row(
        label=label,
        name=name,
        formula=formula,
        latex=latex,
        shape=tuple(taped.shape),
        analytic_norm=analytic_norm,
        taped_norm=taped_norm,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        routes_agree=passed,
        step=step,
        note=note,
        analytic=analytic,
        taped=taped,
    )


def add_finite_differences(row: Any, estimates: Any, tolerance: float) -> None:
    """Record the sampled estimates on ``row`` and judge them against the taped value."""
    taped = np.asarray(row.taped, dtype=np.float64)
    hand = np.asarray(row.analytic, dtype=np.float64)
    row.fd_entries = [(index, fd, float(taped[index]), float(hand[index])) for index, fd in estimates]
    row.fd_error = max(abs(fd - t) for _, fd, t, _ in row.fd_entries)
    scale = float(np.max(np.abs(taped))) if taped.size else 0.0
    row.fd_agrees = bool(row.fd_error <= tolerance * (1.0 + scale))


def inherits_from(computed_from: Any) -> Any:
    """``{label: labels whose value is computed (directly or not) from it}``.

    ``computed_from`` says, for each row, the rows it is computed from
    directly (``{"dQ": ("dS",), ...}``); the result is the closure the other
    way round: an error in ``dS`` reaches ``dQ`` and all that ``dQ`` feeds.
    """
    inherits = {}
    for label in {x for sources in computed_from.values() for x in sources} | set(computed_from):
        found, frontier = [], [label]
        while frontier:
            source = frontier.pop()
            for row, sources in computed_from.items():
                if source in sources and row not in found:
                    found.append(row)
                    frontier.append(row)
        inherits[label] = tuple(found)
    return inherits


class GradientReport:
    """A list of checked gradients, in backward order.

    ``ok`` is True when every row passed; ``first_failure`` is the label of the
    earliest failing row (the place to look); ``inherits[label]`` lists the
    rows computed from that row, which inherit an error in it;
    ``report["dQ"]`` finds a row by label or tape name. ``details`` are the
    lines printed above the table (what was run, the tolerance, …).
    """

    title = "Gradient check: hand-derived against the tape"

    def __init__(
        self,
        rows: Any,
        *,
        atol: float,
        rtol: float,
        details: Any = (),
        gradients: Any = None,
        analytic: Any = None,
        fd_text: Any = None,
        inherits: Any = None,
    ) -> None:
        self.rows = list(rows)
        self.atol = atol
        self.rtol = rtol
        self.details = list(details)
        self.gradients = gradients  # the reverse pass the taped values came from (walk() reads it)
        self.analytic = analytic if analytic is not None else {}
        self.fd_text = fd_text  # how finite differences were run, or None
        self.inherits = dict(inherits or {})  # label -> labels computed from it

    # -- verdicts

    @property
    def ok(self) -> Any:
        return all(row.passed for row in self.rows)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def failures(self) -> Any:
        """The failing rows, in backward order."""
        return [row for row in self.rows if not row.passed]

    @property
    def first_failure(self) -> Any:
        """The label of the earliest failing row in backward order (None if all pass)."""
        failures = self.failures
        return failures[0].label if failures else None

    @property
    def first_failing_row(self) -> Any:
        failures = self.failures
        return failures[0] if failures else None

    def __getitem__(self, key: Any) -> Any:
        for row in self.rows:
            if key in (row.label, row.name):
                return row
        labels = ", ".join(row.label for row in self.rows)
        raise KeyError(f"no row labelled or named {key!r}; rows are: {labels}")

    def __iter__(self) -> Any:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def tolerance_text(self) -> str:
        return f"a row passes when max|analytic - taped| <= {self.atol:g} + {self.rtol:g} * max|taped|"

    def verdict_text(self) -> Any:
        if self.ok:
            return f"all {len(self.rows)} rows agree"
        row = self.first_failing_row
        why = (
            "finite differences disagree with the tape"
            if row.routes_agree
            else (f"max abs error {row.max_abs_error:.3e}")
        )
        text = f"{len(self.failures)} of {len(self.rows)} rows FAIL; first failure: {row.label} ({row.name}): {why}."
        labels = {r.label for r in self.rows}
        downstream = [label for label in self.inherits.get(row.label, ()) if label in labels]
        if downstream:
            verb = "is" if len(downstream) == 1 else "are"
            text += f" Look there first: {', '.join(downstream)} {verb} computed from it."
        elif row.label in self.inherits:
            text += " Look there first: no other row is computed from it."
        else:
            text += " Look there first."
        independent = [r.label for r in self.failures if r is not row and r.label not in downstream]
        if independent and row.label in self.inherits:
            text += f" {', '.join(independent)} also fail{'s' if len(independent) == 1 else ''} on their own."
        return text

    # -- how it reads (microtape.check.report_text)

    def _columns(self) -> Any:
        """The table's columns: ``(header, getter, alignment)``; a report may rename them."""
        return columns(self)

    def table(self) -> Any:
        """The rows as an aligned text table (no title or details)."""
        return text_table(self)

    def __str__(self) -> str:
        return report_text(self)

    def _repr_html_(self) -> Any:
        return report_html(self)

    def __repr__(self) -> str:
        verdict = "ok" if self.ok else f"first failure {self.first_failure}"
        return f"<{type(self).__name__}: {len(self.rows)} rows, {verdict}>"

    # -- plain data

    def to_dict(self) -> Any:
        """Everything the table shows, as plain Python values (JSON-ready)."""
        return {
            "title": self.title,
            "ok": self.ok,
            "first_failure": self.first_failure,
            "atol": self.atol,
            "rtol": self.rtol,
            "tolerance": self.tolerance_text,
            "details": list(self.details),
            "finite_differences": self.fd_text,
            "rows": [row.to_dict() for row in self.rows],
        }


class ConfiguredReport(GradientReport):
    """A report of one run of a layer: also keeps ``config`` (sizes and options), ``grad_output``
    (the upstream gradient used) and ``mistakes`` (names of injected teaching mistakes, if any)."""

    def __init__(self, rows: Any, *, config: Any, grad_output: Any, mistakes: Any, **kwargs: Any) -> None:
        super().__init__(rows, **kwargs)
        self.config = config
        self.grad_output = grad_output
        self.mistakes = tuple(mistakes)

    def to_dict(self) -> Any:
        """Everything the table shows, plus the configuration and the mistakes, as plain data."""
        data = super().to_dict()
        data["config"] = dict(self.config)
        data["mistakes"] = list(self.mistakes)
        return data


def upstream_gradient(grad_output: Any, output_shape: Any, seed: int, dtype: Any, where: str) -> Any:
    """The gradient a report starts from, and a sentence saying where it came from (checked before any forward).

    ``grad_output=None`` draws a standard normal one from ``seed``; a given
    one is checked as ``where``'s ``grad_output`` argument.
    """
    if grad_output is None:
        upstream = np.random.default_rng(seed).standard_normal(output_shape).astype(dtype)
        return upstream, f"upstream gradient dy: standard normal, seed={seed} (grad_output=None)"
    upstream = gradient_array(grad_output, "grad_output", where, output_shape, dtype)
    return upstream, "upstream gradient dy: given (grad_output)"
