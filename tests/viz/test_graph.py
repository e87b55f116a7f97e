"""microtape.viz.graph: what the DOT source says, and (with ``dot``) where things are.

These tests read the DOT text that ``graph`` produces (no ``dot`` needed):
which boxes exist, what their labels say — names, ops with their
parameters, values, gradients, the formula on each edge with the real names
and numbers — which edges join them, which style each box has, and how big
graphs are summarised. Where ``dot`` is installed they also read the layout
(``dot -Tjson``): the order of Q, K, V and of an MLP's neurons, the title on
top.
"""

import functools
import re
import sys
import warnings

import numpy as np
import pytest
from pictures import (
    across,
    attention,
    attr,
    clusters,
    edge_labels,
    edges,
    find_box,
    forks,
    label,
    label_lines,
    layout,
    left_to_right_inside,
    mlp,
    needs_dot,
    neuron_batch,
    nodes,
    reaches_all,
    scalar_expression,
    scalar_trace,
    uses,
)

pytest.importorskip("graphviz")

import microtape as mt  # noqa: E402
from microtape.viz import GraphCollapsedWarning  # noqa: E402
from microtape.viz.picture import KIND, STATE  # noqa: E402
from microtape.viz.view import View  # noqa: E402

# What each box and edge says, and where dot puts it, whatever the width it is shown at: the choice of
# a summary or a direction to fit a notebook cell (width=900, the default) is tested in test_viz_fit.py.
graph = functools.partial(mt.viz.graph, width=None)

# ---------------------------------------------------------------- forward


def test_scalar_expression_boxes_and_edges():
    tape, *_ = scalar_expression()
    source = graph(tape).source
    boxes = nodes(source)
    assert set(boxes) == {"n0", "n1", "n2", "n3", "x0", "x1"}
    assert label(boxes["n0"]) == "c mul -6"
    assert label(boxes["n1"]) == "d pow ² 4"  # the exponent is in the box
    assert label(boxes["x0"]) == "a input 2"
    assert label(boxes["x1"]) == "b input -3"
    assert label(boxes["n3"]).startswith("y tanh -0.964")
    # Operand order kept, tape order kept.
    assert [(t, h) for t, h, _ in edges(source)] == [
        ("x0", "n0"),
        ("x1", "n0"),
        ("x0", "n1"),
        ("n0", "n2"),
        ("n1", "n2"),
        ("n2", "n3"),
    ]
    assert attr(boxes["n3"], "peripheries") == "2"  # the result
    assert attr(boxes["n2"], "peripheries") is None
    assert attr(boxes["x0"], "fillcolor") == KIND["input"][0]
    assert attr(source.splitlines()[1], "rankdir") == "LR"  # small graphs read left to right


def test_graph_of_a_result_node_needs_no_tape():
    tape, *_, y = scalar_expression()
    # Same equations in the same order: the same picture, byte for byte.
    assert graph(y).source == graph(tape).source


def test_operand_order_of_a_non_commutative_op():
    a, b = mt.Scalar(1.0, name="a"), mt.Scalar(5.0, name="b")
    y = b - a
    source = graph(y).source
    (first, _, _), (second, _, _) = edges(source)
    assert label(nodes(source)[first]).startswith("b ")
    assert label(nodes(source)[second]).startswith("a ")


def test_op_parameters_are_in_the_boxes():
    x = mt.Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True, name="x")
    cube = x.pow(3, name="cube")
    half = cube.scale(0.5, name="half")
    thin = half.astype(np.float32)
    source = graph(half).source
    assert "cube pow ³ [3]" in label(nodes(source)[find_box(source, "cube")])
    assert "half scale ×0.5 [3]" in label(nodes(source)[find_box(source, "half")])
    assert "cast →float32 [3]" in label(nodes(graph(thin).source)["n2"])
    # Dropout's p is read off the keep-mask (kept entries hold 1/(1-p)).
    attn, _ = attention(dropout=0.3)
    source = graph(attn).source
    assert "dropout p=0.3" in label(nodes(source)[find_box(source, "dropped_weights")])


def test_small_tensors_are_printed_in_full_and_big_ones_summarised():
    x = mt.Tensor(np.array([[1.5, -2.0]]), requires_grad=True, name="x")
    w = mt.Tensor(np.array([[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]]), requires_grad=True, name="w")
    y = (x @ w).sum(name="y")
    backward = graph(y, backward=True, parameters=[w]).source
    lines = label_lines(nodes(backward)[find_box(backward, "x")])
    # dy/dx = ones(1, 3) @ w^T = [3.5, 12]: a 1×2 gradient, printed in full.
    assert "grad [3.5, 12]" in lines
    lines = label_lines(nodes(backward)[find_box(backward, "w")])
    assert "grad [1.5, 1.5, 1.5]" in lines and any(line.endswith("[-2, -2, -2]") for line in lines)
    forward = graph(y).source
    assert "[1.5, -2]" in label_lines(nodes(forward)[find_box(forward, "x")])
    big = mt.Tensor(np.arange(16.0).reshape(4, 4), requires_grad=True, name="big")
    source = graph((big * 2.0).sum(name="s"), backward=True).source
    assert "‖grad‖ 8 · |max| 2" in label(nodes(source)[find_box(source, "big")])


def test_parameters_are_decided_by_what_they_are_not_by_their_names():
    tape, output, parameters = mlp()
    fills = {
        name: attr(nodes(source)[find_box(source, name)], "fillcolor")
        for source in [graph(tape, parameters=parameters).source]
        for name in ("w1[0,0]", "b1[1]", "w2[3]", "b", "x[0]")
    }
    assert fills == {
        "w1[0,0]": KIND["parameter"][0],
        "b1[1]": KIND["parameter"][0],
        "w2[3]": KIND["parameter"][0],
        "b": KIND["parameter"][0],
        "x[0]": KIND["input"][0],
    }
    # Without being told, a leaf is an input, whatever it is called.
    w = mt.Tensor(np.full((3, 3), 0.5), requires_grad=True, name="layer.weight")
    source = graph((w * 2.0).sum(name="s")).source
    assert attr(nodes(source)[find_box(source, "layer.weight")], "fillcolor") == KIND["input"][0]
    # A Module says which leaves are its parameters (graph(layer) asks it by itself).
    linear = mt.nn.Linear(3, 2, seed=0)
    x = mt.Tensor(np.ones((1, 3)), requires_grad=True, name="x")
    with mt.Tape() as tape:
        linear(x)
    for source in (graph(tape, parameters=linear).source, graph(tape, parameters=linear.parameters()).source):
        assert attr(nodes(source)[find_box(source, "weight")], "fillcolor") == KIND["parameter"][0]
        assert attr(nodes(source)[find_box(source, "x")], "fillcolor") == KIND["input"][0]
    attn, _ = attention()
    source = graph(attn).source
    assert attr(nodes(source)[find_box(source, "q_proj.weight")], "fillcolor") == KIND["parameter"][0]
    assert attr(nodes(source)[find_box(source, "x")], "fillcolor") == KIND["input"][0]
    with pytest.raises(TypeError, match="parameters"):
        graph(tape, parameters=3.5)


def test_constants_masks_and_numbers():
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True, name="x")
    theta = mt.Tensor(np.ones(3), requires_grad=True, name="theta")
    mask = mt.Tensor(np.array([[0.0, -1e9, 0.0], [0.0, 0.0, -np.inf]]), name="mask")
    with mt.Tape() as tape:
        y = ((x + theta).add_constant(mask, name="masked") * 2.0).sum(name="loss")
    source = graph(tape).source
    mask_box = nodes(source)[find_box(source, "mask")]
    assert attr(mask_box, "fillcolor") == KIND["constant"][0]
    assert "dashed" in attr(mask_box, "style")
    assert "masked 2/6" in label(mask_box)
    mask_edges = [a for t, _, a in edges(source) if t == find_box(source, "mask")]
    assert mask_edges and all(attr(a, "style") == "dashed" for a in mask_edges)
    assert "2 constant" in [label(a) for a in nodes(source).values()]  # the 2.0, called by its value
    source = graph(tape, parameters=["theta"]).source  # names work too
    assert attr(nodes(source)[find_box(source, "theta")], "fillcolor") == KIND["parameter"][0]
    assert y.grad is None


def test_masked_entries_are_left_out_of_value_summaries():
    scores = mt.Tensor(np.array([[1.0, 3.0, 2.0, 2.0]] * 4), requires_grad=True, name="s")
    mask = np.zeros((4, 4))
    mask[0, 1] = -1e9
    masked = scores.add_constant(mask, name="masked")
    text = label(nodes(graph(masked).source)["n0"])
    # mean of the 15 unmasked entries, not of -1e9
    assert f"mean {np.mean(np.delete(np.array([[1.0, 3.0, 2.0, 2.0]] * 4).ravel(), 1)):.4g}" in text
    assert "1 masked" in text


def test_attention_boxes_clusters_and_edges():
    attn, _ = attention()
    source = graph(attn).source
    groups = clusters(source)
    assert {"q_proj", "k_proj", "v_proj", "attention", "out_proj"} <= set(groups)
    for name in ("scores", "scaled_scores", "causal_scores", "weights", "context", "causal_mask"):
        assert find_box(source, name) in groups["attention"], name
    assert find_box(source, "q_proj.weight") in groups["q_proj"]
    assert find_box(source, "output") in groups["out_proj"]
    x = find_box(source, "x")
    assert not any(x in members for members in groups.values())  # the input belongs to no module
    pairs = {(t, h) for t, h, _ in edges(source)}
    box = {name: find_box(source, name) for name in ("scores", "scaled_scores", "weights", "context", "V_heads")}
    assert (box["scores"], box["scaled_scores"]) in pairs
    assert (box["weights"], box["context"]) in pairs
    assert (box["V_heads"], box["context"]) in pairs
    mask_edges = [(h, a) for t, h, a in edges(source) if t == find_box(source, "causal_mask")]
    assert mask_edges == [(find_box(source, "causal_scores"), mask_edges[0][1])]
    assert attr(mask_edges[0][1], "style") == "dashed"
    assert sum(1 for t, _, _ in edges(source) if t == x) == 3  # x feeds the three projections
    assert attr(source.splitlines()[1], "rankdir") == "TB"


def test_attention_with_dropout_shows_the_keep_mask():
    attn, _ = attention(dropout=0.5)
    source = graph(attn).source
    keep = find_box(source, "dropout_keep")
    assert attr(nodes(source)[keep], "fillcolor") == KIND["constant"][0]
    assert "kept" in label(nodes(source)[keep]) and "×2" in label(nodes(source)[keep])
    assert (keep, find_box(source, "dropped_weights")) in {(t, h) for t, h, _ in edges(source)}


def test_reshape_chains_fold_into_one_box_and_full_detail_draws_them():
    attn, _ = attention()
    auto = graph(attn).source
    full = graph(attn, detail="full").source
    q_heads = nodes(auto)[find_box(auto, "Q_heads")]
    assert "reshape→transpose→reshape [4,6,4]" in label(q_heads)
    assert "dashed" in attr(q_heads, "style")  # light: it only moves numbers
    # A chain stops at a named value: K_heads and its transpose K_heads^T are two boxes.
    assert "transpose [4,4,6]" in label(nodes(auto)[find_box(auto, "K_heads^T")])
    # W.T is folded into the weight's box, and called by its name.
    assert "used as q_proj.weight^T" in label(nodes(auto)[find_box(auto, "q_proj.weight")])
    assert len(nodes(full)) == len(attn.tape) + len(attn.tape.leaves())
    assert len(nodes(auto)) < len(nodes(full)) - 10
    assert reaches_all(auto, find_box(auto, "output"))
    assert reaches_all(full, find_box(full, "output"))


def test_same_computation_same_source():
    first, _ = attention(seed=3)
    second, _ = attention(seed=3)
    for options in ({}, {"backward": True}, {"step": 5}, {"detail": "full"}, {"group": None}, {"detail": "summary"}):
        assert graph(first, **options).source == graph(second, **options).source, options
    tape_a, *_ = scalar_expression()
    tape_b, *_ = scalar_expression()
    assert graph(tape_a, backward=True).source == graph(tape_b, backward=True).source


def test_accepts_a_layer_and_explains_a_layer_without_forward():
    attn, _ = attention()
    assert graph(attn).source == graph(attn.tape, parameters=attn).source
    with pytest.raises(ValueError, match="forward"):
        graph(mt.nn.MultiHeadAttention(8, 2))


def test_group_none_draws_no_clusters():
    attn, _ = attention()
    assert "cluster" not in graph(attn, group=None).source


def test_title_and_legend_sit_on_top():
    tape, *_ = scalar_expression()
    source = graph(tape, title="tanh(ab + a²)").source
    assert attr(source.splitlines()[1], "labelloc") == "t"
    caption = source[source.index("label=<<table") :]
    assert caption.index("tanh(ab + a²)") < caption.index("operation")  # title row, then the legend row


@needs_dot
def test_title_is_drawn_above_every_box():
    attn, _ = attention()
    placed = layout(graph(attn, title="the attention"))
    title_y = float(placed["graph_label"].split(",")[1])
    assert title_y > max(y for _, y in placed["nodes"].values())


# ---------------------------------------------------------------- backward: names and numbers


def test_backward_edges_say_what_flows_with_real_names_and_numbers():
    d, f = mt.Scalar(4.0, name="d"), mt.Scalar(-2.0, name="f")
    loss = d * f
    loss.name = "L"
    labels = edge_labels(graph(loss, backward=True).source)
    assert labels[("x1", "n0")] == ["∂L/∂f = g·d = 1·4 = 4"]
    assert labels[("x0", "n0")] == ["∂L/∂d = g·f = 1·(-2) = -2"]
    # A value used twice receives one contribution per use: "+=".
    tape, a, b, y = scalar_expression()
    labels = edge_labels(graph(tape, backward=True).source)
    assert labels[("x0", "n0")] == ["∂y/∂a += g·b = 0.07065·(-3) = -0.212"]
    assert labels[("x0", "n1")] == ["∂y/∂a += g·2·a**(2-1) = 0.07065·2·2**(2-1) = 0.2826"]
    assert labels[("n2", "n3")][0].startswith("∂y/∂e = g·(1 - tanh(e)**2) = 1·(1 - tanh(-2)**2) = 0.07065")


def test_tensor_edges_use_the_listing_names_and_shapes():
    attn, _ = attention()
    source = graph(attn, backward=True).source
    labels = edge_labels(source)
    scores = find_box(source, "scores")
    assert labels[(find_box(source, "Q_heads"), scores)] == ["dQ_heads = dscores @ K_heads  [4,6,4]"]
    assert labels[(find_box(source, "K_heads^T"), scores)] == ["d(K_heads^T) = Q_heads^T @ dscores  [4,4,6]"]
    products = [t for t, h, _ in edges(source) if t == find_box(source, "x")]
    assert len(products) == 3
    texts = [text for (t, _), found in labels.items() if t == find_box(source, "x") for text in found]
    assert texts == [f"dx += d({p}.xW^T) @ {p}.weight  [1,6,16]" for p in ("q_proj", "k_proj", "v_proj")]
    assert labels[(find_box(source, "q_proj.bias"), find_box(source, "Q"))] == ["d(q_proj.bias) = dQ summed to [16]"]


def test_the_weight_edge_carries_the_gradient_of_the_weight_as_stored():
    # A Linear stores weight [out, in] and computes x @ W.T; the W.T is drawn in W's box, so the edge
    # from that box must carry dW [out, in] = dy^T @ x, not d(W^T) [in, out] = x^T @ dy.
    layer = mt.nn.Linear(3, 5, seed=0)
    x = mt.Tensor(np.random.default_rng(1).standard_normal((4, 3)), requires_grad=True, name="x")
    with mt.Tape() as tape:
        layer(x)
    source = graph(tape, backward=True, parameters=layer).source
    weight = find_box(source, "weight")
    (text,) = [t for (tail, _), found in edge_labels(source).items() if tail == weight for t in found]
    assert text.startswith("dweight = ") and text.endswith("^T @ x  [5,3]"), text
    assert "weight^T" not in text
    assert layer.weight.shape == (5, 3)


PLACEHOLDER = re.compile(r"(?<![\w.\[])(a|b|x|p|g|keep|factor|exponent|constant)(?![\w\[(])")


def test_no_placeholder_operand_names_in_a_picture_of_named_values():
    """Every edge names real values: none of an op's placeholders (a, b, x, p, keep…) is left over."""
    a, b = mt.Scalar(2.0, name="u"), mt.Scalar(-3.0, name="v")
    y = (a * b + a**2 - b / a).tanh()
    y.name = "out"
    attn, _ = attention(dropout=0.2)
    keep_named = set()
    for source in (graph(y, backward=True).source, graph(attn, backward=True).source):
        for _, _, attrs in edges(source):
            text = attr(attrs, "label")
            if text is None:
                continue
            formula = re.split(r" \+?= ", text, maxsplit=1)[1]
            # Scalars keep the letter g for the incoming gradient; the attention's input really is called x.
            leftovers = {m for m in PLACEHOLDER.findall(formula) if m not in ("g", "x")}
            assert not leftovers, text
            keep_named |= set(re.findall(r"dropout_keep", text))
    assert keep_named == {"dropout_keep"}  # dropout's edge names the saved mask


def test_backward_view_gradients_without_touching_grad():
    tape, a, b, y = scalar_expression()
    source = graph(tape, backward=True).source
    assert all(node.grad is None for node in (a, b, *tape.nodes))  # a pure reverse pass
    boxes = nodes(source)
    assert "grad 0.07065" in label(boxes["x0"])  # dy/da
    assert "grad 0.1413" in label(boxes["x1"])  # dy/db
    assert "grad 1" in label(boxes["n3"])
    assert all(attr(a_, "dir") == "back" for _, _, a_ in edges(source))
    tape.backward(y)  # after a real backward the picture shows the same numbers
    assert graph(tape, backward=True).source == source
    assert round(a.grad, 5) == 0.07065


def test_backward_view_of_a_tensor_uses_the_given_gradient():
    x = mt.Tensor(np.arange(4.0), requires_grad=True, name="x")
    y = (x * 3.0).sum(name="y")
    assert "grad 1" in label(nodes(graph(y, backward=True).source)["n1"])
    z = x.scale(2.0, name="z")
    seed = np.array([3.0, 0.0, 4.0, 0.0])
    assert "grad [6, 0, 8, 0]" in label(nodes(graph(z, backward=True, grad=seed).source)["x0"])
    assert x.grad is None


def test_rounding_noise_reads_as_zero_but_a_vanishing_gradient_is_a_value():
    # Softmax ignores a shift of a whole row of scores, so K's bias gets no gradient in exact arithmetic.
    attn, _ = attention()
    source = graph(attn, backward=True).source
    bias = label(nodes(source)[find_box(source, "k_proj.bias")])
    assert re.search(r"grad ≈0 \(noise \de-1[6-8]\)", bias), bias
    exact = mt.gradients(attn.last_output)[attn.k_proj.bias]
    assert 0 < np.abs(exact).max() < 1e-15
    # A long tanh chain: every term is tiny, nothing cancels: the number is shown.
    x = mt.Scalar(0.5, name="x")
    h = x
    for _ in range(200):
        h = (h * 0.5).tanh()
    text = label(nodes(graph(h, backward=True, detail="full").source)["x0"])
    value = mt.gradients(h)[x]
    assert value < 1e-50 and f"grad {value:.4g}" in text


def test_kinds_stay_distinguishable_under_the_gradient_fill():
    attn, _ = attention(dropout=0.5)
    source = graph(attn, backward=True).source
    boxes = nodes(source)
    x, weight, keep = (boxes[find_box(source, n)] for n in ("x", "q_proj.weight", "dropout_keep"))
    scores = boxes[find_box(source, "scores")]
    # The fill says where the pass is ...
    assert attr(x, "fillcolor") == attr(weight, "fillcolor") == attr(scores, "fillcolor") == STATE["done"][0]
    # ... and the border (and shape) what the box is.
    assert (attr(x, "color"), attr(x, "penwidth")) == (KIND["input"][1], "2")
    assert (attr(weight, "color"), attr(weight, "penwidth"), attr(weight, "style")) == (
        KIND["parameter"][1],
        "2",
        "filled",
    )
    assert attr(x, "style") is None  # inputs keep the rounded default; parameters are square
    assert attr(scores, "color") == KIND["op"][1]
    # Constants get no gradient: they keep their own look.
    assert (attr(keep, "fillcolor"), "dashed" in attr(keep, "style")) == (KIND["constant"][0], True)
    legend = source[source.index("label=<<table") :].split("\n")[0]
    assert "input" in legend and "parameter" in legend and "constant" in legend


def test_step_states_follow_the_backward_pass():
    tape, *_ = scalar_expression()

    def states(step):
        fills = {STATE[k][0]: k for k in ("done", "partial", "current", "pending")}
        return {i: fills[attr(a, "fillcolor")] for i, a in nodes(graph(tape, step=step).source).items()}

    # Steps go backwards along the tape: y (n3), e (n2), d (n1), c (n0).
    assert states(0) == {"n3": "current", "n2": "partial", "n1": "pending", "n0": "pending", "x0": "pending",
                         "x1": "pending"}  # fmt: skip
    assert states(1) == {"n3": "done", "n2": "current", "n1": "partial", "n0": "partial", "x0": "pending",
                         "x1": "pending"}  # fmt: skip
    # After d = a**2, a has one of its two contributions; the box says so.
    assert states(2)["n1"] == "current" and states(2)["x0"] == "partial"
    assert "so far 0.2826 (1 of 2 uses)" in label(nodes(graph(tape, step=2).source)["x0"])
    assert states(3) == {"n3": "done", "n2": "done", "n1": "done", "n0": "current", "x0": "done", "x1": "done"}
    current = graph(tape, step=1).source
    assert attr(nodes(current)["n2"], "penwidth") == "3"
    assert "grad" not in label(nodes(current)["x1"])  # nothing has reached b yet
    assert "step 1 of steps 0–3" in current
    # Edges whose step has not run yet show the formula without numbers.
    labels = edge_labels(current)
    assert labels[("x1", "n0")] == ["∂y/∂b = g·a"] and labels[("n2", "n3")][0].endswith("= 0.07065")


def test_constant_edges_carry_no_gradient():
    attn, _ = attention()
    source = graph(attn, backward=True).source
    mask = find_box(source, "causal_mask")
    (edge,) = [a for t, _, a in edges(source) if t == mask]
    assert attr(edge, "dir") == "none" and attr(edge, "label") is None


def test_a_user_defined_op_is_drawn_with_its_name_and_formula():
    scaled_square = mt.ops.define(
        "times_square",
        forward=lambda u, v: u * v * v,
        vjp=lambda g, ans, u, v: (g * v * v, 2 * g * u * v),
        formula=["{g} * {v}**2", "2 * {g} * {u} * {v}"],
        inputs=("u", "v"),
    )
    p, q = mt.Scalar(3.0, name="p"), mt.Scalar(2.0, name="q")
    y = scaled_square(p, q, name="y")
    forward = graph(y).source
    assert label(nodes(forward)["n0"]) == "y times_square 12"
    labels = edge_labels(graph(y, backward=True).source)
    assert labels[("x0", "n0")] == ["∂y/∂p = g·q**2 = 1·2**2 = 4"]
    assert labels[("x1", "n0")] == ["∂y/∂q = 2·g·p·q = 2·1·3·2 = 12"]
    # On tensors: the names and the shapes.
    s = mt.Tensor(np.ones((2, 3)), requires_grad=True, name="s")
    t = mt.Tensor(np.full((2, 3), 2.0), requires_grad=True, name="t")
    z = scaled_square(s, t, name="z")
    labels = edge_labels(graph(z, backward=True).source)
    assert labels[("x1", "n0")] == ["dt = 2 * dz * s * t  [2,3]"]


def test_step_out_of_range_and_bad_options():
    tape, *_ = scalar_expression()
    with pytest.raises(ValueError, match=r"0\.\.3"):
        graph(tape, step=4)
    with pytest.raises(TypeError):
        graph(tape, step="1")
    with pytest.raises(ValueError, match="detail"):
        graph(tape, detail="everything")
    with pytest.raises(ValueError, match="group"):
        graph(tape, group="heads")
    with pytest.raises(TypeError, match="Tape"):
        graph(42)
    with pytest.raises(ValueError, match="empty"):
        graph(mt.Tape())
    with pytest.raises(ValueError, match="not recorded"):
        graph(tape, output=mt.Scalar(1.0) * mt.Scalar(2.0))
    with pytest.raises(ValueError, match="has no modules"):
        graph(tape, expand="attention")
    attn, _ = attention()
    with pytest.raises(ValueError, match=r"no module 'attention.head9'.*attention, k_proj, out_proj, q_proj, v_proj"):
        graph(attn, expand="attention.head9")
    with pytest.raises(ValueError, match="detail='full'"):
        graph(attn, expand="attention", detail="full")


# ---------------------------------------------------------------- one order everywhere


@needs_dot
@pytest.mark.parametrize("detail", ["auto", "full", "summary"])
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_q_k_v_come_in_one_order_in_every_view(detail, backward):
    attn, _ = attention()
    placed = layout(graph(attn, detail=detail, backward=backward))
    if detail == "summary":  # projections are boxes, not clusters: read their positions
        source = graph(attn, detail=detail).source
        ids = {name: find_box(source, name) for name in ("q_proj", "k_proj", "v_proj")}
        key = (
            (lambda n: placed["nodes"][ids[n]][0])
            if placed["rankdir"] == "TB"
            else (lambda n: -placed["nodes"][ids[n]][1])
        )
        assert sorted(ids, key=key) == ["q_proj", "k_proj", "v_proj"]
    else:
        assert across(placed, ["v_proj", "q_proj", "k_proj"]) == ["q_proj", "k_proj", "v_proj"]


@needs_dot
@pytest.mark.parametrize("detail", ["auto", "full"])
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_mlp_neurons_run_0_to_3_in_both_directions_with_the_inputs_near_them(detail, backward):
    tape, _, parameters = mlp()
    digraph = graph(tape, parameters=parameters, detail=detail, backward=backward)
    placed = layout(digraph)
    neurons = [f"neuron{j}" for j in range(4)]
    assert across(placed, list(reversed(neurons))) == neurons
    left = min(placed["clusters"][n][0] for n in neurons)
    right = max(placed["clusters"][n][2] for n in neurons)
    for name in ("x[0]", "x[1]"):
        x, y = placed["nodes"][find_box(digraph.source, name)]
        assert left <= x <= right  # over the neurons, not off to one side
        assert y >= max(placed["clusters"][n][3] for n in neurons) - 60  # at the top, where they start


# ---------------------------------------------------------------- big graphs: summaries


def long_chain(blocks=5, per_block=40):
    """h = tanh(h * w) repeated, in ``blocks`` modules: a graph too big to draw box by box."""
    with mt.Tape() as tape:
        x, w = mt.Scalar(0.5, name="x"), mt.Scalar(0.9, name="w")
        h = x
        for m in range(blocks):
            with mt.module_scope(f"block{m}"):
                for _ in range(per_block):
                    h = (h * w).tanh()
    return tape, h, w


def test_large_graph_is_summarised_connected_with_a_message():
    tape, h, _ = long_chain()
    with pytest.warns(GraphCollapsedWarning, match="detail='full'"):
        source = graph(tape).source
    boxes = nodes(source)
    assert len(boxes) <= 150
    assert [label(boxes[f"s{m}"]).split(" ")[0] for m in range(5)] == [f"block{m}" for m in range(5)]
    assert "80 ops: 40 mul, 40 tanh" in label(boxes["s0"])
    assert reaches_all(source, "s4")
    assert "detail='full'" in source and "expand=" in source  # the note on the picture
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = graph(tape, max_nodes=10_000).source
    assert "s0" not in nodes(small)


def block_summary():
    layer = mt.nn.TransformerEncoderLayer(16, 4, 32, seed=0)
    layer(np.random.default_rng(0).standard_normal((2, 5, 16)))
    return graph(layer, detail="summary")


BLOCK_STEPS = ("out_proj", "residual1", "norm1", "linear1", "hidden", "linear2", "residual2", "norm2")


def test_transformer_block_summary_names_the_modules():
    # Steps between sublayers (the residual sums, the activation) are drawn as themselves: none is
    # folded into the module before it, and no summary is called "(outside)".
    source = block_summary().source
    titles = {label_lines(text)[0] for box, text in nodes(source).items() if box.startswith(("s", "n"))}
    assert titles == {"q_proj", "k_proj", "v_proj", "attention", *BLOCK_STEPS}
    assert "(outside)" not in source
    assert label_lines(nodes(source)[find_box(source, "residual1")])[1] == "add [2,5,16]"
    assert "3 ops: 1 transpose, 1 matmul, 1 add" in label(nodes(source)[find_box(source, "linear2")])
    # A line that stands for several values says so in words ("×2" said not what was doubled).
    assert ' [label="2 uses"]' in source and "×2" not in source


@needs_dot
def test_transformer_block_summary_draws_the_modules_in_forward_order():
    digraph = block_summary()
    source, placed = digraph.source, layout(digraph)
    at = {name: placed["nodes"][find_box(source, name)] for name in ("q_proj", "k_proj", "v_proj", *BLOCK_STEPS)}
    assert at["q_proj"][0] < at["k_proj"][0] < at["v_proj"][0]
    heights = [at[name][1] for name in BLOCK_STEPS]  # top to bottom: dot's y grows upwards
    assert heights == sorted(heights, reverse=True) and len(set(heights)) == len(heights)


def test_collapsing_comes_first_the_full_view_is_never_planned(monkeypatch):
    # Issue 24: a tape too big to draw box by box is summarised without first planning every box of the
    # full view (its links, its order rows): the boxes are counted, then only the summary is planned.
    tape, *_ = long_chain()
    planned, original = [], View._plan

    def recording(self, merge, summarise):
        planned.append(summarise)
        return original(self, merge, summarise)

    monkeypatch.setattr(View, "_plan", recording)
    with pytest.warns(GraphCollapsedWarning, match="this graph has 601 boxes"):
        source = graph(tape).source
    assert planned == [True] and len(nodes(source)) < 20
    planned.clear()
    whole = graph(tape, max_nodes=10_000).source  # below the threshold: the full view, planned once
    assert planned == [False] and len(nodes(whole)) == 601  # the count said what the full view draws


def test_summaries_show_their_first_and_last_ops_and_gradient_norms():
    """A 2,000-op chain: its ends drawn in full, the middle in stretches whose gradient norms vanish."""
    x = mt.Scalar(0.5, name="x")
    h = x
    for _ in range(1000):
        h = (h * 0.9).tanh()
    with pytest.warns(GraphCollapsedWarning):
        source = graph(h, backward=True).source
    boxes = nodes(source)
    stretches = sorted((i for i in boxes if i.startswith("s")), key=lambda i: int(i[1:]))
    assert len(stretches) == 6
    assert {"n0", "n1", "n1998", "n1999"} <= set(boxes)  # both ends, box by box
    lines = label_lines(boxes[stretches[0]])
    assert lines[0] == "ops 2–334" and lines[2].startswith("%2 = mul(%1, 0.9)") and lines[3] == "⋮  331 more"
    assert lines[4].startswith("%334 = ")
    norms = [float(re.search(r"‖grad‖ ([\d.e+-]+) at its output", label(boxes[s])).group(1)) for s in stretches]
    assert norms == sorted(norms) and norms[0] < 1e-20 < norms[-1]  # the gradient vanishes towards x
    assert reaches_all(source, "n1999")


def test_summaries_show_partial_progress_instead_of_off_the_path():
    # The whole pass: out_proj, which holds the output, is done, not "off the path".
    attn, _ = attention()
    whole = graph(attn, detail="summary", backward=True).source
    out = nodes(whole)[find_box(whole, "out_proj")]
    assert attr(out, "fillcolor") == STATE["done"][0] and "at its output" in label(out)
    # A module with a dead branch: only part of it is on the path, and its box says how much.
    x = mt.Tensor(np.ones(3), requires_grad=True, name="x")
    with mt.Tape() as tape:
        with mt.module_scope("block"):
            used = (x * 2.0).sum(name="used")
            (x * 3.0).sum(name="unused")
        out = (used * 1.0).sum(name="out")
    source = graph(tape, detail="summary", backward=True, output=out).source
    block = nodes(source)[find_box(source, "block")]
    assert "2 of 4 ops on the path" in label(block) and attr(block, "fillcolor") == STATE["done"][0]
    # Step by step, a summary the pass is half-way through says how far it got.
    _, trace = scalar_trace()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphCollapsedWarning)
        count = len(mt.viz.backward_frames(trace, detail="summary"))
        partial = []
        for k in range(count):
            for a in nodes(graph(trace, detail="summary", step=k).source).values():
                found = re.search(r"(\d+) of (\d+) ops done", label(a))
                if found:
                    partial.append((int(found.group(1)), int(found.group(2)), attr(a, "fillcolor")))
    assert partial and all(0 <= done < total for done, total, _ in partial)
    assert all(fill in (STATE["partial"][0], STATE["pending"][0]) for _, _, fill in partial)
    assert any(done > 0 and fill == STATE["partial"][0] for done, _, fill in partial)


def test_expand_opens_one_module():
    _, trace = scalar_trace()
    source = graph(trace, expand="attention.head0").source
    groups = clusters(source)
    head0_ops = sum(1 for node in trace.tape.nodes if node.module == "attention.head0")
    opened = [i for i in groups["head0"] if i.startswith("n")]
    assert len(opened) == head0_ops  # every equation of head0, box by box
    summaries = {label(a).split(" ")[0] for i, a in nodes(source).items() if i.startswith("s")}
    assert summaries == {"q_proj", "k_proj", "v_proj", "head1", "out_proj"}
    assert reaches_all(source, find_box(source, "out_proj"))


def test_chain_longer_than_the_recursion_limit():
    x = mt.Scalar(0.1, name="x")
    y = x
    for _ in range(sys.getrecursionlimit() + 500):
        y = y * 1.0001
    with pytest.warns(GraphCollapsedWarning):
        source = graph(y, backward=True).source
    boxes = nodes(source)
    assert sum(1 for i in boxes if i.startswith("s")) == 6
    assert reaches_all(source, max((i for i in boxes if i.startswith("n")), key=lambda i: int(i[1:])))


def test_summary_detail_and_values_false():
    tape, h, _ = long_chain(blocks=3, per_block=5)
    source = graph(tape, detail="summary").source
    assert [i for i in nodes(source) if i.startswith("s")] == ["s0", "s1", "s2"]
    assert reaches_all(source, "s2")
    tape, *_ = scalar_expression()
    boxes = nodes(graph(tape, values=False, backward=True).source)
    assert label(boxes["n0"]) == "c mul"
    assert label(boxes["x0"]) == "a input"


# ---------------------------------------------------------------- a shared-weight MLP


def test_shared_weight_mlp_keeps_each_loss_in_its_sample_and_each_weight_once():
    tape, loss, parameters = mlp(samples=3)
    source = graph(tape, parameters=parameters, backward=True).source
    groups = clusters(source)
    # Each sample's loss ops, (y - t)**2 recorded after the sample's scope closed, are drawn inside it.
    for s in range(3):
        squares = [i for i in groups[f"sample{s}"] if "pow ²" in label(nodes(source)[i])]
        assert len(squares) == 1, s
    adds = [i for i, a in nodes(source).items() if label(a).split(" ")[1:2] == ["add"] and not any(
        i in members for members in groups.values())]  # fmt: skip
    assert len(adds) == 2  # the sum of the three losses stays outside
    # A shared weight is drawn once, with its total gradient (the sum over the samples).
    total = mt.gradients(loss)
    for weight in (parameters[0], parameters[-1]):
        box = find_box(source, weight.name)
        assert sum(1 for t, _, _ in edges(source) if t == box) == 3  # one line per sample
        used_in = [next(s for s in range(3) if head in groups[f"sample{s}"]) for head in uses(source, box)]
        assert used_in == [0, 1, 2]
        assert f"grad {total[weight]:.4g}" in label(nodes(source)[box])


@needs_dot
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("samples", [3, 5, 8])
def test_shared_weight_mlp_full_view_orders_samples_and_neurons(samples, backward):
    # Wired straight to every use, the shared weights let dot order the samples at random (2, 0, 1);
    # each weight's line splits at one junction per sample, and the junctions are kept in order.
    tape, _, parameters = mlp(samples=samples)
    placed = layout(graph(tape, parameters=parameters, backward=backward, detail="full"))
    names = [f"sample{s}" for s in range(samples)]
    assert across(placed, list(reversed(names))) == names
    for s in range(samples):
        assert left_to_right_inside(placed, f"sample{s}", "neuron") == [f"neuron{j}" for j in range(4)], s


def test_shared_weight_junctions_only_for_parameters_shared_by_sibling_modules():
    tape, _, parameters = mlp(samples=3)
    source = graph(tape, parameters=parameters, detail="full").source
    through = forks(source)
    groups = clusters(source)
    # Every parameter (17 of them) feeds all 3 samples through one fork each; no constant or op has a fork.
    assert len(through) == 17 * 3
    tails = {tail for tail, _ in through.values()}
    assert {label(nodes(source)[t]).split(" ")[0] for t in tails} == {p.name for p in parameters}

    def sample_of(box):
        return next(s for s in range(3) if box in groups[f"sample{s}"])

    # The forks sit in one invisible row, sample 0's first (recorded order).
    rows = re.findall(r"\{\n\t+rank=same\n\t+edge \[style=invis\]\n((?:\t+\w+ -> \w+\n)+)", source)
    (row,) = [re.findall(r"(\w+) -> (\w+)", row) for row in rows if re.search(r"\bj\d+ ->", row)]
    chain = [row[0][0]] + [head for _, head in row]
    assert sorted(chain) == sorted(through)
    samples = [sample_of(through[j][1][0]) for j in chain]
    assert samples == sorted(samples)
    # ... above every box of a sample that nothing feeds (its constants): an invisible edge from its own fork.
    held = {head: tail for tail, head in re.findall(r"^\t(j\d+) -> (\w+) \[style=invis weight=0\]$", source, re.M)}
    constants = [
        i
        for i, a in nodes(source).items()
        if "constant" in label(a) and any(i in groups[f"sample{s}"] for s in range(3))
    ]
    assert constants and all(sample_of(through[held[c]][1][0]) == sample_of(c) for c in constants)
    tape, _, parameters = mlp(samples=1)
    assert not forks(graph(tape, parameters=parameters, detail="full").source)


@needs_dot
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize(
    ("samples", "total", "within", "weights_within"),
    [
        (3, "chain", None, False),
        (8, "chain", None, False),
        (12, "sum", None, False),
        (3, "chain", "batch", False),
        (6, "sum", "batch", False),
        (5, "chain", "model", True),
    ],
)
def test_one_weight_on_many_samples_keeps_the_samples_in_order(samples, total, within, weights_within, backward):
    # Notebook 01's batch: one neuron, the squared errors added up (dot drew sample 1 before sample 0),
    # also with Python's sum (which starts from a constant 0), with the samples inside a module, and
    # with the weights made in that module too (drawn above it: junctions inside a frame do not hold).
    tape, loss, parameters = neuron_batch(samples, total=total, within=within, weights_within=weights_within)
    digraph = graph(tape, parameters=parameters, backward=backward, detail="full")
    names = [f"sample{s}" for s in range(samples)]
    assert across(layout(digraph), names[::-1]) == names
    assert len(forks(digraph.source)) == 2 * samples  # w and b: one line into each sample


@needs_dot
def test_a_weight_shared_by_many_samples_keeps_one_box_and_the_samples_in_order():
    # 20 uses of w would make it a hub drawn per use (small copies inside each sample, and then nothing
    # ties the samples to an order: dot drew them 19, 18, …, 0). A parameter shared by sibling modules
    # keeps its one box and one line per sample instead.
    tape, loss, parameters = neuron_batch(20)
    digraph = graph(tape, parameters=parameters, backward=True, detail="full")
    source = digraph.source
    names = [f"sample{s}" for s in range(20)]
    assert across(layout(digraph), names[::-1]) == names
    boxes = nodes(source)
    assert not [i for i in boxes if label(boxes[i]).endswith("↺")]  # no per-use copies
    total = mt.gradients(loss)
    for weight in parameters:
        box = find_box(source, weight.name)
        assert sum(1 for t, _, _ in edges(source) if t == box) == 20
        assert f"grad {total[weight]:.4g}" in label(boxes[box])


def test_a_leaf_used_very_often_is_drawn_once_in_full_and_then_as_copies():
    tape, h, w = long_chain(blocks=2, per_block=40)  # 160 equations, w used 80 times
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        source = graph(tape, detail="full", backward=True, parameters=[w]).source
    boxes = nodes(source)
    (main,) = [i for i, a in boxes.items() if label(a).startswith("w ") and label(a) != "w ↺"]
    copies = [i for i in boxes if i.startswith(f"{main}_")]
    assert len(copies) == 79 and all(label(boxes[c]) == "w ↺" for c in copies)
    assert "used 80×" in label(boxes[main]) and f"grad {mt.gradients(h)[w]:.4g}" in label(boxes[main])
    tails = [t for t, _, _ in edges(source)]
    assert all(tails.count(c) == 1 for c in copies) and tails.count(main) == 1  # no hub for dot
    assert reaches_all(source, "n159")


# ---------------------------------------------------------------- the scalar trace


def test_scalar_trace_is_drawn_from_its_whole_output():
    attn, trace = scalar_trace()
    upstream = np.random.default_rng(1).standard_normal(trace.output.shape)
    source = graph(trace, backward=True, grad=upstream, detail="full").source
    boxes = nodes(source)
    trace.backward(upstream)
    expected = trace.gradients()
    for name, index in (("q_proj.weight", (1, 2)), ("v_proj.bias", (3,)), ("x", (0, 2, 1))):
        box = boxes[find_box(source, f"{name}[{','.join(map(str, index))}]")]
        assert f"grad {expected[name][index]:.4g}" in label(box), name
    # Every output entry is a result the pass starts from (double border), seeded with its upstream gradient.
    outputs = [i for i, a in boxes.items() if label(a).startswith("output[")]
    assert len(outputs) == trace.output.data.size
    assert all(attr(boxes[i], "peripheries") == "2" for i in outputs)
    first = boxes[find_box(source, "output[0,0,0]")]
    assert f"grad {upstream[0, 0, 0]:.4g}" in label(first)


def test_scalar_trace_names_nodes_by_position_and_folds_repeated_constants():
    _, trace = scalar_trace(causal=True)
    source = graph(trace, detail="full").source
    names = [label(a).split(" ")[0] for a in nodes(source).values()]
    # The core's numbers by head, query and key (or head, query and feature); the rest by position.
    for name in ("scores[h0,q1,k2]", "scaled_scores[h1,q2,k0]", "weights[h1,q2,k2]", "context[h0,q2,d1]", "Q[0,1,3]"):
        assert name in names, name
    assert not any(n.startswith("%") and "score" in n for n in names)
    # The causal mask's -1e9 entries: one box per head (not one per masked cell), saying how often it is used.
    masks = [a for a in nodes(source).values() if label(a).startswith("-1e+09 constant")]
    assert len(masks) == 2
    assert all("used 3×" in label(a) for a in masks)  # T=3: three masked cells per head


def test_scalar_trace_of_a_tiny_attention_is_summarised_by_module():
    _, trace = scalar_trace()
    with pytest.warns(GraphCollapsedWarning):
        source = graph(trace).source
    titles = {label(a).split(" ")[0] for i, a in nodes(source).items() if i.startswith("s")}
    # The scalar trace tags the attention core per head: one summary per head, inside an "attention" cluster.
    assert titles == {"q_proj", "k_proj", "v_proj", "head0", "head1", "out_proj"}
    assert "attention" in clusters(source)
    assert reaches_all(source, [i for i, a in nodes(source).items() if label(a).startswith("out_proj")][0])


# ---------------------------------------------------------------- Jupyter


@needs_dot
def test_in_jupyter_a_graph_fits_the_cell_width_and_can_be_seen_full_size():
    attn, _ = attention()
    digraph = graph(attn, backward=True)
    fitted = digraph._repr_mimebundle_()["text/html"]
    natural = re.search(r'data-width="([\d.]+)"', fitted).group(1)
    assert fitted.startswith("<svg") and 'width="100%"' in fitted and f"max-width:{natural}pt" in fitted
    full = digraph.full_size()._repr_mimebundle_()["text/html"]
    assert f'<svg width="{natural}pt"' in full and "overflow:auto" in full
    assert 'style="max-width:none"' in full  # whole, scrolling sideways, also where a page shrinks pictures
    assert digraph.full_size().source == digraph.source


def test_a_stepped_picture_colours_each_gradient_line_by_its_state():
    """After step 1 of y = tanh(a·b + a²): the gradient running now is dark red and thicker, the one
    already sent orange (its numbers in brown), the ones not yet sent pale grey."""
    from microtape.viz.picture import STATE_EDGE

    tape, *_ = scalar_expression()
    by_edge = {(t, h): a for t, h, a in edges(graph(tape, step=1).source)}
    for current in (("n0", "n2"), ("n1", "n2")):  # e = c + d is the step running: both its inputs' lines
        assert (attr(by_edge[current], "color"), attr(by_edge[current], "penwidth")) == (STATE_EDGE["current"], "2")
        assert attr(by_edge[current], "fontcolor") == STATE_EDGE["current"]
    sent = by_edge[("n2", "n3")]  # y's step ran: e's gradient arrived
    assert (attr(sent, "color"), attr(sent, "fontcolor"), attr(sent, "penwidth")) == (
        STATE_EDGE["done"],
        STATE["done"][1],
        None,
    )
    for waiting in (("x0", "n0"), ("x1", "n0"), ("x0", "n1")):
        assert attr(by_edge[waiting], "color") == STATE_EDGE["pending"], waiting
    assert {attr(a, "dir") for a in by_edge.values()} == {"back"}
    assert STATE_EDGE["current"] != STATE_EDGE["done"] != STATE_EDGE["pending"]


def test_a_box_holding_steps_of_two_derivative_orders_takes_the_higher():
    """A summary box folding the function's last steps with its first derivative's is coloured as a derivative step.

    Summarised hard (max_nodes=2), a stretch of the tape holds a step of the
    function and steps of its recorded first derivative: the box says the
    higher order, the one that makes it part of the derivative.
    """
    from microtape.engine import module_scope
    from microtape.viz.lifetimes import order_of
    from microtape.viz.picture import ORDER
    from microtape.viz.program import collect

    x = mt.Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        with module_scope("outer"), module_scope("block"):
            y = (x * x).tanh().sum(name="y")
            g = mt.gradients(y, create_graph=True)[x]
            (g * g).sum(name="z")
    program = collect(tape)
    orders = order_of(program)
    view = View(program, detail="summary", max_nodes=2)
    mixed = [box for box in view.boxes if len({orders[i] for i in box.equations}) > 1]
    assert mixed, "the summary should fold steps of orders 0 and 1 into one box"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphCollapsedWarning)
        source = graph(tape, detail="summary", max_nodes=2).source
    for box in mixed:
        highest = max(orders[i] for i in box.equations)
        assert attr(nodes(source)[box.id], "fillcolor") == ORDER[highest][0], box.id
