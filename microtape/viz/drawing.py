"""The drawing options that :func:`~microtape.viz.graph` and :func:`~microtape.viz.backward_frames` share.

Both draw a computation the same way, so they take the same options —
``group``, ``detail``, ``expand``, ``values``, ``parameters``,
``max_nodes``, ``rankdir``, ``legend``, ``title``, ``width`` — named, given
their defaults and checked here, once::

    @takes_drawing_options
    def graph(tape_or_output, *, backward=False, ..., drawing):
        program = collect(tape_or_output, output, drawing.parameters)
        view, rankdir = fitted(program, drawing.view_options, trace, ...)

The decorator lists the options in the function's signature (what ``help()``,
Jupyter and the API pages show) and hands the function one checked
:class:`Drawing`.
"""

import functools
import inspect
import warnings
from typing import Any

from .fit import NOTEBOOK_WIDTH
from .view import MAX_NODES

__all__ = [
    "DEFAULTS",
    "Drawing",
    "takes_drawing_options",
    "check_options",
    "warn_if_collapsed",
    "GraphCollapsedWarning",
]

#: The shared options and their defaults, in the order a signature lists them.
DEFAULTS = {
    "group": "module",
    "detail": "auto",
    "expand": None,
    "values": True,
    "parameters": None,
    "max_nodes": MAX_NODES,
    "rankdir": None,
    "legend": True,
    "title": None,
    "width": NOTEBOOK_WIDTH,
}


class GraphCollapsedWarning(UserWarning):
    """A graph was too large to draw box by box and was summarised."""


class Drawing:
    """The shared options of one call, checked: what the view needs and what the painter needs."""

    def __init__(self, **options: Any) -> None:
        options = {**DEFAULTS, **options}
        self.group, self.detail, self.expand = options["group"], options["detail"], options["expand"]
        self.values, self.parameters = options["values"], options["parameters"]
        self.max_nodes, self.rankdir, self.width = options["max_nodes"], options["rankdir"], options["width"]
        self.legend, self.title = options["legend"], options["title"]
        #: The :class:`~microtape.viz.view.View`'s keywords.
        self.view_options = check_options(
            self.group, self.detail, self.max_nodes, self.rankdir, self.expand, self.width
        )

    @property
    def paint_options(self) -> Any:
        """The painter's keywords: numbers shown or not, the title, the legend."""
        return dict(values=self.values, title=self.title, legend=self.legend)


def takes_drawing_options(draw: Any) -> Any:
    """Decorate ``draw(..., drawing)``: its callers pass the options of :data:`DEFAULTS` by keyword.

    The decorated function's signature lists them (keyword-only, with their
    defaults) in place of ``drawing``; a call binds them as Python would
    (an unknown keyword is a ``TypeError`` naming it) and ``draw`` receives
    one checked :class:`Drawing`.
    """
    own = inspect.signature(draw)
    kept = [parameter for name, parameter in own.parameters.items() if name != "drawing"]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value) for name, value in DEFAULTS.items()
    ]
    signature = own.replace(parameters=kept + shared)

    @functools.wraps(draw)
    def with_options(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{draw.__name__}(): {error}") from None
        options = {name: bound.arguments.pop(name) for name in DEFAULTS if name in bound.arguments}
        return draw(*bound.args, **bound.kwargs, drawing=Drawing(**options))

    with_options.__signature__ = signature  # type: ignore[attr-defined]  # what inspect.signature reads
    return with_options


def check_options(group: Any, detail: Any, max_nodes: Any, rankdir: Any, expand: Any, width: Any = None) -> Any:
    """Check the drawing options once (graph and backward_frames share them); the View's keywords."""
    if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 100):
        raise ValueError(f"graph(width=...): expected the pixels a picture is shown at (>= 100) or None, got {width!r}")
    if group not in ("module", None):
        raise ValueError(f"graph(group=...): expected 'module' or None, got {group!r}")
    if detail not in ("auto", "full", "summary"):
        raise ValueError(f"graph(detail=...): expected 'auto', 'full' or 'summary', got {detail!r}")
    if rankdir not in (None, "LR", "TB", "RL", "BT"):
        raise ValueError(f"graph(rankdir=...): expected 'LR', 'TB' or None, got {rankdir!r}")
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"graph(max_nodes=...): expected a positive integer, got {max_nodes!r}")
    if expand is not None:
        if detail == "full":
            raise ValueError(
                "graph(expand=...): detail='full' already draws every module; expand opens one of a summary"
            )
        if not isinstance(expand, (str, list, tuple)):
            raise TypeError(
                f"graph(expand=...): expected a module path like 'attention' or a list of them, got {expand!r}"
            )
    return dict(group=group, detail=detail, max_nodes=max_nodes, expand=expand)


def warn_if_collapsed(view: Any, max_nodes: Any, stacklevel: Any) -> None:
    """Say so when ``detail="auto"`` had to summarise a graph.

    ``stacklevel`` counts frames from the function calling this one (1), so
    that the warning names the user's line: 3 from ``graph`` or
    ``backward_frames``, called through :func:`takes_drawing_options`.
    """
    if view.drawn_before is None:
        return
    warnings.warn(
        f"microtape.viz.graph: this graph has {view.drawn_before} boxes (more than max_nodes={max_nodes}), "
        f"so it is drawn as {len(view.boxes)} summary boxes (one per module, or stretches of the tape). "
        "Pass detail='full' to draw every node (dot gets slow above a few hundred), "
        "expand='module.path' to open one module, or max_nodes=... to move the threshold.",
        GraphCollapsedWarning,
        stacklevel=stacklevel + 1,
    )
