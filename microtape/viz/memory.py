"""Memory you can see: live bytes against the step, through the forward and then the reverse pass.

This module lets you draw what backward keeps::

    fig = mt.viz.memory(attn)              # a layer after its forward (or a Tape, or a Tensor result)
    print(fig.table)                       # rows: step, live bytes, what is alive
    fig.table.peak                         # the peak: which step, which arrays
    fig = compare_attention(T=256)         # full tape, lean tape and tiled op side by side,
                                           # the hand-written numpy reference's peak as a line

The figures are computed from the tape when asked (:mod:`.lifetimes`:
shapes × itemsizes and each array's lifetime, and what each step allocates
for itself as its op declares it: im2col columns, scratch tiles), not
measured: recording pays nothing for them, and drawing changes no value or
gradient. Against ``tracemalloc`` they agree within ±15 % for attention (full
and lean tape, the tiled op), a small conv net and a GRU (the tests check each).

The areas are stacked by kind — values the tape holds, what an op saved for
its backward, gradients — and, for a tape holding a recorded derivative
(``create_graph=True``), the values of its derivative steps get a colour of
their own: that is what a second derivative keeps alive.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from ..nn import MultiHeadAttention
from .figure import new_figure
from .lifetimes import human_bytes, lifetimes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..engine import Node, Tape
    from .program import Recorded

__all__ = ["memory", "compare_attention", "numpy_reference_peak", "draw_timeline", "slope", "KIND_COLOURS"]

KIND_COLOURS = {
    "value": "#3b5b92",
    "value, derivative steps": "#8e44ad",
    "saved": "#2e7d32",
    "gradient": "#d35400",
    "scratch": "#9e9e9e",  # what one step allocates for itself (im2col columns, scratch tiles)
}


def memory(
    tape_or_layer: Tape | Node | Recorded, *, grad: Any = None, title: str | None = None, axes: Any = None
) -> Any:
    """A matplotlib figure of live bytes against the step; ``fig.table`` is the :class:`~.lifetimes.Ledger`.

    ``tape_or_layer``: a :class:`~microtape.Tape` of Tensors, a layer after
    its forward (``attn``, a Transformer layer, ``Conv2d``, ``BatchNorm``, a
    ``GRUCell``: its last forward), or a Tensor result.
    ``grad``: the reverse pass's seed (default: the output's ``.grad``, else
    ones). ``axes``: draw into these matplotlib axes instead of a new
    figure (then the figure returned is theirs). The peak is marked and
    named: its step and its largest arrays.
    """
    ledger = lifetimes(tape_or_layer, grad)
    if axes is None:
        fig = new_figure(figsize=(9, 3.6), layout="constrained")  # 900 px: a notebook cell
        axes = fig.add_subplot()
    else:
        fig = axes.figure
    draw_timeline(axes, ledger, title)
    fig.table = ledger  # type: ignore[union-attr]  # a note on the figure, for its readers
    return fig


def draw_timeline(axes: Any, ledger: Any, title: str | None = None, scale: Any = None, legend: bool = True) -> Any:
    """Stack the ledger's live bytes by kind on ``axes``; mark and name the peak."""
    ticks = np.arange(len(ledger.rows))
    unit, divisor = _unit(ledger.peak_bytes) if scale is None else scale
    layers: dict[Any, Any] = {}
    for array in ledger.arrays:
        kind = array.kind
        if kind == "value" and array.order > 0:
            kind = "value, derivative steps"
        series = layers.setdefault(kind, np.zeros(len(ticks)))
        end = len(ticks) if array.freed is None else min(array.freed, len(ticks))
        series[array.born : end] += array.nbytes
    kinds = [k for k in KIND_COLOURS if k in layers and layers[k].any()]
    axes.stackplot(
        ticks,
        *[layers[k] / divisor for k in kinds],
        labels=kinds,
        colors=[KIND_COLOURS[k] for k in kinds],
        alpha=0.85,
        step=None,
    )
    axes.axvline(ledger.forward_ticks - 0.5, color="#555555", linewidth=0.8, linestyle=":")
    top = ledger.peak_bytes / divisor
    turn = ledger.forward_ticks - 0.5
    axes.text(turn, top * 1.02, " backward →", fontsize=8, va="bottom", color="#555555")
    axes.text(turn, top * 1.02, "← forward ", fontsize=8, va="bottom", ha="right", color="#555555")
    peak = ledger.peak
    axes.plot([peak.tick], [peak.live_bytes / divisor], "v", color="#b03a2e", markersize=7)
    named = ", ".join(peak.alive[:3]) + (" …" if len(peak.alive) > 3 else "")
    axes.annotate(
        f"peak {human_bytes(peak.live_bytes)} at {peak.phase} step {peak.step}\n{named}",
        (peak.tick, peak.live_bytes / divisor),
        xytext=(0.02, 0.97),
        textcoords="axes fraction",
        va="top",
        fontsize=8,
        color="#b03a2e",
        arrowprops=dict(arrowstyle="-", color="#b03a2e", linewidth=0.6),
    )
    axes.set(xlabel="step (forward equations, then reverse-pass steps)", ylabel=f"live {unit}")
    axes.set_ylim(0, top * 1.25 if top else 1)
    axes.set_xlim(0, max(len(ticks) - 1, 1))
    if legend:
        axes.legend(loc="upper right", fontsize=8, frameon=False)
    if title:
        axes.set_title(title, fontsize=10)
    return axes


def _unit(peak: Any) -> Any:
    for unit, divisor in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if peak >= divisor:
            return unit, divisor
    return "bytes", 1


def numpy_reference_peak(batch: int, length: int, embed: int, heads: int, itemsize: int = 8) -> Any:
    """The peak of ``benchmarks/numpy_attention.py``'s forward + backward, counted from shapes (bytes).

    Mirrors that file line by line (leaves — ``x``, the weights, the seed —
    not counted, as in :mod:`.lifetimes`): the forward keeps ``q, k, v``,
    the weights ``P`` (one ``[B·H, T, T]`` array, normalised in place) and
    ``merged``; the backward's peak is in the softmax step, where ``P``,
    ``dP`` (``dS`` is born in its buffer) and the product ``dP ⊙ P`` are
    alive together with ``dC`` and ``dV``. A test checks it against
    ``tracemalloc`` on the reference itself.
    """
    rows = batch * length
    squares = batch * heads * length * length
    vectors = rows * embed
    out = vectors  # y
    # forward, kept: q, k, v (each split by reshape/transpose: a copy), P, merged (a copy), y
    forward_kept = 3 * vectors + squares + vectors + out
    # backward at the softmax step: dmerged, dC (split copy), dV, dP, dP ⊙ P, row sums, dWo, dbo
    backward_live = vectors + vectors + vectors + 2 * squares + batch * heads * length + embed * embed + embed
    return (forward_kept + backward_live) * itemsize


def compare_attention(
    length: int = 256,
    *,
    batch: int = 1,
    embed: int = 16,
    heads: int = 2,
    block_size: int = 64,
    dtype: Any = np.float64,
    seed: int = 0,
) -> Figure:
    """Full tape, lean tape and tiled op of one attention at the same sizes, side by side, one scale.

    Each panel is :func:`memory` of a fresh ``MultiHeadAttention`` after a
    forward and a backward; the dashed line is the hand-written numpy
    reference's peak (:func:`numpy_reference_peak`). Returns the figure;
    ``fig.tables`` maps ``"full"``, ``"lean"``, ``"tiled"`` to their ledgers.
    """
    for name, value in (("length", length), ("batch", batch), ("embed", embed), ("heads", heads)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)) or value < 1:
            raise ValueError(f"compare_attention({name}={value!r}): expected a positive whole number")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, length, embed)).astype(dtype)
    g = rng.standard_normal((batch, length, embed)).astype(dtype)
    ledgers = {}
    for label, options in (("full", {}), ("lean", {"lean": True}), ("tiled", {"block_size": block_size})):
        attn = MultiHeadAttention(embed, heads, seed=seed, dtype=dtype, **options)
        attn(x)
        ledgers[label] = lifetimes(attn, g)
    reference = numpy_reference_peak(batch, length, embed, heads, np.dtype(dtype).itemsize)
    highest = max(max(ledger.peak_bytes for ledger in ledgers.values()), reference)
    scale = _unit(highest)
    fig = new_figure(figsize=(9, 3.8), layout="constrained")
    panels = fig.subplots(1, 3, sharey=True)
    titles = {"full": "full tape", "lean": "lean tape", "tiled": f"tiled op (block {block_size})"}
    for axes, (label, ledger) in zip(panels, ledgers.items(), strict=True):
        draw_timeline(axes, ledger, titles[label], scale=scale, legend=False)
        axes.axhline(reference / scale[1], color="#222222", linestyle="--", linewidth=1, label="numpy reference peak")
        axes.set_ylim(0, highest / scale[1] * 1.35)
        axes.set_xlabel("step (forward, then backward)", fontsize=8)
        if axes is not panels[0]:
            axes.set_ylabel("")
    handles: dict[Any, Any] = {}
    for axes in panels:
        for handle, text in zip(*axes.get_legend_handles_labels(), strict=True):
            handles.setdefault(text, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=len(handles), fontsize=8)
    fig.suptitle(
        f"attention B={batch} T={length} E={embed} H={heads} ({np.dtype(dtype).name}): what backward keeps",
        fontsize=10,
    )
    fig.tables = ledgers  # type: ignore[attr-defined]  # notes on the figure, for its readers
    fig.reference_peak = reference  # type: ignore[attr-defined]
    return fig


def slope(lengths: Any, peaks: Any) -> Any:
    """The slope of log(peak) against log(length), least squares: 2 is quadratic, 1 linear.

    Two distinct lengths at least (one point has no slope; numpy would warn and answer anyway).
    """
    if len(set(np.asarray(lengths, dtype=float).tolist())) < 2:
        raise ValueError(f"slope(lengths={list(lengths)!r}): expected at least two distinct lengths")
    logs = np.log(np.asarray(lengths, dtype=float)), np.log(np.asarray(peaks, dtype=float))
    return float(np.polyfit(*logs, 1)[0])
