"""microtape.viz.tile_schedule and online_softmax: the figures are inspected, not looked at."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import microtape as mt  # noqa: E402
from microtape.nn.attention import tiled  # noqa: E402


def causal_layer(T=13, block_size=4, mask=None):
    attn = mt.nn.MultiHeadAttention(16, 2, causal=True, block_size=block_size, seed=0)
    attn(np.random.default_rng(0).standard_normal((1, T, 16)), mask=mask)
    return attn


def tiles_of(fig):
    ax = fig.axes[0]
    return {patch.get_gid(): patch for patch in ax.patches if patch.get_gid()}


def label_at(ax, patch):
    """The text drawn at the centre of a tile."""
    x, y = patch.get_x() + patch.get_width() / 2, patch.get_y() + patch.get_height() / 2
    return next(text.get_text() for text in ax.texts if np.allclose(text.get_position(), (x, y)))


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_tile_schedule_numbers_the_computed_tiles_and_hatches_the_skipped(order):
    attn = causal_layer()
    schedule = tiled.TileSchedule(13, 13, 4, causal=True)
    fig = mt.viz.tile_schedule(attn, order=order)
    ax, patches = fig.axes[0], tiles_of(fig)
    assert len(patches) == 16
    walk = schedule.forward_order() if order == "forward" else schedule.backward_order()
    for n, tile in enumerate(walk, start=1):
        patch = patches[f"q{tile.q_block} k{tile.k_block}"]
        assert label_at(ax, patch) == str(n) and not patch.get_hatch()
        corners = (patch.get_x(), patch.get_y(), patch.get_x() + patch.get_width(), patch.get_y() + patch.get_height())
        assert corners == (tile.cols.start, tile.rows.start, tile.cols.stop, tile.rows.stop)
    for tile in schedule.skipped():
        patch = patches[f"q{tile.q_block} k{tile.k_block}"]
        assert label_at(ax, patch) == "skip" and patch.get_hatch() == "///"
    assert str(schedule) in ax.get_title() and order in ax.get_title()
    assert [line.get_label() for line in ax.lines] == ["diagonal (key = query)"]
    assert ax.get_ylim() == (13, 0)  # query 0 at the top


def test_tile_schedule_of_a_schedule_without_causality_has_no_skips_or_diagonal():
    fig = mt.viz.tile_schedule(tiled.TileSchedule(5, 9, 4))
    ax = fig.axes[0]
    labels = sorted(label_at(ax, patch) for patch in tiles_of(fig).values())
    assert labels == sorted(str(n) for n in range(1, 7)) and not ax.lines


def test_online_softmax_draws_the_walk_of_one_row():
    """m after each block, the row's scores, l as kept and rescaled — against the standard chain's row."""
    attn = mt.nn.MultiHeadAttention(16, 2, block_size=4, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 16, 16))
    attn(x)
    fig = mt.viz.online_softmax(attn, row=12, head=1)
    left, right = fig.axes[:2]
    standard = attn.twin(None)
    standard(x)
    scores = standard.tape.variable("weights").inputs[0].data[1, 12]  # head 1, query 12
    dots, m_line, final_m = left.lines[:3]  # then the block boundaries
    np.testing.assert_allclose(dots.get_ydata(), scores, rtol=1e-12)
    np.testing.assert_array_equal(m_line.get_xdata(), [3, 7, 11, 15])
    np.testing.assert_allclose(m_line.get_ydata(), [scores[: j + 1].max() for j in (3, 7, 11, 15)], rtol=1e-12)
    assert final_m.get_ydata()[0] == pytest.approx(scores.max())
    kept, rescaled, total = right.lines[:3]
    expected_kept = [np.exp(scores[: j + 1] - scores[: j + 1].max()).sum() for j in (3, 7, 11, 15)]
    np.testing.assert_allclose(kept.get_ydata(), expected_kept, rtol=1e-12)
    np.testing.assert_allclose(
        rescaled.get_ydata(), [np.exp(scores[: j + 1] - scores.max()).sum() for j in (3, 7, 11, 15)], rtol=1e-12
    )
    assert np.all(np.diff(rescaled.get_ydata()) > 0)
    assert total.get_ydata()[0] == pytest.approx(np.exp(scores - scores.max()).sum())
    assert "query 12 (batch 0, head 1)" in fig.texts[0].get_text()


def test_online_softmax_of_a_row_whose_keys_sit_in_a_later_block():
    mask = np.zeros((13, 13))
    mask[9, :8] = -np.inf
    fig = mt.viz.online_softmax(causal_layer(mask=mask), row=9)
    left, right = fig.axes[:2]
    dots, m_line, _ = left.lines[:3]
    np.testing.assert_array_equal(dots.get_xdata(), [8, 9])  # masked and causal keys are left out
    assert list(np.isneginf(m_line.get_ydata())) == [True, True, False]
    np.testing.assert_array_equal(right.lines[0].get_ydata()[:2], [0.0, 0.0])
    assert "10 masked keys not drawn" in fig.texts[0].get_text()


def test_bad_sources_and_indices_are_refused():
    standard = mt.nn.MultiHeadAttention(8, 2, seed=0)
    with pytest.raises(ValueError, match="after a forward with block_size set"):
        mt.viz.tile_schedule(standard)
    standard(np.zeros((1, 3, 8)))
    with pytest.raises(ValueError, match="ran the standard chain; set attn.block_size"):
        mt.viz.online_softmax(standard)
    attn = causal_layer()
    with pytest.raises(ValueError, match=r"order='sideways'"):
        mt.viz.tile_schedule(attn, order="sideways")
    for kwargs, match in [({"row": 13}, r"row=13\): expected an integer in 0..12"), ({"head": 2}, "head=2")]:
        with pytest.raises(ValueError, match=match):
            mt.viz.online_softmax(attn, **kwargs)


def test_online_softmax_shows_each_rescale_where_a_later_block_raises_the_max():
    attn = mt.nn.MultiHeadAttention(16, 2, block_size=4, seed=0)
    x = 3 * np.random.default_rng(0).standard_normal((1, 16, 16))
    attn(x)
    standard = attn.twin(None)
    standard(x)
    scores = standard.tape.variable("weights").inputs[0].data  # [heads, queries, keys]
    found = {True: None, False: None}
    for head in range(2):
        for row in range(16):
            running = np.maximum.accumulate([scores[head, row, j : j + 4].max() for j in range(0, 16, 4)])
            jumps = [(old, new) for old, new in zip(running, running[1:]) if new > old]
            found[bool(jumps)] = found[bool(jumps)] or (head, row, jumps)
    (head, row, jumps), (calm_head, calm_row, _) = found[True], found[False]
    fig = mt.viz.online_softmax(attn, row=row, head=head)
    left, right = fig.axes[:2]
    marks = [t.get_text() for t in left.texts if t.get_gid() == "rescale"]
    factors = [t.get_text() for t in right.texts if t.get_gid() == "rescale"]
    assert marks == [f"max jumps +{new - old:.3g}" for old, new in jumps]
    assert factors == [f"old terms ×α = {np.exp(old - new):.3g}" for old, new in jumps]
    assert "the sum so far is rescaled by α" in fig.texts[0].get_text()
    calm = mt.viz.online_softmax(attn, row=calm_row, head=calm_head)
    assert not [t for ax in calm.axes for t in ax.texts if t.get_gid() == "rescale"]
    assert "nothing is rescaled" in calm.texts[0].get_text()


def test_tile_schedule_keeps_its_labels_clear():
    # Ticks at the tile edges, the legend below the plot (not on the tiles), numbers smaller when tiles are many.
    fig = mt.viz.tile_schedule(causal_layer())
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [0, 4, 8, 12, 13] and list(ax.get_yticks()) == [0, 4, 8, 12, 13]
    fig.canvas.draw()
    legend, plot = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y1 <= plot.y0  # below the axes
    many = mt.viz.tile_schedule(tiled.TileSchedule(64, 64, 2, causal=True))
    ax = many.axes[0]
    assert len(ax.get_xticks()) <= 10 and {t.get_fontsize() for t in ax.texts} == {5}
