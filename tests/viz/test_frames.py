"""microtape.viz.backward_frames: one numbering, true captions, and one layout for every frame.

The frames are read as DOT source (what each box says, which state it is
in) and, with ``dot``, as the SVGs they draw: every box sits at exactly the
same place in every frame, on a canvas of the same size. The page that
plays them is tested in a real browser in ``test_player_browser.py``.
"""

import functools
import re
import sys
import warnings

import pytest
from pictures import attention, attr, edge_labels, label, needs_dot, nodes, scalar_expression, svg_positions, svg_size

pytest.importorskip("graphviz")

import microtape as mt  # noqa: E402

# As in test_viz_graph.py: the fit to a notebook cell's width is tested in test_viz_fit.py.
backward_frames = functools.partial(mt.viz.backward_frames, width=None)  # noqa: E402
graph = functools.partial(mt.viz.graph, width=None)  # noqa: E402


def boxes_and_states(source):
    """What every box says and its fill, without positions: ``{id: (label, fill)}``."""
    return {i: (label(a), attr(a, "fillcolor")) for i, a in nodes(source).items()}


def test_one_frame_per_step_and_graph_step_draws_the_same_frame():
    tape, a, *_ = scalar_expression()
    frames = backward_frames(tape)
    assert len(frames) == 4 and frames.steps == [0, 1, 2, 3] and frames.engine_steps == [0, 1, 2, 3]
    for k in range(4):
        # graph(step=k) and frame k show the same boxes, texts and states (the frame adds positions).
        assert boxes_and_states(frames[k].source) == boxes_and_states(graph(tape, step=k).source)
        assert frames.captions[k].startswith(f"step {k} of steps 0–3: ")
        # The frozen graph says the same step, in the same words: 4 frames are steps 0–3, not "of 3".
        assert f"step {k} of steps 0–3" in graph(tape, step=k).source
    assert frames.captions[0].startswith(
        "step 0 of steps 0–3: y (tanh) receives grad 1; sends ∂y/∂e = g·(1 - tanh(e)**2)"
    )
    assert frames.captions[2] == "step 2 of steps 0–3: d (pow) receives grad 0.07065; sends ∂y/∂a += g·2·a**(2-1) = " \
        "0.07065·2·2**(2-1) = 0.2826"  # fmt: skip
    assert "every leaf has its gradient" in frames.captions[-1]
    assert a.grad is None


def test_attention_frames_count_boxes_once_and_caption_them_by_their_names():
    attn, _ = attention()
    frames = backward_frames(attn)
    count = len(frames)
    assert count < len(attn.tape)  # reshape chains are one step
    assert frames.engine_steps == sorted(frames.engine_steps) and frames.engine_steps[-1] == len(attn.tape) - 1
    assert all(c.startswith(f"step {k} of steps 0–{count - 1}: ") for k, c in enumerate(frames.captions))
    # Each box is one step: K_heads^T (met between the V chain's steps) comes once.
    assert sum(1 for c in frames.captions if ": K_heads^T (" in c) == 1
    # A Linear's W.T is the transpose, drawn in the weight's box, and says so.
    (weight,) = [c for c in frames.captions if "out_proj.weight" in c.split(" receives")[0]]
    assert ": out_proj.weight^T (transpose, drawn in out_proj.weight's box) receives" in weight
    assert "d(out_proj.weight) = transpose(d(out_proj.weight^T), inverse axes)" in weight
    # A folded chain is captioned by its box's name, not an anonymous link.
    assert any(": merged (reshape→transpose→reshape) receives" in c for c in frames.captions)
    assert not any(re.search(r": %\d+ ", c) for c in frames.captions)
    assert all(node.grad is None for node in attn.tape.nodes)


def test_boxes_not_finished_show_what_they_received_so_far():
    tape, *_ = scalar_expression()
    frames = backward_frames(tape)
    a = nodes(frames[2].source)["x0"]
    assert "so far 0.2826 (1 of 2 uses)" in label(a)
    labels = edge_labels(frames[1].source)
    assert labels[("x0", "n1")] == ["∂y/∂a += g·2·a**(2-1)"]  # not sent yet: the formula, no numbers


@needs_dot
def test_every_frame_has_the_same_layout():
    attn, _ = attention()
    frames = backward_frames(attn)
    assert frames.pinned
    svgs = frames.svgs()
    first = svg_positions(svgs[0])
    assert set(first) == set(nodes(frames[0].source))  # every box
    for k, text in enumerate(svgs):
        assert svg_positions(text) == first, k  # nothing moves between frames
        assert svg_size(text) == svg_size(svgs[0])  # and the canvas keeps its size
    # The colours do change: the current box differs from frame to frame.
    fills = [re.findall(r'<g id="node\d+" class="node">\s*<title>(\w+)</title>\s*<\w+ fill="#f5a25d"', s) for s in svgs]
    assert all(len(f) == 1 for f in fills) and len({f[0] for f in fills}) == len(frames)


@needs_dot
def test_focus_points_at_each_frames_current_box():
    tape, *_ = scalar_expression()
    frames = backward_frames(tape)
    # Steps go backwards along the tape: y, e, d, c; y is the rightmost box (left to right).
    xs = [fx for fx, _ in frames.focus]
    assert xs == sorted(xs, reverse=True) and all(0 <= v <= 1 for pair in frames.focus for v in pair)


def test_summary_frames():
    with mt.Tape() as tape:
        h = mt.Scalar(0.5, name="x")
        for m in range(3):
            with mt.module_scope(f"block{m}"):
                for _ in range(5):
                    h = (h * 0.9).tanh()
    frames = backward_frames(tape, detail="summary")
    assert len(frames) == 3  # one frame per module box
    assert frames.captions[0].startswith(
        "step 0 of steps 0–2: block2 (summary of 10 ops) receives grad 1 at its output;"
    )
    assert frames.captions[1].startswith("step 1 of steps 0–2: block1 (summary of 10 ops) receives grad 0.")


def test_frames_of_a_collapsed_graph_warn_once():
    with mt.Tape() as tape:
        h = mt.Scalar(0.5, name="x")
        for m in range(4):
            with mt.module_scope(f"block{m}"):
                for _ in range(25):
                    h = (h * 0.9).tanh()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frames = backward_frames(tape)
    assert len(caught) == 1 and len(frames) == 4


@needs_dot
def test_the_widget_steps_the_frames_and_draws_each_when_reached(monkeypatch):
    ipywidgets = pytest.importorskip("ipywidgets")
    tape, *_ = scalar_expression()
    frames = backward_frames(tape)
    widget = frames.widget()
    assert isinstance(widget, ipywidgets.VBox)
    (back, slider, forward), caption, view = widget.children[0].children, widget.children[1], widget.children[2]
    assert (slider.min, slider.max, slider.value) == (0, len(frames) - 1, 0)
    assert frames.captions[0].split(":")[0] in caption.value and sorted(frames._drawn) == [0]  # one frame drawn
    slider.value = 2
    assert view.value == frames.picture(2) and "step 2 of steps 0–3" in caption.value
    assert sorted(frames._drawn) == [0, 2]  # frame 1 never drawn: never shown
    forward.click()
    assert slider.value == 3 and "every leaf has its gradient" in caption.value
    forward.click()
    assert slider.value == 3  # no step beyond the last
    back.click()
    assert slider.value == 2
    # Without ipywidgets: the frames object itself, whose HTML player needs no kernel.
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    assert frames.widget() is frames and "mt-frames" in frames._repr_html_()


@needs_dot
def test_the_widget_s_output_also_carries_the_plain_html_player_for_a_static_page(monkeypatch):
    """A built site has no kernel: there the widget's output holds the player too, with every frame."""
    pytest.importorskip("ipywidgets")
    tape, *_ = scalar_expression()
    frames = backward_frames(tape)
    monkeypatch.delenv("MICROTAPE_STATIC_PAGES", raising=False)
    assert "text/html" not in frames.widget()._repr_mimebundle_()  # in Jupyter: the notebook stays light
    monkeypatch.setenv("MICROTAPE_STATIC_PAGES", "1")  # as docs/conf.py sets it
    bundle = frames.widget()._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # Jupyter shows the slider
    player = bundle["text/html"]
    assert "mt-frames" in player and player.count('class="mt-frame"') == len(frames)
