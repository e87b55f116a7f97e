"""Where the panels of a heatmap go: their size, how many side by side, the figure's size, and the ticks.

A figure is one block of panels per kind of map (one panel per head), as
many panels side by side as fit a notebook cell (900 px at 100 dpi).
"""

from typing import Any

from .annotation import NUMBER_CELL, writes_numbers
from .inputs import GRADIENTS

__all__ = ["Grid", "ticks", "FIGURE_WIDTH"]

FIGURE_WIDTH = 8.8  # inches: 880 px in Jupyter (100 dpi), shown unscaled in a 900 px cell


class Grid:
    """The panels' arrangement: ``rows`` × ``cols`` per block, and the figure's ``width`` and ``figsize`` (inches)."""

    def __init__(self, maps: Any, ncols: Any, annotate: Any = "auto") -> None:
        _, _, Tq, Tk = maps.shape
        panel = 2.3 if max(Tq, Tk) <= 12 else 3.2
        written = [which for which in maps.whiches if writes_numbers(which, annotate, Tq, Tk)]
        if written:  # each number inside its cell; a gradient's (a sign, four characters more) needs a third more
            cell = NUMBER_CELL * (1.35 if set(written) & set(GRADIENTS) else 1)
            panel = max(panel, cell * max(Tq, Tk))
        label_room = 0.3 + 0.06 * max(len(s) for s in maps.query_labels + maps.key_labels)
        margin = 0.6 if set(maps.whiches) & set(GRADIENTS) else 0.0  # the row-sum column
        if ncols is None:  # as many panels side by side as fit a notebook cell
            ncols = max(1, int((FIGURE_WIDTH - 1.3) // (panel + label_room + margin)))
        self.cols = min(len(maps.heads), int(ncols))
        self.rows = -(-len(maps.heads) // self.cols)
        block_height = self.rows * (panel + label_room) + 0.8
        self.width = max(self.cols * (panel + label_room + margin) + 1.3, 5.0)
        self.figsize = (self.width, len(maps.whiches) * block_height + 0.6)


def ticks(ax: Any, query_labels: Any, key_labels: Any, first_col: Any, bottom: Any) -> None:
    """One tick per token (or about eight evenly spaced ones when there are many)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, MaxNLocator

    for axis, labels in ((ax.xaxis, key_labels), (ax.yaxis, query_labels)):
        if len(labels) <= 16:
            axis.set_major_locator(FixedLocator(range(len(labels))))
            axis.set_major_formatter(FixedFormatter(labels))
        else:
            axis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    long = max(len(s) for s in key_labels) > 2
    ax.tick_params(length=0, labelsize=8)
    if long and len(key_labels) <= 16:
        for label in ax.get_xticklabels():
            label.set_rotation(45)
            label.set_horizontalalignment("right")
    if bottom:
        ax.set_xlabel("key", fontsize=9)
    if first_col:
        ax.set_ylabel("query", fontsize=9)
