"""attention_report and walk: the hand-derived chain against the tape, step by step.

What must hold:

* the report passes in every configuration the layer supports (self, cross,
  masked, causal, dropout, float64 and float32 — the latter at a looser,
  stated tolerance), with its rows in backward order;
* it *catches* each deliberate mistake in :data:`microtape.check.MISTAKES`,
  first at the row a teacher would point at, and every row before it agrees;
* it changes no ``.grad`` anywhere;
* its taped values are the layer's own taped gradients, its analytic values
  the layer's own analytic ones;
* finite differences, when asked for, agree with the tape everywhere — even
  when a mistake is injected (they side with the tape, not the mistake);
* ``walk`` visits the tape's steps in reverse order with their incoming
  gradients and attaches every row exactly once.
"""

import json
import re

import numpy as np
import pytest

import microtape as mt
from microtape.check import MISTAKES, attention_report, walk
from microtape.nn.masks import NEG_INF

CORE = ["dC", "dP", "dV", "dS", "dQ", "dK"]
PARAMETERS = ["dW_o", "db_o", "dW_q", "db_q", "dW_k", "db_k", "dW_v", "db_v"]


def inputs(batch=2, q_len=4, k_len=None, embed=8, seed=1):
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((batch, q_len, embed))
    if k_len is None:
        return query, None, None
    return query, rng.standard_normal((batch, k_len, embed)), rng.standard_normal((batch, k_len, embed))


def some_mask(q_len, k_len):
    mask = np.zeros((q_len, k_len))
    mask[0, 1:] = NEG_INF  # row 0 sees key 0 only
    mask[1:, -1] = NEG_INF  # nobody else sees the last key
    return mask


CONFIGS = {
    "self": dict(),
    "cross": dict(k_len=3),
    "masked": dict(mask=True),
    "causal": dict(causal=True),
    "dropout": dict(dropout=0.3),
    "causal+dropout+mask": dict(causal=True, dropout=0.2, mask=True),
    "cross+mask+dropout": dict(k_len=6, mask=True, dropout=0.2),
    "float32": dict(dtype=np.float32),
    "float32 cross causal-free masked": dict(dtype=np.float32, k_len=5, mask=True),
}


def build(k_len=None, mask=False, causal=False, dropout=0.0, dtype=np.float64, heads=2, seed=0):
    attn = mt.nn.MultiHeadAttention(8, heads, dropout=dropout, causal=causal, seed=seed, dtype=dtype)
    query, key, value = inputs(k_len=k_len)
    tk = 4 if k_len is None else k_len
    return attn, (query, key, value, some_mask(4, tk) if mask else None)


def expected_labels(cross=False, dropout=False):
    # Backward order, step by step: with dropout, the context step sends dP~ and dV, then dropout sends dP.
    core = ["dC", "dP_dropped", "dV", "dP", "dS", "dQ", "dK"] if dropout else list(CORE)
    return core + PARAMETERS + (["dq", "dk", "dv"] if cross else ["dx"])


# ---------------------------------------------------------------- it passes


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_report_passes_in_every_configuration(config):
    attn, args = build(**config)
    report = attention_report(attn, *args)
    assert report.ok, str(report)
    assert report.first_failure is None
    labels = [row.label for row in report.rows]
    assert labels == expected_labels(cross=config.get("k_len") is not None, dropout=bool(config.get("dropout")))
    for row in report.rows:
        assert row.passed and row.routes_agree
        assert row.shape == np.shape(row.taped) == np.shape(row.analytic)
        assert row.formula and row.latex


def test_tolerance_is_stated_and_depends_on_dtype():
    attn64, args = build()
    attn32, args32 = build(dtype=np.float32)
    r64, r32 = attention_report(attn64, *args), attention_report(attn32, *args32)
    assert r64.atol == r64.rtol == 1e-10
    assert r32.atol == r32.rtol == 1e-4
    assert "1e-10" in str(r64) and "0.0001" in str(r32)
    assert "float32" in str(r32)
    # float64 agreement is at rounding level, far below the tolerance.
    assert max(row.max_abs_error for row in r64.rows) < 1e-13


def test_custom_tolerance():
    attn, args = build()
    report = attention_report(attn, *args, tolerance=1e-6)
    assert report.atol == 1e-6 and report.ok
    with pytest.raises(ValueError, match="tolerance"):
        attention_report(attn, *args, tolerance=-1.0)


def test_default_upstream_gradient_is_seeded_and_stated():
    attn, args = build()
    first = attention_report(attn, *args, seed=3).grad_output
    again = attention_report(attn, *args, seed=3)
    other = attention_report(attn, *args, seed=4).grad_output
    np.testing.assert_array_equal(first, again.grad_output)
    assert not np.array_equal(first, other)
    assert "standard normal, seed=3" in str(again)
    np.testing.assert_array_equal(first, np.random.default_rng(3).standard_normal(first.shape))


def test_given_upstream_gradient_is_used():
    attn, args = build()
    dy = np.ones((2, 4, 8))
    report = attention_report(attn, *args, grad_output=dy)
    np.testing.assert_array_equal(report.grad_output, dy)
    assert report.config["upstream"] == "given"
    assert "given" in str(report)
    with pytest.raises(ValueError, match="shape"):
        attention_report(attn, *args, grad_output=np.ones((2, 4, 7)))


@pytest.mark.parametrize(
    "config", [dict(), dict(k_len=3, dropout=0.2), dict(causal=True)], ids=["self", "cross", "causal"]
)
def test_both_routes_are_the_layers_own(config):
    """The report's taped values are attn.backward(method="tape")'s; its analytic ones method="analytic"'s."""
    attn, args = build(**config)
    report = attention_report(attn, *args)
    attn.backward(report.grad_output, method="tape")
    taped = attn.last_gradients
    attn.zero_grad()
    attn.backward(report.grad_output, method="analytic")
    by_hand = attn.last_gradients
    for row in report.rows:
        # (dx is summed over its three uses in another order: equal up to rounding.)
        np.testing.assert_allclose(row.taped, taped[row.name], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(row.analytic, by_hand[row.name], rtol=1e-14, atol=1e-15)


def test_cross_attention_with_key_and_value_the_same_object():
    attn, _ = build()
    query, memory, _ = inputs(k_len=3)
    report = attention_report(attn, query, memory, memory)
    assert report.ok
    assert report.config["attention"] == "cross"
    # dk and dv are separate rows even though key and value are one leaf on the tape.
    assert not np.allclose(report["dk"].taped, report["dv"].taped)


# ---------------------------------------------------------------- it catches mistakes


def config_for(mistake):
    needs = MISTAKES[mistake].needs
    return {"dropout": dict(dropout=0.3), "mask": dict(causal=True), "square": dict(), None: dict()}[needs]


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_each_mistake_fails_first_at_its_row(name):
    attn, args = build(**config_for(name))
    report = attention_report(attn, *args, mistakes={name})
    expected = MISTAKES[name].row
    assert not report.ok
    assert report.first_failure == expected, str(report)
    labels = [row.label for row in report.rows]
    position = labels.index(expected)
    assert all(row.passed for row in report.rows[:position])
    assert not report.rows[position].passed
    # The failing row shows the wrong formula and explains the mistake.
    assert report[expected].formula == MISTAKES[name].formula_for(expected)[0]
    assert name in report[expected].note
    assert "TEACHING MODE" in str(report)
    assert report.mistakes == (name,)


@pytest.mark.parametrize("name", ["forgot_scale", "forgot_rowsum", "causal_mask_leaked"])
def test_mistakes_are_caught_in_float32_and_cross_attention(name):
    config = dict(dtype=np.float32, k_len=6, mask=True)
    attn, args = build(**config)
    report = attention_report(attn, *args, mistakes=name)
    assert report.first_failure == MISTAKES[name].row


def test_specific_mistakes_fail_where_the_issue_says():
    attn, args = build(causal=True, dropout=0.3)
    expectations = {
        "forgot_scale": "dQ",
        "forgot_rowsum": "dS",
        "K_not_transposed": "dK",
        "transposed_operand": "dK",  # another name for it
        "dropout_mask_not_applied": "dP",
        "causal_mask_leaked": "dS",
    }
    for name, row in expectations.items():
        assert attention_report(attn, *args, mistakes=name).first_failure == row, name


def test_causal_mask_leak_puts_gradient_on_masked_entries():
    attn, args = build(causal=True)
    report = attention_report(attn, *args, mistakes="causal_mask_leaked")
    future = np.triu(np.ones((4, 4), dtype=bool), k=1)
    assert np.all(report["dS"].taped[:, future] == 0)  # the truth: nothing flows to masked scores
    assert np.all(report["dS"].analytic[:, future] != 0)  # the mistake: it leaks there


def test_several_mistakes_first_failure_is_the_earliest():
    attn, args = build(dropout=0.3)
    report = attention_report(attn, *args, mistakes=["forgot_scale", "dropout_mask_not_applied"])
    assert report.first_failure == "dP"


def test_mistakes_that_cannot_show_are_refused_before_the_forward():
    attn, args = build()
    attention_report(attn, *args)
    tape_before = attn.tape
    with pytest.raises(ValueError, match="dropout"):
        attention_report(attn, *args, mistakes="dropout_mask_not_applied")
    with pytest.raises(ValueError, match="mask"):
        attention_report(attn, *args, mistakes="causal_mask_leaked")
    cross_attn, cross_args = build(k_len=3)
    with pytest.raises(ValueError, match="Tq == Tk"):
        attention_report(cross_attn, *cross_args, mistakes="K_not_transposed")
    assert attn.tape is tape_before  # nothing ran


def test_unknown_mistake_lists_the_known_ones():
    attn, args = build()
    with pytest.raises(ValueError, match="forgot_scale"):
        attention_report(attn, *args, mistakes="forgot_everything")


def test_mistakes_swap_only_their_own_link():
    """Each mistake changes its row and the rows computed from it, and nothing else."""
    from microtape.check.attention_report import COMPUTED_FROM, INHERITS
    from microtape.check.mistakes import MISTAKES, mistake_links
    from microtape.nn.attention import analytic

    attn, args = build(causal=True, dropout=0.2, k_len=None)
    attn(args[0])
    cache = attn.analytic_cache()
    dy = np.random.default_rng(0).standard_normal((2, 4, 8))
    right = analytic.attention_backward(dy, cache, True)
    assert mistake_links((), cache) == {}
    label_of = {name: label for label, name, _, _ in analytic.CHAIN}
    for mistake in MISTAKES.values():
        wrong = analytic.attention_backward(dy, cache, True, links=mistake_links([mistake.name], cache))
        changed = {label_of[name] for name in label_of if not np.allclose(wrong[name], right[name])}
        allowed = {mistake.row, *INHERITS[mistake.row]} | {row for row, _, _ in mistake.wrong}
        assert mistake.row in changed and changed <= allowed, (mistake.name, changed)
    assert set(COMPUTED_FROM) <= set(INHERITS)


# ---------------------------------------------------------------- no side effects


def test_report_changes_no_gradients():
    attn, (query, key, value, mask) = build(k_len=3, dropout=0.2)
    x = mt.Tensor(query, requires_grad=True, name="query")
    x.grad = np.full(query.shape, 7.0)
    for i, tensor in enumerate(attn.parameters()):
        tensor.grad = None if i % 2 else np.full(tensor.shape, float(i))
    before = [None if t.grad is None else t.grad.copy() for t in attn.parameters()]
    report = attention_report(attn, x, key, value, mask, finite_differences=True)
    assert report.ok
    for tensor, old in zip(attn.parameters(), before, strict=True):
        if old is None:
            assert tensor.grad is None
        else:
            np.testing.assert_array_equal(tensor.grad, old)
    np.testing.assert_array_equal(x.grad, np.full(query.shape, 7.0))
    # What it leaves: the tape of its forward, with no gradients on it.
    assert attn.tape is report.gradients.tape
    assert all(node.grad is None for node in attn.tape.nodes)


def test_running_twice_gives_the_same_report():
    attn, args = build(causal=True)
    first, second = attention_report(attn, *args), attention_report(attn, *args)
    for a, b in zip(first.rows, second.rows, strict=True):
        np.testing.assert_array_equal(a.taped, b.taped)
    assert all(t.grad is None for t in attn.parameters())


# ---------------------------------------------------------------- finite differences


@pytest.mark.parametrize("config", [dict(), dict(k_len=3, mask=True, dropout=0.2), dict(dtype=np.float32, causal=True)])
def test_finite_differences_agree_with_the_tape(config):
    attn, args = build(**config)
    report = attention_report(attn, *args, finite_differences=True)
    assert report.ok, str(report)
    assert report.fd_text and "eps" in report.fd_text
    for row in report.rows:
        assert row.fd_samples == 3
        assert row.fd_agrees
        for _index, fd, taped, _analytic in row.fd_entries:
            assert abs(fd - taped) <= (1e-6 if attn.dtype == np.float64 else 1e-3) * (1 + np.abs(row.taped).max())
    assert "FD err" in str(report)


def test_finite_differences_side_with_the_tape_against_a_mistake():
    attn, args = build()
    report = attention_report(attn, *args, finite_differences=4, mistakes="forgot_scale")
    assert report.first_failure == "dQ"
    dq = report["dQ"]
    assert dq.fd_samples == 4 and dq.fd_agrees and not dq.routes_agree


def test_finite_differences_argument_is_checked():
    attn, args = build()
    with pytest.raises(ValueError, match="finite_differences"):
        attention_report(attn, *args, finite_differences=-2)


# ---------------------------------------------------------------- output


def test_text_table():
    attn, args = build(causal=True)
    text = str(attention_report(attn, *args))
    assert text.startswith("Attention backward check")
    assert "self-attention: B=2, Tq=4, Tk=4, E=8, H=2 (D=4)" in text
    for label in expected_labels():
        assert f"\n{label} " in text
    assert "dS = P * (dP - rowsum(dP * P))" in text
    assert "OK: all 15 rows agree" in text
    # Aligned: every table line has its columns at the same places.
    table = [line for line in text.splitlines() if line.startswith(("dC ", "dP ", "dx "))]
    assert len({line.index("[") for line in table}) == 1

    failing = str(attention_report(attn, *args, mistakes="forgot_rowsum"))
    assert "FAIL" in failing and "<-- first failure" in failing
    assert "first failure: dS (scaled_scores)" in failing
    first_marked = [line for line in failing.splitlines() if "<-- first failure" in line]
    assert len(first_marked) == 1 and first_marked[0].startswith("dS ")


def test_html_table_highlights_failures():
    attn, args = build()
    good = attention_report(attn, *args)._repr_html_()
    assert "<table" in good and "</table>" in good and "background" not in good
    # Formulas read as text without MathJax: the plain formula is the cell, its LaTeX the tooltip.
    assert ">dS = P * (dP - rowsum(dP * P))</code>" in good
    assert r"title='dS = P \odot (dP - \mathrm{rowsum}(dP \odot P))'" in good
    assert "$" not in good
    bad = attention_report(attn, *args, mistakes="forgot_scale")._repr_html_()
    assert bad.count("background:#f8d7da") == sum(
        not row.passed for row in attention_report(attn, *args, mistakes="forgot_scale").rows
    )
    assert "first failure" in bad and "FAILED" in bad


def test_to_dict_is_plain_data():
    attn, args = build(dropout=0.2)
    report = attention_report(attn, *args, finite_differences=True, mistakes="dropout_mask_not_applied")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False and data["first_failure"] == "dP"
    assert data["mistakes"] == ["dropout_mask_not_applied"]
    assert data["config"]["dropout"] == 0.2 and data["config"]["attention"] == "self"
    assert [row["label"] for row in data["rows"]] == expected_labels(dropout=True)
    row = data["rows"][0]
    assert {
        "label",
        "name",
        "formula",
        "latex",
        "shape",
        "max_abs_error",
        "max_rel_error",
        "passed",
    } <= row.keys()
    assert row["fd_samples"] == 3


def test_lookup_by_label_or_tape_name():
    attn, args = build()
    report = attention_report(attn, *args)
    assert report["dQ"] is report["Q_heads"]
    with pytest.raises(KeyError, match="rows are"):
        report["dZ"]


def test_bad_arguments():
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        attention_report(mt.nn.Linear(8, 8), np.ones((1, 2, 8)))
    attn, _ = build()
    with pytest.raises(ValueError, match="rank 3"):
        attention_report(attn, np.ones((2, 8)))


# ---------------------------------------------------------------- walk


def test_walk_goes_through_the_tape_in_reverse_with_incoming_gradients():
    attn, args = build(causal=True, dropout=0.2)
    report = attention_report(attn, *args)
    steps = walk(report)
    tape = attn.tape
    assert [s.index for s in steps] == list(range(len(tape) - 1, -1, -1))
    assert steps[0].name == "output" and steps[0].number == 1 and steps[0].total == len(steps)
    np.testing.assert_array_equal(steps[0].grad_output, report.grad_output)
    by_name = {s.name: s for s in steps}
    weights = by_name["weights"]
    assert weights.op == "softmax" and "rowsum" in weights.formula
    assert weights.row.label == "dP" and weights.passed
    np.testing.assert_array_equal(weights.grad_output, report["dP"].taped)
    np.testing.assert_array_equal(weights.analytic, report["dP"].analytic)
    assert weights.max_abs_error == report["dP"].max_abs_error
    # Every row is checked at exactly one step.
    attached = [row.label for s in steps for row in s.rows]
    assert sorted(attached) == sorted(row.label for row in report.rows)
    # Steps with nothing to check say so.
    assert by_name["merged"].passed is None and by_name["merged"].analytic is None
    text = str(weights)
    assert "incoming gradient d(weights)" in text and "check dP (weights)" in text


def test_walk_shows_where_a_mistake_enters():
    attn, args = build()
    steps = walk(attn, *args, mistakes="forgot_rowsum")
    failing = [s for s in steps if s.passed is False]
    # In tape order the softmax input's step is where the first failing check sits.
    assert failing[0].name == "scaled_scores"
    assert "FAIL" in str(failing[0])


def test_walk_rejects_other_things():
    with pytest.raises(TypeError, match="report"):
        walk(42)


def test_float32_routes_stay_float32_even_with_a_mistake():
    attn, args = build(dtype=np.float32, causal=True)
    for mistakes in (None, "forgot_scale"):
        report = attention_report(attn, *args, mistakes=mistakes)
        for row in report.rows:
            assert row.taped.dtype == np.float32 and row.analytic.dtype == np.float32, row.label


def test_a_taped_float64_input_into_a_float32_layer():
    attn, (query, *_rest) = build(dtype=np.float32)
    x = mt.Tensor(query, requires_grad=True, name="x")
    report = attention_report(attn, x)
    assert report.ok, str(report)
    assert x.grad is None


def test_html_table_cells_are_padded_and_wrap_names_and_formulas_never_numbers():
    """Numbers never run into the next column ('0.000e+00ok'); a narrow column wraps the text, never a number."""
    attn, args = build()
    html = attention_report(attn, *args)._repr_html_()
    cells = re.findall(r"<t([dh]) style='([^']*)'", html)
    assert cells and all("padding:2px 6px" in style and "white-space:normal" in style for _, style in cells)
    columns = attention_report(attn, *args)._columns()
    header = re.findall(r"<th style='([^']*)'>([^<]*)</th>", html)
    assert [title for _, title in header] == [title for title, _, _ in columns]
    for (style, title), (_, _, align) in zip(header, columns, strict=True):
        assert ("overflow-wrap:anywhere" in style) == (align != ">"), title
    assert "min-width:8em" in dict((title, style) for style, title in header)["formula"]
    assert "table-layout:auto" in html and "overflow-x:auto" in html
