"""What is written and marked on a heatmap: numbers in the cells, row sums, masked and dropped cells, titles.

Numbers are written in the cells of weight maps up to 10 × 10 by default, of
any map up to 16 × 16 with ``annotate=True``, never above (the title says
they were left out). Gradient maps get a margin column ``Σ`` of row sums.
Masked cells are hatched; cells dropout zeroed carry a dot in a corner.
"""

import textwrap
from typing import Any

import numpy as np

from .colour import ink
from .inputs import GRADIENTS

__all__ = [
    "annotate_cells",
    "row_sums",
    "mark_dropped",
    "hatch_masked",
    "colorbar",
    "figure_title",
    "TITLES",
    "ANNOTATE_UP_TO",
    "ANNOTATE_AUTO_UP_TO",
    "NUMBER_FONT",
    "NUMBER_CELL",
    "short",
    "DOT_OFFSET",
]

ANNOTATE_UP_TO = 16  # numbers are written in maps of at most this many queries and keys
ANNOTATE_AUTO_UP_TO = 10  # annotate="auto": weight maps of at most this many queries and keys
NUMBER_CELL = 0.27  # inches: a cell that holds a number at NUMBER_FONT (four characters)
SUM_WIDTH = 1.6  # cells: the Σ column, wide enough for a row sum's five characters
NUMBER_FONT = 8  # points: cell values and row sums (8 pt at 100 dpi stays over 10 px in an 833 px column)
TITLES = {
    "weights": "attention weights  P = softmax(S)",
    "dropped": "attention weights after dropout",
    "grad_weights": "gradient of the weights  dP = ∂L/∂P",
    "grad_scores": "gradient of the scores  dS = ∂L/∂S",
}
COLORBAR = {
    "weights": "weight",
    "dropped": "weight after dropout",
    "grad_weights": "dP",
    "grad_scores": "dS",
}
DROPPED_MARK = "#222222"
DOT_OFFSET = 0.3  # a dropped cell's dot sits this far from the centre, towards the top-right corner
HATCHED_UP_TO = 64 * 64  # cells; above this, masked and dropped cells are only coloured (the marks would be noise)


def short(value: Any, exponent: bool = True) -> str:
    """A number in at most five characters, to fit a cell at 8 pt: ``.56``, ``-.06``, ``1.00``, ``-12``, ``3e-4``.

    ``exponent=False``: a small number keeps two decimals (``.00``, ``-.00``), as a map's cells are written.
    """
    value = float(value)
    if value == 0.0 and exponent:
        return "0"
    if abs(value) < 1 and (not exponent or abs(value) >= 0.005):
        return f"{value:.2f}".replace("0.", ".", 1)
    if 1 <= abs(value) < 10:
        return f"{value:.2f}"
    if 10 <= abs(value) < 1000:
        return f"{value:.0f}"
    mantissa, power = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(power)}"


def writes_numbers(which: Any, annotate: Any, rows: Any, keys: Any) -> Any:
    """Whether the numbers go in the cells of a ``which`` map of ``rows`` × ``keys``."""
    if max(rows, keys) > ANNOTATE_UP_TO:
        return False
    return annotate is True or (
        annotate == "auto" and which not in GRADIENTS and max(rows, keys) <= ANNOTATE_AUTO_UP_TO
    )


def hatch_masked(ax: Any, hidden: Any) -> None:
    """Hatch the masked cells (grey already: the colour map's "bad" colour), in maps up to 64 × 64."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    cells = np.argwhere(hidden)
    if len(cells) and hidden.size <= HATCHED_UP_TO:
        patches = [Rectangle((c - 0.5, r - 0.5), 1, 1) for r, c in cells]
        ax.add_collection(PatchCollection(patches, facecolor="none", edgecolor="#8a8a8a", hatch="///", linewidth=0))


def mark_dropped(ax: Any, cells: Any, size: Any) -> None:
    """A dot in the top-right corner of each cell dropout zeroed (a zero weight by chance looks the same).

    In the corner, not the centre: the centre is where a cell's number is written.
    """
    rows, cols = np.nonzero(cells)
    if len(rows) and size <= HATCHED_UP_TO:
        marker = 3.0 if size <= 16 * 16 else 1.5
        ax.plot(cols + DOT_OFFSET, rows - DOT_OFFSET, linestyle="none", marker="o", markersize=marker,
                color=DROPPED_MARK, gid="dropped")  # fmt: skip


def row_sums(ax: Any, data: Any, hidden: Any, image: Any, write: Any) -> None:
    """A margin column Σ: each row's sum over its visible cells, on the map's colour scale (numbers up to 16 rows).

    Masked cells are left out: a key hidden from a query is no part of its
    row (``dP`` is not zero there, but nothing flows through it).
    """
    rows, keys = data.shape
    visible = np.where(hidden, 0.0, data)
    sums = visible.sum(axis=-1)
    # A row sum that is 0 in exact arithmetic (each row of dS) comes out as rounding noise.
    sums = np.where(np.abs(sums) <= 1e-12 * np.max(np.abs(visible), axis=-1), 0.0, sums)
    left = keys - 0.5 + 0.35
    ax.imshow(sums[:, None], cmap=image.cmap, norm=image.norm, extent=(left, left + SUM_WIDTH, rows - 0.5, -0.5),
              interpolation="nearest", aspect="auto")  # fmt: skip
    ax.set_xlim(-0.5, left + SUM_WIDTH)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.text(left + SUM_WIDTH / 2, -0.55, "Σ", ha="center", va="bottom", fontsize=8, gid="row-sum-title")
    if write:
        for r, total in enumerate(sums):
            ax.text(left + SUM_WIDTH / 2, r, short(total), ha="center", va="center", fontsize=NUMBER_FONT,
                    color=ink(image, total), gid="row-sum")  # fmt: skip


def annotate_cells(ax: Any, values: Any, shown: Any, hidden: Any, image: Any) -> None:
    """Write each visible value in its cell (the real value, even when the colours are row-scaled)."""
    for (r, c), v in np.ndenumerate(values):
        if not hidden[r, c]:
            ax.text(c, r, short(v, exponent=False), ha="center", va="center", fontsize=NUMBER_FONT,
                    color=ink(image, shown[r, c]), gid="cell-value")  # fmt: skip


def colorbar(block: Any, image: Any, axes: Any, which: Any, data: Any, high: Any, norm: Any) -> None:
    """The colorbar of one row of panels, labelled with what it measures (an arrow when values pass its top)."""
    bar = block.colorbar(
        image,
        ax=axes,
        shrink=0.85,
        pad=0.02,
        extend="max" if which not in GRADIENTS and np.max(data, initial=0) > high else "neither",
    )
    row_scaled = norm == "row" and which not in GRADIENTS
    bar.set_label(COLORBAR[which] + (" ÷ its row's largest" if row_scaled else ""), fontsize=9)
    bar.ax.tick_params(labelsize=8)


def figure_title(maps: Any, title: str | None, norm: Any, annotate: Any, width: Any) -> Any:
    """The figure's title, wrapped to its width: what is shown, then notes on how (unless ``title`` is given)."""
    if title is None:
        whiches = maps.whiches
        B, _, Tq, Tk = maps.shape
        notes = [f"batch {maps.batch % B}"]
        if maps.masked.any():
            notes.append("hatched = masked")
        if any(w in ("dropped", "grad_weights") for w in whiches) and maps.dropped.any():
            notes.append("· = dropped by dropout")
        if norm in ("row", "log") and any(w not in GRADIENTS for w in whiches):
            notes.append("each row scaled to its largest weight" if norm == "row" else "log scale")
        if max(Tq, Tk) > ANNOTATE_UP_TO and annotate is not False:
            notes.append(f"numbers not written: {Tq}×{Tk} is more than {ANNOTATE_UP_TO}×{ANNOTATE_UP_TO}")
        title = f"{_kind_title(whiches)}   ({'; '.join(notes)})"
    # Wrapped to the figure's width, so nothing is clipped (one head makes a narrow figure).
    return textwrap.fill(title, width=max(30, int(width * 72 / (11 * 0.55))))


def _kind_title(whiches: Any) -> Any:
    kinds = set(whiches)
    if kinds <= {"weights", "dropped"}:
        return TITLES[whiches[0]] if len(whiches) == 1 else "attention weights, before and after dropout"
    if kinds <= set(GRADIENTS):
        return TITLES[whiches[0]] if len(whiches) == 1 else "attention gradients"
    return "attention weights and their gradients"
