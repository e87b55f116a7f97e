"""The attention report: the hand-derived chain against the tape, step by step.

This module lets you see *where* along attention's backward pass a
derivative is right or wrong::

    >>> import numpy as np, microtape as mt
    >>> attn = mt.nn.MultiHeadAttention(16, 4, causal=True, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((2, 5, 16))
    >>> report = mt.check.attention_report(attn, x)
    >>> report.ok, report.first_failure
    (True, None)
    >>> print(report)              # the table a teacher projects  # doctest: +SKIP

PyTorch's ``gradcheck`` and JAX's ``check_grads`` compare whole-function
Jacobians: they say *that* a backward is wrong. Here one forward is
differentiated twice — by its tape's reverse pass (each primitive's VJP) and by the
hand-derived formulas of :mod:`microtape.nn.attention.analytic` — and the two are lined
up at every named step, in backward order::

    dC  →  (dP~)  →  dP  →  dV  →  dS  →  dQ  →  dK  →  dW, db of each projection  →  dx

The first row that disagrees is where the mistake is; the rows computed
from it (:data:`INHERITS`: ``dQ`` feeds ``dW_q``, ``db_q`` and the input
gradient, but not ``dV`` or ``dW_v``) inherit it. ``finite_differences=True`` adds a third opinion at a few
sampled entries of every row (:mod:`microtape.check.attention_fd`), and
``mistakes={"forgot_scale"}`` swaps in a deliberately wrong formula
(:data:`microtape.check.MISTAKES`) to show what a failure looks like.

The report has no side effects on gradients: both routes are computed by
``attn.named_gradients`` (the tape's pure reverse pass, and the hand-derived
chain reading the layer's cache), which writes no ``.grad``. What it leaves
behind is the layer's last forward (``attn.tape``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..nn import masks
from ..nn.attention import derivation
from ..nn.attention.layer import MultiHeadAttention
from .attention_fd import EPS, AttentionPoint
from .mistakes import ALIASES, MISTAKES, mistake_links
from .options import DEFAULT_FD_SAMPLES, ReportOptions, call_config
from .rows import ConfiguredReport, add_finite_differences, inherits_from, make_row, upstream_gradient

__all__ = ["AttentionReport", "attention_report", "DEFAULT_FD_SAMPLES", "INHERITS"]

ROLES = ("query", "key", "value")

#: Which rows are computed from which (directly), read off the derivation table
#: (:func:`microtape.nn.attention.derivation.computed_from`): a wrong row spoils these, and
#: everything computed from them in turn. dW_o and db_o come from dy alone.
COMPUTED_FROM = derivation.computed_from()


#: ``INHERITS["dQ"]``: the rows an error in ``dQ`` propagates to.
INHERITS = inherits_from(COMPUTED_FROM)

#: Things worth knowing about a row, shown under the table.
ROW_NOTES = {
    "db_k": "zero in exact arithmetic: b_k adds the same q . b_k to every score of a row, and softmax "
    "ignores a shift of a whole row. Both routes show only rounding noise (hence a large relative error).",
}


class AttentionReport(ConfiguredReport):
    """The step-by-step check of one attention backward (see :func:`attention_report`).

    Besides the :class:`~microtape.check.rows.GradientReport` API (``ok``,
    ``rows``, ``first_failure``, ``str``, ``_repr_html_``, ``to_dict``) it
    keeps ``config`` (sizes and options), ``grad_output`` (the upstream
    gradient used) and ``mistakes`` (names of injected mistakes, if any).
    """

    title = "Attention backward check: hand-derived formulas against the tape"


# ---------------------------------------------------------------- arguments


def _known_mistakes(names: Any) -> Any:
    chosen = tuple(dict.fromkeys(ALIASES.get(name, name) for name in names))
    for name in chosen:
        if name not in MISTAKES:
            raise ValueError(f"attention_report(mistakes=...): unknown mistake {name!r}; known: {', '.join(MISTAKES)}")
    return chosen


def _shape_of(value: Any) -> Any:
    return np.shape(getattr(value, "data", value))


def _check_mistakes_apply(attn: Any, chosen: Any, query: Any, key: Any, mask: Any) -> None:
    """Refuse a mistake that cannot show in this configuration (before any forward)."""
    for name in chosen:
        needs = MISTAKES[name].needs
        if needs == "dropout" and not (attn.training and attn.dropout > 0):
            raise ValueError(
                f"mistake {name!r} changes nothing without dropout: use a layer with dropout > 0 in "
                "training mode (on the command line: --dropout 0.1)"
            )
        if needs == "mask":
            user_mask = None if mask is None else np.asarray(getattr(mask, "data", mask))
            if not attn.causal and (user_mask is None or not np.any(user_mask != 0)):
                raise ValueError(
                    f"mistake {name!r} changes nothing without a mask: use causal=True or pass a mask "
                    "(on the command line: --causal or --mask-prob 0.3)"
                )
        if needs == "square":
            q_len = _shape_of(query)[1] if len(_shape_of(query)) == 3 else None
            k_len = q_len if key is None else (_shape_of(key)[1] if len(_shape_of(key)) == 3 else None)
            if q_len != k_len:
                raise ValueError(
                    f"mistake {name!r} needs Tq == Tk (got Tq={q_len}, Tk={k_len}): otherwise dS Q does "
                    "not even have dK's shape, and a shape check alone would catch it"
                )


# ---------------------------------------------------------------- the report


def attention_report(
    attn: MultiHeadAttention,
    query: Any,
    key: Any = None,
    value: Any = None,
    mask: Any = None,
    grad_output: Any = None,
    *,
    finite_differences: bool | int = False,
    tolerance: float | None = None,
    seed: int = 0,
    mistakes: Any = None,
) -> AttentionReport:
    """Run ``attn`` forward once, backward twice, and compare every named step.

    ``query``, ``key``, ``value`` and ``mask`` are what
    :meth:`MultiHeadAttention.forward` takes (``attn(x)`` is self-attention).
    ``grad_output`` is the upstream gradient ``dy``; None draws a standard
    normal one from ``seed`` (the report says which). ``tolerance`` defaults to
    1e-10 for float64 and 1e-4 for float32 (see
    :mod:`microtape.check.rows` for the rule). ``finite_differences=True``
    (or a number of entries per row) adds a float64 finite-difference
    estimate to every row. ``mistakes``: names from :data:`MISTAKES`, for
    teaching — the analytic route then uses the wrong formulas.

    Returns an :class:`AttentionReport`. Parameter and input ``.grad`` fields
    are left exactly as they were.
    """
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attention_report(attn, ...): expected a MultiHeadAttention, got {type(attn).__name__}")
    options = ReportOptions.parse(
        "attention_report", attn.dtype, tolerance=tolerance, finite_differences=finite_differences, seed=seed,
        mistakes=mistakes,
    )  # fmt: skip
    chosen, tolerance, fd_samples = _known_mistakes(options.mistakes), options.tolerance, options.fd_samples
    _check_mistakes_apply(attn, chosen, query, key, mask)
    # Every argument is checked before the forward runs.
    call = attn.check_call(query, key, value, mask)
    output_shape = (call.batch, call.q_len, attn.embed)
    upstream, upstream_text = upstream_gradient(grad_output, output_shape, seed, attn.dtype, "attention_report")

    attn.forward(query, key, value, mask)
    tape = attn.tape
    self_attention = call.self_attention
    keep = attn.dropout_keep

    # Route 1: the tape's reverse pass. Route 2: the hand-derived chain (maybe with mistakes).
    cache = attn.analytic_cache()
    taped = attn.named_gradients(upstream, "tape")
    by_hand = attn.named_gradients(upstream, "analytic", links=mistake_links(chosen, cache) if chosen else None)

    # Every row the derivation table describes, in backward order (a tiled layer's tape has no
    # score-sized steps: its core is one row, so only dC, dV, dQ, dK are lined up).
    specs = [spec for spec in derivation.attention_rows(self_attention, keep is not None) if spec[1] in taped]
    rows = [_row(spec, taped, by_hand, chosen, tolerance) for spec in specs]
    fd_text = None
    if fd_samples:
        point = AttentionPoint(cache, attn.last_mask, upstream, _intermediates(tape, specs), self_attention)
        fd_text = _add_finite_differences(rows, point, dict(attn.named_parameters()), fd_samples, tolerance, seed)

    config = _config(attn, call, keep, tolerance, seed, grad_output)
    details = [_describe(config, attn.last_mask), upstream_text] + _teaching_details(chosen)
    return AttentionReport(
        rows, config=config, grad_output=upstream, mistakes=chosen, atol=tolerance, rtol=tolerance, details=details,
        gradients=taped.reverse_pass, analytic=dict(by_hand), fd_text=fd_text,
        inherits=inherits_from(_computed_from(specs)),
    )  # fmt: skip


def _teaching_details(chosen: Any) -> Any:
    """The report's line saying which mistakes were injected, and where each first shows (none: no line)."""
    if not chosen:
        return []
    injected = "; ".join(f"{name} ({MISTAKES[name].summary}; first shows at {MISTAKES[name].row})" for name in chosen)
    return [f"TEACHING MODE - mistakes injected into the hand-derived route: {injected}"]


def _row(spec: Any, taped: Any, by_hand: Any, chosen: Any, tolerance: float) -> Any:
    """One row: the table's formula (or an injected mistake's), both routes' values, the step completing it."""
    label, name, formula, latex, _ = spec
    note = ROW_NOTES.get(label, "")
    for mistake_name in chosen:
        wrong = MISTAKES[mistake_name].formula_for(label)
        if wrong is not None:
            formula, latex = wrong
            note = f"injected mistake {mistake_name!r}: {MISTAKES[mistake_name].why}"
    return make_row(
        label,
        name,
        formula,
        latex,
        by_hand[name],
        taped[name],
        atol=tolerance,
        rtol=tolerance,
        step=taped.completed_at.get(name),
        note=note,
    )


def _intermediates(tape: Any, specs: Any) -> Any:
    """The forward's value of every row that is a step of the chain (what finite differences nudge)."""
    names = tape.names()
    return {spec[1]: names[spec[1]].data for spec in specs if spec[1] in names}


def _add_finite_differences(
    rows: Any, point: Any, parameters: Any, fd_samples: Any, tolerance: float, seed: int
) -> str:
    """A third opinion at ``fd_samples`` entries of every row; returns the text the report says about it."""
    fd_tolerance = max(1e-6, 10 * tolerance)
    rng = np.random.default_rng(seed)
    for row in rows:
        kind = "param" if row.name in parameters else "input" if row.name in (*ROLES, "x") else "node"
        add_finite_differences(row, point.sample(kind, row.name, fd_samples, rng), fd_tolerance)
    return (
        f"central, eps={EPS:g}, by a float64 numpy forward (independent of the tape), at {fd_samples} "
        f"random entries of every row (seed={seed}; intermediates too: replaced, then only what follows "
        f"re-run); FD err = max|FD - taped|, must be <= {fd_tolerance:g} * (1 + max|taped|)"
    )


def _config(attn: Any, call: Any, keep: Any, tolerance: float, seed: int, grad_output: Any) -> Any:
    total_mask = attn.last_mask
    return {
        **call_config(attn, call),
        "head_dim": attn.head_dim,
        "causal": attn.causal,
        "dropout": attn.dropout if keep is not None else 0.0,
        "masked_entries": 0 if total_mask is None else int(np.sum(masks.suppressed(total_mask))),
        "dtype": np.dtype(attn.dtype).name,
        "tolerance": tolerance,
        "seed": seed,
        "upstream": "given" if grad_output is not None else "standard normal",
    }


def _computed_from(specs: Any) -> Any:
    return {label: sources for label, _, _, _, sources in specs if sources}


def _describe(config: Any, total_mask: Any) -> Any:
    kind = "self-attention" if config["attention"] == "self" else "cross-attention"
    parts = [
        f"{kind}: B={config['batch']}, Tq={config['q_len']}, Tk={config['k_len']}, E={config['embed']}, "
        f"H={config['heads']} (D={config['head_dim']})",
        "causal" if config["causal"] else "not causal",
    ]
    if total_mask is not None:
        parts.append(f"mask suppresses {config['masked_entries']} of {total_mask.size} score entries")
    parts.append(
        f"dropout p={config['dropout']:g} (mask saved, same in both routes)" if config["dropout"] else "no dropout"
    )
    parts.append(config["dtype"])
    return ", ".join(parts)
