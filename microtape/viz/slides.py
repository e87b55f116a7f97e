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
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .graph import graph
from .render import render, svg

__all__ = ["slide", "save_slide", "SLIDE_INCHES", "SLIDE_PIXELS"]

SLIDE_INCHES = (13.333, 7.5)  # a widescreen (16:9) slide
SLIDE_PIXELS = (1920, 1080)
_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')


def slide(layer: Any, *, title: str | None = None, expand: Any = None) -> Any:
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
    # Drawn top to bottom and left to right; the slide takes the one that fills 16:9 with the larger text.
    pixels_x, pixels_y = SLIDE_PIXELS
    best = None
    for rankdir in ("TB", "LR"):
        digraph = graph(
            layer, backward=True, values=False, detail=detail, expand=expand, width=None, rankdir=rankdir, title=text
        )
        # Scale the drawing to fit 1920 × 1080, then pad the short side: exactly 16:9, nothing distorted.
        drawn_width, drawn_height = (float(v) for v in _SIZE.search(svg(digraph)).groups())  # points, at 72 dpi
        zoom = min(pixels_x / drawn_width, pixels_y / drawn_height)
        if best is None or zoom > best[0]:
            best = (zoom, digraph, drawn_width, drawn_height)
    zoom, digraph, drawn_width, drawn_height = best
    pad_x = (pixels_x / zoom - drawn_width) / 2 / 72  # inches of the drawing, around it
    pad_y = (pixels_y / zoom - drawn_height) / 2 / 72
    digraph.attr(dpi=f"{72 * zoom:.4f}", pad=f"{pad_x:.4f},{pad_y:.4f}")
    return digraph


def save_slide(
    layer: Any, path: str | os.PathLike[str], *, title: str | None = None, expand: Any = None
) -> dict[str, Path]:
    """Write ``path``.svg and ``path``.png (16:9, 1920 × 1080); returns ``{"svg": Path, "png": Path}``."""
    digraph = slide(layer, title=title, expand=expand)
    path = Path(path)
    return {fmt: render(digraph, path.with_suffix(f".{fmt}")) for fmt in ("svg", "png")}
