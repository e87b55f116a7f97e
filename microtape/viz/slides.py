"""Slides: a layer's forward boxes and backward formulas on one 16:9 page, as SVG and PNG.

This module lets a teacher put a picture straight on a slide::

    paths = mt.viz.save_slide(layer, "slides/encoder")   # encoder.svg and encoder.png, 16:9
    digraph = mt.viz.slide(attn)                          # the Digraph, to show or render yourself

What a slide shows: every box with its op and shape (no numbers: a slide
explains, it does not report), every backward edge with the formula of what
flows along it, in the tape's names. An attention layer (one head reads
best) is drawn op by op; a Transformer encoder or decoder layer one box per
sublayer, with the residual sums and the activation between them as ops of
their own (their edges carry formulas). The page is 13.33 × 7.5 inches (16:9,
a widescreen slide) and the graph fills it; the PNG is 1920 × 1080 pixels.
To fill it with the largest text, a long formula may be written on two lines,
and a block's sublayers hang one under the other, left of its residual path
(not one quarter of the slide left empty).
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import graphviz

from .drawing import check_options, warn_if_collapsed
from .paint import paint
from .picture import to_digraph
from .program import Recorded, collect, trace_backward
from .render import render, svg
from .saved import colour_orders
from .view import MAX_NODES, View

__all__ = ["slide", "save_slide", "SLIDE_INCHES", "SLIDE_PIXELS"]

SLIDE_INCHES = (13.333, 7.5)  # a widescreen (16:9) slide
SLIDE_PIXELS = (1920, 1080)
FORMULA_WIDTH = 40  # characters: a longer formula on an edge may be written on two lines or more
_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')


def slide(layer: Recorded, *, title: str | None = None, expand: Any = None) -> graphviz.Digraph:
    """The 16:9 slide of ``layer``'s last forward and backward (a ``graphviz.Digraph``).

    ``layer``: a MultiHeadAttention (drawn op by op) or a Transformer
    encoder/decoder layer (one box per sublayer); ``expand`` opens modules of
    a block (see :func:`~microtape.viz.graph`).
    """
    if not hasattr(layer, "tape") or not callable(getattr(layer, "parameters", None)):
        raise TypeError(f"slide(layer): expected a layer after a forward pass, got {type(layer).__name__}")
    is_attention = hasattr(layer, "attention_weights")
    detail = "auto" if is_attention or expand else "summary"  # attention: every op; a block: its sublayers
    name = type(layer).__name__
    heads = getattr(layer, "num_heads", None)
    text = title or (f"{name} ({heads} head{'s' if heads != 1 else ''})" if heads else name)
    # Painted here as graph(backward=True, values=False, width=None) paints it, to be changed before dot draws it.
    program = collect(layer)
    trace = trace_backward(program)
    view = View(program, **check_options("module", detail, MAX_NODES, None, expand))
    warn_if_collapsed(view, MAX_NODES, stacklevel=2)
    # Every way to draw it: top to bottom or left to right; each formula on one line or wrapped (a
    # narrower, taller drawing); a block's sublayers where dot puts them or stacked (_stack_sublayers).
    # The slide takes the largest text and, of equal ones, the stacked sublayers: they fill the frame.
    pixels_x, pixels_y = SLIDE_PIXELS
    best = None
    for rankdir in ("TB", "LR"):
        for formula_width in (None, FORMULA_WIDTH):
            picture = colour_orders(paint(view, trace, values=False, title=text, rankdir=rankdir), view)
            if formula_width:
                _wrap_formulas(picture, formula_width)
            for stacked in (False, True):
                digraph = to_digraph(picture)
                if stacked:
                    _stack_sublayers(digraph, picture)
                # Scale the drawing to fit 1920 × 1080, then pad the short side: exactly 16:9, nothing distorted.
                drawn_width, drawn_height = (float(v) for v in _SIZE.search(svg(digraph)).groups())  # type: ignore[union-attr]  # points
                zoom = min(pixels_x / drawn_width, pixels_y / drawn_height)
                if best is None or (zoom, stacked) > best[:2]:
                    best = (zoom, stacked, digraph, drawn_width, drawn_height)
    zoom, _, digraph, drawn_width, drawn_height = best  # type: ignore[misc]  # at least one layout was drawn
    pad_x = max(0.0, (pixels_x / zoom - drawn_width) / 2 / 72)  # inches of the drawing, around it
    pad_y = max(0.0, (pixels_y / zoom - drawn_height) / 2 / 72)
    digraph.attr(dpi=f"{72 * zoom:.4f}", pad=f"{pad_x:.4f},{pad_y:.4f}")
    return digraph


def _wrap_formulas(picture: Any, width: int) -> None:
    """Break every edge's formula longer than ``width`` characters into lines, at spaces (nothing is cut)."""
    for arrow in picture.arrows:
        if arrow.label and len(arrow.label) > width:
            lines = textwrap.wrap(arrow.label, width, break_long_words=False, break_on_hyphens=False)
            arrow.label = "\\n".join(lines)  # dot's line break (lines centred)


def _stack_sublayers(digraph: Any, picture: Any) -> None:
    """Hang each sublayer of a residual block under the one before: one column, left of the residual path.

    A block drawn one box per sublayer keeps its residual path straight down the page (the picture's
    ``spine``) and hangs each sublayer beside the box it starts from. Left to itself, ``dot`` puts the
    feed-forward right beside the path, under nothing: self-attention above it is three projections
    wide, so a quarter of a 16:9 slide, its lower left, stays empty. An invisible edge from the first
    box of each sublayer to the first box of the next, in one ``group`` with the boxes the next one
    goes through (``dot`` keeps a group's edges straight), draws the sublayers one under the other.
    The edge runs down ranks the path already sets, so the drawing is as tall as before; it may be
    wider, and then :func:`slide` keeps dot's own layout (the text comes first).
    """
    path = picture.spine
    leaves = ("input", "parameter", "constant")
    beside = {shape.id for shape in picture.shapes if shape.id not in path and shape.kind not in leaves}
    starts = []  # the first box of each sublayer: the first box beside the path that a box on the path feeds
    for box in path:
        fed = [arrow.head for arrow in picture.arrows if arrow.tail == box and arrow.head in beside]
        if fed and fed[0] not in starts:
            starts.append(fed[0])
    for upper, lower in zip(starts, starts[1:]):
        for box in [upper, *_sublayer(lower, beside, picture.arrows)]:
            digraph.node(box, group="sublayers")  # a node said again keeps its label and its cluster
        digraph.edge(upper, lower, style="invis")


def _sublayer(start: str, beside: set[str], arrows: list[Any]) -> list[str]:
    """``start`` and the boxes beside the residual path it feeds, directly or not (up to the path)."""
    found, todo = [], [start]
    while todo:
        box = todo.pop()
        if box not in found:
            found.append(box)
            todo += [arrow.head for arrow in arrows if arrow.tail == box and arrow.head in beside]
    return found


def save_slide(
    layer: Any, path: str | os.PathLike[str], *, title: str | None = None, expand: Any = None
) -> dict[str, Path]:
    """Write ``path``.svg and ``path``.png (16:9, 1920 × 1080); returns ``{"svg": Path, "png": Path}``."""
    digraph = slide(layer, title=title, expand=expand)
    path = Path(path)
    return {fmt: render(digraph, path.with_suffix(f".{fmt}")) for fmt in ("svg", "png")}
