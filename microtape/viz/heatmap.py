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
"""

import numbers
import textwrap

import numpy as np

from ..nn.masks import SUPPRESSED_BELOW
from .figure import new_figure
from .text import fmt

__all__ = ["attention_heatmaps", "WHICH", "MASKED_AT", "ANNOTATE_UP_TO", "NORMS"]

MASKED_AT = SUPPRESSED_BELOW  # an additive mask value at or below this hides the cell
WHICH = ("weights", "dropped", "grad_scores", "grad_weights")
GRADIENTS = ("grad_scores", "grad_weights")
NORMS = ("auto", "linear", "row", "log")
ANNOTATE_UP_TO = 16  # numbers are written in maps of at most this many queries and keys
FIGURE_WIDTH = 8.8  # inches: 880 px in Jupyter (100 dpi), shown unscaled in a 900 px cell
LINEAR_UP_TO = 16  # norm="auto": linear up to this many keys, row-scaled above
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
MASK_GREY = "#d0d0d0"
DROPPED_MARK = "#222222"
DOT_OFFSET = 0.3  # a dropped cell's dot sits this far from the centre, towards the top-right corner


def attention_heatmaps(
    attn_or_weights,
    *,
    batch=0,
    heads=None,
    tokens=None,
    key_tokens=None,
    mask=True,
    which="weights",
    annotate="auto",
    vmax=None,
    norm="auto",
    ncols=None,
    title=None,
):
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
    whiches = (which,) if isinstance(which, str) else tuple(which)
    if not whiches or any(w not in WHICH for w in whiches):
        raise ValueError(f"attention_heatmaps(which=...): expected one of {', '.join(WHICH)}, got {which!r}")
    is_layer = _is_layer(attn_or_weights)
    if not is_layer and len(whiches) > 1:
        raise ValueError("attention_heatmaps: several `which` need a layer; an array is just one kind of map")
    arrays = [_array_for(attn_or_weights, w, is_layer) for w in whiches]
    shape = arrays[0].shape
    for w, a in zip(whiches, arrays, strict=True):
        if a.shape != shape:
            raise ValueError(f"attention_heatmaps: {w} has shape {a.shape}, expected {shape}")
    B, H, Tq, Tk = shape
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or not -B <= batch < B:
        raise ValueError(f"attention_heatmaps(batch={batch!r}): expected an integer in 0..{B - 1}")
    head_list = _heads(heads, H)
    query_labels = _labels(tokens, Tq, "tokens")
    key_labels = _labels(key_tokens, Tk, "key_tokens") if key_tokens is not None else None
    if key_labels is None:
        if tokens is not None and Tk != Tq:
            raise ValueError(f"attention_heatmaps: {Tq} query tokens but {Tk} keys; pass key_tokens=... for the keys")
        key_labels = _labels(tokens, Tk, "tokens")
    masked = _masked_cells(attn_or_weights, mask, is_layer, shape)[batch]  # [H, Tq, Tk] bool
    dropped = _dropped_cells(attn_or_weights, is_layer, shape)[batch]  # [H, Tq, Tk] bool
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

    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    panel = 2.3 if max(Tq, Tk) <= 12 else 3.2
    label_room = 0.3 + 0.06 * max(len(s) for s in query_labels + key_labels)
    margin = 0.45 if set(whiches) & set(GRADIENTS) else 0.0  # the row-sum column
    if ncols is None:  # as many panels side by side as fit a notebook cell (900 px at 100 dpi)
        ncols = max(1, int((FIGURE_WIDTH - 1.3) // (panel + label_room + margin)))
    cols = min(len(head_list), int(ncols))
    rows = -(-len(head_list) // cols)
    block_height = rows * (panel + label_room) + 0.8
    width = max(cols * (panel + label_room + margin) + 1.3, 5.0)
    fig = new_figure(figsize=(width, len(whiches) * block_height + 0.6), layout="constrained")
    too_big = max(Tq, Tk) > ANNOTATE_UP_TO
    scales = _shared_scales(whiches, arrays, batch, head_list, masked, vmax, norm)
    # One sub-figure per kind of map: its own title, panels and colorbar.
    blocks = [fig] if len(whiches) == 1 else list(fig.subfigures(len(whiches), 1).flat)
    for block, w, array in zip(blocks, whiches, arrays, strict=True):
        data = array[batch][head_list]  # [h, Tq, Tk]
        hidden = masked[head_list]
        low, high, cmap, shown = scales[w]
        write = not too_big and (annotate is True or (annotate == "auto" and w not in GRADIENTS and max(Tq, Tk) <= 10))
        axes = list(block.subplots(rows, cols, squeeze=False).flat)
        image = None
        for k, h in enumerate(head_list):
            ax = axes[k]
            values = np.ma.masked_array(shown[k], mask=hidden[k])
            image = ax.imshow(
                values, cmap=cmap, norm=_norm(w, norm, low, high), interpolation="nearest", aspect="equal"
            )
            ax.set_title(f"head {h}", fontsize=10)
            _ticks(ax, query_labels, key_labels, first_col=k % cols == 0, bottom=k >= len(head_list) - cols)
            cells = np.argwhere(hidden[k])
            if len(cells) and Tq * Tk <= 64 * 64:
                patches = [Rectangle((c - 0.5, r - 0.5), 1, 1) for r, c in cells]
                ax.add_collection(
                    PatchCollection(patches, facecolor="none", edgecolor="#8a8a8a", hatch="///", linewidth=0)
                )
            if w in ("dropped", "grad_weights"):
                _mark_dropped(ax, dropped[h] & ~hidden[k], Tq * Tk)
            if write:
                _annotate(ax, data[k], shown[k], hidden[k], image)
            if w in GRADIENTS:
                _row_sums(ax, data[k], hidden[k], image, write=Tq <= ANNOTATE_UP_TO)
        for ax in axes[len(head_list) :]:
            block.delaxes(ax)
        bar = block.colorbar(
            image,
            ax=axes[: len(head_list)],
            shrink=0.85,
            pad=0.02,
            extend="max" if w not in GRADIENTS and np.max(data, initial=0) > high else "neither",
        )
        bar.set_label(
            COLORBAR[w] + (" ÷ its row's largest" if norm == "row" and w not in GRADIENTS else ""), fontsize=9
        )
        bar.ax.tick_params(labelsize=8)
        if len(whiches) > 1:
            block.suptitle(TITLES[w], fontsize=10, fontweight="bold")
    notes = [f"batch {batch % B}"]
    if masked.any():
        notes.append("hatched = masked")
    if any(w in ("dropped", "grad_weights") for w in whiches) and dropped.any():
        notes.append("· = dropped by dropout")
    if norm in ("row", "log") and any(w not in GRADIENTS for w in whiches):
        notes.append("each row scaled to its largest weight" if norm == "row" else "log scale")
    if too_big and annotate is not False:
        notes.append(f"numbers not written: {Tq}×{Tk} is more than {ANNOTATE_UP_TO}×{ANNOTATE_UP_TO}")
    text = _title(whiches) if title is None else title
    text = f"{text}   ({'; '.join(notes)})" if title is None else text
    # Wrapped to the figure's width, so nothing is clipped (one head makes a narrow figure).
    fig.suptitle(textwrap.fill(text, width=max(30, int(width * 72 / (11 * 0.55)))), fontsize=11)
    return fig


def _title(whiches):
    kinds = set(whiches)
    if kinds <= {"weights", "dropped"}:
        return TITLES[whiches[0]] if len(whiches) == 1 else "attention weights, before and after dropout"
    if kinds <= set(GRADIENTS):
        return TITLES[whiches[0]] if len(whiches) == 1 else "attention gradients"
    return "attention weights and their gradients"


# ---------------------------------------------------------------- inputs


def _is_layer(source):
    return hasattr(source, "attention_weights")


def _as_bhqk(array, what):
    raw = np.asarray(getattr(array, "data", array))
    if raw.dtype.kind not in "fiu":
        raise TypeError(
            f"attention_heatmaps: {what} must hold real numbers, got dtype {raw.dtype}"
            + (" (the imaginary part would be dropped)" if raw.dtype.kind == "c" else "")
        )
    array = raw.astype(np.float64)
    if array.ndim == 2:
        array = array[None, None]
    elif array.ndim == 3:
        array = array[None]
    if array.ndim != 4:
        raise ValueError(
            f"attention_heatmaps: {what} must have shape [B, H, Tq, Tk], [H, Tq, Tk] or [Tq, Tk], got {array.shape}"
        )
    return array


def _array_for(source, which, is_layer):
    if not is_layer:
        if source is None or isinstance(source, (str, bytes, dict)):
            raise TypeError(
                "attention_heatmaps: expected a MultiHeadAttention or an array [B, H, Tq, Tk], "
                f"got {type(source).__name__}"
            )
        return _as_bhqk(source, "the array")
    weights = source.attention_weights
    if weights is None:
        raise ValueError("attention_heatmaps: the layer has no attention weights yet; run a forward pass first")
    weights = _as_bhqk(weights, "attention_weights")
    if which == "weights":
        return weights
    if which == "dropped":
        if getattr(source, "dropout_keep", True) is None:
            # Without dropout the "weights after dropout" are the weights: a picture of them would
            # suggest that something was dropped.
            raise ValueError(
                "attention_heatmaps(which='dropped'): the last forward ran without dropout "
                f"(dropout={getattr(source, 'dropout', 0.0)}, training={getattr(source, 'training', None)}), "
                "so nothing was dropped; run a forward in training mode with dropout > 0, or use which='weights'"
            )
        dropped = getattr(source, "dropped_attention_weights", None)
        if dropped is None:
            dropped = _tape_value(source, "dropped_weights", grad=False)
        if dropped is None:
            raise ValueError(
                "attention_heatmaps(which='dropped'): the layer keeps no post-dropout weights "
                "(dropout=0 or eval mode?); use which='weights'"
            )
        return np.asarray(dropped, dtype=np.float64).reshape(weights.shape)
    method = getattr(source, which, None)  # grad_scores() / grad_weights()
    grad = None
    if callable(method):
        try:
            grad = method()
        except RuntimeError:  # the layer's way of saying "no backward yet"
            grad = None
    if grad is None:
        # Read it off the tape: dP is the gradient of "weights", dS that of
        # the softmax's input.
        grad = _tape_value(source, "weights", grad=True, softmax_input=which == "grad_scores")
    if grad is None:
        raise ValueError(f"attention_heatmaps(which={which!r}): no gradient yet; run attn.backward(grad_output) first")
    return np.asarray(grad, dtype=np.float64).reshape(weights.shape)


def _tape_value(layer, name, grad, softmax_input=False):
    tape = getattr(layer, "tape", None)
    if tape is None:
        return None
    try:
        node = tape.find(name).output
    except (KeyError, AttributeError):
        return None
    if softmax_input:
        node = node.inputs[0] if node.inputs else None
        if node is None:
            return None
    return node.grad if grad else node.data


def _masked_cells(source, mask, is_layer, shape):
    """Boolean [B, H, Tq, Tk]: True where the additive mask hides the cell."""
    if mask is False or mask is None:
        return np.zeros(shape, dtype=bool)
    if mask is True:
        mask = getattr(source, "last_mask", None) if is_layer else None
        if mask is None:
            return np.zeros(shape, dtype=bool)
    mask = np.asarray(getattr(mask, "data", mask))
    if mask.dtype == bool:
        raise TypeError(
            "attention_heatmaps(mask=...): a boolean mask is ambiguous; pass the additive float mask "
            "(0 = allowed, -1e9 or -inf = hidden), e.g. microtape.nn.masks.from_bool(allowed)"
        )
    if not np.issubdtype(mask.dtype, np.number):
        raise TypeError(f"attention_heatmaps(mask=...): expected a float array, got dtype {mask.dtype}")
    try:
        hidden = np.broadcast_to(mask <= MASKED_AT, shape)
    except ValueError:
        raise ValueError(
            f"attention_heatmaps(mask=...): mask of shape {mask.shape} does not fit maps of shape "
            f"{shape[-2:]} (expected [Tq, Tk])"
        ) from None
    return hidden | np.broadcast_to(np.isneginf(mask), shape)


def _heads(heads, H):
    if heads is None:
        return list(range(H))
    items = [heads] if isinstance(heads, numbers.Integral) and not isinstance(heads, bool) else heads
    try:
        items = list(items)
    except TypeError:
        raise TypeError(f"attention_heatmaps(heads=...): expected an int or a list of ints, got {heads!r}") from None
    if not items:
        raise ValueError("attention_heatmaps(heads=...): the list of heads is empty")
    for h in items:
        if isinstance(h, bool) or not isinstance(h, numbers.Integral) or not 0 <= h < H:
            raise ValueError(f"attention_heatmaps(heads=...): head {h!r} is not in 0..{H - 1}")
    return [int(h) for h in items]


def _labels(tokens, n, what):
    if tokens is None:
        return [str(i) for i in range(n)]
    if isinstance(tokens, str):
        raise TypeError(f"attention_heatmaps({what}=...): expected a list of labels, not one string")
    labels = [str(t) for t in tokens]
    if len(labels) != n:
        raise ValueError(f"attention_heatmaps({what}=...): {len(labels)} labels for {n} positions")
    return labels


# ---------------------------------------------------------------- drawing


def _dropped_cells(source, is_layer, shape):
    """Boolean [B, H, Tq, Tk]: True where the layer's last dropout zeroed the weight."""
    keep = getattr(source, "dropout_keep", None) if is_layer else None
    if keep is None or np.size(keep) != np.prod(shape):
        return np.zeros(shape, dtype=bool)
    return np.asarray(keep).reshape(shape) == 0


def _shared_scales(whiches, arrays, batch, head_list, masked, vmax, norm):
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


def _norm(which, norm, low, high):
    from matplotlib.colors import LogNorm, Normalize

    if norm == "log" and which not in GRADIENTS:
        return LogNorm(vmin=low, vmax=high, clip=True)
    return Normalize(vmin=low, vmax=high)


def _mark_dropped(ax, cells, size):
    """A dot in the top-right corner of each cell dropout zeroed (a zero weight by chance looks the same).

    In the corner, not the centre: the centre is where a cell's number is written.
    """
    rows, cols = np.nonzero(cells)
    if len(rows) and size <= 64 * 64:
        marker = 3.0 if size <= 16 * 16 else 1.5
        ax.plot(cols + DOT_OFFSET, rows - DOT_OFFSET, linestyle="none", marker="o", markersize=marker,
                color=DROPPED_MARK, gid="dropped")  # fmt: skip


def _row_sums(ax, data, hidden, image, write):
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
    ax.imshow(sums[:, None], cmap=image.cmap, norm=image.norm, extent=(left, left + 1, rows - 0.5, -0.5),
              interpolation="nearest", aspect="auto")  # fmt: skip
    ax.set_xlim(-0.5, left + 1)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.text(left + 0.5, -0.55, "Σ", ha="center", va="bottom", fontsize=8, gid="row-sum-title")
    if write:
        for r, total in enumerate(sums):
            ax.text(left + 0.5, r, fmt(total), ha="center", va="center", fontsize=6, color=_ink(image, total),
                    gid="row-sum")  # fmt: skip


def _ink(image, value):
    """Dark or light text, for contrast with the cell's colour."""
    red, green, blue, _ = image.cmap(image.norm(value))
    return "#1a1a1a" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.55 else "white"


def _ticks(ax, query_labels, key_labels, first_col, bottom):
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


def _annotate(ax, values, shown, hidden, image):
    """Write each visible value in its cell (the real value, even when the colours are row-scaled)."""
    for (r, c), v in np.ndenumerate(values):
        if not hidden[r, c]:
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7, color=_ink(image, shown[r, c]))
