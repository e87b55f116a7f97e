"""A Transformer layer's pictures laid out for a page and a slide (issue #39).

Collapsed to one box per module, an encoder layer is drawn top to bottom
with its residual path straight (input, first sum, first norm, second sum,
second norm in one column), so the picture is not a diagonal and its text
reads at notebook width; its slide fills 1920 × 1080.
"""

import numpy as np
import pytest
from pictures import find_box, median_text_px, needs_dot, svg_positions, svg_size

pytest.importorskip("graphviz")

import microtape as mt  # noqa: E402
from microtape.viz.fit import NOTEBOOK_WIDTH  # noqa: E402
from microtape.viz.picture import Arrow, Shape, spine  # noqa: E402


def encoder_layer():
    layer = mt.nn.TransformerEncoderLayer(8, 2, 16, seed=0)
    layer(np.random.default_rng(0).standard_normal((2, 5, 8)))
    return layer


def test_the_spine_is_the_shortest_chain_from_the_input_to_the_result():
    def box(name, kind="op"):
        return Shape(name, kind, "", [])

    shapes = [box("x", "input"), box("w", "parameter"), box("f", "summary"), box("sum"), box("norm", "summary")]
    arrows = [Arrow("x", "f"), Arrow("w", "f"), Arrow("f", "sum"), Arrow("x", "sum"), Arrow("sum", "norm")]
    assert spine(shapes, arrows) == ["x", "sum", "norm"]  # the skip, not the sublayer
    assert spine([box("w", "parameter"), box("y")], [Arrow("w", "y")]) == []  # no input: no spine
    chain = [box("x", "input"), box("f", "summary"), box("g")]
    assert spine(chain, [Arrow("x", "f"), Arrow("f", "g")]) == []  # nothing skipped: no residual path


@needs_dot
@pytest.mark.parametrize("backward", [False, True])
def test_an_encoder_layer_s_collapsed_graph_reads_at_notebook_width_with_its_residual_path_straight(backward):
    digraph = mt.viz.graph(encoder_layer(), backward=backward)
    source = digraph.source
    assert "one box per module" in source and "rankdir=TB" in source
    drawn = mt.viz.svg(digraph)
    assert median_text_px(drawn, NOTEBOOK_WIDTH) >= 8
    placed = svg_positions(drawn)
    path = [find_box(source, name) for name in ("x", "residual1", "norm1", "residual2", "norm2")]
    columns = {round(placed[box][0]) for box in path}
    rows = [placed[box][1] for box in path]
    assert max(columns) - min(columns) <= 1  # one straight column
    assert rows == sorted(rows)  # top to bottom, in order


@needs_dot
def test_an_encoder_layer_s_slide_fills_1920_by_1080_with_readable_text():
    drawn = mt.viz.svg(mt.viz.slide(encoder_layer()))
    width, height = (float(v) for v in svg_size(drawn))  # the slide's pixels (drawn at the slide's dpi)
    assert abs(width - 1920) <= 10 and abs(height - 1080) <= 10
    assert median_text_px(drawn, 1920) >= 9.5  # 9.0 when the layer was drawn on a diagonal
