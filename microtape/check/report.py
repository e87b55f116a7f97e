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
hand-derived formulas of :mod:`microtape.nn.analytic` — and the two are lined
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

import numbers

import numpy as np

from ..nn import analytic, masks
from ..nn.attention import MultiHeadAttention
from .attention_fd import EPS, AttentionPoint
from .mistakes import ALIASES, MISTAKES, mistake_links
from .rows import (
    ConfiguredReport,
    add_finite_differences,
    default_tolerance,
    inherits_from,
    make_row,
    upstream_gradient,
)

__all__ = ["AttentionReport", "attention_report", "DEFAULT_FD_SAMPLES", "INHERITS"]

#: Entries per row that ``finite_differences=True`` samples.
DEFAULT_FD_SAMPLES = 3

ROLES = ("query", "key", "value")

#: Parameter rows, in backward order: out_proj is the last layer of the
#: forward, so its gradients come first. (label, parameter, formula, LaTeX)
PARAMETER_ROWS = [
    ("dW_o", "out_proj.weight", "dW_o = sum_rows dy^T merged", r"dW_o = \sum dy^{\top} C_{\mathrm{merged}}"),
    ("db_o", "out_proj.bias", "db_o = sum_rows dy", r"db_o = \sum_{\mathrm{rows}} dy"),
    (
        "dW_q",
        "q_proj.weight",
        "dW_q = sum_rows merge(dQ)^T x_q",
        r"dW_q = \sum \mathrm{merge}(dQ)^{\top} x_q",
    ),
    ("db_q", "q_proj.bias", "db_q = sum_rows merge(dQ)", r"db_q = \sum_{\mathrm{rows}} \mathrm{merge}(dQ)"),
    (
        "dW_k",
        "k_proj.weight",
        "dW_k = sum_rows merge(dK)^T x_k",
        r"dW_k = \sum \mathrm{merge}(dK)^{\top} x_k",
    ),
    ("db_k", "k_proj.bias", "db_k = sum_rows merge(dK)", r"db_k = \sum_{\mathrm{rows}} \mathrm{merge}(dK)"),
    (
        "dW_v",
        "v_proj.weight",
        "dW_v = sum_rows merge(dV)^T x_v",
        r"dW_v = \sum \mathrm{merge}(dV)^{\top} x_v",
    ),
    ("db_v", "v_proj.bias", "db_v = sum_rows merge(dV)", r"db_v = \sum_{\mathrm{rows}} \mathrm{merge}(dV)"),
]

#: Input rows. Self-attention: one input feeds all three projections, so its
#: gradient is the sum of three paths. Cross-attention: one row per role.
SELF_INPUT_ROW = (
    "dx",
    "x",
    "dx = merge(dQ) W_q + merge(dK) W_k + merge(dV) W_v",
    r"dx = \mathrm{merge}(dQ) W_q + \mathrm{merge}(dK) W_k + \mathrm{merge}(dV) W_v",
)
CROSS_INPUT_ROWS = [
    ("dq", "query", "dq = merge(dQ) W_q", r"dq = \mathrm{merge}(dQ)\, W_q"),
    ("dk", "key", "dk = merge(dK) W_k", r"dk = \mathrm{merge}(dK)\, W_k"),
    ("dv", "value", "dv = merge(dV) W_v", r"dv = \mathrm{merge}(dV)\, W_v"),
]

#: Two formulas of the chain read differently with dropout off / on.
CHAIN_FORMULAS = {
    "dP": (
        ("dP = dC V^T", r"dP = dC\, V^{\top}"),
        ("dP = dP~ * keep   (keep = 1/(1-p) kept, 0 dropped)", r"dP = d\tilde P \odot \mathrm{keep}"),
    ),
    "dV": (("dV = P^T dC", r"dV = P^{\top} dC"), ("dV = P~^T dC", r"dV = \tilde P^{\top} dC")),
}

#: Which rows are computed from which (directly): a wrong row spoils these, and
#: everything computed from them in turn. dW_o and db_o come from dy alone.
COMPUTED_FROM = {
    "dP_dropped": ("dC",),
    "dP": ("dC", "dP_dropped"),
    "dV": ("dC",),
    "dS": ("dP",),
    "dQ": ("dS",),
    "dK": ("dS",),
    "dW_q": ("dQ",),
    "db_q": ("dQ",),
    "dW_k": ("dK",),
    "db_k": ("dK",),
    "dW_v": ("dV",),
    "db_v": ("dV",),
    "dx": ("dQ", "dK", "dV"),
    "dq": ("dQ",),
    "dk": ("dK",),
    "dv": ("dV",),
}


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


def _parse_mistakes(mistakes):
    if mistakes is None:
        return ()
    if isinstance(mistakes, str):
        mistakes = [mistakes]
    try:
        names = list(mistakes)
    except TypeError:
        raise TypeError(
            f"attention_report(mistakes=...): expected a name or a set of names, got {type(mistakes).__name__}"
        ) from None
    chosen = []
    for name in names:
        name = ALIASES.get(name, name)
        if name not in MISTAKES:
            raise ValueError(f"attention_report(mistakes=...): unknown mistake {name!r}; known: {', '.join(MISTAKES)}")
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def _parse_tolerance(tolerance, dtype):
    if tolerance is None:
        return default_tolerance(dtype)
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) or not 0 < tolerance < 1:
        raise ValueError(f"attention_report(tolerance={tolerance!r}): expected a number between 0 and 1")
    return float(tolerance)


def _parse_fd(finite_differences):
    if finite_differences is False or finite_differences is None:
        return 0
    if finite_differences is True:
        return DEFAULT_FD_SAMPLES
    if isinstance(finite_differences, numbers.Integral) and finite_differences > 0:
        return int(finite_differences)
    raise ValueError(
        f"attention_report(finite_differences={finite_differences!r}): expected True, False or a "
        "positive number of entries to sample per row"
    )


def _shape_of(value):
    return np.shape(getattr(value, "data", value))


def _check_mistakes_apply(attn, chosen, query, key, mask):
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
    attn,
    query,
    key=None,
    value=None,
    mask=None,
    grad_output=None,
    *,
    finite_differences=False,
    tolerance=None,
    seed=0,
    mistakes=None,
):
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
    chosen = _parse_mistakes(mistakes)
    tolerance = _parse_tolerance(tolerance, attn.dtype)
    fd_samples = _parse_fd(finite_differences)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"attention_report(seed={seed!r}): expected an integer")
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

    rows = []

    def add_row(label, name, formula, latex):
        note = ROW_NOTES.get(label, "")
        for mistake_name in chosen:
            wrong = MISTAKES[mistake_name].formula_for(label)
            if wrong is not None:
                formula, latex = wrong
                note = f"injected mistake {mistake_name!r}: {MISTAKES[mistake_name].why}"
        row = make_row(label, name, formula, latex, by_hand[name], taped[name], atol=tolerance, rtol=tolerance)
        row.step, row.note = taped.completed_at.get(name), note
        rows.append(row)

    # The attention core, in the order of the hand-derived chain (a tiled layer's tape has no
    # score-sized steps: its core is one row, so only dC, dV, dQ, dK are lined up).
    for label, name, formula, latex in analytic.CHAIN:
        if (name == "dropped_weights" and keep is None) or name not in taped:
            continue
        if label in CHAIN_FORMULAS:
            formula, latex = CHAIN_FORMULAS[label][keep is not None]
        add_row(label, name, formula, latex)

    # Each projection's parameters, out_proj first.
    for label, name, formula, latex in PARAMETER_ROWS:
        add_row(label, name, formula, latex)

    # The inputs: dk and dv stay apart even when key and value are one object.
    for label, name, formula, latex in [SELF_INPUT_ROW] if self_attention else CROSS_INPUT_ROWS:
        add_row(label, name, formula, latex)

    fd_text = None
    if fd_samples:
        fd_tolerance = max(1e-6, 10 * tolerance)
        names = tape.names()
        intermediates = {name: names[name].data for _, name, _, _ in analytic.CHAIN if name in names}
        point = AttentionPoint(cache, attn.last_mask, upstream, intermediates, self_attention)
        parameters = dict(attn.named_parameters())
        rng = np.random.default_rng(seed)
        for row in rows:
            kind = "param" if row.name in parameters else "input" if row.name in (*ROLES, "x") else "node"
            add_finite_differences(row, point.sample(kind, row.name, fd_samples, rng), fd_tolerance)
        fd_text = (
            f"central, eps={EPS:g}, by a float64 numpy forward (independent of the tape), at {fd_samples} "
            f"random entries of every row (seed={seed}; intermediates too: replaced, then only what follows "
            f"re-run); FD err = max|FD - taped|, must be <= {fd_tolerance:g} * (1 + max|taped|)"
        )

    total_mask = attn.last_mask
    config = {
        "attention": "self" if self_attention else "cross",
        "batch": call.batch,
        "q_len": call.q_len,
        "k_len": call.k_len,
        "embed": attn.embed,
        "heads": attn.num_heads,
        "head_dim": attn.head_dim,
        "causal": attn.causal,
        "dropout": attn.dropout if keep is not None else 0.0,
        "masked_entries": 0 if total_mask is None else int(np.sum(masks.suppressed(total_mask))),
        "dtype": np.dtype(attn.dtype).name,
        "tolerance": tolerance,
        "seed": seed,
        "upstream": "given" if grad_output is not None else "standard normal",
    }
    details = [_describe(config, total_mask), upstream_text]
    if chosen:
        details.append(
            "TEACHING MODE - mistakes injected into the hand-derived route: "
            + "; ".join(f"{name} ({MISTAKES[name].summary}; first shows at {MISTAKES[name].row})" for name in chosen)
        )
    return AttentionReport(
        rows,
        config=config,
        grad_output=upstream,
        mistakes=chosen,
        atol=tolerance,
        rtol=tolerance,
        details=details,
        gradients=taped.reverse_pass,
        analytic=dict(by_hand),
        fd_text=fd_text,
        inherits=INHERITS,
    )


def _describe(config, total_mask):
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
