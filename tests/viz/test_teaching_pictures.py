"""The pictures teachers asked for: analytic against tape on the graph, each head's gradients, 16:9 slides."""

import re
import struct

import numpy as np
import pytest
from pictures import attr, edges, find_box, median_text_px, needs_dot, nodes

pytest.importorskip("graphviz")
pytest.importorskip("matplotlib")

import microtape as mt  # noqa: E402
from microtape.viz.picture import STATE, STATE_EDGE  # noqa: E402
from microtape.viz.program import collect  # noqa: E402
from microtape.viz.verdict import verdicts  # noqa: E402


def small_attention(**options):
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0, **options)
    x = np.random.default_rng(0).standard_normal((1, 4, 8))
    attn(x)
    return attn, x


def edge_colour(source, tail, head):
    (found,) = [a for t, h, a in edges(source) if (t, h) == (tail, head)]
    return attr(found, "color"), attr(found, "style"), attr(found, "penwidth")


# ---------------------------------------------------------------- analytic against tape


def test_report_graph_shows_where_a_derivation_broke():
    attn, x = small_attention()
    report = mt.check.attention_report(attn, x, mistakes={"forgot_scale"})
    source = mt.viz.report_graph(report, attn).source
    box = {name: find_box(source, name) for name in ("Q_heads", "K_heads", "K_heads^T", "scores", "V_heads")}
    box["weights"], box["context"] = find_box(source, "weights"), find_box(source, "context")
    # dQ is the first row that differs: the edge that brings it into Q_heads is the thick dark red one.
    assert edge_colour(source, box["Q_heads"], box["scores"]) == (STATE_EDGE["first"], None, "3.5")
    assert attr(nodes(source)[box["Q_heads"]], "fillcolor") == STATE["first"][0]
    # The first failing box alone has the thick border; a box that fails on its own (dK) has a plain one.
    assert attr(nodes(source)[box["Q_heads"]], "penwidth") == "3"
    assert attr(nodes(source)[box["K_heads"]], "fillcolor") == STATE["differs"][0]
    assert attr(nodes(source)[box["K_heads"]], "penwidth") is None
    # dK fails on its own (not computed from dQ): red.
    assert edge_colour(source, box["K_heads"], box["K_heads^T"])[0] == STATE_EDGE["differs"]
    # Everything computed from them depends on a failure: the projections of Q and K, and x (dashed orange).
    q_proj, k_proj, v_proj = (find_box(source, name) for name in ("q_proj", "k_proj", "v_proj"))
    assert edge_colour(source, q_proj, box["Q_heads"])[:2] == (STATE_EDGE["depends"], "dashed")
    assert edge_colour(source, k_proj, box["K_heads"])[:2] == (STATE_EDGE["depends"], "dashed")
    # The V path and everything before the mistake agree.
    assert edge_colour(source, v_proj, box["V_heads"])[0] == STATE_EDGE["agreed"]
    assert edge_colour(source, box["weights"], box["context"])[0] == STATE_EDGE["agreed"]
    assert "the first row that differs is dQ" in source
    # A correct derivation: every edge agrees.
    fine = mt.viz.report_graph(mt.check.attention_report(attn, x), attn).source
    colours = {attr(a, "color") for _, _, a in edges(fine) if "dashed" not in a or "dir=back" in a}
    assert colours <= {STATE_EDGE["agreed"], "#999999", None} and "all agree" in fine


def test_verdicts_follow_the_report_rows_and_what_is_computed_from_them():
    attn, x = small_attention()
    report = mt.check.attention_report(attn, x, mistakes={"forgot_scale"})
    program = collect(attn)
    verdict = {program.name(node): v for node, v in verdicts(program, report).items()}
    assert verdict["Q_heads"] == "first" and verdict["K_heads"] == "differs"
    assert verdict["q_proj.weight"] == verdict["x"] == verdict["Q"] == "depends"  # computed from dQ
    assert verdict["V_heads"] == verdict["v_proj.weight"] == verdict["scaled_scores"] == "agreed"
    assert verdict["scores"] == "unchecked"  # no row of its own, computed from agreeing rows
    with pytest.raises(TypeError, match="report"):
        mt.viz.report_graph("not a report", attn)


# ---------------------------------------------------------------- each head's gradients


def test_head_gradients_draw_p_dp_dq_dk_dv_on_shared_scales():
    attn, x = small_attention(causal=True)
    attn.backward(np.random.default_rng(1).standard_normal((1, 4, 8)))
    fig = mt.viz.head_gradients(attn)
    panels = [ax for ax in fig.axes if ax.images and ax.get_title() or ax.get_ylabel().startswith("head")]
    images = [ax.images[0] for ax in fig.axes if ax.images and ax.get_xticks().size == 0]
    assert len(images) == 2 * 5 and panels
    grads = attn.last_gradients
    hidden = attn.last_mask <= -1e4
    expected = {
        "P": attn.attention_weights[0],
        "dP": attn.grad_weights()[0],
        **{f"d{k}": grads[f"{k}_heads"].reshape(1, 2, 4, 4)[0] for k in "QKV"},
    }
    top = max(np.abs(expected[k]).max() for k in ("dQ", "dK", "dV"))
    for n, image in enumerate(images):
        head, key = divmod(n, 5)
        name = ("P", "dP", "dQ", "dK", "dV")[key]
        np.testing.assert_array_equal(np.ma.getdata(image.get_array()), expected[name][head])
        if name in ("dQ", "dK", "dV"):
            assert image.get_clim() == (-top, top)  # one scale for the three, across the heads
        elif name == "dP":
            peak = np.abs(expected["dP"][:, ~hidden]).max()
            assert image.get_clim() == (-peak, peak)  # masked cells left out of the scale
            assert np.array_equal(np.ma.getmaskarray(image.get_array()), hidden)
    assert fig.get_size_inches()[0] * 100 <= 900
    fresh, _ = small_attention()
    with pytest.raises(ValueError, match="backward"):
        mt.viz.head_gradients(fresh)


# ---------------------------------------------------------------- slides


def png_size(path):
    return struct.unpack(">II", path.read_bytes()[16:24])


@needs_dot
@pytest.mark.parametrize("kind", ["attention", "encoder", "decoder"])
def test_slides_are_16_by_9_with_shapes_and_formulas_and_no_numbers(kind, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 8))
    if kind == "attention":
        layer = mt.nn.MultiHeadAttention(8, 1, seed=0)
        layer(x)
    elif kind == "encoder":
        layer = mt.nn.TransformerEncoderLayer(8, 2, 16, seed=0)
        layer(x)
    else:
        layer = mt.nn.TransformerDecoderLayer(8, 2, 16, seed=0)
        layer(x, rng.standard_normal((1, 5, 8)))
    paths = mt.viz.save_slide(layer, tmp_path / kind)
    width, height = png_size(paths["png"])
    assert abs(width / height - 16 / 9) < 0.01 and abs(width - 1920) <= 20
    svg = paths["svg"].read_text()
    svg_width, svg_height = (float(v) for v in re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
    assert abs(svg_width / svg_height - 16 / 9) < 0.01
    source = mt.viz.slide(layer).source
    assert "[1,4,8]" in source and "|max|" not in source and "‖grad‖" not in source  # shapes, no numbers
    if kind == "attention":
        assert "dQ_heads = dscores @ K_heads" in source and "dscaled_scores = weights * (dweights" in source
    else:  # one box per sublayer, and what flows between them: the residual sum's formula, by name
        assert 'label="dx += dresidual1  [1,4,8]"' in source and "(2 uses)" in source


def drawn_fraction(png_path, rows, columns):
    """How much of each of ``rows`` × ``columns`` cells of a PNG is drawn: the share of pixels not white."""
    from matplotlib.image import imread

    pixels = imread(png_path)[..., :3]  # RGB in 0..1; the slide's background is white
    drawn = (pixels < 0.97).any(axis=-1)  # boxes are filled in light colours, lines and text are dark
    row_edges = np.linspace(0, drawn.shape[0], rows + 1).astype(int)
    column_edges = np.linspace(0, drawn.shape[1], columns + 1).astype(int)
    return np.array(
        [
            [drawn[top:bottom, left:right].mean() for left, right in zip(column_edges, column_edges[1:])]
            for top, bottom in zip(row_edges, row_edges[1:])
        ]
    )


@needs_dot
def test_an_encoder_layer_s_slide_leaves_no_quarter_of_the_frame_empty(tmp_path):
    # The feed-forward sublayer used to hang right beside the residual path, under nothing: the lower
    # left of the slide, a quarter of the frame, was blank.
    layer = mt.nn.TransformerEncoderLayer(8, 2, 16, seed=0)
    layer(np.random.default_rng(0).standard_normal((2, 5, 8)))
    paths = mt.viz.save_slide(layer, tmp_path / "encoder")
    cells = drawn_fraction(paths["png"], 4, 4)
    # Every quarter of the frame (2 × 2 cells, the four corners and the five in between) has something drawn.
    quarters = {(top, left): cells[top : top + 2, left : left + 2].mean() for top in range(3) for left in range(3)}
    emptiest = min(quarters, key=quarters.get)
    assert quarters[emptiest] >= 0.01, f"the quarter from cell {emptiest} down is blank:\n{np.round(cells, 3)}"
    assert median_text_px(paths["svg"].read_text(), 1920) >= 9.5  # not filled by shrinking the text
