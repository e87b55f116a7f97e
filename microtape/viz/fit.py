"""Pictures that read at the width they are shown: a notebook cell, a slide, the README.

This module lets graph and frames pick, among a few ways to draw a
computation, the first whose smallest text is still readable once the
picture is scaled to the width it is shown at::

    view, rankdir = fitted(program, options, trace, rankdir=None, width=900)
    smallest_text_px(svg_text, width=900)    # what a reader sees of the smallest text, in pixels

Why: a Jupyter cell shows a wide SVG scaled down to the cell (about 900
pixels); an attention graph drawn op by op is about 2,000 points wide, so its
8-point edge labels end up 4 pixels tall. The candidates, in order: the view
asked for, laid out in the direction asked for (or the one the box count
suggests); the other direction; then — when the computation has modules and
``detail="auto"`` — one summary box per module, in both directions
(``expand="attention"`` opens one module again; ``width=None`` draws every
op whatever its width). The first that fits is drawn; if none does, the
narrowest. Each candidate is drawn once by ``dot`` (and that drawing is kept:
the one shown is not drawn twice; only pictures
of up to ``max_nodes`` boxes are measured: bigger ones are summarised
anyway). Without Graphviz nothing is measured.
"""

import re
from typing import Any

from .paint import paint
from .picture import to_digraph
from .render import PX_PER_PT, GraphvizNotFound, natural_text_px, svg
from .view import View

__all__ = [
    "NOTEBOOK_WIDTH",
    "SMALLEST_FONT",
    "READABLE_PX",
    "widest_readable",
    "fitted",
    "fitted_picture",
    "smallest_text_px",
]

NOTEBOOK_WIDTH = 900  # pixels: a Jupyter cell, a slide, the README's column
SMALLEST_FONT = 8  # points: the smallest text a graph writes (its edge labels)
READABLE_PX = 7  # the smallest text must stay at least this many pixels tall once scaled


def widest_readable(width: Any) -> Any:
    """The widest picture (points) whose ``SMALLEST_FONT`` text is ``READABLE_PX`` tall when shown ``width`` px wide."""
    return width * SMALLEST_FONT / READABLE_PX


def fitted(
    program: Any,
    options: Any,
    trace: Any = None,
    *,
    rankdir: Any = None,
    width: Any = NOTEBOOK_WIDTH,
    paint_options: Any = None,
) -> Any:
    """``(view, rankdir)``: the first way to draw ``program`` that reads at ``width`` pixels (see the module doc).

    ``options`` are the View's keywords; ``trace`` the backward pass if the
    picture is a backward one (its edge labels are what makes it wide).
    """
    view, rankdir, _ = fitted_picture(
        program, options, trace, rankdir=rankdir, width=width, paint_options=paint_options
    )
    return view, rankdir


def fitted_picture(
    program: Any,
    options: Any,
    trace: Any = None,
    *,
    rankdir: Any = None,
    width: Any = NOTEBOOK_WIDTH,
    paint_options: Any = None,
    decorate: Any = None,
) -> Any:
    """:func:`fitted`, plus the whole pass's picture it measured for the chosen view (None if none was).

    A caller drawing that same picture (no ``step``) uses it instead of painting it again.
    ``decorate(picture, view)``: what the caller adds to every painted picture
    (saved values, :mod:`.saved`), so the width measured is the width shown.
    """
    view = View(program, **options)
    if width is None:
        return view, rankdir, None
    candidates = [(view, rankdir)] if rankdir else [(view, None), (view, "other")]
    summarise = options["detail"] == "auto" and not options["expand"] and view.drawn_before is None
    if summarise and any(program.equations[i].module for i in range(len(program.equations))):
        summary = {**options, "detail": "summary"}
        candidates += [(summary, rankdir)] if rankdir else [(summary, None), (summary, "other")]
    limit = widest_readable(width)
    made: dict[Any, Any]
    measured, made = [], {}
    for candidate, direction in candidates:
        if isinstance(candidate, dict):
            candidate = made.get("summary") or made.setdefault("summary", _summary_view(program, candidate, width))
        if len(candidate.boxes) > candidate.max_nodes:
            continue
        picture = paint(candidate, trace, **(paint_options or {}))
        if decorate is not None:
            picture = decorate(picture, candidate)
        if direction == "other":
            picture.rankdir = "TB" if picture.rankdir == "LR" else "LR"
        elif direction is not None:
            picture.rankdir = direction  # the caller's
        try:
            drawn = svg(to_digraph(picture))  # kept: shown as it is, it is not drawn again
        except GraphvizNotFound:
            return view, rankdir, None
        wide = float(_SVG_WIDTH.search(drawn).group(1))  # type: ignore[union-attr]  # dot's SVG has a width
        measured.append((wide, candidate, picture))
        if wide <= limit:
            return candidate, picture.rankdir, picture
    if not measured:
        return view, rankdir, None
    _, best, picture = min(measured, key=lambda m: m[0])
    return best, picture.rankdir, picture


def _summary_view(program: Any, options: Any, width: Any) -> Any:
    """One box per module, with a note saying why and how to see more."""
    view = View(program, **options)
    modules = sorted({path.split(".")[0] for path in view.clusters if path})
    view.note = (
        f"one box per module, to read at {width} px wide: expand={modules[0]!r} opens one"
        + (f" (modules: {', '.join(modules)})" if len(modules) > 1 else "")
        + ", width=None draws every op"
    )
    return view


_SVG_WIDTH = re.compile(r'<svg width="([\d.]+)pt"')


def smallest_text_px(svg_text: Any, width: Any = NOTEBOOK_WIDTH) -> Any:
    """How tall the smallest text of a Graphviz SVG is, in pixels, once shown at most ``width`` pixels wide."""
    natural = float(_SVG_WIDTH.search(svg_text).group(1)) * PX_PER_PT  # type: ignore[union-attr]  # dot's SVG has a width
    return natural_text_px(svg_text) * min(1.0, width / natural)
