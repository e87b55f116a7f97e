"""The lean tape (``Tape(lean=True)``, ``MultiHeadAttention(..., lean=True)``): less kept, the same gradients.

What is pinned: which values and gradients a lean tape keeps (only what a
VJP reads, the results, and the steps named in ``keep``), that its
gradients are bit-identical to a full tape's (random graphs of every op,
and attention in every configuration), and that what it did not keep is
refused with a message saying how to keep it — in the listing, the
pictures, the layer's getters and reports.
"""

import numpy as np
import pytest
from hypothesis import given
from viz.test_graph_properties import DTYPE_STEPS, SETTINGS, STEPS, _tensors, plans, replay

import microtape as mt
from microtape.engine.lean import NotKept
from microtape.ops import OPS


@SETTINGS
@given(plans(steps={**STEPS, **DTYPE_STEPS}, dtypes=(np.float32, np.float64)))
def test_a_lean_tape_gives_the_full_tapes_gradients_bit_for_bit(drawn):
    arrays, plan = drawn
    results = []
    for lean in (False, True):
        leaves = _tensors(arrays)
        with mt.Tape(lean=lean) as tape:
            loss = replay(leaves, plan, every_leaf=True)
        grads = mt.gradients(loss, tape=tape)
        tape.backward(loss)
        results.append([(grads[leaf], leaf.grad) for leaf in leaves])
    for (full, full_grad), (lean, lean_grad) in zip(*results):
        for a, b in ((full, lean), (full_grad, lean_grad)):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def _chain(lean, keep=()):
    x = mt.Tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4), requires_grad=True, name="x")
    with mt.Tape(lean=lean, keep=keep) as tape:
        doubled = _named(x * 2.0, "doubled")
        e = _named(doubled.exp(), "e")
        total = _named(e.sum(axis=1, keepdims=True), "total")
        shifted = _named(e + 1.0, "shifted")
        ratio = _named(shifted / total, "ratio")
        loss = _named(ratio.sum(), "loss")
    return x, tape, {n.name: n for n in tape.nodes if n.name}, loss


def _named(node, name):
    node.name = name
    return node


def test_a_lean_tape_keeps_only_what_a_vjp_reads():
    x, tape, nodes, loss = _chain(lean=True)
    # add (shifted = e + 1) reads nothing, sum reads nothing, mul (x * 2) reads its operands — x and the
    # constant, not its output; exp reads its output e; div reads its divisor and its output; the loss is a result.
    dropped = {name for name, node in nodes.items() if node.data.__class__ is NotKept}
    assert dropped == {"doubled", "shifted"}
    kept = {name for name, node in nodes.items() if node.data.__class__ is np.ndarray}
    assert kept == {"e", "total", "ratio", "loss"}
    assert x.data.__class__ is np.ndarray  # leaves are never dropped
    _, full, full_nodes, _ = _chain(lean=False)
    assert all(node.data.__class__ is np.ndarray for node in full_nodes.values())


def test_keep_names_steps_whose_values_and_gradients_stay():
    x, tape, nodes, loss = _chain(lean=True, keep=("shifted",))
    assert nodes["shifted"].data.__class__ is np.ndarray and nodes["doubled"].data.__class__ is NotKept
    full_x, full_tape, full_nodes, full_loss = _chain(lean=False)
    lean_grads, full_grads = mt.gradients(loss, tape=tape), mt.gradients(full_loss, tape=full_tape)
    np.testing.assert_array_equal(lean_grads[nodes["shifted"]], full_grads[full_nodes["shifted"]])
    # Every other intermediate gradient was freed once used: only the leaf's and the kept step's stay.
    assert set(lean_grads) == {x, nodes["shifted"]}
    with pytest.raises(KeyError, match="gradient of e was not kept.*lean.*keep=\\('e',\\)"):
        lean_grads[nodes["e"]]
    tape.backward(loss)
    assert nodes["e"].grad is None and nodes["ratio"].grad is None
    np.testing.assert_array_equal(x.grad, full_grads[full_x])


def test_what_was_not_kept_says_so_and_refuses_to_be_read():
    x, tape, nodes, loss = _chain(lean=True)
    listing = str(tape)
    assert listing.startswith("recorded lean")
    assert [line.split()[1] for line in listing.splitlines() if "(value not kept)" in line] == ["doubled", "shifted"]
    assert repr(tape).endswith("lean>")
    with pytest.raises(ValueError, match="value of doubled was not kept.*mt.Tape\\(\\).*keep=\\('doubled',\\)"):
        np.asarray(nodes["doubled"])
    with pytest.raises(ValueError, match="value of shifted was not kept"):
        nodes["shifted"] * 2.0
    with pytest.raises(ValueError, match="value of shifted was not kept"):
        nodes["shifted"].data.sum()
    assert repr(nodes["shifted"]) == "Tensor(value not kept, shape=(3, 4), name='shifted', op=add)"
    assert nodes["shifted"].shape == (3, 4) and nodes["shifted"].data.dtype == np.float64
    drawn = mt.viz.graph(tape).source
    assert drawn.count("value not kept") == 2


def test_a_recorded_reverse_pass_over_a_lean_tape_is_refused():
    x, tape, nodes, loss = _chain(lean=True)
    with pytest.raises(ValueError, match="create_graph=True.*recorded lean.*mt.Tape\\(\\)"):
        mt.gradients(loss, tape=tape, create_graph=True)


def test_a_user_op_that_declares_nothing_keeps_its_values():
    triple = mt.ops.define("triple_lean", lambda x: 3 * x, lambda g, ans, x: (3 * g,), "3 * {g}")
    declared = mt.ops.define("triple_declared", lambda x: 3 * x, lambda g, ans, x: (3 * g,), "3 * {g}", reads=())
    try:
        x = mt.Tensor(np.ones(3), requires_grad=True)
        with mt.Tape(lean=True):
            a, b = x * 2.0, x * 2.0
            (triple(a) + declared(b)).sum()
        assert a.data.__class__ is np.ndarray  # the safe default: kept
        assert b.data.__class__ is NotKept
    finally:
        OPS.pop("triple_lean")
        OPS.pop("triple_declared")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"lean": "yes"}, TypeError, "Tape\\(lean='yes'\\): expected True or False"),
        ({"lean": True, "keep": "weights"}, TypeError, "keep='weights'.*tuple of step names"),
        ({"lean": True, "keep": ("weights", 3)}, TypeError, "tuple of step names"),
        ({"keep": ("weights",)}, ValueError, "add lean=True"),
    ],
)
def test_bad_lean_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        mt.Tape(**kwargs)


# ---------------------------------------------------------------- attention


CONFIGS = [
    {"causal": True},
    {"dropout": 0.3},
    {"mask": True},
    {"cross": True},
    {"dtype": np.float32, "causal": True},
    {"block_size": 2, "causal": True},
]


def _run(config, lean, keep=()):
    config = dict(config)
    rng = np.random.default_rng(3)
    mask = rng.standard_normal((5, 5)) if config.pop("mask", False) else None
    cross = config.pop("cross", False)
    attn = mt.nn.MultiHeadAttention(16, 4, seed=1, lean=lean, keep=keep, **config)
    x = rng.standard_normal((2, 5, 16))
    inputs = (x, rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 5, 16))) if cross else (x,)
    y = attn(*inputs, mask=mask)
    dx = attn.backward(rng.standard_normal((2, 5, 16)))
    return attn, y, dx


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c))
def test_lean_attention_gives_the_full_layers_gradients_bit_for_bit(config):
    full, y_full, dx_full = _run(config, lean=False)
    lean, y_lean, dx_lean = _run(config, lean=True)
    np.testing.assert_array_equal(y_lean.data, y_full.data)
    np.testing.assert_array_equal(dx_lean, dx_full)
    for (name, p), (_, q) in zip(full.named_parameters(), lean.named_parameters()):
        np.testing.assert_array_equal(q.grad, p.grad, err_msg=name)
    if "cross" in config:
        np.testing.assert_array_equal(lean.grad_key_input(), full.grad_key_input())
        np.testing.assert_array_equal(lean.grad_value_input(), full.grad_value_input())
    # The weights (which the backward reads) are kept, so the heatmap and the analytic route still work.
    np.testing.assert_array_equal(lean.attention_weights, full.attention_weights)
    g = np.random.default_rng(9).standard_normal(y_full.shape)
    np.testing.assert_array_equal(lean.backward(g, method="analytic"), full.backward(g, method="analytic"))


def _score_sized(attn, arrays):
    """How many score-sized blocks of memory ``arrays`` hold (views of one array count once)."""
    shape = attn.tape.find("weights").output.shape
    return len({id(a if a.base is None else a.base) for a in arrays if isinstance(a, np.ndarray) and a.shape == shape})


def test_lean_attention_keeps_one_score_sized_array_where_the_full_tape_keeps_seven():
    """After forward and backward: the tape's values plus every gradient the pass and the layer hold."""
    counts = {}
    for lean in (False, True):
        attn, _, _ = _run({"causal": True}, lean=lean)
        result = attn.last_gradients
        values = [node.data for node in attn.tape.nodes]
        grads = [node.grad for node in attn.tape.nodes] + list(result.values())
        counts[lean] = (_score_sized(attn, values), _score_sized(attn, grads))
    assert counts[True] == (1, 0)  # the weights P; no score-sized gradient
    # scores, scaled, causal_scores, weights; dS (the scaled and causal scores share it), dP and dS/√d
    assert counts[False] == (4, 3)


def test_lean_attention_refuses_what_it_did_not_keep_saying_how():
    attn, _, _ = _run({"causal": True}, lean=True)
    for getter in (attn.grad_weights, attn.grad_scores):
        with pytest.raises(ValueError, match="not kept.*lean=False on the layer.*keep="):
            getter()
    with pytest.raises(ValueError, match="not kept"):
        mt.viz.attention_heatmaps(attn, which="grad_scores")
    with pytest.raises(ValueError, match="recorded lean.*attn.lean = False"):
        attn.named_gradients(np.ones((2, 5, 16)))
    with pytest.raises(ValueError, match="recorded lean"):
        mt.check.attention_report(attn, np.ones((2, 5, 16)))
    mt.viz.attention_heatmaps(attn)  # the weights: kept
    # The graph says so on top, even with the attention module collapsed (its boxes hidden).
    assert "recorded lean: values no VJP reads were not kept" in mt.viz.graph(attn.tape).source
    assert "recorded lean" not in mt.viz.graph(_run({"causal": True}, lean=False)[0].tape).source


def test_lean_attention_keeps_the_steps_you_name():
    full, _, _ = _run({"causal": True}, lean=False)
    lean, _, _ = _run({"causal": True}, lean=True, keep=("weights",))
    np.testing.assert_array_equal(lean.grad_weights(), full.grad_weights())
    mt.viz.attention_heatmaps(lean, which="grad_weights")
    assert "keep=('weights',)" in repr(lean)


def test_lean_attention_switch_and_bad_values():
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0)
    assert attn.lean is False and attn.keep == ()
    attn.lean = True
    attn(np.ones((1, 3, 8)))
    assert attn.tape.lean
    with pytest.raises(ValueError, match="lean = 'yes'"):
        attn.lean = "yes"
    with pytest.raises(ValueError, match="'nope' is not a step"):
        attn.keep = ("nope",)
    with pytest.raises(TypeError, match="tuple of step names"):
        mt.nn.MultiHeadAttention(8, 2, keep="weights")
    assert attn.lean is True and attn.keep == ()


def test_lean_cross_attention_with_one_tensor_in_two_roles_is_refused_and_changes_nothing():
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0, lean=True)
    q = mt.Tensor(np.ones((1, 3, 8)), requires_grad=True)
    kv = mt.Tensor(np.ones((1, 4, 8)), requires_grad=True)
    with pytest.raises(ValueError, match="lean=True needs self-attention or three separate inputs"):
        attn(q, kv, kv)
    assert attn.tape is None


# ---------------------------------------------------------------- dropping as it records (read_once)


def test_a_read_once_tape_drops_each_value_as_soon_as_its_reader_is_recorded():
    before = mt.Tensor(np.ones((2, 3)), requires_grad=True) * 2.0  # computed before the tape began
    with mt.Tape(lean=True, read_once=True, keep=("kept",)) as tape:
        doubled = _named(before + 1.0, "doubled")  # add reads nothing
        assert before.data.__class__ is np.ndarray  # not this tape's to drop
        shifted = _named(doubled + 1.0, "shifted")
        assert doubled.data.__class__ is NotKept  # dropped already, mid-recording
        flat = _named(shifted.reshape(6), "flat")  # a view of shifted: dropping it would free nothing
        assert shifted.data.__class__ is np.ndarray
        kept = _named(flat + 0.5, "kept")
        loss = _named((kept + 1.0).sum(), "loss")
        assert kept.data.__class__ is np.ndarray  # named in keep
    assert flat.data.__class__ is NotKept  # (dropped when its reader was recorded)
    assert loss.data.__class__ is np.ndarray  # a result
    x_full = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    x_lean = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    results = []
    for x, options in ((x_full, {}), (x_lean, {"lean": True, "read_once": True})):
        with mt.Tape(**options) as tape:
            y = ((x * 3.0).exp() + 1.0).reshape(6).sum()
        results.append(mt.gradients(y, tape=tape)[x])
    np.testing.assert_array_equal(*results)


@pytest.mark.parametrize("kwargs", [{"read_once": True}, {"lean": True, "read_once": 1}])
def test_read_once_needs_a_lean_tape(kwargs):
    with pytest.raises(ValueError, match="read_once=.*expected True \\(with lean=True\\) or False"):
        mt.Tape(**kwargs)


def test_the_lean_layer_drops_as_it_records_and_still_names_an_overflow():
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0, lean=True, causal=True)
    attn(np.ones((1, 3, 8)))
    assert attn.tape.read_once  # (drops values as it records)
    assert attn.tape.find("scores").output.data.__class__ is NotKept
    attn.q_proj.weight.data[...] = attn.k_proj.weight.data[...] = 1e200  # the scores overflow
    with pytest.raises(FloatingPointError, match="overflowed.*recorded lean: the steps whose values were not kept"):
        attn(np.ones((1, 3, 8)))
