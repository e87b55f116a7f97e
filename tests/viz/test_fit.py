"""Pictures that read at notebook width: graph(width=900) and the README's images.

A graph shown in a 900-pixel cell is scaled down to it; these tests draw the
SVG and measure how tall its smallest text ends up (``smallest_text_px``),
the same measure tests/docs/test_notebooks.py applies to every notebook output.
"""

import importlib
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from pictures import attention, find_box, label, needs_dot, nodes

pytest.importorskip("graphviz")

import microtape as mt  # noqa: E402
from microtape.viz.demo import README_SCALE, readme_graph, render_readme_images  # noqa: E402
from microtape.viz.fit import NOTEBOOK_WIDTH, READABLE_PX, smallest_text_px  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def png_size(path):
    data = Path(path).read_bytes()
    return struct.unpack(">II", data[16:24])


@needs_dot
@pytest.mark.parametrize("backward", [False, True])
def test_an_attention_graph_reads_at_notebook_width(backward):
    attn, _ = attention()
    whole = mt.viz.svg(mt.viz.graph(attn, backward=backward, width=None))
    fitted = mt.viz.graph(attn, backward=backward)
    # Drawn op by op, the text would be too small to read once the picture is scaled to the cell.
    assert smallest_text_px(whole) < READABLE_PX
    assert smallest_text_px(mt.viz.svg(fitted)) >= READABLE_PX
    # So it is drawn one box per module, and says how to open one or see everything.
    source = fitted.source
    assert {label(nodes(source)[find_box(source, name)]).split(" ")[0] for name in ("q_proj", "attention")}
    assert "expand='attention' opens one" in source and "width=None draws every op" in source
    opened = mt.viz.graph(attn, backward=backward, expand="attention")
    assert "scores" in opened.source and smallest_text_px(mt.viz.svg(opened)) >= READABLE_PX


@needs_dot
def test_a_small_graph_is_drawn_whole_and_frames_agree_with_graph_under_the_fit():
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    with mt.Tape() as tape:
        (a * b + a**2).tanh()
    assert mt.viz.graph(tape).source == mt.viz.graph(tape, width=None).source  # it fits: nothing changes
    attn, _ = attention()
    frames = mt.viz.backward_frames(attn)
    boxes = set(nodes(frames[0].source))
    assert boxes == set(nodes(mt.viz.graph(attn, step=0).source))  # one view for both
    assert smallest_text_px(frames.svgs()[0]) >= READABLE_PX


def test_full_size_draws_everything_at_natural_size_and_width_is_checked():
    attn, _ = attention()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole = mt.viz.graph(attn, full_size=True)
    assert whole.fit is False and whole.source == mt.viz.graph(attn, width=None).source
    for bad in (0, 50, 12.5, True, "900"):
        with pytest.raises(ValueError, match="width"):
            mt.viz.graph(attn, width=bad)
    with pytest.raises(TypeError, match="full_size"):
        mt.viz.graph(attn, full_size="yes")


@needs_dot
def test_readme_images_are_twice_the_size_shown_and_read_at_that_size(tmp_path):
    # The README shows the graph; the site's pictures page (docs/pictures.md) shows both, each at a width.
    readme = re.findall(r'<img src="(docs/images/[\w.]+)" width="(\d+)"', (ROOT / "README.md").read_text())
    page = (ROOT / "docs" / "pictures.md").read_text()
    on_page = [("docs/" + name, width) for name, width in re.findall(r"```\{image\} ([\w./]+)\n:width: (\d+)px", page)]
    assert len(readme) == 1 and len(on_page) == 2
    shown = dict(readme + on_page)
    assert set(shown) == {"docs/images/attention_backward_graph.png", "docs/images/attention_heatmaps.png"}
    assert all(shown[name] == width for name, width in readme)  # the same width in both places
    fresh = render_readme_images(tmp_path)
    for name, path in (
        ("graph", "docs/images/attention_backward_graph.png"),
        ("heatmaps", "docs/images/attention_heatmaps.png"),
    ):
        assert png_size(ROOT / path) == png_size(fresh[name])  # the committed image is the current one
        width = int(shown[path])
        assert width <= NOTEBOOK_WIDTH and png_size(ROOT / path)[0] >= README_SCALE * width - 2  # crisp: 2×
    width = int(shown["docs/images/attention_backward_graph.png"])
    assert smallest_text_px(mt.viz.svg(readme_graph()), width=width) >= READABLE_PX


def test_heatmaps_fit_a_notebook_cell():
    weights = np.random.default_rng(0).dirichlet(np.ones(6), size=(1, 8, 6))
    for which, source in (("weights", weights), ("grad_scores", weights - 1 / 6)):
        fig = mt.viz.attention_heatmaps(source, which=which)
        assert fig.get_size_inches()[0] * 100 <= NOTEBOOK_WIDTH  # shown at 100 dpi, unscaled
    assert len([ax for ax in mt.viz.attention_heatmaps(weights, ncols=8).axes if ax.images]) == 8


def test_a_direction_asked_for_is_kept():
    attn, _ = attention()
    for rankdir in ("LR", "TB"):
        assert f"rankdir={rankdir}" in mt.viz.graph(attn, backward=True, rankdir=rankdir).source


@needs_dot
def test_the_drawing_made_to_measure_is_the_one_shown(monkeypatch):
    rendering = importlib.import_module("microtape.viz.render")  # the module (mt.viz.render is its function)
    calls = []
    original = rendering._pipe
    monkeypatch.setattr(rendering, "_pipe", lambda *args, **kw: calls.append(args[1]) or original(*args, **kw))
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    with mt.Tape() as tape:
        (a * b + a**7).tanh()
    digraph = mt.viz.graph(tape, backward=True)
    assert calls == ["svg"]  # measured once: it fits
    assert "<svg" in digraph._repr_mimebundle_()["text/html"] and calls == ["svg"]  # shown: not drawn again
    digraph.attr(label="changed")  # a changed graph is drawn anew
    mt.viz.svg(digraph)
    assert calls == ["svg", "svg"]


@needs_dot
def test_a_fitted_graph_never_shrinks_its_smallest_text_below_8_px():
    """Shown in a narrow column (or zoomed in), a graph keeps a min-width in CSS pixels and scrolls instead."""
    from microtape.viz.render import SMALLEST_SHOWN_PX, fit_svg

    attn, _ = attention()
    drawn = mt.viz.svg(mt.viz.graph(attn, backward=True, width=None))  # wide: far over a cell's width
    shown = fit_svg(drawn)
    natural_pt = float(re.search(r'<svg width="([\d.]+)pt"', drawn).group(1))
    least = float(re.search(r"min-width:(\d+)px", shown).group(1))
    assert least < natural_pt * 4 / 3  # it may shrink ...
    assert smallest_text_px(drawn, width=least) >= SMALLEST_SHOWN_PX - 0.05  # ... down to 8 px text, no further
    assert smallest_text_px(drawn, width=least - 10) < SMALLEST_SHOWN_PX
    # A small graph is never shrunk at all below its natural size's 8 px text (its text is larger).
    a = mt.Scalar(2.0, name="a")
    with mt.Tape() as tape:
        a.tanh()
    small = mt.viz.svg(mt.viz.graph(tape))
    assert smallest_text_px(small, width=float(re.search(r"min-width:(\d+)px", fit_svg(small)).group(1))) >= 8 - 0.05
