"""The explorer's Python side (mt.viz.explore): its data against the engine's own numbers, its file, its errors.

The page itself is tested in a real browser (test_explore_browser.py); here
every number it will show is checked where it is made: the README's first
example's local derivatives (∂(a·b)/∂a = b = −3, ∂(a²)/∂a = 2a = 4), every
use's share against the engine's VJP, the shares summing to the gradient
(scalars and each entry of a Tensor's heatmap), the steps against the
engine's steps, and the graph's boxes marked with the names of the nodes.
"""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

import microtape as mt
from microtape.viz.explorer import Explorer
from microtape.viz.explorer.data import explore_data
from microtape.viz.explorer.explore import fingerprint
from microtape.viz.explorer.local import local_template, tidy
from microtape.viz.explorer.values import HEAT


def readme_example():
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    with mt.Tape() as tape:
        y = (a * b + a**2).tanh()
    return a, b, y, tape


def test_clicking_a_shows_each_use_local_derivative_with_this_runs_numbers():
    a, b, y, tape = readme_example()
    data = explore_data(tape)
    panel = data["nodes"]["a"]
    by_symbol = {use["symbol"]: use for use in panel["uses"]}
    assert set(by_symbol) == {"∂(a·b)/∂a", "∂(a²)/∂a"}
    product, square = by_symbol["∂(a·b)/∂a"], by_symbol["∂(a²)/∂a"]
    assert (product["text"], product["local"]) == ("b", -3.0)
    assert (square["text"], square["numbers"], square["local"]) == ("2a", "2·2", 4.0)
    g = mt.gradients(y)
    # upstream × local = share, and the shares sum to the gradient that reaches a
    for use in panel["uses"]:
        assert use["share"]["number"] == pytest.approx(use["upstream"]["number"] * use["local"], rel=1e-12)
    assert sum(use["share"]["number"] for use in panel["uses"]) == pytest.approx(g[a], rel=1e-12)
    assert panel["grad"]["number"] == pytest.approx(g[a], rel=1e-12)
    assert a.grad is None and b.grad is None  # exploring writes no gradient


def test_an_equation_panel_gives_its_ops_local_derivatives_and_what_its_vjp_saved():
    a, b, y, tape = readme_example()
    nodes = explore_data(tape)["nodes"]
    product = nodes["%0"]
    assert (product["op"], product["expr"]) == ("mul", "a·b")
    locals_ = {entry["input"]: entry for entry in product["local"]}
    assert (locals_["a"]["text"], locals_["a"]["value"]) == ("b", -3.0)
    assert (locals_["b"]["text"], locals_["b"]["value"]) == ("a", 2.0)
    assert locals_["a"]["latex"] == r"\bar a = \bar y\, b"  # the op's own LaTeX
    assert product["saved"] == [["a", "2"], ["b", "-3"]]  # mul's VJP reads both operands
    tanh = nodes["%3"]
    assert tanh["output"] and tanh["seed"]["number"] == 1.0
    assert tanh["local"][0]["value"] == pytest.approx(1 - np.tanh(-2.0) ** 2, rel=1e-12)


def test_local_formulas_are_the_op_templates_with_g_set_to_one():
    assert local_template("{g} * {b}") == "{b}"
    assert local_template("-{g} * {a} / {b}**2") == "-{a} / {b}**2"
    assert local_template("{g} / {x}") == "1 / {x}"
    assert tidy("3 * x**(3-1)") == "3x²"
    assert tidy("0.5 * x**(0.5-1)") == "0.5·x**−0.5"  # a decimal keeps its dot: 0.5x would misread


def test_steps_are_the_engines_steps_in_order_with_what_each_sends():
    a, b, y, tape = readme_example()
    data = explore_data(tape)
    engine = mt.gradients(y, steps=True).steps
    assert [step["node"] for step in data["steps"]] == [tape.variable_names()[s.equation.output] for s in engine]
    assert data["steps"][3]["to"] == ["a", "b"]
    assert data["steps"][0]["text"].startswith("step 0 of steps 0–3: %3 = tanh(%2) receives 1")
    # when each node is handled and when its shares arrive: what the page colours the graph by
    assert data["nodes"]["a"]["gets"] == [2, 3] and data["nodes"]["%0"]["step"] == 3


def test_every_box_of_the_graph_is_marked_with_its_nodes_name():
    a, b, y, tape = readme_example()
    view = explore_data(tape)["views"][0]
    marked = re.findall(r'data-node="([^"]+)"', view["svg"])
    assert sorted(marked) == sorted(["a", "b", "%0", "%1", "%2", "%3"])
    assert view["boxes"]["a"] == ["a"]


@pytest.fixture(scope="module")
def attention():
    attn = mt.nn.MultiHeadAttention(16, 4, causal=True, seed=0)
    x = np.random.default_rng(0).standard_normal((2, 6, 16))
    attn(x)
    upstream = np.random.default_rng(1).standard_normal((2, 6, 16))
    return attn, upstream


def test_a_tensors_heatmap_entries_and_their_chain_rule_sums(attention):
    attn, upstream = attention
    data = explore_data(attn, grad=upstream)
    g = mt.gradients(attn.tape.nodes[-1], upstream, tape=attn.tape)
    names = attn.tape.names()
    checked = []
    for name in ("Q_heads", "weights", "x", "q_proj.weight"):
        node = names[name]
        panel = data["nodes"][name]
        rows, cols = len(panel["grad"]["heat"]["cells"]), len(panel["grad"]["heat"]["cells"][0])
        assert rows <= HEAT and cols <= HEAT
        grad = np.asarray(g[node])
        corner = grad.reshape((-1,) + grad.shape[-2:])[0] if grad.ndim > 1 else grad.reshape(1, -1)
        # a heatmap's cells keep 7 significant digits (values.CELL_DIGITS); the page prints 4
        np.testing.assert_allclose(panel["grad"]["heat"]["cells"], corner[:rows, :cols], rtol=1e-6, atol=1e-15)
        value = np.asarray(node.data)
        value = value.reshape((-1,) + value.shape[-2:])[0] if value.ndim > 1 else value.reshape(1, -1)
        np.testing.assert_allclose(panel["value"]["heat"]["cells"], value[:rows, :cols], rtol=1e-6)
        if len(panel["uses"]) == 1:  # one use: its share is the gradient (the page reads the grad's cells)
            assert "share_cells" not in panel["uses"][0]
            continue
        shares = sum(np.asarray(use["share_cells"]) for use in panel["uses"])
        np.testing.assert_allclose(shares, corner[:rows, :cols], rtol=1e-5, atol=1e-9)
        checked.append(name)
    assert checked == ["x"]  # x feeds the three projections; the others have one use each


def test_a_layer_that_ran_shows_its_named_steps_and_each_vjp_formula(attention):
    attn, upstream = attention
    data = explore_data(attn, grad=upstream)
    scores = data["nodes"]["scores"]
    # (the heads are folded into the batch: [2·4, 6, 6])
    assert (scores["op"], scores["expr"], scores["shape"]) == ("matmul", "Q_heads @ K_heads^T", "[8,6,6]")
    assert [entry["text"] for entry in scores["local"]] == ["dscores @ K_heads", "Q_heads^T @ dscores"]
    assert len(data["steps"]) == len(mt.gradients(attn.tape.nodes[-1], upstream, tape=attn.tape, steps=True).steps)


def test_a_big_tape_is_collapsed_and_each_summary_lists_its_ops():
    w, c, x = mt.Scalar(0.5, name="w"), mt.Scalar(0.1, name="c"), mt.Scalar(0.3, name="x")
    with mt.Tape() as tape:
        h = x
        for _ in range(400):
            h = (h * w + c).tanh()
    data = explore_data(tape)
    view = data["views"][0]
    assert len(re.findall(r"data-node=", view["svg"])) < 40
    assert data["summaries"] and sum(len(s["members"]) for s in data["summaries"].values()) > 1000
    assert len(data["nodes"]) == len(tape) + 3 and len(data["steps"]) == len(tape)


def test_a_module_summary_is_drawn_opened_too():
    layer = mt.nn.TransformerEncoderLayer(8, 2, 16, seed=0)
    layer(np.random.default_rng(0).standard_normal((1, 3, 8)))
    from microtape.viz.explorer.graphs import graph_views
    from microtape.viz.program import collect

    views, overview = graph_views(collect(layer), max_nodes=20)
    assert views[0]["summaries"], "the overview should be collapsed at max_nodes=20"
    keys = [view["key"] for view in views[1:]]
    assert keys and set(keys) <= set(views[0]["summaries"])
    opened = views[1]
    assert opened["key"] not in opened["summaries"] and len(opened["boxes"]) > len(views[0]["boxes"])


def test_save_writes_one_file_that_needs_no_network(tmp_path):
    a, b, y, tape = readme_example()
    view = mt.viz.explore(y, widget=False)
    path = view.save(tmp_path / "sub" / "y.html")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "mtExplore(" in text
    assert 'data-node=\\"a\\"' in text  # the graph travels in the JSON
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    payload = re.search(r'<script type="application/json" id="microtape-explore-data">(.*?)</script>', text, re.S)
    assert json.loads(payload.group(1))["nodes"]["a"]["uses"][0]["local"] == -3.0


def test_bad_arguments_raise_clear_errors(tmp_path):
    a, b, y, tape = readme_example()
    view = mt.viz.explore(y, widget=False)
    with pytest.raises(ValueError, match=r"save\(path\): expected a \.html file, got .*y\.svg"):
        view.save(tmp_path / "y.svg")
    with pytest.raises(TypeError, match="save\\(path\\): expected a file path, got int"):
        view.save(3)
    with pytest.raises(TypeError, match=r"explore\(widget=\.\.\.\): expected True, False or None, got 'yes'"):
        mt.viz.explore(y, widget="yes")
    with pytest.raises(TypeError, match="expected a Tape, a Scalar/Tensor result"):
        mt.viz.explore(42)
    unrun = mt.nn.MultiHeadAttention(8, 2, seed=0)
    with pytest.raises(ValueError, match="run a forward pass first"):
        mt.viz.explore(unrun)
    before = view.data
    with pytest.raises(TypeError):
        view.update(object())
    assert view.data is before and view.obj is y  # a bad update leaves the view as it was


def test_a_view_follows_its_layer_after_a_new_forward():
    layer = mt.nn.MultiHeadAttention(8, 2, seed=0)
    rng = np.random.default_rng(0)
    layer(rng.standard_normal((1, 3, 8)))
    view = Explorer(layer)
    assert not view.refresh()  # nothing changed
    first = view.data["nodes"]["x"]["value"]["heat"]["cells"]
    layer(rng.standard_normal((1, 3, 8)))
    assert view.refresh()
    assert view.data["nodes"]["x"]["value"]["heat"]["cells"] != first
    print_before = fingerprint(layer)
    layer.backward(np.ones((1, 3, 8)))  # gradients written: the view reads them again
    assert fingerprint(layer) != print_before and view.refresh()


def test_import_microtape_does_not_import_anywidget():
    code = "import sys, microtape, microtape.viz; print('anywidget' in sys.modules, 'ipywidgets' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


# ---------------------------------------------------------------- the widget (anywidget), its Python side


@pytest.fixture
def widget_of():
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install microtape[notebooks])")
    return lambda obj: mt.viz.explore(obj)


def test_explore_returns_the_widget_and_its_output_carries_a_static_fallback(widget_of):
    a, b, y, tape = readme_example()
    view = widget_of(y)
    assert type(view).__name__ == "ExploreWidget"
    assert view.data["nodes"]["a"]["uses"][0]["local"] == -3.0
    bundle, _ = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    # reopened without a kernel: the graph as last shown (the whole view is in the widget's state)
    assert 'data-node="a"' in bundle["text/html"] and "mtExplore(" not in bundle["text/html"]
    assert "mtExplore(" in view._esm and "export default" in view._esm


def test_on_a_built_site_the_widgets_output_is_the_whole_explorer(widget_of, monkeypatch):
    from microtape.viz.frames import STATIC_PAGES

    monkeypatch.setenv(STATIC_PAGES, "1")
    a, b, y, tape = readme_example()
    bundle, _ = widget_of(y)._repr_mimebundle_()
    assert "mtExplore(document" in bundle["text/html"] and 'class="mt-explore-root"' in bundle["text/html"]


def test_the_widget_follows_its_layer_when_the_front_end_polls(widget_of):
    layer = mt.nn.MultiHeadAttention(8, 2, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 3, 8))
    layer(x)
    view = widget_of(layer)
    before = view.data
    view._on_message(view, {"kind": "poll"}, [])
    assert view.data is before  # nothing changed: nothing sent
    layer(2 * x)  # a new forward, in a later cell
    view._on_message(view, {"kind": "poll"}, [])
    assert view.data["nodes"]["x"]["value"]["heat"]["cells"][0][0] == pytest.approx(2 * x[0, 0, 0])
    view.follow = False
    layer(3 * x)
    view._on_message(view, {"kind": "poll"}, [])
    assert view.data["nodes"]["x"]["value"]["heat"]["cells"][0][0] == pytest.approx(2 * x[0, 0, 0])


def test_widget_update_shows_another_object_and_a_bad_one_changes_nothing(widget_of, tmp_path):
    a, b, y, tape = readme_example()
    view = widget_of(y)
    z = mt.Scalar(1.5, name="z")
    with mt.Tape():
        w = z.sin()
    assert view.update(w) is view and "z" in view.data["nodes"]
    before = view.data
    with pytest.raises(TypeError):
        view.update("not a computation")
    assert view.data == before
    saved = view.save(tmp_path / "w.html").read_text(encoding="utf-8")
    assert saved.count("function mtExplore(") == 1 and saved.count("\nmtExplore(document") == 1


# ---------------------------------------------------------------- a stepped check, explored link by link


def attention_steps(q, k, v, grad_c, *, rowsum=True, scale_q=True):
    """attention_backward_steps by hand: right, or with the rowsum forgotten, or dQ's 1/√d forgotten."""
    scale = 1 / np.sqrt(q.shape[-1])

    def t(a):
        return np.swapaxes(a, -1, -2)

    scores = q @ t(k) * scale
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    grad_p = grad_c @ t(v)
    grad_s = p * (grad_p - (np.sum(grad_p * p, axis=-1, keepdims=True) if rowsum else 0.0))
    grad_q = grad_s @ k * (scale if scale_q else 1.0)
    return {"grad_weights": grad_p, "grad_scaled_scores": grad_s, "grad_q": grad_q, "grad_k": t(grad_s) @ q * scale,
            "grad_v": t(p) @ grad_c}  # fmt: skip


def test_a_checks_wrong_link_opens_yours_the_tapes_and_what_your_upstream_implies():
    import microtape.exercises as ex

    def mine(q, k, v, grad_c):
        return attention_steps(q, k, v, grad_c, rowsum=False)

    result = ex.check("attention_backward_steps", mine)
    assert result.first_wrong == "grad_scaled_scores"
    data = mt.viz.explore(result, student=mine, widget=False).data
    assert data["verdicts"] == {"weights": "right", "scaled_scores": "wrong", "q": "carried", "k": "carried",
                                "v": "right"}  # fmt: skip
    wrong = data["nodes"]["scaled_scores"]["check"]
    assert wrong["step"] == "grad_scaled_scores" and wrong["after"] == ["grad_weights"]
    # grad_weights was right, so what it implies is the tape's own dS: the error is at this link
    assert wrong["off_implied"] == pytest.approx(wrong["off_tape"], rel=1e-12) and wrong["off_tape"] > 0.1
    carried = data["nodes"]["q"]["check"]
    assert carried["off_tape"] > 0.1 and carried["off_implied"] < 1e-12  # right from your own dS
    assert carried["text"].startswith("grad_q differs from the tape's only because grad_scaled_scores does")
    assert "grad_scaled_scores" in data["note"]


def test_a_second_independent_wrong_link_is_not_hidden_behind_the_first():
    import microtape.exercises as ex

    def mine(q, k, v, grad_c):
        return attention_steps(q, k, v, grad_c, rowsum=False, scale_q=False)

    result = ex.check("attention_backward_steps", mine)
    data = mt.viz.explore(result, student=mine, widget=False).data
    checked = data["nodes"]["q"]["check"]
    assert checked["state"] == "wrong" and checked["off_implied"] > 0.1  # wrong even from your own dS
    assert data["verdicts"]["scaled_scores"] == "wrong" and data["verdicts"]["k"] == "carried"
    assert "wrong links: grad_scaled_scores, grad_q" in data["note"]


def test_a_check_without_your_function_shows_the_verdicts_and_the_tapes_numbers():
    import microtape.exercises as ex

    result = ex.check("attention_backward_steps", lambda q, k, v, grad_c: attention_steps(q, k, v, grad_c))
    data = mt.viz.explore(result, widget=False).data
    assert set(data["verdicts"].values()) == {"right"}
    assert data["nodes"]["q"]["check"]["yours"] is None and "student=your_function" in data["note"]
    with pytest.raises(TypeError, match=r"explore\(student=...\): only for a check result, not a Scalar"):
        mt.viz.explore(mt.Scalar(1.0), student=print)
    plain = ex.check("softmax_backward", lambda p, grad_p: p * (grad_p - (grad_p * p).sum(-1, keepdims=True)))
    with pytest.raises(ValueError, match="'softmax_backward' is not a stepped exercise's check"):
        mt.viz.explore(plain, widget=False)


# ---------------------------------------------------------------- forward mode and a recorded derivative


def test_forward_mode_steps_the_tangents_with_each_local_derivative():
    a, b, y, tape = readme_example()
    forward = explore_data(tape, tangents={"a": 1.0})["forward"]
    assert [step["node"] for step in forward["steps"]] == ["%0", "%1", "%2", "%3"]
    assert forward["steps"][2]["text"] == "step 2 of steps 0–3: %2 = %0 + %1: d%2 = 1·(-3) + 1·4 = 1"
    _, expected = mt.jvp(lambda a, b: (a * b + a**2).tanh(), (2.0, -3.0), (1.0, 0.0))
    assert forward["tangents"]["%3"]["number"] == pytest.approx(expected, rel=1e-12)
    assert forward["seeded"] == ["a"] and "b" not in forward["tangents"]
    with pytest.raises(ValueError, match=r"tangents=...: 'c' is not a leaf of this computation; its leaves are a, b"):
        explore_data(tape, tangents={"c": 1.0})
    with pytest.raises(TypeError, match="tangents=...: expected a dict"):
        explore_data(tape, tangents=[1.0])


def test_forward_mode_on_tensors_matches_jvp():
    rng = np.random.default_rng(0)
    w = mt.Tensor(rng.standard_normal((3, 2)), requires_grad=True, name="w")
    x = mt.Tensor(rng.standard_normal((4, 3)), requires_grad=True, name="x")
    with mt.Tape() as tape:
        loss = (x @ w).tanh().sum()
    direction = rng.standard_normal((3, 2))
    forward = explore_data(tape, tangents={w: direction})["forward"]
    _, expected = mt.jvp(lambda w: (mt.Tensor(x.data) @ w).tanh().sum(), (w.data,), (direction,))
    assert forward["tangents"][tape.variable_names()[loss]]["number"] == pytest.approx(float(expected), rel=1e-12)
    with pytest.raises(ValueError, match=r"tangents\['w'\]: shape \(2,\), expected the leaf's \(3, 2\)"):
        explore_data(tape, tangents={"w": np.ones(2)})


def test_a_recorded_derivatives_steps_are_told_apart_and_its_gradient_is_the_second_derivative():
    x = mt.Scalar(1.5, name="x")
    with mt.Tape():
        y = x.sin() * x
        dy_dx = mt.gradients(y, create_graph=True)[x]
    data = explore_data(dy_dx)
    assert data["nodes"]["x"]["grad"]["number"] == pytest.approx(2 * np.cos(1.5) - 1.5 * np.sin(1.5), rel=1e-12)
    orders = {step["order"] for step in data["steps"]}
    assert {0, 1} <= orders
    told = [step["text"] for step in data["steps"] if step["order"] == 1]
    assert told and all(text.endswith("[first-derivative step]") or "[first-derivative step];" in text for text in told)
    assert re.search(r'data-node="[^"]+"[^>]*data-order="1"', data["views"][0]["svg"])


def _ran(kind):
    rng = np.random.default_rng(0)
    if kind == "conv2d":
        layer = mt.nn.Conv2d(2, 3, 3, seed=0)
        layer(rng.standard_normal((1, 2, 5, 5)))
    elif kind == "gru":
        layer = mt.nn.GRUCell(3, 4, seed=0)
        layer(rng.standard_normal((2, 3)), np.zeros((2, 4)))
    else:
        layer = mt.nn.TransformerDecoderLayer(8, 2, 16, seed=0)
        layer(rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 4, 8)))
    return layer


@pytest.mark.parametrize("kind", ["conv2d", "gru", "decoder"])
def test_every_layer_kind_explores_with_the_engines_gradients(kind):
    from microtape.viz.program import collect

    layer = _ran(kind)
    data = explore_data(layer)
    program = collect(layer)
    output = program.outputs[0]
    g = mt.gradients(output, np.ones_like(output.data), tape=program.tape)
    compared = 0
    for node in [*program.leaves, *program.equations]:
        panel = data["nodes"][program.name(node)]
        if node not in g or not panel["grad"] or "heat" not in panel["grad"]:
            continue
        grad = np.asarray(g[node])
        corner = grad.reshape((-1,) + grad.shape[-2:])[0] if grad.ndim > 1 else grad.reshape(1, -1)
        cells = np.asarray(panel["grad"]["heat"]["cells"])
        noise = 1e-12 * max(1.0, float(np.abs(grad).max()))  # what the page shows as 0 is rounding noise
        np.testing.assert_allclose(cells, corner[: cells.shape[0], : cells.shape[1]], rtol=1e-6, atol=noise)
        compared += 1
    assert compared >= 5
    steps = mt.gradients(output, np.ones_like(output.data), tape=program.tape, steps=True).steps
    assert len(data["steps"]) == len(steps)


def test_shown_in_a_notebook_the_widget_is_a_static_page_then_the_live_view(widget_of, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, **kwargs: shown.append((data, kwargs)))
    a, b, y, tape = readme_example()
    view = widget_of(y)
    view._ipython_display_()
    (page, _), (live, options) = shown
    # first the page (it needs no kernel: what a reopened notebook shows), marked for the widget to hide
    assert list(page) == ["text/html"] and f'id="{view.static_id}"' in page["text/html"]
    assert "mtStaticFallback(" in page["text/html"] and "mtExplore(document" in page["text/html"]
    # then the widget, whose own html copy is empty (the page above is the fallback)
    assert "application/vnd.jupyter.widget-view+json" in live and live["text/html"] == ""
    assert options["raw"] is True and view.static_id.startswith("mt-explore-")


def test_a_teachers_own_derivation_is_explored_link_by_link():
    import microtape.exercises as ex

    def forward(x, w):
        h = (x @ w).tanh()
        return {"h": h, "loss": (h * h).sum()}

    def inputs(rng, size):
        n = {"visible": 3, "hidden": 5, "large": 40}[size]
        return {"x": rng.standard_normal((n, 4)), "w": rng.standard_normal((4, 2))}

    name = "explore_tanh_square"
    ex.derivation(name, forward, inputs=inputs, steps=["h", "w"])
    try:

        def mine(x, w):
            h = np.tanh(x @ w)
            grad_h = h  # the 2 of d(h²)/dh forgotten: the first link is wrong
            return {"grad_h": grad_h, "grad_w": x.T @ (grad_h * (1 - h**2))}

        result = ex.check(name, mine)
        data = mt.viz.explore(result, student=mine, widget=False).data
        assert data["verdicts"] == {"h": "wrong", "w": "carried"}
        carried = data["nodes"]["w"]["check"]
        assert carried["off_implied"] < 1e-12 < carried["off_tape"]  # right from your own grad_h
    finally:
        ex.EXERCISES.pop(name, None)
