"""One head's backward pass at a glance: P and dP next to dQ, dK and dV, on shared scales.

This module lets you look at where the gradients of one attention head go::

    attn.backward(grad_output)
    fig = mt.viz.head_gradients(attn)      # one row per head

Each row is one head: the weights ``P`` (queries × keys), their gradient
``dP``, and the gradients of the head's queries, keys and values ``dQ``,
``dK``, ``dV`` (positions × head features). ``dQ``, ``dK`` and ``dV`` share
one diverging colour scale across all heads (white is exactly 0), so a head
whose queries barely move shows pale next to one that learns; ``dP`` has its
own (it lives in another space: one entry per pair of positions), also shared
across heads; ``P`` runs from 0 to the largest visible weight. Masked cells
are grey and left out of the scales, as in
:func:`~microtape.viz.attention_heatmaps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


import numbers

import numpy as np

from .figure import new_figure
from .heatmap.colour import MASK_GREY
from .heatmap.inputs import masked_cells
from .text import fmt

__all__ = ["head_gradients"]

COLUMNS = (("P", "weights P"), ("dP", "dP = ∂L/∂P"), ("dQ", "dQ"), ("dK", "dK"), ("dV", "dV"))


def head_gradients(
    attn: Any, *, batch: int = 0, heads: Sequence[int] | None = None, title: str | None = None
) -> Figure:
    """Per head: ``P``, ``dP``, ``dQ``, ``dK``, ``dV`` side by side, gradients on shared scales; a ``Figure``.

    ``attn``: a MultiHeadAttention after a forward and a backward (self-attention
    or cross). ``batch``: which batch entry; ``heads``: a list (default all).
    Rows and columns are positions and features in order (ticks would crowd
    the small panels).
    """
    if not hasattr(attn, "last_gradients"):
        raise TypeError(f"head_gradients(attn): expected a MultiHeadAttention, got {type(attn).__name__}")
    grads = attn.last_gradients
    if not grads:
        raise ValueError("head_gradients: no gradients yet; run attn.backward(grad_output) first")
    weights = np.asarray(attn.attention_weights, dtype=np.float64)
    B, H, Tq, Tk = weights.shape
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or not 0 <= batch < B:
        raise ValueError(f"head_gradients(batch={batch!r}): expected an integer in 0..{B - 1}")
    chosen = list(range(H)) if heads is None else [int(h) for h in heads]
    if not chosen or any(not 0 <= h < H for h in chosen):
        raise ValueError(f"head_gradients(heads={heads!r}): expected heads in 0..{H - 1}")
    per_head = {
        "P": weights,
        "dP": np.asarray(attn.grad_weights(), dtype=np.float64),
        **{f"d{k}": np.asarray(grads[f"{k}_heads"], dtype=np.float64).reshape(B, H, -1, attn.head_dim) for k in "QKV"},
    }
    hidden = masked_cells(attn, True, True, weights.shape)[batch]
    shown = {key: value[batch][chosen] for key, value in per_head.items()}
    scale = _scales(shown, ~hidden[chosen])
    fig = new_figure(figsize=(8.8, 0.6 + 1.75 * len(chosen)), layout="constrained")
    _draw_panels(fig, shown, hidden, chosen, scale)
    top_dp, top_qkv = scale["dP"][1], scale["dQ"][1]
    text = title or (
        f"each head's backward pass (batch {batch}): dQ, dK, dV on one scale, ±{fmt(top_qkv)}; dP ±{fmt(top_dp)}"
    )
    fig.suptitle(text, fontsize=10)
    return fig


def _scales(shown: Any, visible: Any) -> Any:
    """``{column: (low, high)}``: P from 0, dP symmetric, and dQ, dK, dV on one symmetric scale."""
    top_p = float(np.max(shown["P"][visible], initial=0.0)) or 1.0
    top_dp = float(np.max(np.abs(shown["dP"][visible]), initial=0.0)) or 1.0
    top_qkv = max(float(np.max(np.abs(shown[key]), initial=0.0)) for key in ("dQ", "dK", "dV")) or 1.0
    return {"P": (0.0, top_p), "dP": (-top_dp, top_dp), **dict.fromkeys(("dQ", "dK", "dV"), (-top_qkv, top_qkv))}


def _draw_panels(fig: Any, shown: Any, hidden: Any, chosen: Any, scale: Any) -> None:
    """One row of panels per head (masked cells grey in P and dP), and a colorbar per scale."""
    import matplotlib

    blues = matplotlib.colormaps["Blues"].with_extremes(bad=MASK_GREY)
    diverging = matplotlib.colormaps["RdBu_r"].with_extremes(bad=MASK_GREY)
    axes = fig.subplots(len(chosen), len(COLUMNS), squeeze=False)
    images = {}
    for r, h in enumerate(chosen):
        for c, (key, heading) in enumerate(COLUMNS):
            ax = axes[r, c]
            data = shown[key][r]
            if key in ("P", "dP"):
                data = np.ma.masked_array(data, mask=hidden[h])
            low, high = scale[key]
            cmap = blues if key == "P" else diverging
            images[key] = ax.imshow(data, cmap=cmap, vmin=low, vmax=high, interpolation="nearest", aspect="auto")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(heading, fontsize=9)
            if c == 0:
                ax.set_ylabel(f"head {h}", fontsize=9)
            if r == len(chosen) - 1:
                ax.set_xlabel("key" if key in ("P", "dP") else "feature", fontsize=8)
    for key, columns, label in (("P", [0], "P"), ("dP", [1], "dP"), ("dQ", [2, 3, 4], "dQ, dK, dV (one scale)")):
        bar = fig.colorbar(images[key], ax=list(axes[:, columns].flat), shrink=0.8, pad=0.01, aspect=30)
        bar.set_label(label, fontsize=8)
        bar.ax.tick_params(labelsize=7)
