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
its tape) and through the tiled kernel of :mod:`microtape.nn.attention.tiled`, walked
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

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..nn.attention import derivation, tiled
from ..nn.attention.layer import MultiHeadAttention
from ..nn.checks import positive_int
from .options import ReportOptions, call_config
from .rows import ConfiguredReport, inherits_from, make_row, upstream_gradient
from .tile_walk import TileWalk

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
    links: dict  # {link name: wrong function} (see microtape.nn.attention.tiled.LINKS)
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


class TiledReport(ConfiguredReport):
    """The tile-by-tile check of one tiled forward and backward (see :func:`tiled_report`).

    Besides the :class:`~microtape.check.rows.GradientReport` API it keeps
    ``schedule`` (the :class:`~microtape.nn.attention.tiled.TileSchedule` walked),
    ``config``, ``mistakes``, ``grad_output`` and the two layers it ran:
    ``tiled`` and ``standard`` (copies of the layer checked).
    """

    title = "Tiled attention check: FlashAttention-2, tile by tile, against the standard chain"

    def __init__(self, rows: Any, *, schedule: Any, tiled: Any, standard: Any, **kwargs: Any) -> None:
        super().__init__(rows, **kwargs)
        self.schedule = schedule
        self.tiled = tiled
        self.standard = standard

    @property
    def tolerance_text(self) -> str:
        return f"a row passes when max|tiled - standard| <= {self.atol:g} + {self.rtol:g} * max|standard|"

    def _columns(self) -> Any:
        names = {"gradient": "step", "tape node": "quantity", "|analytic|": "|tiled|", "|taped|": "|standard|"}
        return [(names.get(header, header), getter, align) for header, getter, align in super()._columns()]

    def to_dict(self) -> Any:
        data = super().to_dict()
        data["schedule"] = str(self.schedule)
        return data


# ---------------------------------------------------------------- arguments


def _parse(attn: Any, block_size: Any, mistakes: Any, tolerance: float | None, seed: int) -> Any:
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"tiled_report(attn, ...): expected a MultiHeadAttention, got {type(attn).__name__}")
    if block_size is None:
        block_size = attn.block_size
        if block_size is None:
            raise ValueError(
                "tiled_report: attn runs the standard chain (block_size=None); give block_size=16 "
                "or make the layer with MultiHeadAttention(..., block_size=16)"
            )
    else:
        block_size = positive_int(block_size, f"tiled_report(block_size={block_size!r})")
    options = ReportOptions.parse("tiled_report", attn.dtype, tolerance=tolerance, seed=seed, mistakes=mistakes)
    unknown = [name for name in options.mistakes if name not in TILED_MISTAKES]
    if unknown:
        raise ValueError(
            f"tiled_report(mistakes=...): unknown mistake {unknown[0]!r}; known: {', '.join(TILED_MISTAKES)}"
        )
    return block_size, options.mistakes, options.tolerance


def _check_schedule(schedule: Any, chosen: Any) -> None:
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


# ---------------------------------------------------------------- the report


def tiled_report(
    attn: MultiHeadAttention,
    query: Any,
    key: Any = None,
    value: Any = None,
    mask: Any = None,
    grad_output: Any = None,
    *,
    block_size: int | None = None,
    tolerance: float | None = None,
    seed: int = 0,
    mistakes: Any = None,
) -> TiledReport:
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
    walk = TileWalk(standard, tiled_layer, reference, grads, {name: TILED_MISTAKES[name] for name in chosen}, tolerance)
    walk.backward(schedule, *walk.forward(schedule))
    # The layer itself (its own tape, not the walk): every parameter and input gradient.
    for label, name, formula, latex, _ in derivation.parameter_rows() + derivation.input_rows(call.self_attention):
        walk.rows.append(make_row(label, name, formula, latex, grads[name], reference[name], atol=tolerance,
                                  rtol=tolerance))  # fmt: skip

    config = _config(attn, call, schedule, block_size, walk.dropout, tolerance, seed)
    return TiledReport(
        walk.rows,
        schedule=schedule,
        config=config,
        mistakes=chosen,
        grad_output=upstream,
        tiled=tiled_layer,
        standard=standard,
        atol=tolerance,
        rtol=tolerance,
        details=_details(config, call, schedule, walk.dropout, upstream_text, chosen),
        inherits=inherits_from(walk.computed_from),
    )


def _config(attn: Any, call: Any, schedule: Any, block_size: Any, dropout: Any, tolerance: float, seed: int) -> Any:
    return {
        **call_config(attn, call),
        "block_size": block_size,
        "tiles_computed": len(schedule.forward_order()),
        "tiles_skipped": len(schedule.skipped()),
        "causal": attn.causal,
        "dropout": attn.dropout if dropout is not None else 0.0,
        "dtype": np.dtype(attn.dtype).name,
        "tolerance": tolerance,
        "seed": seed,
    }


def _details(config: Any, call: Any, schedule: Any, dropout: Any, upstream_text: Any, chosen: Any) -> Any:
    details = [
        f"{config['attention']}-attention: B={call.batch}, Tq={call.q_len}, Tk={call.k_len}, E={config['embed']}, "
        f"H={config['heads']}; {schedule}; "
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
    return details
