"""The colours of a heatmap: one scale shared by the panels of a row, its colour map, and text that stays readable.

Weights go from 0 (white) to the largest visible weight in ``Blues``
(optionally each row scaled to its largest, or a log scale); gradients use a
diverging ``RdBu_r`` map centred at 0 with symmetric limits. Masked cells are
grey and stay out of every limit.
"""

from typing import Any

import numpy as np

from .inputs import GRADIENTS

__all__ = ["shared_scales", "colour_norm", "ink", "MASK_GREY", "NORMS", "LINEAR_UP_TO"]

NORMS = ("auto", "linear", "row", "log")
LINEAR_UP_TO = 16  # norm="auto": linear up to this many keys, row-scaled above
MASK_GREY = "#d0d0d0"


def shared_scales(whiches: Any, arrays: Any, batch: int, head_list: Any, masked: Any, vmax: Any, norm: Any) -> Any:
    """``{which: (low, high, cmap, shown)}``: the colour limits, map and displayed values of each row.

    Gradients get a diverging map with symmetric limits; weights and dropped
    weights share one scale (so dropout's ``1/(1-p)`` rescale shows). The
    limits are taken over the visible (unmasked) cells of every panel.
    """
    import matplotlib

    hidden = masked[head_list]
    scales, weights = {}, {}
    for w, array in zip(whiches, arrays, strict=True):
        data = array[batch][head_list]
        if w in GRADIENTS:
            visible = data[~hidden]
            limit = vmax or (float(np.max(np.abs(visible))) if visible.size else 0.0) or 1.0
            cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad=MASK_GREY)
            scales[w] = (-limit, limit, cmap, data)
            continue
        if norm == "row":
            largest = np.max(np.where(hidden, 0.0, data), axis=-1, keepdims=True)
            data = np.divide(data, largest, out=np.zeros_like(data), where=largest > 0)
        weights[w] = data
    if weights:
        visible = np.concatenate([data[~hidden] for data in weights.values()])
        top = vmax or (float(np.max(visible)) if visible.size else 0.0) or 1.0
        low = top * 1e-3 if norm == "log" else 0.0
        cmap = matplotlib.colormaps["Blues"].with_extremes(bad=MASK_GREY)
        for w, data in weights.items():
            scales[w] = (low, top, cmap, np.maximum(data, low) if norm == "log" else data)
    return scales


def colour_norm(which: Any, norm: Any, low: Any, high: Any) -> Any:
    from matplotlib.colors import LogNorm, Normalize

    if norm == "log" and which not in GRADIENTS:
        return LogNorm(vmin=low, vmax=high, clip=True)
    return Normalize(vmin=low, vmax=high)


def ink(image: Any, value: Any) -> Any:
    """Dark or light text, for contrast with the cell's colour."""
    red, green, blue, _ = image.cmap(image.norm(value))
    return "#1a1a1a" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.55 else "white"
