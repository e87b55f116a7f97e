"""Heatmaps of attention: the weights each head gives, and their gradients.

This module lets you look inside a multi-head attention layer::

    attn = mt.nn.MultiHeadAttention(16, 4, causal=True, seed=0)
    y = attn(x)
    fig = mt.viz.attention_heatmaps(attn, tokens=["the", "cat", "sat"])
    attn.backward(g)
    fig = mt.viz.attention_heatmaps(attn, which="grad_scores")        # dS, with its row sums
    fig = mt.viz.attention_heatmaps(attn, which=("weights", "dropped"))  # before / after dropout
    fig.savefig("heads.png")

One panel per head (row = query token, column = key token), one colour scale
shared by all the panels of a row of pictures, with its colorbar:

* ``which="weights"``: ``P = softmax(S)``, from 0 (white) to the largest weight
  shown; ``"dropped"``: the weights after dropout (scaled by ``1/(1-p)``).
  Drawn together, weights and dropped weights share one scale, so the
  ``1/(1-p)`` rescale shows. Cells dropout zeroed carry a dot.
* ``which="grad_weights"`` (``dP``) and ``"grad_scores"`` (``dS``): gradients,
  in a diverging map centred at 0 with symmetric limits, so red is "raising
  this would raise the loss", blue the opposite, and white exactly zero. A
  margin column ``Σ`` shows each row's sum (each row of ``dS`` sums to 0:
  softmax ignores a shift of a whole row).

Masked cells (mask value ``<= -1e4`` or ``-inf``: the key is hidden from that
query) are grey and hatched, and left out of the colour limits — they are
not "weight 0 by choice". The mask comes from the layer (``attn.last_mask``)
or is passed as ``mask=`` (an additive ``[Tq, Tk]`` array).

Long maps: ``vmax=`` caps the colour scale; ``norm="row"`` scales each row
to its largest weight, ``norm="log"`` uses a logarithmic scale. The default
(``"auto"``) is linear up to 16 keys and row-scaled above, where one
always-1 cell (the first query of a causal map) would wash the rest out.
Numbers are written in the cells of weight maps up to 10 × 10 by default
(``annotate="auto"``), of any map up to 16 × 16 with ``annotate=True``, and
never above 16 × 16 (the title says they were left out).

You may pass the numbers directly instead of a layer: an array
``[B, H, Tq, Tk]``, ``[H, Tq, Tk]`` or ``[Tq, Tk]``; ``which`` then only says
what they are (which colour map to use). The figure is a plain
``matplotlib.figure.Figure`` (no pyplot state): Jupyter shows it, and
``fig.savefig(path)`` writes it.

The builder is split by concern: :mod:`.inputs` reads and checks the maps,
:mod:`.layout` places the panels, :mod:`.colour` picks the scales and
:mod:`.annotation` writes numbers, marks and titles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


import numbers

import numpy as np

from ..figure import new_figure
from .annotation import (
    ANNOTATE_UP_TO,
    DOT_OFFSET,
    TITLES,
    annotate_cells,
    colorbar,
    figure_title,
    hatch_masked,
    mark_dropped,
    row_sums,
    writes_numbers,
)
from .colour import LINEAR_UP_TO, MASK_GREY, NORMS, colour_norm, shared_scales
from .inputs import GRADIENTS, MASKED_AT, WHICH, read_maps
from .layout import Grid, ticks

__all__ = [
    "attention_heatmaps",
    "WHICH",
    "MASKED_AT",
    "ANNOTATE_UP_TO",
    "NORMS",
    "GRADIENTS",
    "MASK_GREY",
    "DOT_OFFSET",
]


def attention_heatmaps(
    attn_or_weights: Any,
    *,
    batch: int = 0,
    heads: Sequence[int] | None = None,
    tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    mask: bool = True,
    which: Any = "weights",
    annotate: bool | str = "auto",
    vmax: float | None = None,
    norm: str = "auto",
    ncols: int | None = None,
    title: str | None = None,
) -> Figure:
    """One heatmap per head, shared colour scale and colorbar; returns a ``Figure``.

    ``attn_or_weights``: a MultiHeadAttention (after a forward; after a
    backward for gradients) or an array ``[B,H,Tq,Tk]`` / ``[H,Tq,Tk]`` /
    ``[Tq,Tk]``. ``batch``: which batch entry. ``heads``: an int, a list, or
    None for all. ``tokens``: labels of the queries (and of the keys unless
    ``key_tokens`` is given). ``mask``: True (the layer's mask, if any), False,
    or an additive ``[Tq, Tk]`` array. ``which``: one of ``"weights"``,
    ``"dropped"``, ``"grad_scores"``, ``"grad_weights"``, or a sequence of
    them (one row of panels each). ``annotate``: write the numbers in the
    cells (``"auto"``: weights of maps up to 10 × 10; never above 16 × 16).
    ``vmax``: the top of the colour scale (gradients: ±vmax). ``ncols``: panels
    per row (default: as many as fit 9 inches, a notebook cell). ``norm``:
    ``"auto"``, ``"linear"``, ``"row"`` or ``"log"`` (weights only).
    """
    maps = read_maps(attn_or_weights, which, batch, heads, tokens, key_tokens, mask)
    Tk = maps.shape[-1]
    if annotate not in ("auto", True, False):
        raise ValueError(f"attention_heatmaps(annotate=...): expected 'auto', True or False, got {annotate!r}")
    if ncols is not None and (isinstance(ncols, bool) or not isinstance(ncols, numbers.Integral) or ncols < 1):
        raise ValueError(f"attention_heatmaps(ncols=...): expected a positive integer or None, got {ncols!r}")
    if norm not in NORMS:
        raise ValueError(f"attention_heatmaps(norm=...): expected one of {', '.join(NORMS)}, got {norm!r}")
    if vmax is not None and (isinstance(vmax, bool) or not isinstance(vmax, numbers.Real) or not vmax > 0):
        raise ValueError(f"attention_heatmaps(vmax=...): expected a positive number, got {vmax!r}")
    if norm == "auto":
        norm = "linear" if Tk <= LINEAR_UP_TO or vmax is not None else "row"

    grid = Grid(maps, ncols, annotate)
    fig = new_figure(figsize=grid.figsize, layout="constrained")
    scales = shared_scales(maps.whiches, maps.arrays, maps.batch, maps.heads, maps.masked, vmax, norm)
    # One sub-figure per kind of map: its own title, panels and colorbar.
    blocks = [fig] if len(maps.whiches) == 1 else list(fig.subfigures(len(maps.whiches), 1).flat)  # type: ignore[union-attr]  # an array of two or more
    for block, w, array in zip(blocks, maps.whiches, maps.arrays, strict=True):
        _draw_block(block, maps, grid, w, array[maps.batch][maps.heads], scales[w], annotate, norm)
    fig.suptitle(figure_title(maps, title, norm, annotate, grid.width), fontsize=11)
    return fig


def _draw_block(block: Any, maps: Any, grid: Any, which: Any, data: Any, scale: Any, annotate: Any, norm: Any) -> None:
    """One row of panels (one per head) for the map ``which`` (``data``: ``[heads, Tq, Tk]``), with its colorbar."""
    _, _, Tq, Tk = maps.shape
    hidden = maps.masked[maps.heads]
    low, high, cmap, shown = scale
    write = writes_numbers(which, annotate, Tq, Tk)
    axes = list(block.subplots(grid.rows, grid.cols, squeeze=False).flat)
    image = None
    for k, h in enumerate(maps.heads):
        ax = axes[k]
        values = np.ma.masked_array(shown[k], mask=hidden[k])
        scale_of = colour_norm(which, norm, low, high)
        image = ax.imshow(values, cmap=cmap, norm=scale_of, interpolation="nearest", aspect="equal")
        ax.set_title(f"head {h}", fontsize=10)
        last_row = k >= len(maps.heads) - grid.cols
        ticks(ax, maps.query_labels, maps.key_labels, first_col=k % grid.cols == 0, bottom=last_row)
        hatch_masked(ax, hidden[k])
        if which in ("dropped", "grad_weights"):
            mark_dropped(ax, maps.dropped[h] & ~hidden[k], Tq * Tk)
        if write:
            annotate_cells(ax, data[k], shown[k], hidden[k], image)
        if which in GRADIENTS:
            row_sums(ax, data[k], hidden[k], image, write=Tq <= ANNOTATE_UP_TO)
    for ax in axes[len(maps.heads) :]:
        block.delaxes(ax)
    colorbar(block, image, axes[: len(maps.heads)], which, data, high, norm)
    if len(maps.whiches) > 1:
        block.suptitle(TITLES[which], fontsize=10, fontweight="bold")
