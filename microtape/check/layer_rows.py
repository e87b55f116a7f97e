"""The rows of a layer report: which gradient, its formula, and what it is computed from.

This module describes, for each kind of layer with a hand-derived backward,
the rows :func:`microtape.check.layer_report` lines up, in backward order::

    LayerNorm          d_normalized, dgamma, dbeta, dx
    FeedForward        dW_linear2, db_linear2, (d_hidden_dropped), d_hidden, d_pre_activation,
                       dW_linear1, db_linear1, dx
    encoder layer      block by block from the last:  d_residual2 (through norm2), dgamma_norm2, dbeta_norm2,
                       d_ff, the feed-forward rows, d_norm1 (the residual sum), d_residual1 (through norm1), …,
                       d_self_attn, the attention rows (self_attn.dC, self_attn.dS, …), dx
    decoder layer      the same with three blocks: …, d_multihead_attn, multihead_attn.dC, …, d_memory

A row's label is the gradient's name as a student writes it (``d_<tape
node>`` for a step, ``dW_``/``db_``/``dgamma_``/``dbeta_`` for parameters);
its name is the key of the layer's ``named_gradients`` (a tape node or a
parameter). ``sources`` are the rows it is computed from directly — an error
there is inherited here (the report's ``inherits``).
"""

import re
from typing import Any, NamedTuple

from ..nn.attention import derivation

__all__ = ["RowSpec", "layernorm_rows", "feedforward_rows", "post_norm_rows", "computed_from"]


class RowSpec(NamedTuple):
    """One row to check: its label, the gradient's key, its formula (text, LaTeX), the rows it is computed from."""

    label: str
    name: str
    formula: str
    latex: str
    sources: tuple = ()


def layernorm_rows() -> Any:
    """The rows of a LayerNorm on its own (``dy`` is the gradient of its output)."""
    return [
        RowSpec("d_normalized", "normalized", "d_normalized = dy * gamma", r"d\hat x = dy \odot \gamma"),
        RowSpec("dgamma", "weight", "dgamma = sum_rows dy * xhat", r"d\gamma = \sum_{\mathrm{rows}} dy \odot \hat x"),
        RowSpec("dbeta", "bias", "dbeta = sum_rows dy", r"d\beta = \sum_{\mathrm{rows}} dy"),
        RowSpec(
            "dx",
            "x",
            "dx = (g - mean(g) - xhat * mean(g * xhat)) / std,  g = d_normalized",
            r"dx = (g - \overline{g} - \hat x\, \overline{g \hat x}) / \sigma",
            ("d_normalized",),
        ),
    ]


def _norm_rows(block: Any, incoming: Any, source: Any) -> Any:
    """A post-norm block's LayerNorm rows: the gradient of its input (the residual sum) and of γ, β."""
    k = block.norm[len("norm") :]
    sources = (source,) if source else ()
    through = f"(g - mean(g) - xhat{k} mean(g xhat{k})) / std{k},  g = {incoming} * gamma{k}"
    latex = rf"dr_{k} = (g - \overline{{g}} - \hat x_{k}\,\overline{{g \hat x_{k}}}) / \sigma_{k},\ "
    latex += rf"g = \gamma_{k} \odot dh_{k}"
    return [
        RowSpec(f"d_{block.residual}", block.residual, f"d_{block.residual} = {through}", latex, sources),
        RowSpec(
            f"dgamma_{block.norm}",
            f"{block.norm}.weight",
            f"dgamma{k} = sum_rows {incoming} * xhat{k}",
            rf"d\gamma_{k} = \sum dh_{k} \odot \hat x_{k}",
            sources,
        ),
        RowSpec(
            f"dbeta_{block.norm}",
            f"{block.norm}.bias",
            f"dbeta{k} = sum_rows {incoming}",
            rf"d\beta_{k} = \sum dh_{k}",
            sources,
        ),
    ]


def feedforward_rows(
    activation: Any, dropout: Any, incoming: str = "dy", source: Any = None, input_name: str = "x"
) -> Any:
    """The feed-forward's rows without its input row (``incoming``: the gradient of its output)."""
    sources = (source,) if source else ()
    slope = "[pre_activation > 0]" if activation == "relu" else "gelu'(pre_activation)"
    rows = [
        RowSpec(
            "dW_linear2",
            "linear2.weight",
            f"dW2 = sum_rows {incoming}^T hidden" + ("~" if dropout else ""),
            r"dW_2 = \sum d_{\mathrm{out}}^{\top} a",
            sources,
        ),
        RowSpec("db_linear2", "linear2.bias", f"db2 = sum_rows {incoming}", r"db_2 = \sum d_{\mathrm{out}}", sources),
    ]
    if dropout:
        rows += [
            RowSpec(
                "d_hidden_dropped",
                "hidden_dropped",
                f"d_hidden~ = {incoming} W2",
                r"d\tilde a = d_{\mathrm{out}} W_2",
                sources,
            ),
            RowSpec(
                "d_hidden",
                "hidden",
                "d_hidden = d_hidden~ * keep   (keep = 1/(1-p) kept, 0 dropped)",
                r"da = d\tilde a \odot \mathrm{keep}",
                ("d_hidden_dropped",),
            ),
        ]
    else:
        rows.append(RowSpec("d_hidden", "hidden", f"d_hidden = {incoming} W2", r"da = d_{\mathrm{out}} W_2", sources))
    rows += [
        RowSpec(
            "d_pre_activation",
            "pre_activation",
            f"d_pre_activation = d_hidden * {slope}",
            r"dz = da \odot \mathrm{act}'(z)",
            ("d_hidden",),
        ),
        RowSpec(
            "dW_linear1",
            "linear1.weight",
            f"dW1 = sum_rows d_pre_activation^T {input_name}",
            r"dW_1 = \sum dz^{\top} x",
            ("d_pre_activation",),
        ),
        RowSpec(
            "db_linear1", "linear1.bias", "db1 = sum_rows d_pre_activation", r"db_1 = \sum dz", ("d_pre_activation",)
        ),
    ]
    return rows


def feedforward_layer_rows(activation: Any, dropout: Any) -> Any:
    """The rows of a FeedForward on its own."""
    input_row = RowSpec("dx", "x", "dx = d_pre_activation W1", r"dx = dz\, W_1", ("d_pre_activation",))
    return feedforward_rows(activation, dropout) + [input_row]


_DY = re.compile(r"\bdy\b")


def attention_rows(sublayer: Any, incoming: Any, self_attention: Any, dropout: Any) -> Any:
    """An attention sublayer's rows (attention_report's), prefixed ``<sublayer>.``; ``dy`` becomes ``incoming``."""
    rows = []
    for label, name, formula, latex, sources in derivation.attention_rows(self_attention, dropout):
        # A row computed from the attention's upstream gradient alone depends on d_<sublayer>.
        sources = tuple(f"{sublayer}.{s}" for s in sources) or (f"d_{sublayer}",)
        rows.append(RowSpec(f"{sublayer}.{label}", f"{sublayer}.{name}", _DY.sub(incoming, formula), latex, sources))
    return rows


def post_norm_rows(layer: Any, dropout_blocks: Any, attention_dropout: Any) -> Any:
    """The rows of a post-norm Transformer layer, block by block from the last.

    ``dropout_blocks``: the block sublayers whose residual dropout ran;
    ``attention_dropout``: the attention sublayers whose weights dropout ran.
    """
    rows = []
    blocks = layer.blocks
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        source = None if index == len(blocks) - 1 else f"d_{block.norm}"
        rows += _norm_rows(block, source or "dy", source)
        branch = f"d_{block.residual}"
        sub = block.sublayer
        if sub in dropout_blocks:
            rows.append(
                RowSpec(f"d_{sub}_dropped", f"{sub}_dropped", f"d_{sub}~ = {branch}", r"d\tilde s = dr", (branch,))
            )
            rows.append(
                RowSpec(
                    f"d_{sub}",
                    sub,
                    f"d_{sub} = d_{sub}~ * keep",
                    r"ds = d\tilde s \odot \mathrm{keep}",
                    (f"d_{sub}_dropped",),
                )
            )
        else:
            rows.append(RowSpec(f"d_{sub}", sub, f"d_{sub} = {branch}", r"ds = dr", (branch,)))
        input_label = "dx" if block.input == "x" else f"d_{block.input}"
        if sub == "ff":
            rows += feedforward_rows(layer.activation, "ff" in dropout_blocks, "d_ff", "d_ff", block.input)
            sent = "d_pre_activation W1"
            sent_label = "d_pre_activation"
        else:
            self_attention = sub == "self_attn"
            rows += attention_rows(sub, f"d_{sub}", self_attention, sub in attention_dropout)
            sent_label = f"{sub}.dx" if self_attention else f"{sub}.dq"
            sent = sent_label
        rows.append(
            RowSpec(
                input_label,
                block.input,
                f"{input_label} = {branch} + {sent}   (residual: the skip plus what {sub} sends back)",
                r"dh = dr + dh_{\mathrm{sublayer}}",
                (branch, sent_label),
            )
        )
    if "memory" in layer.input_roles:
        rows.append(
            RowSpec(
                "d_memory",
                "memory",
                "d_memory = multihead_attn.dk + multihead_attn.dv   (memory is the key and the value)",
                r"dm = dk + dv",
                ("multihead_attn.dk", "multihead_attn.dv"),
            )
        )
    return rows


def computed_from(rows: Any) -> Any:
    """``{label: sources}`` for the report's ``inherits`` (rows without sources are left out)."""
    return {row.label: tuple(s for s in row.sources if s) for row in rows if row.sources}
