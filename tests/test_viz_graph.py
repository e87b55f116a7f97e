"""microtape.viz.graph and backward_frames: what the DOT source says.

These tests read the DOT text that ``graph`` produces (no ``dot`` needed):
which boxes exist, what their labels say, which edges join them and in what
order, which style each box has, and that a graph too large to draw is
summarised into a smaller graph that is still connected.
"""

import html
import re
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("graphviz")

import microtape as mt  # noqa: E402
from microtape.viz import GraphCollapsedWarning, backward_frames, graph  # noqa: E402
from microtape.viz.graph import STYLE  # noqa: E402

# ---------------------------------------------------------------- reading DOT

NODE = re.compile(r"^\t+(\w+) \[(.*)\]$", re.M)
EDGE = re.compile(r"^\t+(\w+) -> (\w+)(?: \[(.*)\])?$", re.M)


def nodes(source):
    """``{id: attribute text}`` for every node statement."""
    return {m.group(1): m.group(2) for m in NODE.finditer(source) if m.group(1) not in ("node", "edge", "graph")}


def edges(source):
    """``[(tail, head, attribute text)]`` in the order they are written."""
    return [(m.group(1), m.group(2), m.group(3) or "") for m in EDGE.finditer(source)]


def attr(text, key):
    """The value of ``key="..."`` or ``key=word`` in an attribute list (None if absent)."""
    m = re.search(rf'(?:^| ){key}=(?:"([^"]*)"|([^\s<>"]+))', text)
    if m is None:
        return None
    return m.group(1) if m.group(1) is not None else m.group(2)


def label(text):
    """The plain text of a node's HTML label (tags removed)."""
    start = text.index("label=<") + len("label=")
    depth, end = 0, start
    for end in range(start, len(text)):
        depth += {"<": 1, ">": -1}.get(text[end], 0)
        if depth == 0:
            break
    inner = text[start + 1 : end]
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", inner).split()))


def find_box(source, name):
    """The id of the box whose label starts with ``name``."""
    matches = [i for i, a in nodes(source).items() if label(a).split(" ")[0] == name]
    assert len(matches) == 1, f"expected one box named {name!r}, found {matches}"
    return matches[0]


def reaches_all(source, target):
    """True if every drawn box has a path to ``target`` along the edges."""
    ids = set(nodes(source))
    incoming = {}
    for tail, head, _ in edges(source):
        incoming.setdefault(head, []).append(tail)
    seen, stack = {target}, [target]
    while stack:
        for tail in incoming.get(stack.pop(), []):
            if tail not in seen:
                seen.add(tail)
                stack.append(tail)
    return seen == ids


def clusters(source):
    """``{cluster label: [node ids directly or indirectly inside]}``."""
    result = {}
    for m in re.finditer(r"subgraph (cluster_\d+) \{", source):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        body = source[m.end() : i]
        name = attr(body.splitlines()[1].strip(), "label")  # the cluster's attribute line
        result[name] = list(nodes(body))
    return result


# ---------------------------------------------------------------- computations


def scalar_expression():
    """y = tanh(a*b + a**2), every step named."""
    with mt.Tape() as tape:
        a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
        c = a * b
        c.name = "c"
        d = a**2
        d.name = "d"
        e = c + d
        e.name = "e"
        y = e.tanh()
        y.name = "y"
    return tape, a, b, y


def attention(dropout=0.0, seed=0):
    attn = mt.nn.MultiHeadAttention(16, 4, dropout=dropout, causal=True, seed=seed)
    x = np.random.default_rng(seed).standard_normal((1, 6, 16))
    y = attn(x)
    return attn, y


def long_chain(blocks=5, per_block=40):
    """h = tanh(h * w) repeated, in ``blocks`` modules: a graph too big to draw box by box."""
    with mt.Tape() as tape:
        x, w = mt.Scalar(0.5, name="x"), mt.Scalar(0.9, name="w.weight")
        h = x
        for m in range(blocks):
            with mt.module_scope(f"block{m}"):
                for _ in range(per_block):
                    h = (h * w).tanh()
    return tape, h


# ---------------------------------------------------------------- forward


def test_scalar_expression_boxes_and_edges():
    tape, *_ = scalar_expression()
    source = graph(tape).source
    boxes = nodes(source)
    assert set(boxes) == {"n0", "n1", "n2", "n3", "x0", "x1"}
    assert label(boxes["n0"]) == "c mul -6"
    assert label(boxes["n1"]) == "d pow 4"
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
    assert attr(boxes["x0"], "fillcolor") == STYLE["input"][0]
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


def test_leaf_kinds_inputs_parameters_constants():
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True, name="x")
    w = mt.Tensor(np.full((3, 3), 0.5), requires_grad=True, name="layer.weight")
    theta = mt.Tensor(np.ones(3), requires_grad=True, name="theta")
    mask = mt.Tensor(np.array([[0.0, -1e9, 0.0], [0.0, 0.0, -np.inf]]), name="mask")
    with mt.Tape() as tape:
        y = ((x @ w + theta).add_constant(mask, name="masked") * 2.0).sum(name="loss")
    source = graph(tape).source
    fill = {name: attr(nodes(source)[find_box(source, name)], "fillcolor") for name in ("x", "layer.weight", "theta")}
    assert fill == {"x": STYLE["input"][0], "layer.weight": STYLE["parameter"][0], "theta": STYLE["input"][0]}
    mask_box = nodes(source)[find_box(source, "mask")]
    assert attr(mask_box, "fillcolor") == STYLE["constant"][0]
    assert "dashed" in attr(mask_box, "style")
    assert "masked 2/6" in label(mask_box)
    # The edge from a constant is dashed.
    mask_edges = [a for t, _, a in edges(source) if t == find_box(source, "mask")]
    assert mask_edges and all(attr(a, "style") == "dashed" for a in mask_edges)
    # The plain number 2.0 is a constant too, labelled by its value.
    assert "2 constant" in [label(a) for a in nodes(source).values()]
    # parameters= overrides the naming rule.
    source = graph(tape, parameters=["theta"]).source
    assert attr(nodes(source)[find_box(source, "theta")], "fillcolor") == STYLE["parameter"][0]
    assert y.grad is None


def test_masked_entries_are_left_out_of_summaries():
    scores = mt.Tensor(np.array([[1.0, 3.0], [2.0, 2.0]]), requires_grad=True, name="s")
    masked = scores.add_constant(np.array([[0.0, -1e9], [0.0, 0.0]]), name="masked")
    text = label(nodes(graph(masked).source)["n0"])
    # mean of the three unmasked entries (1 + 2 + 2) / 3, not of -1e9
    assert "mean 1.667" in text and "1 masked" in text


def test_attention_boxes_clusters_and_edges():
    attn, _ = attention()
    source = graph(attn.tape).source
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
    # x feeds the three projections: three edges out of one box.
    assert sum(1 for t, _, _ in edges(source) if t == x) == 3
    assert attr(source.splitlines()[1], "rankdir") == "TB"


def test_attention_with_dropout_shows_the_keep_mask():
    attn, _ = attention(dropout=0.5)
    source = graph(attn.tape).source
    keep = find_box(source, "dropout_keep")
    assert attr(nodes(source)[keep], "fillcolor") == STYLE["constant"][0]
    assert "kept" in label(nodes(source)[keep]) and "×2" in label(nodes(source)[keep])
    assert (keep, find_box(source, "dropped_weights")) in {(t, h) for t, h, _ in edges(source)}


def test_reshape_chains_fold_into_one_box_and_full_detail_draws_them():
    attn, _ = attention()
    auto = graph(attn.tape).source
    full = graph(attn.tape, detail="full").source
    q_heads = nodes(auto)[find_box(auto, "Q_heads")]
    assert "reshape→transpose→reshape [4,6,4]" in label(q_heads)
    assert "dashed" in attr(q_heads, "style")  # light: it only moves numbers
    # W.T is folded into the weight's box.
    assert "used transposed" in label(nodes(auto)[find_box(auto, "q_proj.weight")])
    assert len(nodes(full)) == len(attn.tape) + len(attn.tape.leaves())
    assert len(nodes(auto)) < len(nodes(full)) - 10
    assert reaches_all(auto, find_box(auto, "output"))
    assert reaches_all(full, find_box(full, "output"))


def test_same_computation_same_source():
    first, _ = attention(seed=3)
    second, _ = attention(seed=3)
    for options in ({}, {"backward": True}, {"step": 5}, {"detail": "full"}, {"group": None}):
        assert graph(first.tape, **options).source == graph(second.tape, **options).source, options
    assert graph(first.tape).source == graph(first.tape).source
    tape_a, *_ = scalar_expression()
    tape_b, *_ = scalar_expression()
    assert graph(tape_a, backward=True).source == graph(tape_b, backward=True).source


def test_accepts_a_layer_and_explains_a_layer_without_forward():
    attn, _ = attention()
    assert graph(attn).source == graph(attn.tape).source
    with pytest.raises(ValueError, match="forward"):
        graph(mt.nn.MultiHeadAttention(8, 2))


def test_group_none_draws_no_clusters():
    attn, _ = attention()
    assert "subgraph" not in graph(attn.tape, group=None).source


# ---------------------------------------------------------------- backward


def test_backward_view_gradients_and_formulas_without_touching_grad():
    tape, a, b, y = scalar_expression()
    source = graph(tape, backward=True).source
    assert all(node.grad is None for node in (a, b, *tape.nodes))  # a private replay
    boxes = nodes(source)
    assert "grad 0.07065" in label(boxes["x0"])  # dy/da
    assert "grad 0.1413" in label(boxes["x1"])  # dy/db
    assert "grad 1" in label(boxes["n3"])
    formulas = {(t, h): attr(a_, "label") for t, h, a_ in edges(source)}
    assert formulas[("x0", "n0")] == "grad_a = g * b"
    assert formulas[("x1", "n0")] == "grad_b = g * a"
    assert formulas[("n2", "n3")] == mt.ops.OPS["tanh"].formula
    assert all(attr(a_, "dir") == "back" for _, _, a_ in edges(source))
    # After a real backward the picture shows the same numbers.
    tape.backward(y)
    assert graph(tape, backward=True).source == source
    assert round(a.grad, 5) == 0.07065


def test_backward_view_of_a_tensor_uses_the_given_gradient():
    x = mt.Tensor(np.arange(4.0), requires_grad=True, name="x")
    y = (x * 3.0).sum(name="y")
    assert "grad 1" in label(nodes(graph(y, backward=True).source)["n1"])
    z = x.scale(2.0, name="z")
    seed = np.array([3.0, 0.0, 4.0, 0.0])
    text = label(nodes(graph(z, backward=True, grad=seed).source)["x0"])
    assert "‖grad‖ 10 · |max| 8" in text  # 2 * [3, 0, 4, 0]
    assert x.grad is None


def test_constant_edges_carry_no_gradient():
    attn, y = attention()
    source = graph(attn.tape, backward=True).source
    mask = find_box(source, "causal_mask")
    (edge,) = [a for t, _, a in edges(source) if t == mask]
    assert attr(edge, "dir") == "none" and attr(edge, "label") is None


def test_step_states_follow_the_backward_pass():
    tape, *_ = scalar_expression()

    def states(step):
        fills = {v: k for k, v in ((k, STYLE[k][0]) for k in ("done", "current", "pending"))}
        return {i: fills[attr(a, "fillcolor")] for i, a in nodes(graph(tape, step=step).source).items()}

    # Steps go backwards along the tape: y (n3), e (n2), d (n1), c (n0).
    assert states(0) == {
        "n3": "current",
        "n2": "pending",
        "n1": "pending",
        "n0": "pending",
        "x0": "pending",
        "x1": "pending",
    }
    assert states(1) == {
        "n3": "done",
        "n2": "current",
        "n1": "pending",
        "n0": "pending",
        "x0": "pending",
        "x1": "pending",
    }
    # After d = a**2, a has only part of its gradient (c = a*b is still to come).
    assert states(2)["n1"] == "current" and states(2)["x0"] == "pending"
    assert states(3) == {
        "n3": "done",
        "n2": "done",
        "n1": "done",
        "n0": "current",
        "x0": "done",
        "x1": "done",
    }
    current = graph(tape, step=1).source
    assert attr(nodes(current)["n2"], "penwidth") == "2.5"
    assert "grad" not in label(nodes(current)["n0"])  # pending boxes show no gradient yet
    assert "step 1 of 0..3" in current


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


def test_backward_frames_one_per_step():
    tape, a, *_ = scalar_expression()
    frames = backward_frames(tape)
    assert len(frames) == 4 and frames.steps == [0, 1, 2, 3]
    for k in range(4):
        assert frames[k].source == graph(tape, step=k).source
    assert frames.captions[0].startswith("step 0 of 3: y (tanh) receives grad 1")
    assert "every leaf has its gradient" in frames.captions[-1]
    assert a.grad is None


def test_backward_frames_share_a_frame_inside_a_folded_chain():
    attn, _ = attention()
    frames = backward_frames(attn.tape)
    assert len(frames) < len(attn.tape)
    assert frames.steps[0] == 0 and frames.steps[-1] == len(attn.tape) - 1
    assert frames.steps == sorted(frames.steps)
    assert any("Q_heads (reshape→transpose→reshape)" in c for c in frames.captions)
    assert all(node.grad is None for node in attn.tape.nodes)


# ---------------------------------------------------------------- large graphs


def test_large_graph_is_summarised_connected_with_a_message():
    tape, h = long_chain()
    with pytest.warns(GraphCollapsedWarning, match="detail='full'"):
        source = graph(tape).source
    boxes = nodes(source)
    assert len(boxes) <= 150
    assert [label(boxes[f"s{m}"]).split(" ")[0] for m in range(5)] == [f"block{m}" for m in range(5)]
    assert "80 ops: mul ×40, tanh ×40" in label(boxes["s0"])
    assert reaches_all(source, "s4")
    assert "detail='full'" in source  # the note on the picture
    # Just below the threshold nothing is summarised.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = graph(tape, max_nodes=10_000).source
    assert "s0" not in nodes(small)


def test_full_detail_draws_shared_leaves_once_per_use():
    tape, h = long_chain(blocks=2, per_block=40)  # 160 equations, w used 80 times
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        source = graph(tape, detail="full").source
    boxes = nodes(source)
    copies = [i for i in boxes if i.startswith("x1_")]
    assert len(copies) == 80
    tails = [t for t, _, _ in edges(source)]
    assert all(tails.count(c) == 1 for c in copies)  # one use each: no hub for dot
    assert sum(1 for i in boxes if i.startswith("n")) == 160
    assert reaches_all(source, "n159")


def test_chain_longer_than_the_recursion_limit():
    x = mt.Scalar(0.1, name="x")
    y = x
    for _ in range(sys.getrecursionlimit() + 500):
        y = y * 1.0001
    with pytest.warns(GraphCollapsedWarning):
        source = graph(y, backward=True).source
    boxes = nodes(source)
    # No module structure: the tape is cut into about eight stretches.
    assert 8 <= sum(1 for i in boxes if i.startswith("s")) <= 9
    last = max((i for i in boxes if i.startswith("s")), key=lambda i: int(i[1:]))
    assert reaches_all(source, last)


def test_summary_detail_and_summary_steps():
    tape, h = long_chain(blocks=3, per_block=5)
    source = graph(tape, detail="summary").source
    assert [i for i in nodes(source) if i.startswith("s")] == ["s0", "s1", "s2"]
    assert reaches_all(source, "s2")
    frames = backward_frames(tape, detail="summary")
    assert len(frames) == 3  # one frame per module box


def test_scalar_trace_of_a_tiny_attention_is_summarised_by_module():
    attn = mt.nn.MultiHeadAttention(4, 2, causal=True, seed=0)
    trace = attn.trace_scalars(np.random.default_rng(0).standard_normal((1, 3, 4)))
    with pytest.warns(GraphCollapsedWarning):
        source = graph(trace.tape).source
    titles = {label(a).split(" ")[0] for i, a in nodes(source).items() if i.startswith("s")}
    # The scalar trace tags the attention core per head: one summary per head, inside an "attention" cluster.
    assert titles == {"q_proj", "k_proj", "v_proj", "head0", "head1", "out_proj"}
    assert 'label="attention"' in source or "label=attention" in source
    assert reaches_all(source, [i for i, a in nodes(source).items() if label(a).startswith("out_proj")][0])


def test_values_false_draws_structure_only():
    tape, *_ = scalar_expression()
    boxes = nodes(graph(tape, values=False, backward=True).source)
    assert label(boxes["n0"]) == "c mul"
    assert label(boxes["x0"]) == "a input"
