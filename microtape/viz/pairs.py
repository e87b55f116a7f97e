"""Pictures meant to be compared, on one colour scale: before and after training, two layers, two runs.

This module lets you put attention maps side by side honestly::

    figures = mt.viz.paired_heatmaps({"before training": w0, "after training": w1}, tokens=tokens)
    figures[0], figures[1]            # two matplotlib Figures, one colour scale, said in each title

Drawn one by one, each map gets its own colour scale (from 0 to its own
largest weight), so a map that learned a sharp pattern and one that is
nearly uniform can look alike: "it learned" cannot be seen. Here every map
shares one scale — from 0 to the largest visible weight of all of them
(gradients: ±the largest magnitude) — and each title says so, with the
scale's top. Masked cells stay out of the scale, as in
:func:`~microtape.viz.attention_heatmaps` (which draws each figure).
(The weights before and after *dropout* are one figure already:
``attention_heatmaps(attn, which=("weights", "dropped"))`` shares one scale.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


import numpy as np

from .heatmap import attention_heatmaps
from .heatmap.inputs import GRADIENTS, WHICH, array_for, is_layer, masked_cells
from .text import fmt

__all__ = ["paired_heatmaps", "shared_limit"]


def shared_limit(sources: Any, *, which: Any = "weights", mask: bool = True, batch: int = 0) -> Any:
    """The top of one colour scale for all ``sources``: the largest visible value (or magnitude, gradients)."""
    if which not in WHICH:
        raise ValueError(f"paired_heatmaps(which=...): expected one of {', '.join(WHICH)}, got {which!r}")
    top = 0.0
    for source in sources:
        layer = is_layer(source)
        array = array_for(source, which, layer)
        if not -array.shape[0] <= batch < array.shape[0]:
            raise ValueError(f"paired_heatmaps(batch={batch!r}): expected an integer in 0..{array.shape[0] - 1}")
        hidden = masked_cells(source, mask, layer, array.shape)[batch]
        visible = array[batch][~hidden]
        if visible.size:
            top = max(top, float(np.max(np.abs(visible) if which in GRADIENTS else visible)))
    return top or 1.0


def paired_heatmaps(
    pictures: Mapping[str, Any], *, which: Any = "weights", mask: bool = True, batch: int = 0, **options: Any
) -> list[Figure]:
    """One figure per entry of ``pictures`` (``{title: layer or weights}``), all on one colour scale.

    Returns the list of figures in the order given. ``options`` are those of
    :func:`~microtape.viz.attention_heatmaps` (``tokens=``, ``heads=``, …),
    except ``vmax`` and ``norm`` (the scale is shared and linear) and ``title``.
    """
    if not isinstance(pictures, dict) or len(pictures) < 2:
        raise TypeError(
            "paired_heatmaps(pictures): expected a dict of at least two {title: layer or weights}, "
            f"got {type(pictures).__name__}" + (f" of {len(pictures)}" if isinstance(pictures, dict) else "")
        )
    taken = sorted({"vmax", "norm", "title"} & set(options))
    if taken:
        raise TypeError(f"paired_heatmaps: {', '.join(taken)} cannot be set: the pictures share one linear scale")
    top = shared_limit(pictures.values(), which=which, mask=mask, batch=batch)
    scale = f"−{fmt(top)} to {fmt(top)}" if which in GRADIENTS else f"0 to {fmt(top)}"
    figures = []
    for title, source in pictures.items():
        text = f"{title}   (one colour scale for these {len(pictures)} pictures: {scale})"
        figures.append(
            attention_heatmaps(
                source, which=which, mask=mask, batch=batch, vmax=top, norm="linear", title=text, **options
            )
        )
    return figures
