"""Each derivation once: the attention derivation table drives every part, each primitive's derivative lives once.

The table (:mod:`microtape.nn.attention.derivation`) is what the forward, the
hand-derived backward, the reports and the captions read: a toy intermediate
added to a copy of it shows up in all of them. Softmax's backward, the stable
softmax, GELU and the ``1/√d`` scale are each written in exactly one function;
the other modules call it. A Transformer layer runs one reverse pass.
"""

import ast
import dataclasses
import pathlib

import numpy as np
import pytest

import microtape as mt
from microtape import ops
from microtape.engine import reverse
from microtape.nn.attention import analytic, derivation, tiled

PACKAGE = pathlib.Path(mt.__file__).parent
ORIGINAL = derivation.ATTENTION


# ---------------------------------------------------------------- a toy intermediate, added once


def _alibi(length):
    """A linear distance penalty, ALiBi's shape: -0.5 |i - j| (not constant along a row, so it changes P)."""
    i = np.arange(length)
    return -0.5 * np.abs(i[:, None] - i[None, :])


def _toy_table():
    """A copy of the table with one more step, ``biased_scores = S + bias``, between the scores and the softmax."""
    steps = list(derivation.ATTENTION)
    bias = dataclasses.replace(
        steps[0],
        name="biased_scores",
        label="dB",
        symbol="B",
        symbol_latex="B",
        inputs=("scaled_scores",),
        forward=lambda s, c: s.add_constant(_alibi(s.shape[-1]), name="biased_scores"),
        forward_text="B = S + bias   (ALiBi: a fixed penalty per distance)",
        forward_latex=r"B = S + \mathrm{bias}",
        vjp=lambda links, g, out, s, c: (g,),
        grads=("d{0} = d{out}   (the bias is a constant)",),
        grads_latex=(r"d{0} = d{out}",),
        also=(),
        also_grads=None,
    )
    weights = next(i for i, step in enumerate(steps) if step.name == "weights")
    steps[weights] = dataclasses.replace(steps[weights], inputs=("biased_scores",))
    return tuple(steps[:weights] + [bias] + steps[weights:])


@pytest.fixture
def toy_table(monkeypatch):
    table = _toy_table()
    monkeypatch.setattr(derivation, "ATTENTION", table)
    return table


def _layer_and_input(**options):
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0, **options)
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    return attn, x


def test_a_toy_intermediate_runs_in_the_forward(toy_table):
    attn, x = _layer_and_input()
    biased = attn(x).data
    names = [node.name for node in attn.tape.nodes]
    assert names.index("scaled_scores") < names.index("biased_scores") < names.index("weights")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(derivation, "ATTENTION", ORIGINAL)
        plain = attn(x).data
    assert not np.allclose(biased, plain)  # the bias changed the weights


@pytest.mark.parametrize("options", [{}, {"causal": True, "dropout": 0.2}], ids=["plain", "causal+dropout"])
def test_a_toy_intermediate_is_a_row_of_the_report(toy_table, options):
    attn, x = _layer_and_input(**options)
    report = mt.check.attention_report(attn, x, finite_differences=2)
    assert report.ok, str(report)
    rows = {row.label: row for row in report.rows}
    assert rows["dB"].name == "biased_scores"
    assert rows["dB"].formula == "dB = P * (dP - rowsum(dP * P))"  # softmax's input is now B
    assert rows["dS"].formula == "dS = dB   (the bias is a constant)"
    labels = [row.label for row in report.rows]
    assert labels.index("dP") < labels.index("dB") < labels.index("dS") < labels.index("dQ")
    assert "dB" in report.inherits["dS"] or "dS" in report.inherits["dB"]
    assert "dB" in str(report)


def test_a_toy_intermediate_is_in_the_layer_report(toy_table):
    layer = mt.nn.TransformerEncoderLayer(8, 2, 16, seed=0)
    x = np.random.default_rng(1).standard_normal((2, 4, 8))
    report = mt.check.layer_report(layer, x)
    assert report.ok, str(report)
    assert "self_attn.dB" in [row.label for row in report.rows]


def test_a_toy_intermediate_is_in_the_captions(toy_table):
    attn, x = _layer_and_input()
    attn(x)
    captions = mt.viz.backward_frames(attn.tape, expand="attention").captions  # the core op by op
    softmax = next(c for c in captions if ": weights (softmax)" in c)
    assert "(by hand: dB = P * (dP - rowsum(dP * P)))" in softmax
    bias = next(c for c in captions if ": biased_scores (" in c)
    assert "(by hand: dS = dB   (the bias is a constant))" in bias


def test_a_toy_intermediate_is_in_the_hints(toy_table):
    from microtape.exercises.registry import get

    exercise = get("attention_backward")
    assert exercise.mistake("no_rowsum").hint.startswith("your dS is P ⊙ dP")
    assert "dS = dB (the bias is a constant)" in exercise.mistake("no_rowsum").hint
    assert "dS = dB (the bias is a constant)" in exercise.mistake("softmax_skipped").hint


def test_the_hints_quote_the_table():
    from microtape.exercises.registry import get

    hint = get("attention_backward").mistake("no_rowsum").hint
    assert "dS = P ⊙ (dP − rowsum(dP ⊙ P))" in hint
    assert "dQ = dS K / √d, dK = dSᵀ Q / √d" in get("attention_backward").mistake("no_backward_scale").hint


# ---------------------------------------------------------------- the table reads like the old chain


def test_the_table_gives_the_chain_formulas():
    rows = {row[0]: row for row in derivation.gradient_rows(derivation.ATTENTION, {})}
    assert rows["dS"][2] == "dS = P * (dP - rowsum(dP * P))"
    assert rows["dQ"][2] == "dQ = dS K / sqrt(d)" and rows["dQ"][4] == ("dS",)
    assert rows["dP"][2] == "dP = dC V^T" and rows["dV"][2] == "dV = P^T dC"
    dropout = {row[0]: row for row in derivation.gradient_rows(derivation.ATTENTION, {"keep": True})}
    assert dropout["dP"][2].startswith("dP = dP~ * keep") and dropout["dP"][4] == ("dP_dropped",)
    assert dropout["dV"][2] == "dV = P~^T dC"


# ---------------------------------------------------------------- each primitive's derivative once


def _calls(monkeypatch, module, name):
    """Count the calls of ``module.name`` (looked up at call time by every caller)."""
    counter = {"calls": 0}
    original = getattr(module, name)

    def counted(*args, **kwargs):
        counter["calls"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return counter


def test_softmax_backward_is_the_ops_one_everywhere(monkeypatch):
    counter = _calls(monkeypatch, ops, "softmax_backward")
    # The op's own VJP reaches it in the module that defines it (microtape/ops/nn.py): the same counter.
    monkeypatch.setattr(ops.nn, "softmax_backward", ops.softmax_backward)
    rng = np.random.default_rng(0)
    q, k, v, grad = (rng.standard_normal((2, 4, 3)) for _ in range(4))
    p = ops.softmax.forward(q @ np.swapaxes(k, -1, -2), axis=-1)
    ops.softmax.vjp(rng.standard_normal(p.shape), p, None)
    assert counter["calls"] == 1, "the op's VJP"
    analytic.attention_core_backward(grad, q, k, v, p)
    assert counter["calls"] == 2, "the hand-derived chain"
    schedule = tiled.schedule_of(q, k, v, 2)
    out = tiled.tiled_forward(q, k, v, schedule)[0]
    tiled.tiled_backward(grad, out, q, k, v, schedule)
    assert counter["calls"] == 2 + len(schedule.forward_order()), "the tiled kernel, once per tile"


def test_gelu_backward_is_the_ops_one(monkeypatch):
    from types import SimpleNamespace

    from microtape.nn import analytic_blocks

    calls = []

    def vjp(g, ans, x):
        calls.append(x)
        return ops.gelu.vjp(g, ans, x)

    monkeypatch.setattr(analytic_blocks, "ops", SimpleNamespace(gelu=SimpleNamespace(vjp=vjp), softmax=ops.softmax))
    z = np.linspace(-3, 3, 7)
    analytic_blocks.gelu_backward(np.ones_like(z), z)
    assert len(calls) == 1 and calls[0] is z


def _functions(tree):
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.Lambda)]


def _is_call_to(node, names):
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr in names)
        or (isinstance(node.func, ast.Name) and node.func.id in names)
    )


def _row_max(node):
    """A call to ``max`` along an axis (a row's maximum; a global ``np.max(x)`` is the known mistake, not this)."""
    return _is_call_to(node, {"max"}) and any(keyword.arg == "axis" for keyword in node.keywords)


def _stable_softmax(function):
    """``x - max(x, axis)`` then a division by a sum, in one function: the stable softmax forward."""
    nodes = list(ast.walk(function))
    shifts = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and _row_max(n.right) for n in nodes)
    divides = any(
        (isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.Div))
        and _is_call_to(n.right if isinstance(n, ast.BinOp) else n.value, {"sum"})
        for n in nodes
    )
    return shifts and divides


def _softmax_backward(function):
    """``p * (g - rowsum(g * p))``: a difference whose right side sums (or row-dots) a product."""
    for n in ast.walk(function):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            inside = list(ast.walk(n.right))
            if any(_is_call_to(m, {"_rowdot"}) for m in inside):
                return True
            for call in inside:
                if not _is_call_to(call, {"sum", "einsum"}):
                    continue
                # what is summed: the arguments, or the receiver of a method call ((g * p).sum(...))
                summed = [*call.args, *([call.func.value] if isinstance(call.func, ast.Attribute) else [])]
                if any(isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mult) for x in summed for m in ast.walk(x)):
                    return True
    return False


def _gelu(function):
    """GELU's tanh form: its constant ``k = 0.044715``, as a number or by the registry's name."""
    return any(
        (isinstance(n, ast.Constant) and n.value == 0.044715) or (isinstance(n, ast.Name) and n.id == "GELU_K")
        for n in ast.walk(function)
    )


def _score_scale(function):
    """``1 / sqrt(d)`` of a head depth: a division by ``sqrt`` of a ``.shape[-1]`` or of a depth."""
    for n in ast.walk(function):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and _is_call_to(n.right, {"sqrt"}) and n.right.args:
            text = ast.unparse(n.right.args[0])
            if "shape[-1]" in text or "depth" in text or "head_dim" in text:
                return True
    return False


def _where(formula):
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for function in _functions(tree):
            if formula(function) and not any(formula(inner) for inner in _functions(function) if inner is not function):
                name = getattr(function, "name", "<lambda>")
                found.append(f"{path.relative_to(PACKAGE)}:{name}")
    return found


@pytest.mark.parametrize(
    "formula, home",
    [
        (_stable_softmax, ["ops/nn.py:_softmax_forward"]),
        (_softmax_backward, ["ops/nn.py:softmax_backward"]),
        (_gelu, ["ops/elementwise.py:_gelu_forward", "ops/elementwise.py:_gelu_vjp"]),
        (_score_scale, ["ops/attention_links.py:score_scale"]),
    ],
    ids=["stable softmax", "softmax backward", "gelu", "1/sqrt(d)"],
)
def test_each_primitive_formula_is_written_once(formula, home):
    assert _where(formula) == home


# ---------------------------------------------------------------- one reverse pass per layer


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_a_transformer_layer_runs_one_reverse_pass(monkeypatch, kind):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8))
    if kind == "encoder":
        layer = mt.nn.TransformerEncoderLayer(8, 2, 16, seed=0)
        layer(x)
    else:
        layer = mt.nn.TransformerDecoderLayer(8, 2, 16, seed=0)
        layer(x, rng.standard_normal((2, 3, 8)))
    counter = _calls(monkeypatch, reverse, "_reverse")
    grads = layer.named_gradients(np.ones((2, 4, 8)), "tape")
    assert counter["calls"] == 1
    assert "self_attn.scaled_scores" in grads and "self_attn.x" in grads
    report = mt.check.layer_report(layer, *([x] if kind == "encoder" else [x, rng.standard_normal((2, 3, 8))]))
    assert report.ok, str(report)
