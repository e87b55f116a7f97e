"""microtape.viz.attention_heatmaps: one honest panel per head.

The figure is inspected, not looked at: which axes hold an image, what array
each image shows, its colour limits and map, which cells are masked and
hatched, and the tick labels.
"""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import microtape as mt  # noqa: E402
from microtape.viz import attention_heatmaps  # noqa: E402
from microtape.viz.heatmap import DOT_OFFSET  # noqa: E402
from microtape.viz.heatmap.annotation import SUM_WIDTH, short  # noqa: E402

CAUSAL = np.triu(np.full((5, 5), -1e9), 1)


def image_axes(fig):
    return [ax for ax in fig.axes if ax.images]


def softmax_rows(rng, shape, mask=None):
    scores = rng.standard_normal(shape)
    if mask is not None:
        scores = scores + mask
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def layer():
    """A real causal attention after forward and backward."""
    attn = mt.nn.MultiHeadAttention(8, 4, causal=True, seed=1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 8))
    attn(x)
    attn.backward(rng.standard_normal((2, 5, 8)))
    return attn


def test_one_image_axis_per_head_with_shared_limits():
    weights = softmax_rows(np.random.default_rng(0), (1, 3, 5, 5))
    fig = attention_heatmaps(weights)
    axes = image_axes(fig)
    assert len(axes) == 3
    assert [ax.get_title() for ax in axes] == ["head 0", "head 1", "head 2"]
    limits = {im.get_clim() for ax in axes for im in ax.images}
    assert limits == {(0.0, weights.max())}  # from 0, shared by every head
    for h, ax in enumerate(axes):
        np.testing.assert_array_equal(ax.images[0].get_array().data, weights[0, h])
    # One colorbar for all of them.
    assert len(fig.axes) == 4


def test_heads_selection_and_three_dimensional_input():
    weights = softmax_rows(np.random.default_rng(0), (6, 4, 4))  # [H, Tq, Tk]
    fig = attention_heatmaps(weights, heads=[1, 4])
    axes = image_axes(fig)
    assert [ax.get_title() for ax in axes] == ["head 1", "head 4"]
    np.testing.assert_array_equal(axes[1].images[0].get_array().data, weights[4])
    assert len(image_axes(attention_heatmaps(weights, heads=2))) == 1


def test_masked_cells_are_masked_hatched_and_left_out_of_the_limits():
    rng = np.random.default_rng(2)
    weights = softmax_rows(rng, (1, 2, 5, 5), CAUSAL)
    weights[0, 0, 0, 4] = 0.0  # a masked cell, whatever it holds, must not set the scale
    fig = attention_heatmaps(weights, mask=CAUSAL)
    hidden = CAUSAL <= -1e4
    for ax in image_axes(fig):
        shown = ax.images[0].get_array()
        np.testing.assert_array_equal(np.ma.getmaskarray(shown), hidden)
        (hatching,) = ax.collections
        assert hatching.get_hatch() == "///"
        assert len(hatching.get_paths()) == int(hidden.sum()) == 10
    assert "hatched = masked" in fig._suptitle.get_text()
    # -inf counts as masked too.
    minus_inf = np.where(hidden, -np.inf, 0.0)
    fig = attention_heatmaps(weights, mask=minus_inf)
    np.testing.assert_array_equal(np.ma.getmaskarray(image_axes(fig)[0].images[0].get_array()), hidden)
    # mask=False marks nothing.
    fig = attention_heatmaps(weights, mask=False)
    assert not np.ma.getmaskarray(image_axes(fig)[0].images[0].get_array()).any()
    assert not image_axes(fig)[0].collections


def test_layer_weights_and_mask_come_from_the_last_forward(layer):
    fig = attention_heatmaps(layer, batch=1)
    axes = image_axes(fig)
    assert len(axes) == 4
    for h, ax in enumerate(axes):
        np.testing.assert_array_equal(ax.images[0].get_array().data, layer.attention_weights[1, h])
        np.testing.assert_array_equal(np.ma.getmaskarray(ax.images[0].get_array()), layer.last_mask <= -1e4)
    visible = layer.attention_weights[1][:, layer.last_mask > -1e4]
    assert axes[0].images[0].get_clim() == (0.0, visible.max())


def test_gradient_heatmaps_show_exactly_dS_and_dP(layer):
    for which, expected in (("grad_scores", layer.grad_scores()), ("grad_weights", layer.grad_weights())):
        fig = attention_heatmaps(layer, which=which)
        axes = image_axes(fig)
        assert len(axes) == 4
        peak = np.abs(expected[0][:, layer.last_mask > -1e4]).max()
        for h, ax in enumerate(axes):
            image = ax.images[0]
            np.testing.assert_array_equal(image.get_array().data, expected[0, h])
            assert image.get_clim() == (-peak, peak)  # symmetric: white is exactly zero
            assert image.get_cmap().name.startswith("RdBu_r")


def test_gradient_heatmaps_match_the_attention_report():
    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=4)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 4, 8))
    grad_output = rng.standard_normal((1, 4, 8))
    report = mt.check.attention_report(attn, x, grad_output=grad_output)
    rows = {row.label: row for row in report.rows}
    attn(x)
    attn.backward(grad_output)
    fig = attention_heatmaps(attn, which=("grad_weights", "grad_scores"))
    axes = image_axes(fig)
    assert len(axes) == 4  # two rows of two heads
    for row, block in (("dP", axes[:2]), ("dS", axes[2:])):
        expected = rows[row].analytic.reshape(1, 2, 4, 4)
        for h, ax in enumerate(block):
            np.testing.assert_allclose(ax.images[0].get_array().data, expected[0, h], rtol=0, atol=1e-12)
    # Each row has its own colour scale.
    assert axes[0].images[0].get_clim() != axes[2].images[0].get_clim()


def test_gradients_are_read_off_the_tape_when_the_layer_has_no_accessor():
    """A layer-like object with only a tape: dP is the gradient of "weights", dS of its input."""

    class Minimal:
        pass

    attn = mt.nn.MultiHeadAttention(8, 2, seed=5)
    x = np.random.default_rng(5).standard_normal((1, 3, 8))
    attn(x)
    attn.backward(np.ones((1, 3, 8)))
    minimal = Minimal()
    minimal.tape = attn.tape
    minimal.attention_weights = attn.attention_weights
    P, dP = attn.attention_weights, attn.grad_weights()
    dS = P * (dP - (dP * P).sum(-1, keepdims=True))
    fig = attention_heatmaps(minimal, which="grad_scores")
    for h, ax in enumerate(image_axes(fig)):
        np.testing.assert_allclose(ax.images[0].get_array().data, dS[0, h], rtol=0, atol=1e-12)


def test_dropped_weights(layer):
    attn = mt.nn.MultiHeadAttention(8, 2, dropout=0.5, seed=3)
    attn(np.random.default_rng(3).standard_normal((1, 4, 8)))
    fig = attention_heatmaps(attn, which="dropped")
    dropped = attn.dropped_attention_weights
    for h, ax in enumerate(image_axes(fig)):
        np.testing.assert_array_equal(ax.images[0].get_array().data, dropped[0, h])
    assert image_axes(fig)[0].images[0].get_clim() == (
        0.0,
        dropped[0].max(),
    )  # can exceed 1: scaled by 1/(1-p)


def test_token_labels_and_values_in_small_maps():
    weights = softmax_rows(np.random.default_rng(0), (1, 1, 3, 4))
    fig = attention_heatmaps(weights, tokens=["a", "b", "c"], key_tokens=["w", "x", "y", "z"])
    (ax,) = image_axes(fig)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w", "x", "y", "z"]
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert len(ax.texts) == 12  # every weight written in its cell
    assert len(image_axes(attention_heatmaps(weights, annotate=False))[0].texts) == 0


def test_bad_input_is_refused_clearly():
    weights = np.full((1, 2, 3, 3), 1 / 3)
    with pytest.raises(TypeError, match="boolean"):
        attention_heatmaps(weights, mask=np.tri(3, dtype=bool))
    with pytest.raises(ValueError, match="does not fit"):
        attention_heatmaps(weights, mask=np.zeros((4, 4)))
    with pytest.raises(ValueError, match="head 5"):
        attention_heatmaps(weights, heads=[5])
    with pytest.raises(ValueError, match="batch"):
        attention_heatmaps(weights, batch=1)
    with pytest.raises(ValueError, match="which"):
        attention_heatmaps(weights, which="scores")
    with pytest.raises(ValueError, match=r"\[B, H, Tq, Tk\]"):
        attention_heatmaps(np.ones(5))
    with pytest.raises(ValueError, match="2 labels for 3"):
        attention_heatmaps(weights, tokens=["a", "b"])
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        attention_heatmaps("weights.npy")
    with pytest.raises(ValueError, match="backward"):
        attn = mt.nn.MultiHeadAttention(8, 2, seed=0)
        attn(np.ones((1, 2, 8)))
        attention_heatmaps(attn, which="grad_scores")


def test_the_figure_is_not_registered_with_pyplot():
    import matplotlib.figure
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = attention_heatmaps(np.full((1, 1, 2, 2), 0.5))
    assert plt.get_fignums() == before
    assert isinstance(fig, matplotlib.figure.Figure)
    assert fig._repr_png_()[:4] == b"\x89PNG"  # Jupyter can show it without pyplot


# ---------------------------------------------------------------- titles, dropout, long maps, row sums


def dropout_layer(heads=2, seq=5):
    attn = mt.nn.MultiHeadAttention(8, heads, dropout=0.4, causal=True, seed=2)
    rng = np.random.default_rng(2)
    attn(rng.standard_normal((1, seq, 8)))
    attn.backward(rng.standard_normal((1, seq, 8)))
    return attn


def test_titles_say_what_is_drawn():
    attn = dropout_layer()
    titles = {
        which: attention_heatmaps(attn, which=which)._suptitle.get_text().replace("\n", " ")
        for which in (("weights", "dropped"), ("grad_weights", "grad_scores"), ("weights", "grad_scores"), "dropped")
    }
    assert titles[("weights", "dropped")].startswith("attention weights, before and after dropout")
    assert titles[("grad_weights", "grad_scores")].startswith("attention gradients")
    assert titles[("weights", "grad_scores")].startswith("attention weights and their gradients")
    assert titles["dropped"].startswith("attention weights after dropout")


def test_the_title_fits_in_a_one_head_figure():
    attn = mt.nn.MultiHeadAttention(4, 1, causal=True, seed=0)
    attn(np.random.default_rng(0).standard_normal((1, 3, 4)))
    for which in ("weights", ("weights", "weights")):
        fig = attention_heatmaps(attn, which=which)
        fig.canvas.draw()
        box = fig._suptitle.get_window_extent()
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height


def test_cells_dropout_zeroed_carry_a_dot():
    attn = dropout_layer()
    keep = attn.dropout_keep.reshape(1, 2, 5, 5)
    hidden = attn.last_mask <= -1e4
    fig = attention_heatmaps(attn, which=("weights", "dropped", "grad_weights"))
    axes = image_axes(fig)
    for k, ax in enumerate(axes):
        head, kind = k % 2, ("weights", "dropped", "grad_weights")[k // 2]
        dots = [line for line in ax.lines if line.get_gid() == "dropped"]
        expected = np.argwhere((keep[0, head] == 0) & ~hidden)
        if kind == "weights":
            assert not dots  # before dropout nothing is zeroed
            continue
        (dots,) = dots
        # In the cell's top-right corner, clear of the number written at its centre.
        rows, cols = dots.get_ydata() + DOT_OFFSET, dots.get_xdata() - DOT_OFFSET
        drawn = sorted(zip(np.rint(rows).astype(int), np.rint(cols).astype(int)))
        assert drawn == sorted(map(tuple, expected)) and len(drawn) > 0
        centres = [text.get_position() for text in ax.texts]
        assert all(
            abs(x - cx) + abs(y - cy) > 0.4 for x, y in zip(dots.get_xdata(), dots.get_ydata()) for cx, cy in centres
        )
    assert "· = dropped by dropout" in fig._suptitle.get_text().replace("\n", " ")


def test_dropped_weights_without_dropout_are_refused(layer):
    # The layer ran without dropout: a "weights after dropout" picture would suggest something was dropped.
    with pytest.raises(ValueError, match="without dropout"):
        attention_heatmaps(layer, which="dropped")
    evaluated = mt.nn.MultiHeadAttention(8, 2, dropout=0.3, seed=0).eval()
    evaluated(np.random.default_rng(0).standard_normal((1, 5, 8)))
    with pytest.raises(ValueError, match="dropout=0.3, training=False"):
        attention_heatmaps(evaluated, which="dropped")


def test_weights_and_dropped_weights_share_one_scale():
    attn = dropout_layer()
    axes = image_axes(attention_heatmaps(attn, which=("weights", "dropped")))
    limits = {ax.images[0].get_clim() for ax in axes}
    assert limits == {(0.0, float(attn.dropped_attention_weights[0].max()))}  # 1/(1-p) shows: the top is > 1


def test_vmax_and_the_row_and_log_scales():
    weights = softmax_rows(np.random.default_rng(0), (1, 2, 5, 5), CAUSAL)
    (ax, _) = image_axes(attention_heatmaps(weights, vmax=0.5, mask=CAUSAL))
    assert ax.images[0].get_clim() == (0.0, 0.5)
    (ax, _) = image_axes(attention_heatmaps(weights, norm="row", mask=CAUSAL))
    rows = np.ma.getdata(ax.images[0].get_array())
    np.testing.assert_allclose(rows.max(axis=-1), 1.0)
    np.testing.assert_allclose(rows * weights[0, 0].max(axis=-1, keepdims=True), weights[0, 0])
    (ax, _) = image_axes(attention_heatmaps(weights, norm="log", mask=CAUSAL))
    assert type(ax.images[0].norm).__name__ == "LogNorm"
    with pytest.raises(ValueError, match="norm"):
        attention_heatmaps(weights, norm="sqrt")
    with pytest.raises(ValueError, match="vmax"):
        attention_heatmaps(weights, vmax=-1)


def test_a_long_causal_map_is_readable_by_default():
    attn = mt.nn.MultiHeadAttention(8, 1, causal=True, seed=0)
    attn(np.random.default_rng(0).standard_normal((1, 64, 8)))
    fig = attention_heatmaps(attn, annotate=True)
    (ax,) = image_axes(fig)
    shown = ax.images[0].get_array()
    # Row-scaled: the always-1 cell (0, 0) no longer washes the late rows out.
    np.testing.assert_allclose(np.ma.max(shown, axis=-1), 1.0)
    title = fig._suptitle.get_text().replace("\n", " ")
    assert "each row scaled to its largest weight" in title
    # No text soup: 64×64 numbers are not written, and the title says so.
    assert len(ax.texts) == 0 and "numbers not written: 64×64 is more than 16×16" in title
    small = attention_heatmaps(softmax_rows(np.random.default_rng(0), (1, 1, 12, 12)), annotate=True)
    assert len(image_axes(small)[0].texts) == 144


def test_gradient_maps_show_row_sums():
    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=1)
    rng = np.random.default_rng(1)
    attn(rng.standard_normal((1, 5, 8)))
    attn.backward(rng.standard_normal((1, 5, 8)))
    fig = attention_heatmaps(attn, which=("grad_weights", "grad_scores"))
    axes = image_axes(fig)
    hidden = attn.last_mask <= -1e4
    for ax, expected in zip(axes, [*attn.grad_weights()[0], *attn.grad_scores()[0]], strict=True):
        column = np.ma.getdata(ax.images[1].get_array())[:, 0]
        # Sums over the cells that exist: a masked key is no part of its query's row.
        visible = np.where(hidden, 0.0, expected)
        sums = visible.sum(axis=-1)
        sums[np.abs(sums) <= 1e-12 * np.abs(visible).max(axis=-1)] = 0.0
        np.testing.assert_array_equal(column, sums)
        written = [t.get_text() for t in ax.texts if t.get_gid() == "row-sum"]
        assert len(written) == 5
        # The colour scale is over the visible cells too, and the sums are drawn on it.
        peak = np.abs(attn.grad_weights()[0][:, ~hidden] if ax in axes[:2] else attn.grad_scores()[0][:, ~hidden])
        assert ax.images[0].get_clim() == (-peak.max(), peak.max()) == ax.images[1].get_clim()
    # dP is not zero where the mask hides a key: summing those cells would change the margin.
    assert not np.allclose(attn.grad_weights()[0].sum(-1), np.where(hidden, 0.0, attn.grad_weights()[0]).sum(-1))
    # Each row of dS sums to zero (softmax ignores a shift of a row): the margin says 0, not 1e-17.
    for ax in axes[2:]:
        assert {t.get_text() for t in ax.texts if t.get_gid() == "row-sum"} == {"0"}
    assert any(t.get_text() != "0" for t in axes[0].texts if t.get_gid() == "row-sum")


def test_paired_pictures_share_one_scale_and_say_so():
    # A uniform map and a sharp one: drawn alone, each reaches the top of its own scale.
    flat = np.full((1, 2, 5, 5), 0.2)
    sharp = np.broadcast_to(np.eye(5), (1, 2, 5, 5))
    before, after = mt.viz.paired_heatmaps({"before": flat, "after": sharp})
    for fig in (before, after):
        assert {ax.images[0].get_clim() for ax in image_axes(fig)} == {(0.0, 1.0)}
        assert "one colour scale for these 2 pictures: 0 to 1" in fig._suptitle.get_text().replace("\n", " ")
    assert image_axes(attention_heatmaps(flat))[0].images[0].get_clim() == (0.0, 0.2)  # what sharing changes
    # Masked cells stay out of the shared scale.
    spike = flat.copy()
    spike[0, 0, 0, 4] = 5.0  # causal: key 4 is hidden from query 0
    (fig, _) = mt.viz.paired_heatmaps({"a": spike, "b": flat}, mask=CAUSAL)
    assert image_axes(fig)[0].images[0].get_clim() == (0.0, 0.2)
    with pytest.raises(TypeError, match="share one linear scale"):
        mt.viz.paired_heatmaps({"a": flat, "b": sharp}, vmax=2.0)
    with pytest.raises(TypeError, match="at least two"):
        mt.viz.paired_heatmaps({"a": flat})


@pytest.mark.parametrize(
    ("size", "which", "annotate", "written"),
    [
        (10, "weights", "auto", True),  # weight maps up to 10 × 10 by default
        (11, "weights", "auto", False),
        (16, "weights", True, True),  # any map up to 16 × 16 on request
        (16, "grad_scores", True, True),
        (16, "grad_scores", "auto", False),
        (17, "weights", True, False),  # never above 16 × 16, and the title says so
    ],
)
def test_numbers_are_written_as_the_readme_promises(size, which, annotate, written):
    maps = softmax_rows(np.random.default_rng(0), (1, 1, size, size))
    fig = attention_heatmaps(maps, which=which, annotate=annotate)
    (ax,) = image_axes(fig)
    cells = [t for t in ax.texts if t.get_gid() not in ("row-sum", "row-sum-title")]
    assert len(cells) == (size * size if written else 0)
    if size > 16:
        assert f"numbers not written: {size}×{size} is more than 16×16" in fig._suptitle.get_text().replace("\n", " ")


@pytest.mark.parametrize("size, annotate", [(10, "auto"), (16, True)])
def test_numbers_are_8_points_and_each_fits_its_cell_or_column(size, annotate):
    """Cell values and row sums at 8 pt or more, none wider than its cell (or the Σ column): none run together."""
    attn = mt.nn.MultiHeadAttention(16, 4, causal=True, seed=0)
    x = np.random.default_rng(0).standard_normal((1, size, 16))
    attn(x)
    attn.backward(np.random.default_rng(1).standard_normal((1, size, 16)) * 30)  # row sums of every magnitude
    fig = attention_heatmaps(attn, which=("weights", "grad_weights"), annotate=annotate)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    written = 0
    for ax in image_axes(fig):
        cell = ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0]
        for text in ax.texts:
            if text.get_gid() not in ("cell-value", "row-sum"):
                continue
            written += 1
            assert text.get_fontsize() >= 8, text.get_text()
            room = cell * (SUM_WIDTH if text.get_gid() == "row-sum" else 1)
            assert text.get_window_extent(renderer).width < room, (text.get_text(), room)
    assert written >= 4 * size * (size + 1) // 2  # every weight of the causal maps, and the sums


def test_short_numbers():
    assert [short(v) for v in (0.0, 0.56, -0.06, 1.0, 3e-4, -0.0031, 12.5, -4.41)] == [
        "0", ".56", "-.06", "1.00", "3e-4", "-3e-3", "12", "-4.41",
    ]  # fmt: skip
    assert [short(v, exponent=False) for v in (0.0, -0.0031, 0.5)] == [".00", "-.00", ".50"]
