"""``explore(obj)``: the explorer of one computation, as a Jupyter widget or a page of its own.

This module lets you open, follow and save a view::

    view = explore(y)                 # the widget when anywidget is installed, else an Explorer
    view.save("y.html")               # one file, no kernel, no network
    view.update(z)                    # show another computation in the same place
    view.refresh()                    # re-read the object (the widget does it by itself)

:class:`Explorer` holds what is shown: the object, its data
(:func:`.data.explore_data`) and a fingerprint of the object — which tape
it has, how long it is, a checksum of its leaves' values and gradients —
so a view can tell that its layer ran again, or that ``y.backward()`` or a
training step changed something, and read it again.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ...engine import Node, Tape
from .data import explore_data
from .page import fragment, page

__all__ = ["explore", "Explorer", "fingerprint"]

LEAVES_WATCHED = 256  # leaves whose values and gradients the fingerprint sums


def explore(
    obj: Any,
    *,
    grad: Any = None,
    tangents: Any = None,
    title: str | None = None,
    widget: bool | None = None,
    student: Any = None,
) -> Any:
    """The explorer of ``obj``: a tape, a Scalar/Tensor result, a layer that ran, a scalar trace or a check result.

    Returns the Jupyter widget (:mod:`.widget`, built on anywidget) — or,
    with ``widget=False`` or when anywidget is not installed, an
    :class:`Explorer`, which shows itself in Jupyter as the same view (it
    needs no kernel) and saves the same file. ``grad`` seeds the backward
    pass (default: the output's ``.grad`` after a backward, else ones);
    ``tangents`` (``{input or its name: direction}``) adds forward mode,
    stepped the same way (a button switches); ``title`` is written above the graph. A stepped exercise's check result
    (``microtape.exercises.check``) opens on its failing trial, each step's
    node coloured by its link's verdict; ``student`` (your function) adds your
    own numbers to each link's comparison.
    """
    if widget not in (None, True, False):
        raise TypeError(f"explore(widget=...): expected True, False or None, got {widget!r}")
    if student is not None and getattr(type(obj), "_microtape_explore_", None) is None:
        raise TypeError(f"explore(student=...): only for a check result, not a {type(obj).__name__}")
    explorer = Explorer(obj, grad=grad, tangents=tangents, title=title, student=student)
    if widget is False:
        return explorer
    try:
        from .widget import widget_class
    except ImportError:
        if widget:
            raise ImportError(
                "explore(widget=True) needs anywidget: pip install anywidget (or microtape[notebooks])"
            ) from None
        return explorer
    return widget_class()(explorer)


def fingerprint(obj: Any) -> tuple:
    """What changes when the object is computed again: its tape, the tape's length, its leaves' numbers."""
    tape = obj if isinstance(obj, (Tape, Node)) else getattr(obj, "tape", None)
    if isinstance(tape, Node):
        tape = Tape.of(tape) if tape.op is not None else None
    if not isinstance(tape, Tape):
        return (id(obj), id(tape))
    total = 0.0
    for leaf in tape.leaves()[:LEAVES_WATCHED]:
        total += _checksum(leaf.data) + 1e-3 * _checksum(leaf.grad)
    output = tape.nodes[-1] if len(tape) else None
    return (id(tape), len(tape), total, _checksum(getattr(output, "grad", None)))


def _checksum(value: Any) -> float:
    if value is None:
        return 0.0
    try:
        return float(np.sum(np.asarray(value, dtype=np.float64)))
    except (TypeError, ValueError):  # a value a lean tape dropped
        return 0.0


class Explorer:
    """The explorer's view of one object: its data, as a page or a notebook output (see the module docstring)."""

    def __init__(
        self, obj: Any, *, grad: Any = None, tangents: Any = None, title: str | None = None, student: Any = None
    ) -> None:
        self.grad, self.tangents, self.title, self.student = grad, tangents, title, student
        self.obj: Any = None
        self.data: dict[str, Any] = {}
        self.update(obj)

    def update(self, obj: Any) -> Explorer:
        """Show ``obj`` instead (read at once: a bad object raises and leaves the view as it was)."""
        data = _data_of(obj, self.grad, self.tangents, self.title, self.student)
        self.obj, self.data, self.version = obj, data, fingerprint(obj)
        return self

    def refresh(self) -> bool:
        """Read the object again if it changed since it was read (a new forward, a backward); True if it did."""
        now = fingerprint(self.obj)
        if now == self.version:
            return False
        self.update(self.obj)
        return True

    def html(self) -> str:
        """The whole page ``save`` writes."""
        return page(self.data, self.title or "microtape: explore the tape")

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the view as one HTML file (no kernel, no network needed) and return its path."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"save(path): expected a file path, got {type(path).__name__}")
        path = Path(path)
        if path.suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"save(path): expected a .html file, got {str(path)!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html(), encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        return fragment(self.data, uid="mt-explore-" + uuid.uuid4().hex[:8])

    def __repr__(self) -> str:
        nodes, steps = len(self.data["nodes"]), len(self.data["steps"])
        return f"<Explorer of {type(self.obj).__name__}: {nodes} nodes, {steps} steps>"


def _data_of(obj: Any, grad: Any, tangents: Any, title: str | None, student: Any) -> dict[str, Any]:
    # A check result says itself what to show (the exercises know how its trial was drawn; viz does not
    # import them): the ``_microtape_explore_`` protocol, like ``_repr_html_``.
    hook = getattr(type(obj), "_microtape_explore_", None)
    if hook is not None:
        return hook(obj, student=student, title=title)
    return explore_data(obj, grad=grad, title=title, tangents=tangents)
