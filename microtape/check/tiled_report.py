"""The tiled report: FlashAttention-2, tile by tile, against the standard chain.

This module lets you watch the tiled kernel work and check every number it
keeps on the way::

    >>> import numpy as np, microtape as mt
    >>> attn = mt.nn.MultiHeadAttention(8, 2, causal=True, block_size=2, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((1, 6, 8))
    >>> report = mt.check.tiled_report(attn, x)
    >>> report.ok
    True
    >>> mt.check.tiled_report(attn, x, mistakes={"forgot_rescale"}).first_failure
    'acc[q1,k1]'

The same inputs run through the standard chain (every score-sized step on
its tape) and through the tiled kernel of :mod:`microtape.nn.tiled`, walked
one tile at a time. After each key block ``j`` of query block ``i`` the
kernel holds a running max ``m``, a running sum ``l`` and an accumulator
``acc``; the standard chain's masked scores ``S``, dropout mask and values
``V`` say what they must be — the softmax statistics *of the keys seen so far*::

    m   = max_k S[:, :j]        l = Σ_k exp(S[:, :j] − m)        acc = Σ_k exp(S[:, :j] − m) keep V

Then the outputs ``O`` and ``L = m + log l``; then the backward: ``D =
rowsum(dO ⊙ O)`` against the chain's ``rowsum(dP ⊙ P)``, and what each tile
adds to ``dV``, ``dK`` and ``dQ`` against the same block of the chain's
gradients (``P̃ᵀ dO``, ``dSᵀ Q / √d``, ``dS K / √d``); then the totals, and
every parameter and input gradient of the tiled layer against the standard
layer's. One row each, in the order the kernel computes them, judged like
the attention report's rows (:mod:`microtape.check.rows`).

``mistakes={"forgot_rescale"}`` swaps one of the kernel's update rules for a
classic wrong one (:data:`TILED_MISTAKES`): the report then fails at the
first tile where it matters. The report runs on copies of the layer
(``attn.twin``), so ``attn`` itself is left exactly as it was.
"""

import numbers
from dataclasses import dataclass

import numpy as np

from ..nn import derivation, tiled
from ..nn.attention import MultiHeadAttention
from .options import ReportOptions
from .rows import ConfiguredReport, inherits_from, make_row, upstream_gradient

__all__ = ["TiledReport", "TiledMistake", "TILED_MISTAKES", "tiled_report", "MAX_TILES"]

#: The most tiles a report walks (every tile makes six rows).
MAX_TILES = 256


@dataclass(frozen=True)
class TiledMistake:
    """A wrong update rule of the tiled kernel: which quantity it spoils first, and why it is wrong."""

    name: str
    quantity: str  # the row quantity that disagrees first: "acc", "l", "L" or "D"
    formula: str  # the wrong rule, as text
    why: str
    links: dict  # {link name: wrong function} (see microtape.nn.tiled.LINKS)
    key_blocks: int = 1  # key blocks a query block needs before the mistake can show


TILED_MISTAKES = {
    mistake.name: mistake
    for mistake in (
        TiledMistake(
            "forgot_rescale",
            "acc",
            "acc = acc_prev + (exp(S_ij - m) * keep) V_j   (exp(m_prev - m) forgotten)",
            "when a later key block raises the row max from m_prev to m, everything accumulated so far was "
            "weighted by exp(S - m_prev); it must be multiplied by exp(m_prev - m) to use the new max.",
            {"accumulate": lambda acc, alpha, used, v_tile: acc + used @ v_tile},
            key_blocks=2,
        ),
        TiledMistake(
            "forgot_rescale_sum",
            "l",
            "l = l_prev + rowsum(exp(S_ij - m))   (exp(m_prev - m) forgotten)",
            "the running sum is a sum of exp(S - m): when m grows, the old terms shrink by exp(m_prev - m).",
            {"sum": lambda l, alpha, weights: l + weights.sum(axis=-1)},
            key_blocks=2,
        ),
        TiledMistake(
            "lse_without_max",
            "L",
            "L = log l   (the max m forgotten)",
            "l sums exp(S - m), not exp(S): the log-sum-exp of the row is m + log l. The backward's "
            "P = exp(S - L) is then wrong by a factor exp(m) per row.",
            {"logsumexp": lambda m, l: np.log(l)},
        ),
        TiledMistake(
            "forgot_delta",
            "D",
            "D = 0, so dS = P * dP   (the rowsum term forgotten)",
            "softmax couples a row: dS = P * (dP - rowsum(dP * P)), and rowsum(dP * P) = rowsum(dO * O) = D.",
            {"delta": lambda grad_out, out: np.zeros(out.shape[:-1], out.dtype)},
        ),
    )
}

#: (text, LaTeX) of each quantity's rule, as the kernel computes it.
FORMULAS = {
    "m": ("m = max(m_prev, rowmax(S_ij))", r"m = \max(m_{\mathrm{prev}}, \mathrm{rowmax}\,S_{ij})"),
    "l": (
        "l = exp(m_prev - m) l_prev + rowsum(exp(S_ij - m))",
        r"l = e^{m_{\mathrm{prev}} - m}\, l_{\mathrm{prev}} + \mathrm{rowsum}\, e^{S_{ij} - m}",
    ),
    "acc": (
        "acc = exp(m_prev - m) acc_prev + (exp(S_ij - m) * keep) V_j",
        r"\mathrm{acc} = e^{m_{\mathrm{prev}} - m} \mathrm{acc}_{\mathrm{prev}} + (e^{S_{ij} - m} \odot k) V_j",
    ),
    "O": ("O = acc / l", r"O = \mathrm{acc} / l"),
    "L": ("L = m + log l", r"L = m + \log l"),
    "D": ("D = rowsum(dO * O)   vs   rowsum(dP * P)", r"D = \mathrm{rowsum}(dO \odot O)"),
    "dV": ("dV_j += (P * keep)^T dO_i,  P = exp(S_ij - L_i)", r"dV_j \mathrel{+}= (P \odot k)^{\top} dO_i"),
    "dK": ("dK_j += dS^T Q_i / sqrt(d),  dS = P * (dP - D_i)", r"dK_j \mathrel{+}= dS^{\top} Q_i / \sqrt d"),
    "dQ": ("dQ_i += dS K_j / sqrt(d)", r"dQ_i \mathrel{+}= dS\, K_j / \sqrt d"),
    "dV total": ("dV = sum of the tiles' parts   vs   P~^T dC", r"dV = \sum_i (P \odot k)^{\top} dO_i"),
    "dK total": ("dK = sum of the tiles' parts   vs   dS^T Q / sqrt(d)", r"dK = \sum_i dS^{\top} Q_i / \sqrt d"),
    "dQ total": ("dQ = sum of the tiles' parts   vs   dS K / sqrt(d)", r"dQ = \sum_j dS\, K_j / \sqrt d"),
}

QUANTITIES = {
    "m": "running row max",
    "l": "running sum",
    "acc": "running output",
    "O": "output O",
    "L": "log-sum-exp L",
    "D": "row dot D",
    "dV": "tile's part of dV",
    "dK": "tile's part of dK",
    "dQ": "tile's part of dQ",
    "dV total": "V_heads",
    "dK total": "K_heads",
    "dQ total": "Q_heads",
}

#: The totals: what the tiles' parts add up to, and the tape node of the chain they are checked against.
TOTALS = [("dV", "V_heads"), ("dK", "K_heads"), ("dQ", "Q_heads")]


class TiledReport(ConfiguredReport):
    """The tile-by-tile check of one tiled forward and backward (see :func:`tiled_report`).

    Besides the :class:`~microtape.check.rows.GradientReport` API it keeps
    ``schedule`` (the :class:`~microtape.nn.tiled.TileSchedule` walked),
    ``config``, ``mistakes``, ``grad_output`` and the two layers it ran:
    ``tiled`` and ``standard`` (copies of the layer checked).
    """

    title = "Tiled attention check: FlashAttention-2, tile by tile, against the standard chain"

    def __init__(self, rows, *, schedule, tiled, standard, **kwargs):
        super().__init__(rows, **kwargs)
        self.schedule = schedule
        self.tiled = tiled
        self.standard = standard

    @property
    def tolerance_text(self):
        return f"a row passes when max|tiled - standard| <= {self.atol:g} + {self.rtol:g} * max|standard|"

    def _columns(self):
        names = {"gradient": "step", "tape node": "quantity", "|analytic|": "|tiled|", "|taped|": "|standard|"}
        return [(names.get(header, header), getter, align) for header, getter, align in super()._columns()]

    def to_dict(self):
        data = super().to_dict()
        data["schedule"] = str(self.schedule)
        return data


# ---------------------------------------------------------------- arguments


def _parse(attn, block_size, mistakes, tolerance, seed):
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"tiled_report(attn, ...): expected a MultiHeadAttention, got {type(attn).__name__}")
    if block_size is None:
        block_size = attn.block_size
        if block_size is None:
            raise ValueError(
                "tiled_report: attn runs the standard chain (block_size=None); give block_size=16 "
                "or make the layer with MultiHeadAttention(..., block_size=16)"
            )
    elif isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or block_size <= 0:
        raise ValueError(f"tiled_report(block_size={block_size!r}): expected a positive integer")
    options = ReportOptions.parse("tiled_report", attn.dtype, tolerance=tolerance, seed=seed, mistakes=mistakes)
    unknown = [name for name in options.mistakes if name not in TILED_MISTAKES]
    if unknown:
        raise ValueError(
            f"tiled_report(mistakes=...): unknown mistake {unknown[0]!r}; known: {', '.join(TILED_MISTAKES)}"
        )
    return int(block_size), options.mistakes, options.tolerance


def _check_schedule(schedule, chosen):
    tiles = len(schedule.forward_order())
    if tiles > MAX_TILES:
        raise ValueError(
            f"tiled_report: {schedule} — more than {MAX_TILES} tiles to walk (six rows each); use a larger "
            "block_size or shorter sequences"
        )
    longest = max(len(schedule.row(a)) for a in range(len(schedule.query_blocks)))
    for name in chosen:
        if longest < TILED_MISTAKES[name].key_blocks:
            raise ValueError(
                f"mistake {name!r} changes nothing when every query block sees one key block ({schedule}): "
                "use a block_size smaller than the key length (on the command line: --block-size 2)"
            )


# ---------------------------------------------------------------- the walk


def _comparable(value, reference):
    """Both arrays, with equal infinities (a row that has seen only -inf scores) set to 0 in both."""
    same = np.isinf(reference) & (value == reference)
    return np.where(same, 0.0, value), np.where(same, 0.0, reference)


def _prefix_softmax(scores, keep, values):
    """The softmax statistics of the keys seen so far, the textbook way: ``(m, l, acc)``."""
    m = scores.max(axis=-1)
    shift = np.where(np.isneginf(m), 0.0, m)
    weights = np.exp(scores - shift[..., None])
    used = weights if keep is None else weights * keep
    return m, weights.sum(axis=-1), used @ values


def tiled_report(
    attn, query, key=None, value=None, mask=None, grad_output=None,
    *, block_size=None, tolerance=None, seed=0, mistakes=None,
):  # fmt: skip
    """Walk the tiled kernel tile by tile and check every running quantity against the standard chain.

    ``query``, ``key``, ``value`` and ``mask`` are what
    :meth:`MultiHeadAttention.forward` takes. ``block_size`` defaults to the
    layer's. ``grad_output`` is the upstream gradient (None: standard normal
    from ``seed``). ``tolerance`` defaults to 1e-10 (float64) or 1e-4
    (float32). ``mistakes``: names from :data:`TILED_MISTAKES`, swapped into
    the walk (not into the layer). Returns a :class:`TiledReport`; ``attn``
    is not changed (the report runs on ``attn.twin(...)`` copies).
    """
    block_size, chosen, tolerance = _parse(attn, block_size, mistakes, tolerance, seed)
    tiled_layer, standard = attn.twin(block_size), attn.twin(None)
    call = standard.check_call(query, key, value, mask)  # the reference materialises the scores
    tiled_layer.check_call(query, key, value, mask)
    schedule = tiled.TileSchedule(call.q_len, call.k_len, block_size, attn.causal)
    _check_schedule(schedule, chosen)
    output_shape = (call.batch, call.q_len, attn.embed)
    upstream, upstream_text = upstream_gradient(grad_output, output_shape, seed, attn.dtype, "tiled_report")

    for layer in (standard, tiled_layer):
        layer(query, key, value, mask)
    reference, grads = standard.named_gradients(upstream), tiled_layer.named_gradients(upstream)
    weights_node = standard.tape.variable("weights")
    scores, weights = weights_node.inputs[0].data, weights_node.data  # the chain's masked scores, and P
    chain = {name: standard.tape.variable(name).data for name in ("Q_heads", "K_heads", "V_heads", "context")}
    keep = standard.dropout_keep
    used = weights if keep is None else weights * keep
    node = tiled_layer.tape.find("context").output
    q, k, v = (x.data for x in node.inputs)
    kernel_mask, dropout = node.params.get("mask"), node.params.get("dropout")
    links = {name: fn for mistake in chosen for name, fn in TILED_MISTAKES[mistake].links.items()}
    link = {**tiled.LINKS, **links}

    rows, computed_from = [], {}

    def add_row(quantity, label, value, expected, sources=()):
        formula, latex = FORMULAS[quantity]
        note = ""
        for name in chosen:
            if TILED_MISTAKES[name].quantity == quantity:
                formula, note = TILED_MISTAKES[name].formula, f"injected mistake {name!r}: {TILED_MISTAKES[name].why}"
        value, expected = _comparable(np.asarray(value), np.asarray(expected))
        row = make_row(label, QUANTITIES[quantity], formula, latex, value, expected,
                       atol=tolerance, rtol=tolerance, note=note)  # fmt: skip
        rows.append(row)
        computed_from[label] = tuple(sources)

    # Forward: after each key block, the running statistics against those of the keys seen so far.
    out = np.empty((q.shape[0], q.shape[1], v.shape[-1]), dtype=node.data.dtype)
    lse = np.empty(q.shape[:2], dtype=node.data.dtype)
    finals = []
    for a, block in enumerate(schedule.query_blocks):
        previous = ()
        for state in tiled.online_softmax(q, k, v, schedule, a, kernel_mask, dropout, links):
            seen = slice(0, state.tile.cols.stop)
            expected = _prefix_softmax(
                scores[:, block, seen], None if keep is None else keep[:, block, seen], chain["V_heads"][:, seen]
            )
            tag = f"[q{a},k{state.tile.k_block}]"
            add_row("m", "m" + tag, state.m, expected[0], ["m" + t for t in previous])
            add_row("l", "l" + tag, state.l, expected[1], ["m" + tag] + ["l" + t for t in previous])
            add_row("acc", "acc" + tag, state.acc, expected[2], ["m" + tag] + ["acc" + t for t in previous])
            previous = (tag,)
        out[:, block] = state.acc / state.l[..., None]
        lse[:, block] = link["logsumexp"](state.m, state.l)
        finals += previous
    peak = scores.max(axis=-1)
    add_row("O", "O", out, chain["context"], [x + t for t in finals for x in ("acc", "l")])
    add_row("L", "L", lse, peak + np.log(np.exp(scores - peak[..., None]).sum(axis=-1)),
            [x + t for t in finals for x in ("m", "l")])  # fmt: skip

    # Backward: D, then each tile's parts of dV, dK, dQ against the same block of the chain's gradients.
    grad_out, grad_scores = grads["context"], reference["scaled_scores"]
    row_delta = link["delta"](grad_out, out)
    add_row("D", "D", row_delta, np.einsum("...k,...k->...", reference["weights"], weights), ["O"])
    scale = derivation.score_scale(q.shape[-1])
    totals = {"dQ": np.zeros_like(q), "dK": np.zeros_like(k), "dV": np.zeros_like(v)}
    parts = {"dQ": [], "dK": [], "dV": []}
    for step in tiled.backward_steps(grad_out, q, k, v, lse, row_delta, schedule, kernel_mask, dropout, links):
        r, c = step.tile.rows, step.tile.cols
        tag = f"[q{step.tile.q_block},k{step.tile.k_block}]"
        expected = {
            "dV": np.swapaxes(used[:, r, c], -1, -2) @ reference["context"][:, r],
            "dK": np.swapaxes(grad_scores[:, r, c], -1, -2) @ chain["Q_heads"][:, r] * scale,
            "dQ": grad_scores[:, r, c] @ chain["K_heads"][:, c] * scale,
        }
        for quantity, part, where in (("dV", step.grad_v, c), ("dK", step.grad_k, c), ("dQ", step.grad_q, r)):
            add_row(quantity, quantity + tag, part, expected[quantity], ["L"] if quantity == "dV" else ["L", "D"])
            totals[quantity][:, where] += part
            parts[quantity].append(quantity + tag)
    for quantity, name in TOTALS:
        add_row(f"{quantity} total", quantity, totals[quantity], reference[name], parts[quantity])

    # The layer itself (its own tape, not the walk): every parameter and input gradient.
    for label, name, formula, latex, _ in derivation.parameter_rows() + derivation.input_rows(call.self_attention):
        rows.append(make_row(label, name, formula, latex, grads[name], reference[name], atol=tolerance, rtol=tolerance))

    config = {
        "attention": "self" if call.self_attention else "cross",
        "batch": call.batch,
        "q_len": call.q_len,
        "k_len": call.k_len,
        "embed": attn.embed,
        "heads": attn.num_heads,
        "block_size": block_size,
        "tiles_computed": len(schedule.forward_order()),
        "tiles_skipped": len(schedule.skipped()),
        "causal": attn.causal,
        "dropout": attn.dropout if dropout is not None else 0.0,
        "dtype": np.dtype(attn.dtype).name,
        "tolerance": tolerance,
        "seed": seed,
    }
    details = [
        f"{config['attention']}-attention: B={call.batch}, Tq={call.q_len}, Tk={call.k_len}, E={attn.embed}, "
        f"H={attn.num_heads}; {schedule}; "
        + (f"dropout p={config['dropout']:g} (the same counter-based mask in both)" if dropout else "no dropout")
        + f", {config['dtype']}",
        "standard: the chain's masked scores S, weights P, dropout mask and its tape's gradients; after key "
        "block j: m = max S[:, :j], l = sum exp(S[:, :j] - m), acc = sum exp(S[:, :j] - m) keep V",
        upstream_text,
    ]
    if chosen:
        details.append(
            "TEACHING MODE - mistakes injected into the walk (not the layer): "
            + "; ".join(f"{name} ({TILED_MISTAKES[name].formula})" for name in chosen)
        )
    return TiledReport(
        rows,
        schedule=schedule,
        config=config,
        mistakes=chosen,
        grad_output=upstream,
        tiled=tiled_layer,
        standard=standard,
        atol=tolerance,
        rtol=tolerance,
        details=details,
        inherits=inherits_from(computed_from),
    )
