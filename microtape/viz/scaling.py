"""Why attention is quadratic and tiling is not: peak memory against the sequence length, drawn.

This module lets you measure the law from the project itself::

    fig = mt.viz.memory_scaling()            # T = 128 … 4096, log axes, slopes in the legend
    fig.peaks["full"], fig.slopes["tiled"]   # bytes per length; ≈ 2 and ≈ 1

The peaks are computed, not allocated: each variant (full tape, lean tape,
tiled op) is recorded once at a small length ``T₀`` and its ledger
(:mod:`.lifetimes`) read at every ``T`` by putting ``T`` for ``T₀`` in every
array's shape — the tape's structure (which arrays live when) does not
depend on ``T``, only their sizes do. ``T₀`` is a prime no other dimension
equals, so no size is mistaken for the length; a test checks the result
against a ledger recorded at the real length. So 4096² arrays are never
made, and the figure draws in a second.
"""

import numbers
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

import numpy as np

from ..nn import MultiHeadAttention
from .figure import new_figure
from .lifetimes import lifetimes
from .memory import numpy_reference_peak, slope

__all__ = ["memory_scaling", "peak_at", "VARIANTS"]

#: The variants drawn, with their layer options and colours.
VARIANTS = {
    "full": ({}, "#3b5b92", "full tape"),
    "lean": ({"lean": True}, "#8e44ad", "lean tape"),
    "tiled": ({"block_size": 64}, "#2e7d32", "tiled op"),
}

_RECORDED_AT = 11  # T₀: a prime, unlike every other dimension here (B, E, H, D, B·H, the block size)


def peak_at(ledger: Any, recorded_at: Any, length: int) -> Any:
    """The ledger's peak live bytes with every axis of size ``recorded_at`` made ``length`` long."""
    ticks = len(ledger.rows)
    live = np.zeros(ticks + 1)
    for array in ledger.arrays:
        # (A step's scratch is left out: the tiled op's is block-sized, the same at every T, and the
        # tapes' ops declare none; so the law drawn is that of the arrays on the tape.)
        if not array.nbytes or array.kind == "scratch":
            continue
        shape = [length if size == recorded_at else size for size in array.shape]
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(array.dtype).itemsize
        end = ticks if array.freed is None else min(array.freed, ticks)
        live[array.born] += nbytes
        live[end] -= nbytes
    return int(np.cumsum(live)[:ticks].max())


def _ledger(options: Any, batch: int, embed: int, heads: int, dtype: Any, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, _RECORDED_AT, embed)).astype(dtype)
    g = rng.standard_normal((batch, _RECORDED_AT, embed)).astype(dtype)
    attn = MultiHeadAttention(embed, heads, seed=seed, dtype=dtype, **options)
    attn(x)
    return lifetimes(attn, g)


def _check_lengths(lengths: Any) -> Any:
    """``lengths`` as a list of ints, refused unless it holds two distinct whole lengths >= 2 (a slope needs two)."""
    expected = f"expected a sequence of at least two distinct whole lengths >= 2 (and not {_RECORDED_AT})"
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, (list, tuple, range, np.ndarray)):
        raise TypeError(f"memory_scaling(lengths={lengths!r}): {expected}")
    items = list(lengths)
    if not all(isinstance(t, (numbers.Integral, np.integer)) and not isinstance(t, (bool, np.bool_)) for t in items):
        raise TypeError(f"memory_scaling(lengths={lengths!r}): {expected}, got a non-integer")
    items = [int(t) for t in items]
    if len(set(items)) < 2 or any(t < 2 or t == _RECORDED_AT for t in items):
        raise ValueError(f"memory_scaling(lengths={lengths!r}): {expected}")
    return items


def memory_scaling(
    lengths: Any = (128, 256, 512, 1024, 2048, 4096),
    *,
    batch: int = 1,
    embed: int = 16,
    heads: int = 2,
    dtype: Any = np.float64,
    seed: int = 0,
) -> "Figure":
    """Peak memory against ``T`` for the full tape, lean tape and tiled op (and the numpy reference), log axes.

    Returns the figure; ``fig.peaks`` maps each variant to its peaks (bytes,
    one per length), ``fig.slopes`` to the slope of log peak against log T
    (least squares over ``lengths``), which the legend prints.
    """
    lengths = _check_lengths(lengths)
    if _RECORDED_AT in (batch, embed, heads, embed // heads, batch * heads):
        raise ValueError(f"memory_scaling: a dimension equals {_RECORDED_AT}, the length it records at; change it")
    itemsize = np.dtype(dtype).itemsize
    peaks = {
        name: [peak_at(_ledger(options, batch, embed, heads, dtype, seed), _RECORDED_AT, t) for t in lengths]
        for name, (options, _, _) in VARIANTS.items()
    }
    peaks["numpy"] = [numpy_reference_peak(batch, t, embed, heads, itemsize) for t in lengths]
    slopes = {name: slope(lengths, values) for name, values in peaks.items()}
    fig = new_figure(figsize=(7, 4.2), layout="constrained")
    axes = fig.add_subplot()
    styles = {**{name: (colour, text, "o-") for name, (_, colour, text) in VARIANTS.items()}}
    styles["numpy"] = ("#222222", "numpy reference", "s--")
    for name, values in peaks.items():
        colour, text, marker = styles[name]
        label = f"{text}: slope {slopes[name]:.2f}"
        axes.loglog(lengths, np.asarray(values) / 2**20, marker, color=colour, label=label)
    for exponent, where in ((2, "quadratic"), (1, "linear")):
        start = peaks["full" if exponent == 2 else "tiled"][0] / 2**20
        guide = [start * (t / lengths[0]) ** exponent for t in lengths]
        axes.loglog(lengths, guide, ":", color="#999999", linewidth=1)
        axes.annotate(f"slope {exponent} ({where})", (lengths[-1], guide[-1]), fontsize=8, color="#777777", ha="right")
    axes.set(
        xlabel="sequence length T",
        ylabel="peak live MB (forward + backward)",
        title=f"attention, B={batch} E={embed} H={heads} ({np.dtype(dtype).name}): peak memory against T",
    )
    axes.set_xticks(lengths, [str(t) for t in lengths])
    axes.set_xticks([], minor=True)  # (log axes label their minor ticks too: 2×10², 3×10³ … among ours)
    axes.legend(fontsize=8, loc="upper left")
    fig.peaks, fig.slopes, fig.lengths = peaks, slopes, lengths  # type: ignore[attr-defined]  # notes on the figure
    return fig
