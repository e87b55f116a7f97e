"""Writing pictures: render() with and without Graphviz, the frame pages, the demo files."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("graphviz")
pytest.importorskip("matplotlib")

import microtape as mt  # noqa: E402
from microtape.viz import GraphvizNotFound, backward_frames, graph, render  # noqa: E402
from microtape.viz.demo import DEMO, render_demo, render_readme_images, write_pictures  # noqa: E402
from microtape.viz.view import HUB_USES  # noqa: E402

needs_dot = pytest.mark.skipif(
    not any((Path(p) / "dot").exists() for p in os.environ.get("PATH", "").split(os.pathsep)),
    reason="Graphviz's dot is not installed",
)


def small_graph():
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    return graph((a * b + a).tanh())


@pytest.fixture
def no_dot(monkeypatch, tmp_path):
    """PATH with nothing on it: as if Graphviz were not installed."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@needs_dot
def test_render_svg_and_png(tmp_path):
    digraph = small_graph()
    path = render(digraph, tmp_path / "out" / "graph.svg")
    assert path == tmp_path / "out" / "graph.svg"
    text = path.read_text()
    assert "<svg" in text and "</svg>" in text and ">tanh<" in text
    png = render(digraph, tmp_path / "graph.png", dpi=72)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The format may be given explicitly; no extra suffix is ever added.
    other = render(digraph, tmp_path / "picture", format="svg")
    assert other == tmp_path / "picture" and "<svg" in other.read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["graph.png", "picture"]


def test_render_without_dot_writes_the_source_and_explains(tmp_path, no_dot):
    digraph = small_graph()
    with pytest.raises(GraphvizNotFound) as caught:
        render(digraph, tmp_path / "graph.svg")
    error = caught.value
    assert isinstance(error, RuntimeError)
    message = str(error)
    assert "`dot` program was not found" in message
    assert "apt-get install graphviz" in message and "brew install graphviz" in message
    assert str(tmp_path / "graph.dot") in message
    assert (tmp_path / "graph.dot").read_text() == digraph.source
    assert error.dot_path == tmp_path / "graph.dot"
    assert not (tmp_path / "graph.svg").exists()
    # No chained stack trace from inside the graphviz package.
    assert error.__cause__ is None and error.__suppress_context__


def test_dot_format_needs_no_graphviz(tmp_path, no_dot):
    digraph = small_graph()
    path = render(digraph, tmp_path / "graph.dot")
    assert path.read_text() == digraph.source


def test_render_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="format"):
        render(small_graph(), tmp_path / "g.svg", format="gif")
    with pytest.raises(TypeError, match="Digraph"):
        render("digraph {}", tmp_path / "g.svg")


@needs_dot
def test_backward_frames_page(tmp_path):
    with mt.Tape() as tape:
        a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
        y = (a * b + a**2).tanh()
    frames = backward_frames(tape, out_dir=tmp_path / "frames")
    names = sorted(p.name for p in (tmp_path / "frames").iterdir())
    assert names == ["frame_000.svg", "frame_001.svg", "frame_002.svg", "frame_003.svg", "index.html"]
    assert frames.paths[-1] == tmp_path / "frames" / "index.html"
    page = (tmp_path / "frames" / "index.html").read_text()
    assert 'type="range" min="0" max="3"' in page
    assert page.count('<img src="frame_') == 4
    assert "ArrowRight" in page  # keyboard stepping
    # The same frames write the same page.
    backward_frames(tape, out_dir=tmp_path / "again")
    assert (tmp_path / "again" / "index.html").read_text() == page
    # The inline version (what Jupyter shows) embeds the SVGs themselves.
    inline = frames._repr_html_()
    assert inline.count("<svg") == 4 and "<?xml" not in inline
    assert a.grad is None and y.grad is None


def test_backward_frames_without_dot_saves_dot_files(tmp_path, no_dot):
    a = mt.Scalar(2.0, name="a")
    frames = backward_frames((a * a).tanh())
    with pytest.raises(GraphvizNotFound, match="saved as .dot files"):
        frames.save(tmp_path / "frames")
    assert sorted(p.name for p in (tmp_path / "frames").iterdir()) == ["frame_000.dot", "frame_001.dot"]


@needs_dot
def test_demo_writes_every_file_it_promises(tmp_path):
    paths = render_demo(tmp_path / "demo")
    assert set(paths) == {
        "graph_forward",
        "graph_backward",
        "backward_frames",
        "attention_heatmaps",
        "grad_heatmaps",
    }
    for name in ("graph_forward", "graph_backward"):
        assert paths[name].suffix == ".svg" and "<svg" in paths[name].read_text()
    for name in ("attention_heatmaps", "grad_heatmaps"):
        assert paths[name].read_bytes()[:4] == b"\x89PNG"
    frames = sorted((tmp_path / "demo" / "backward_frames").glob("frame_*.svg"))
    assert len(frames) >= 10
    assert paths["backward_frames"].name == "index.html" and paths["backward_frames"].exists()
    page = paths["backward_frames"].read_text()
    assert page.count('<img src="frame_') == len(frames)
    # The demo's settings are written once: the pictures are of a DEMO-sized attention.
    forward = paths["graph_forward"].read_text()
    assert f"[{DEMO['batch']},{DEMO['seq']},{DEMO['embed']}]" in forward


@needs_dot
def test_readme_images_are_made_by_one_call(tmp_path):
    written = render_readme_images(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attention_backward_graph.png", "attention_heatmaps.png"]
    assert all(path.read_bytes()[:4] == b"\x89PNG" for path in written.values())


def test_demo_without_dot_still_writes_heatmaps_and_dot_sources(tmp_path, no_dot):
    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 3, 8))
    attn(x)
    grad_output = np.ones((1, 3, 8))
    attn.backward(grad_output)
    with pytest.raises(GraphvizNotFound, match="heatmaps were written") as caught:
        write_pictures(attn, grad_output, tmp_path)
    paths = caught.value.paths
    assert paths["attention_heatmaps"].exists() and paths["grad_heatmaps"].exists()
    assert (tmp_path / "graph_forward.dot").exists() and (tmp_path / "graph_backward.dot").exists()
    assert list((tmp_path / "backward_frames").glob("frame_*.dot"))


@needs_dot
def test_the_full_scalar_graph_of_a_tiny_attention_has_no_hub(tmp_path):
    """~600 equations: no box has more than HUB_USES edges out (a hub is what makes dot slow; timed in benchmarks)."""
    attn = mt.nn.MultiHeadAttention(4, 2, causal=True, seed=0)
    trace = attn.trace_scalars(np.random.default_rng(0).standard_normal((1, 3, 4)))
    digraph = graph(trace, detail="full")
    tails = re.findall(r"^\t+(\w+) -> ", digraph.source, re.M)
    assert max(tails.count(t) for t in set(tails)) <= HUB_USES
    assert "<svg" in render(digraph, tmp_path / "scalar.svg").read_text()


def test_import_microtape_stays_light():
    code = (
        "import sys, microtape, microtape.nn; "
        "assert 'graphviz' not in sys.modules, 'graphviz'; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib'; "
        "import microtape.viz; "
        "assert 'matplotlib' not in sys.modules, 'viz imports matplotlib only for heatmaps'"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@needs_dot
def test_a_tape_of_two_recorded_derivatives_draws_with_its_module_boxes(tmp_path, capfd):
    """Graphviz 2.43 cannot route curved edges between this tape's boxes ("triangulation failed"): it is drawn
    with straight edges instead of raising, and nothing of dot's complaint is printed."""
    x = mt.Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        y = (x * x).tanh().sum()
        grad = mt.gradients(y, create_graph=True)[x]
        second = mt.gradients(grad.sum(), create_graph=True)[x]
        (second * second).sum()
    picture = graph(tape, values=False)
    assert "subgraph cluster" in picture.source  # the boxes are there
    shown = picture._repr_mimebundle_()["text/html"]
    assert shown.count('class="cluster"') >= 5 and "%31" in shown
    assert render(picture, tmp_path / "second.png").stat().st_size > 10_000
    assert "triangulation" not in capfd.readouterr().err
