"""The tiled report's walk: every running quantity of the tiled kernel, tile by tile, against the standard chain.

This module lets :func:`microtape.check.tiled_report` line up, as report rows:

* forward, after each key block ``j`` of each query block: the running max
  ``m``, sum ``l`` and output ``acc`` against those of the keys seen so far
  (computed the textbook way from the chain's masked scores), then ``O`` and
  ``L``;
* backward: ``D``, each tile's parts of ``dV``, ``dK``, ``dQ`` against the
  same block of the chain's gradients, and their totals.

A :class:`TileWalk` collects the rows and what each is computed from.
"""

from typing import Any

import numpy as np

from ..nn.attention import tiled
from ..ops import attention_links as attention_links
from .rows import make_row

__all__ = ["TileWalk", "FORMULAS", "QUANTITIES", "TOTALS"]

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


def _comparable(value: Any, reference: Any) -> Any:
    """Both arrays, with equal infinities (a row that has seen only -inf scores) set to 0 in both."""
    same = np.isinf(reference) & (value == reference)
    return np.where(same, 0.0, value), np.where(same, 0.0, reference)


def _prefix_softmax(scores: Any, keep: Any, values: Any) -> Any:
    """The softmax statistics of the keys seen so far, the textbook way: ``(m, l, acc)``."""
    m = scores.max(axis=-1)
    shift = np.where(np.isneginf(m), 0.0, m)
    weights = np.exp(scores - shift[..., None])
    used = weights if keep is None else weights * keep
    return m, weights.sum(axis=-1), used @ values


class TileWalk:
    """The rows of one walk: ``rows`` (report rows) and ``computed_from`` (label -> the labels it comes from).

    ``standard`` and ``tiled_layer`` have run the same forward; ``reference``
    and ``grads`` are their named gradients for the same upstream gradient.
    ``mistakes`` are the chosen teaching mistakes (``quantity``, ``formula``,
    ``why``, ``links``, by name), swapped into the walk's update rules.
    """

    def __init__(
        self, standard: Any, tiled_layer: Any, reference: Any, grads: Any, mistakes: Any, tolerance: float
    ) -> None:
        self.rows: list[Any]
        self.computed_from: dict[Any, Any]
        self.rows, self.computed_from = [], {}
        self.mistakes, self.tolerance = mistakes, tolerance
        self.reference, self.grads = reference, grads
        weights_node = standard.tape.variable("weights")
        self.scores, self.weights = weights_node.inputs[0].data, weights_node.data  # the chain's masked S, and P
        self.chain = {name: standard.tape.variable(name).data for name in ("Q_heads", "K_heads", "V_heads", "context")}
        self.keep = standard.dropout_keep
        self.used = self.weights if self.keep is None else self.weights * self.keep
        self.node = tiled_layer.tape.find("context").output
        self.q, self.k, self.v = (x.data for x in self.node.inputs)
        self.kernel_mask, self.dropout = self.node.params.get("mask"), self.node.params.get("dropout")
        self.links = {name: fn for mistake in mistakes.values() for name, fn in mistake.links.items()}
        self.link = {**tiled.LINKS, **self.links}

    def add_row(self, quantity: Any, label: str, value: Any, expected: Any, sources: Any = ()) -> None:
        formula, latex = FORMULAS[quantity]
        note = ""
        for name, mistake in self.mistakes.items():
            if mistake.quantity == quantity:
                formula, note = mistake.formula, f"injected mistake {name!r}: {mistake.why}"
        value, expected = _comparable(np.asarray(value), np.asarray(expected))
        row = make_row(label, QUANTITIES[quantity], formula, latex, value, expected,
                       atol=self.tolerance, rtol=self.tolerance, note=note)  # fmt: skip
        self.rows.append(row)
        self.computed_from[label] = tuple(sources)

    def forward(self, schedule: Any) -> Any:
        """After each key block, the running statistics against those of the keys seen so far; then O and L."""
        q, v, keep, scores = self.q, self.v, self.keep, self.scores
        out = np.empty((q.shape[0], q.shape[1], v.shape[-1]), dtype=self.node.data.dtype)
        lse = np.empty(q.shape[:2], dtype=self.node.data.dtype)
        finals: list[Any] = []
        for a, block in enumerate(schedule.query_blocks):
            previous: tuple[str, ...] = ()
            for state in tiled.online_softmax(q, self.k, v, schedule, a, self.kernel_mask, self.dropout, self.links):
                seen = slice(0, state.tile.cols.stop)
                expected = _prefix_softmax(
                    scores[:, block, seen], None if keep is None else keep[:, block, seen],
                    self.chain["V_heads"][:, seen],
                )  # fmt: skip
                tag = f"[q{a},k{state.tile.k_block}]"
                self.add_row("m", "m" + tag, state.m, expected[0], ["m" + t for t in previous])
                self.add_row("l", "l" + tag, state.l, expected[1], ["m" + tag] + ["l" + t for t in previous])
                self.add_row("acc", "acc" + tag, state.acc, expected[2], ["m" + tag] + ["acc" + t for t in previous])
                previous = (tag,)
            out[:, block] = state.acc / state.l[..., None]
            lse[:, block] = self.link["logsumexp"](state.m, state.l)
            finals += previous
        peak = scores.max(axis=-1)
        self.add_row("O", "O", out, self.chain["context"], [x + t for t in finals for x in ("acc", "l")])
        self.add_row("L", "L", lse, peak + np.log(np.exp(scores - peak[..., None]).sum(axis=-1)),
                     [x + t for t in finals for x in ("m", "l")])  # fmt: skip
        return out, lse

    def backward(self, schedule: Any, out: Any, lse: Any) -> None:
        """D, then each tile's parts of dV, dK, dQ against the same block of the chain's gradients; the totals."""
        q, k, v, reference, chain = self.q, self.k, self.v, self.reference, self.chain
        grad_out, grad_scores = self.grads["context"], reference["scaled_scores"]
        row_delta = self.link["delta"](grad_out, out)
        self.add_row("D", "D", row_delta, np.einsum("...k,...k->...", reference["weights"], self.weights), ["O"])
        scale = attention_links.score_scale(q.shape[-1])
        totals = {"dQ": np.zeros_like(q), "dK": np.zeros_like(k), "dV": np.zeros_like(v)}
        parts: dict[str, list[Any]] = {"dQ": [], "dK": [], "dV": []}
        steps = tiled.backward_steps(grad_out, q, k, v, lse, row_delta, schedule, self.kernel_mask, self.dropout,
                                     self.links)  # fmt: skip
        for step in steps:
            r, c = step.tile.rows, step.tile.cols
            tag = f"[q{step.tile.q_block},k{step.tile.k_block}]"
            expected = {
                "dV": np.swapaxes(self.used[:, r, c], -1, -2) @ reference["context"][:, r],
                "dK": np.swapaxes(grad_scores[:, r, c], -1, -2) @ chain["Q_heads"][:, r] * scale,
                "dQ": grad_scores[:, r, c] @ chain["K_heads"][:, c] * scale,
            }
            for quantity, part, where in (("dV", step.grad_v, c), ("dK", step.grad_k, c), ("dQ", step.grad_q, r)):
                sources = ["L"] if quantity == "dV" else ["L", "D"]
                self.add_row(quantity, quantity + tag, part, expected[quantity], sources)
                totals[quantity][:, where] += part
                parts[quantity].append(quantity + tag)
        for quantity, name in TOTALS:
            self.add_row(f"{quantity} total", quantity, totals[quantity], reference[name], parts[quantity])
