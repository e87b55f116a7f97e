"""graph() and backward_frames() share their drawing options, named once in microtape.viz.drawing."""

import inspect
import warnings

import pytest

pytest.importorskip("graphviz")

import microtape as mt  # noqa: E402
from microtape.viz.drawing import DEFAULTS, GraphCollapsedWarning  # noqa: E402


def _chain(n):
    with mt.Tape() as tape:
        y = mt.Scalar(0.5, name="x")
        for _ in range(n):
            y = y * 0.999 + 0.001
    return tape


@pytest.mark.parametrize("draw", [mt.viz.graph, mt.viz.backward_frames])
def test_each_drawing_option_is_in_the_signature_with_its_default(draw):
    parameters = inspect.signature(draw).parameters
    assert "drawing" not in parameters
    for name, default in DEFAULTS.items():
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameters[name].default == default, name


def test_graph_keeps_its_own_options_and_backward_frames_its_own():
    graph, frames = inspect.signature(mt.viz.graph).parameters, inspect.signature(mt.viz.backward_frames).parameters
    assert list(graph)[:6] == ["tape_or_output", "backward", "step", "output", "grad", "full_size"]
    assert list(frames)[:5] == ["tape_or_output", "output", "grad", "out_dir", "format"]


@pytest.mark.parametrize("draw", [mt.viz.graph, mt.viz.backward_frames])
def test_an_unknown_or_misplaced_keyword_is_a_type_error_naming_it(draw):
    tape = _chain(2)
    with pytest.raises(TypeError, match=rf"{draw.__name__}\(\): .*'colour'"):
        draw(tape, colour="red")
    with pytest.raises(TypeError, match=rf"{draw.__name__}\(\)"):
        draw(tape, tape, tape)  # the options are keyword-only


def test_the_options_are_checked_and_passed_on():
    tape = _chain(2)
    with pytest.raises(ValueError, match=r"graph\(detail=\.\.\.\)"):
        mt.viz.graph(tape, detail="most")
    with pytest.raises(ValueError, match=r"graph\(width=\.\.\.\)"):
        mt.viz.backward_frames(tape, width=50)
    assert "my title" in mt.viz.graph(tape, title="my title").source
    assert "rankdir=LR" in mt.viz.graph(tape, rankdir="LR").source
    assert "rankdir=TB" in mt.viz.graph(tape, rankdir="TB").source


@pytest.mark.parametrize("draw", [mt.viz.graph, mt.viz.backward_frames])
def test_the_collapse_warning_names_the_line_that_drew(draw):
    tape = _chain(200)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        draw(tape, max_nodes=10)
    collapsed = [w for w in caught if issubclass(w.category, GraphCollapsedWarning)]
    assert [(w.filename, w.lineno) for w in collapsed] == [(__file__, line)]
