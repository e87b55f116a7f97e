"""mt.check.layer_report: every layer's hand-derived backward against its tape, row by row.

A checker is worth trusting only if it catches mistakes, at the right
place: for every sublayer of the encoder and the decoder (each norm, the
feed-forward block, each attention, each residual connection) a wrong link
is injected there alone, and the report must first fail at that sublayer's
row — rows before it still agree.
"""

import numpy as np
import pytest

import microtape as mt

RNG = np.random.default_rng(21)
X = RNG.standard_normal((2, 4, 8))
MEMORY = RNG.standard_normal((2, 4, 8))
CAUSAL = mt.nn.masks.causal_mask(4)


def encoder(dropout=0.0):
    return mt.nn.TransformerEncoderLayer(8, 2, 12, dropout=dropout, activation="gelu", seed=1)


def decoder(dropout=0.0):
    return mt.nn.TransformerDecoderLayer(8, 2, 12, dropout=dropout, seed=2)


CALLS = {
    "encoder": lambda layer, **kw: mt.check.layer_report(layer, X, mask=CAUSAL, **kw),
    "decoder": lambda layer, **kw: mt.check.layer_report(layer, X, MEMORY, tgt_mask=CAUSAL, **kw),
}
MAKERS = {"encoder": encoder, "decoder": decoder}


@pytest.mark.parametrize("dropout", [0.0, 0.25])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_every_row_agrees_and_finite_differences_agree(kind, dropout):
    report = CALLS[kind](MAKERS[kind](dropout), finite_differences=True)
    assert report.ok, report
    assert all(row.fd_entries and row.fd_agrees for row in report.rows)
    labels = [row.label for row in report.rows]
    first = ["d_residual3", "dgamma_norm3", "dbeta_norm3"] if kind == "decoder" else ["d_residual2"]
    assert labels[: len(first)] == first  # backward order: the last norm first
    assert labels[-1] == ("d_memory" if kind == "decoder" else "dx")
    assert ("d_ff_dropped" in labels) == (dropout > 0)
    assert "self_attn.dS" in labels and ("multihead_attn.dk" in labels) == (kind == "decoder")


def test_standalone_layers_and_attention():
    norm = mt.nn.LayerNorm(8)
    norm.weight.data[...] = RNG.standard_normal(8)
    report = mt.check.layer_report(norm, X, finite_differences=2)
    assert report.ok and [row.label for row in report.rows] == ["d_normalized", "dgamma", "dbeta", "dx"]
    assert report.inherits["d_normalized"] == ("dx",)
    ff = mt.nn.FeedForward(8, 16, "relu", dropout=0.5, seed=3)
    report = mt.check.layer_report(ff, X, finite_differences=True)
    assert report.ok and report["d_hidden_dropped"].fd_agrees
    attention = mt.check.layer_report(mt.nn.MultiHeadAttention(8, 2, seed=0), X)
    assert isinstance(attention, mt.check.AttentionReport) and attention.ok


# (kind, mistake, the row where it must first show)
PLACED_MISTAKES = [
    ("encoder", "norm2.layernorm_forgot_mean", "d_residual2"),
    ("encoder", "ff.activation_not_differentiated", "d_pre_activation"),
    ("encoder", "residual2.residual_skip_forgotten", "d_norm1"),
    ("encoder", "norm1.layernorm_forgot_variance", "d_residual1"),
    ("encoder", "self_attn.forgot_scale", "self_attn.dQ"),
    ("encoder", "self_attn.causal_mask_leaked", "self_attn.dS"),
    ("encoder", "residual1.residual_skip_forgotten", "dx"),
    ("decoder", "norm3.layernorm_forgot_variance", "d_residual3"),
    ("decoder", "ff.activation_not_differentiated", "d_pre_activation"),
    ("decoder", "residual3.residual_skip_forgotten", "d_norm2"),
    ("decoder", "norm2.layernorm_forgot_mean", "d_residual2"),
    ("decoder", "multihead_attn.forgot_rowsum", "multihead_attn.dS"),
    ("decoder", "multihead_attn.K_not_transposed", "multihead_attn.dK"),
    ("decoder", "residual2.residual_skip_forgotten", "d_norm1"),
    ("decoder", "norm1.layernorm_forgot_mean", "d_residual1"),
    ("decoder", "self_attn.forgot_scale", "self_attn.dQ"),
    ("decoder", "residual1.residual_skip_forgotten", "dx"),
]


@pytest.mark.parametrize("kind, mistake, row", PLACED_MISTAKES, ids=[m for _, m, _ in PLACED_MISTAKES])
def test_a_mistake_in_each_sublayer_is_caught_there(kind, mistake, row):
    report = CALLS[kind](MAKERS[kind](), mistakes={mistake})
    assert not report.ok and report.first_failure == row
    labels = [r.label for r in report.rows]
    assert all(r.passed for r in report.rows[: labels.index(row)])  # everything before it agrees
    assert report[row].note.startswith("injected mistake")
    # Only the rows the mistake changes (forgot_scale changes dQ and dK) and what is computed from them fail.
    changed = [r.label for r in report.rows if r.note.startswith("injected mistake")]
    downstream = {label for c in changed for label in (c, *report.inherits.get(c, ()))}
    assert {r.label for r in report.failures} <= downstream
    assert mistake.split(".")[1] in "".join(report.details)


DROPOUT_MISTAKES = [
    ("residual2.residual_dropout_not_applied", "d_ff"),
    ("residual1.residual_dropout_not_applied", "d_self_attn"),
    ("ff.ff_dropout_not_applied", "d_hidden"),
    ("self_attn.dropout_mask_not_applied", "self_attn.dP"),
]


@pytest.mark.parametrize("mistake, row", DROPOUT_MISTAKES, ids=[m for m, _ in DROPOUT_MISTAKES])
def test_dropout_mistakes_are_caught_with_dropout_and_refused_without(mistake, row):
    report = CALLS["encoder"](encoder(dropout=0.3), mistakes=mistake)
    assert report.first_failure == row
    with pytest.raises(ValueError, match="changes nothing without dropout"):
        CALLS["encoder"](encoder(), mistakes=mistake)


def test_unqualified_mistake_goes_everywhere_of_its_kind():
    report = CALLS["decoder"](decoder(), mistakes="layernorm_forgot_mean")
    assert report.mistakes == (
        "norm3.layernorm_forgot_mean",
        "norm2.layernorm_forgot_mean",
        "norm1.layernorm_forgot_mean",
    )
    assert report.first_failure == "d_residual3"
    assert mt.check.layer_report(mt.nn.LayerNorm(8), X, mistakes="layernorm_forgot_variance").first_failure == "dx"
    ff = mt.nn.FeedForward(8, 16, seed=4)
    assert mt.check.layer_report(ff, X, mistakes="activation_not_differentiated").first_failure == "d_pre_activation"


@pytest.mark.parametrize(
    "mistakes, words",
    [
        ("no_such_mistake", "unknown mistake 'no_such_mistake'"),
        ("norm9.layernorm_forgot_mean", "has no part 'norm9'"),
        ("ff.layernorm_forgot_mean", "'ff' is a feedforward"),
        ("self_attn.causal_mask_leaked", "without a mask on self_attn"),
    ],
)
def test_mistakes_that_cannot_apply_are_refused_before_anything_runs(mistakes, words):
    layer = encoder()
    with pytest.raises(ValueError, match=words):
        mt.check.layer_report(layer, X, mistakes=mistakes)
    assert layer.tape is None  # refused before the forward
    with pytest.raises(ValueError, match="a mistake of a layernorm"):
        mt.check.layer_report(mt.nn.FeedForward(8, 8), X, mistakes="layernorm_forgot_mean")


def test_the_report_changes_no_gradient_and_checks_its_arguments():
    layer = decoder()
    report = CALLS["decoder"](layer, grad_output=np.ones(X.shape))
    assert report.ok and all(p.grad is None for p in layer.parameters())
    assert report.config["upstream"] == "given" and report.config["shapes"]["memory"] == [2, 4, 8]
    for call, error, words in [
        (lambda: mt.check.layer_report(mt.nn.Linear(2, 2), X), TypeError, "hand-derived backward"),
        (lambda: mt.check.layer_report(layer, X), TypeError, "does not take these arguments"),
        (lambda: mt.check.layer_report(layer, X, MEMORY, grad_output=np.ones(3)), ValueError, "grad_output"),
        (lambda: mt.check.layer_report(layer, X, MEMORY, tolerance=2), ValueError, "tolerance=2"),
        (lambda: mt.check.layer_report(layer, X, MEMORY, finite_differences=-1), ValueError, "finite_differences"),
        (lambda: mt.check.layer_report(layer, X[:, :, :4], MEMORY), ValueError, "embed=8"),
    ]:
        with pytest.raises(error, match=words):
            call()


def test_renderings_name_the_first_failure():
    report = CALLS["encoder"](encoder(), mistakes="norm1.layernorm_forgot_mean")
    text = str(report)
    assert "first failure: d_residual1 (residual1)" in text and "<-- first failure" in text
    assert "TEACHING MODE" in text
    assert "background:#f8d7da" in report._repr_html_()
    data = report.to_dict()
    assert data["first_failure"] == "d_residual1" and data["mistakes"] == ["norm1.layernorm_forgot_mean"]


def test_float32_layer_report_uses_float32_tolerance():
    layer = mt.nn.TransformerEncoderLayer(8, 2, 12, seed=5, dtype=np.float32)
    report = mt.check.layer_report(layer, X)
    assert report.ok and report.atol == 1e-4


def test_walk_follows_a_layer_report_step_by_step():
    """walk(report) goes through the layer's backward pass; every row hangs on the step completing it."""
    report = CALLS["decoder"](decoder(dropout=0.2))
    steps = mt.check.walk(report)
    assert [step.index for step in steps] == sorted((step.index for step in steps), reverse=True)
    attached = [row.label for step in steps for row in step.rows]
    assert sorted(attached) == sorted(row.label for row in report.rows)
    by_label = {row.label: step for step in steps for row in step.rows}
    assert by_label["d_residual3"].index > by_label["d_norm2"].index > by_label["self_attn.dS"].index
