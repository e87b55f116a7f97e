"""Pictures of tiled (flash) attention: the tile schedule, and the online softmax of one row.

This module lets you see what the tiled kernel of :mod:`microtape.nn.attention.tiled` does::

    attn = mt.nn.MultiHeadAttention(16, 2, causal=True, block_size=4, seed=0)
    y = attn(x)
    fig = mt.viz.tile_schedule(attn)              # which tiles ran, in what order, which were skipped
    fig = mt.viz.tile_schedule(attn, order="backward")
    fig = mt.viz.online_softmax(attn, row=9)      # the running max m and sum l of query 9, block by block

:func:`tile_schedule` draws the ``Tq × Tk`` score matrix cut into tiles: each
computed tile carries its number in the chosen pass (the forward walks query
block by query block, the backward key block by key block), and the tiles
skipped by causality are grey and hatched — never computed, not merely
masked. :func:`online_softmax` replays the forward walk for one query row:
its scores key by key, the running max ``m`` after each key block, and the
running sum ``l`` — as the kernel holds it (in units of the current max) and
rescaled to the final max, where every block can only add to it.

Both read the layer's last (tiled) forward, or take a
:class:`~microtape.nn.attention.tiled.TileSchedule` directly (the schedule only), and
return a plain ``matplotlib.figure.Figure`` that Jupyter shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


import numbers

import numpy as np

from ..nn.attention import tiled
from ..nn.masks import SUPPRESSED_BELOW
from .figure import new_figure

__all__ = ["tile_schedule", "online_softmax"]

COMPUTED = "#6baed6"
SKIPPED = "#d9d9d9"


def _tiled_row(attn: Any, what: str) -> Any:
    """The recorded ``tiled_attention`` node of ``attn``'s last forward (clear errors otherwise)."""
    tape = getattr(attn, "tape", None)
    if tape is None:
        raise ValueError(f"{what}: expected a MultiHeadAttention after a forward with block_size set (or a schedule)")
    node = next((n for n in tape.nodes if n.op is tiled.TILED_ATTENTION), None)
    if node is None:
        raise ValueError(
            f"{what}: the layer's last forward ran the standard chain; set attn.block_size = 16 (say) and run it again"
        )
    return node


def _schedule_of(source: Any, what: str) -> Any:
    if isinstance(source, tiled.TileSchedule):
        return source
    node = _tiled_row(source, what)
    q, k, v = (x.data for x in node.inputs)
    return tiled.schedule_of(q, k, v, node.params["block_size"], node.params.get("causal", False))


def tile_schedule(source: Any, order: str = "forward") -> Figure:
    """The tiles of the score matrix: computed ones numbered in ``order``, causal skips hatched; a Figure.

    ``source`` is a layer after a tiled forward, or a :class:`~microtape.nn.attention.tiled.TileSchedule`.
    ``order`` is ``"forward"`` (query block by query block) or ``"backward"`` (key block by key block).
    Each tile is a patch whose ``gid`` is ``"q{i} k{j}"``.
    """
    from matplotlib.patches import Rectangle

    if order not in ("forward", "backward"):
        raise ValueError(f"tile_schedule(order={order!r}): expected 'forward' or 'backward'")
    schedule = _schedule_of(source, "tile_schedule")
    walk = schedule.forward_order() if order == "forward" else schedule.backward_order()
    number = {(tile.q_block, tile.k_block): n for n, tile in enumerate(walk, start=1)}
    fig = new_figure(figsize=(5.2, 5.2 * min(2.0, max(0.5, schedule.q_len / schedule.k_len))), layout="constrained")
    ax = fig.add_subplot()
    blocks = max(len(schedule.query_blocks), -(-schedule.k_len // schedule.block_size))
    size = 9 if blocks <= 8 else 7 if blocks <= 16 else 5  # many tiles: smaller numbers, still inside them
    for tile in schedule.all_tiles():
        rows, cols = tile.rows, tile.cols
        done = (tile.q_block, tile.k_block) in number
        rect = Rectangle(
            (cols.start, rows.start), cols.stop - cols.start, rows.stop - rows.start,
            facecolor=COMPUTED if done else SKIPPED, edgecolor="white", linewidth=1.5, hatch=None if done else "///",
        )  # fmt: skip
        rect.set_gid(f"q{tile.q_block} k{tile.k_block}")
        ax.add_patch(rect)
        label = str(number[tile.q_block, tile.k_block]) if done else "skip"
        centre = ((cols.start + cols.stop) / 2, (rows.start + rows.stop) / 2)
        ax.text(*centre, label, ha="center", va="center", fontsize=size, color="black" if done else "#636363")
    if schedule.causal:
        ax.plot([0, min(schedule.q_len, schedule.k_len)], [0, min(schedule.q_len, schedule.k_len)],
                color="#cb181d", linewidth=1, label="diagonal (key = query)")  # fmt: skip
        # Below the plot: inside, it would sit on the tiles' numbers.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, frameon=False)
    ax.set_xlim(0, schedule.k_len)
    ax.set_ylim(schedule.q_len, 0)  # query 0 at the top, as in the heatmaps
    # Ticks at the tile edges (at most about nine a side), not at every position: they line up with the tiles.
    for axis, length in ((ax.xaxis, schedule.k_len), (ax.yaxis, schedule.q_len)):
        edges = sorted({*range(0, length, schedule.block_size), length})
        step = max(1, -(-len(edges) // 9))
        axis.set_ticks(edges[::step] if edges[-1] in edges[::step] else [*edges[::step], edges[-1]])
    ax.tick_params(labelsize=8)
    ax.set_aspect("equal")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title(f"{schedule}\nnumbers: the {order} pass's order", fontsize=10)
    return fig


def _check_index(value: Any, size: Any, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < size:  # type: ignore[operator]  # an Integral compares
        raise ValueError(f"online_softmax({what}={value!r}): expected an integer in 0..{size - 1}")
    return int(value)


def online_softmax(attn: Any, row: int = 0, head: int = 0, batch: int = 0) -> Figure:
    """The online softmax of query ``row`` (of ``head``, ``batch``) in ``attn``'s last tiled forward; a Figure.

    Left: the row's scores ``S_j`` key by key (masked keys left out) and the
    running max ``m`` after each key block, with the final max. Right: the
    running sum ``l`` as the kernel keeps it (``Σ exp(S − m)`` for the current
    ``m``: it can *drop* when ``m`` grows) and rescaled to the final max
    (``l · exp(m − m_final)``: it only grows), reaching ``Σ exp(S − m_final)``.
    """
    node = _tiled_row(attn, "online_softmax")
    q, k, v = (x.data for x in node.inputs)
    params = node.params
    schedule = tiled.schedule_of(q, k, v, params["block_size"], params.get("causal", False))
    num_heads = attn.num_heads
    row = _check_index(row, schedule.q_len, "row")
    head = _check_index(head, num_heads, "head")
    batch = _check_index(batch, q.shape[0] // num_heads, "batch")
    n, q_block = batch * num_heads + head, row // schedule.block_size
    inside = row - schedule.query_blocks[q_block].start
    states = list(tiled.online_softmax(q, k, v, schedule, q_block, params.get("mask"), params.get("dropout")))
    ends = [state.tile.cols.stop for state in states]
    last_keys = [end - 1 for end in ends]  # each state is drawn at the last key of its block
    m = np.array([state.m[n, inside] for state in states], dtype=np.float64)
    l = np.array([state.l[n, inside] for state in states], dtype=np.float64)
    whole = tiled.Tile(q_block, 0, slice(row, row + 1), slice(0, ends[-1]))
    scores = tiled.score_tile(q, k, whole, params.get("mask"), schedule.causal)[n, 0].astype(np.float64)
    visible = scores > SUPPRESSED_BELOW
    final = m[-1]

    fig = new_figure(figsize=(8.8, 4.6), layout="constrained")  # 880 px: fits a 900 px notebook cell
    left, right = fig.subplots(1, 2)
    keys = np.arange(scores.size)
    left.plot(keys[visible], scores[visible], "o", color="#9ecae1", label="score S_j of each key")
    left.plot(last_keys, m, drawstyle="steps-post", color="#08519c", marker="s", label="running max m after the block")
    left.axhline(final, color="#08519c", linestyle="--", linewidth=0.8, label="final max")
    left.set_xlabel("key position")
    left.set_title("running row max m", fontsize=10)
    rescaled = l * np.exp(m - final)  # m = -inf (nothing seen yet) gives l = 0 and exp(-inf) = 0
    right.plot(last_keys, l, marker="s", color="#a63603", label="l as kept: sum exp(S - m), current m")
    right.plot(last_keys, rescaled, marker="o", color="#31a354", label="l rescaled to the final max")
    right.axhline(rescaled[-1], color="#31a354", linestyle="--", linewidth=0.8, label="sum exp(S - m_final)")
    right.set_xlabel("key position")
    right.set_title("running sum l", fontsize=10)
    rescales = _mark_rescales(left, right, last_keys, m, l)
    for ax in (left, right):
        ax.set_xlim(-0.5, ends[-1] - 0.5)
        for end in ends[:-1]:
            ax.axvline(end - 0.5, color="#bdbdbd", linewidth=0.6)
        # Below the plot, so the legend never sits on the curves or their labels.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, frameon=False)
    hidden = int(np.sum(~visible))
    said = (
        f"the max jumps {len(rescales)}× after the first block: the sum so far is rescaled by α = exp(m_old − m_new)"
        if rescales
        else "no later block raises the max: nothing is rescaled"
    )
    fig.suptitle(
        f"online softmax of query {row} (batch {batch}, head {head}), key blocks of {schedule.block_size}"
        + (f"; {hidden} masked keys not drawn" if hidden else "")
        + f"\n{said}",
        fontsize=10,
    )
    return fig


def _mark_rescales(left: Any, right: Any, last_keys: Any, m: Any, l: Any) -> Any:
    """Where a later block raises the running max: an arrow on m, and the factor α that shrinks l there.

    Returns the factors ``α = exp(m_old − m_new)``, one per jump.
    """
    factors = []
    for k in range(1, len(m)):
        if not (np.isfinite(m[k - 1]) and m[k] > m[k - 1]):
            continue
        alpha = float(np.exp(m[k - 1] - m[k]))
        factors.append(alpha)
        x = last_keys[k]
        left.annotate("", xy=(x, m[k]), xytext=(x, m[k - 1]), arrowprops=dict(arrowstyle="->", color="#cb181d"))
        left.annotate(
            f"max jumps +{m[k] - m[k - 1]:.3g}", xy=(x, (m[k] + m[k - 1]) / 2), xytext=(-6, 0),
            textcoords="offset points", ha="right", va="center", fontsize=7, color="#cb181d", gid="rescale",
        )  # fmt: skip
        right.annotate(
            f"old terms ×α = {alpha:.3g}", xy=(x, l[k]), xytext=(-6, 8), textcoords="offset points",
            ha="right", fontsize=7, color="#cb181d", gid="rescale",
        )  # fmt: skip
    return factors
