"""The layer report: any layer's hand-derived backward against its tape, sublayer by sublayer.

This module generalises :func:`microtape.check.attention_report` to every
layer with a hand-derived backward — LayerNorm, FeedForward, the Transformer
encoder and decoder layers (and MultiHeadAttention, which it hands to
``attention_report``)::

    >>> import numpy as np, microtape as mt
    >>> layer = mt.nn.TransformerEncoderLayer(16, 4, 32, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((2, 5, 16))
    >>> report = mt.check.layer_report(layer, x)
    >>> report.ok, report.first_failure
    (True, None)
    >>> print(report)                    # one row per gradient, in backward order  # doctest: +SKIP

One forward, then two backward passes — the tape's reverse pass and the
hand-derived chain (:mod:`microtape.nn.analytic_blocks`, which calls each
attention's own hand-derived backward) — lined up row by row in backward
order (see :mod:`microtape.check.layer_rows`): for an encoder layer,
``d_residual2`` (through norm2), ``dgamma_norm2``, ``dbeta_norm2``, ``d_ff``,
the feed-forward's rows, ``d_norm1`` (the residual sum), ``d_residual1``
(through norm1), …, ``d_self_attn``, the attention's rows
(``self_attn.dC``, ``self_attn.dS``, …) and ``dx``. The first row that
disagrees is named; the rows computed from it inherit the error.

``finite_differences=True`` adds a third opinion at a few sampled entries
of every row (:mod:`microtape.check.layer_fd`). ``mistakes=`` swaps wrong
links into the hand-derived chain — in every place of their kind
(``"layernorm_forgot_mean"``) or in one (``"norm1.layernorm_forgot_mean"``,
``"self_attn.forgot_scale"``): :data:`~microtape.check.layer_mistakes.LAYER_MISTAKES`
and attention's :data:`~microtape.check.MISTAKES`. No ``.grad`` changes; what
is left behind is the layer's last forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..nn.module import Module


import inspect

import numpy as np

from ..nn import masks
from ..nn.attention.layer import MultiHeadAttention
from ..nn.checked_layer import CheckedLayer
from ..nn.feedforward import FeedForward
from ..nn.layernorm import LayerNorm
from .attention_report import EPS, AttentionReport, attention_report
from .layer_fd import LayerPoint
from .layer_mistakes import LAYER_MISTAKES
from .layer_rows import computed_from, feedforward_layer_rows, layernorm_rows, post_norm_rows
from .mistakes import ALIASES, MISTAKES, mistake_links
from .options import ReportOptions
from .rows import ConfiguredReport, add_finite_differences, inherits_from, make_row, upstream_gradient

__all__ = ["LayerReport", "layer_report", "places"]


class LayerReport(ConfiguredReport):
    """The row-by-row check of one layer's backward (see :func:`layer_report`).

    Besides the :class:`~microtape.check.rows.GradientReport` API (``ok``,
    ``rows``, ``first_failure``, ``inherits``, ``str``, ``_repr_html_``,
    ``to_dict``) it keeps ``config``, ``grad_output`` and ``mistakes``
    (``"where.name"`` of each injected mistake).
    """

    def __init__(self, rows: Any, *, title: str, **kwargs: Any) -> None:
        super().__init__(rows, **kwargs)
        self.title = title


# ---------------------------------------------------------------- places and mistakes


def places(layer: Any) -> Any:
    """``[(where, part)]``: the places of ``layer`` a mistake can go (``""`` for a one-part layer)."""
    if isinstance(layer, LayerNorm):
        return [("", "layernorm")]
    if isinstance(layer, FeedForward):
        return [("", "feedforward")]
    found = []
    for block in reversed(layer.blocks):
        part = "feedforward" if block.sublayer == "ff" else "attention"
        found += [(block.norm, "layernorm"), (block.sublayer, part), (block.residual, "residual")]
    return found


def _part_of(name: str) -> Any:
    if name in LAYER_MISTAKES:
        return LAYER_MISTAKES[name].part
    return "attention" if ALIASES.get(name, name) in MISTAKES else None


def _parse_mistakes(names: Any, layer: Any) -> Any:
    """``[(where, name)]`` for the mistake ``names`` (parsed by :class:`ReportOptions`), each in its places."""
    known = ", ".join([*LAYER_MISTAKES, *MISTAKES])
    where_of = dict(places(layer))
    chosen = []
    for text in names:
        where, _, name = text.rpartition(".")
        name = ALIASES.get(name, name)
        part = _part_of(name)
        if part is None:
            raise ValueError(f"layer_report(mistakes=...): unknown mistake {name!r}; known: {known}")
        if where and where not in where_of:
            raise ValueError(
                f"layer_report(mistakes={text!r}): {type(layer).__name__} has no part {where!r}; its parts are "
                + ", ".join(w for w in where_of if w)
            )
        targets = [w for w, p in places(layer) if p == part and (not where or w == where)]
        if not targets:
            here = f"{where!r} is a {where_of[where]}" if where else f"{type(layer).__name__} has none"
            raise ValueError(f"layer_report(mistakes={text!r}): {name!r} is a mistake of a {part}, but {here}")
        chosen += [(w, name) for w in targets if (w, name) not in chosen]
    return chosen


def _mask_of(layer: Any, arguments: Any, where: str) -> Any:
    """The additive mask the forward gives attention sublayer ``where`` (None if none)."""
    key = {"TransformerEncoderLayer": "mask", "TransformerDecoderLayer": "tgt_mask"}.get(type(layer).__name__)
    mask = arguments.get("memory_mask" if where == "multihead_attn" else key)
    return None if mask is None else np.asarray(getattr(mask, "data", mask))


def _check_needs(layer: Any, chosen: Any, arguments: Any) -> None:
    """Refuse a mistake that cannot show in this configuration (before any forward)."""
    for where, name in chosen:
        needs = LAYER_MISTAKES[name].needs if name in LAYER_MISTAKES else MISTAKES[name].needs
        label = f"{where}.{name}" if where else name
        if needs == "dropout" and not (layer.training and layer.dropout > 0):
            raise ValueError(f"mistake {label!r} changes nothing without dropout: use dropout > 0 in training mode")
        if needs == "mask":
            mask = _mask_of(layer, arguments, where)
            if mask is None or not np.any(masks.suppressed(mask)):
                raise ValueError(f"mistake {label!r} changes nothing without a mask on {where}: pass one")
        if needs == "square" and where == "multihead_attn":
            x, memory = (np.shape(getattr(arguments[r], "data", arguments[r])) for r in ("x", "memory"))
            if x[1] != memory[1]:
                raise ValueError(f"mistake {label!r} needs as many memory positions as target positions (T == S)")


def _links(layer: Any, chosen: Any) -> Any:
    """The wrong links of the chosen mistakes, shaped as the layer's ``named_gradients(links=...)`` takes them."""
    links: dict[Any, Any] = {}
    for where, name in chosen:
        if name in MISTAKES:
            part = mistake_links([name], getattr(layer, where).analytic_cache())
        else:
            mistake = LAYER_MISTAKES[name]
            part = {mistake.link: mistake.function}
        if where:
            links.setdefault(where, {}).update(part)
        else:
            links.update(part)
    return links


def _wrong_formulas(layer: Any, chosen: Any) -> Any:
    """``{row label: (formula, latex, note)}`` for the rows whose formula a mistake changes."""
    wrong = {}
    for where, name in chosen:
        if name in MISTAKES:
            mistake = MISTAKES[name]
            for label, text, latex in mistake.wrong:
                wrong[f"{where}.{label}"] = (text, latex, f"injected mistake {name!r}: {mistake.why}")
            continue
        mistake = LAYER_MISTAKES[name]
        wrong[_row_of(layer, where, mistake)] = (
            mistake.wrong,
            mistake.latex,
            f"injected mistake {name!r}: {mistake.why}",
        )
    return wrong


def _row_of(layer: Any, where: str, mistake: Any) -> Any:
    """The row whose formula a layer mistake replaces (the first row it shows in)."""
    if mistake.part == "layernorm":
        return "dx" if not where else f"d_{next(b.residual for b in layer.blocks if b.norm == where)}"
    if mistake.part == "feedforward":
        return "d_pre_activation" if mistake.link == "activation" else "d_hidden"
    block = next(b for b in layer.blocks if b.residual == where)
    if mistake.link == "dropout":
        return f"d_{block.sublayer}"
    return "dx" if block.input == "x" else f"d_{block.input}"


# ---------------------------------------------------------------- arguments


def _row_specs(layer: Any) -> Any:
    if isinstance(layer, LayerNorm):
        return layernorm_rows()
    if isinstance(layer, FeedForward):
        return feedforward_layer_rows(layer.activation, layer.analytic_cache()["keep"] is not None)
    keeps = layer.analytic_cache()["keeps"]
    dropout_blocks = {block.sublayer for block in layer.blocks if keeps[block.dropout] is not None}
    attention_dropout = {name for name in layer.attentions if getattr(layer, name).dropout_keep is not None}
    return post_norm_rows(layer, dropout_blocks, attention_dropout)


def _describe(layer: Any, arguments: Any, upstream_text: Any) -> Any:
    given = {name: value for name, value in arguments.items() if value is not None}
    shapes = ", ".join(f"{name} {list(np.shape(getattr(value, 'data', value)))}" for name, value in given.items())
    mode = "training" if layer.training else "eval"
    return [f"{layer!r}", f"called with {shapes}; {mode} mode", upstream_text]


# ---------------------------------------------------------------- the report


def layer_report(
    layer: Module,
    *inputs: Any,
    grad_output: Any = None,
    finite_differences: bool | int = False,
    tolerance: float | None = None,
    seed: int = 0,
    mistakes: Any = None,
    **forward_kwargs: Any,
) -> LayerReport | AttentionReport:
    """Run ``layer`` forward once, backward twice (tape, by hand), and compare every named gradient.

    ``inputs`` and ``forward_kwargs`` are what ``layer.forward`` takes
    (``layer_report(decoder, x, memory, tgt_mask=causal)``). ``grad_output``
    is the upstream gradient (None: standard normal from ``seed``).
    ``tolerance`` defaults to 1e-10 for float64 and 1e-4 for float32.
    ``finite_differences=True`` (or a number of entries per row) adds a
    float64 finite-difference estimate to every row. ``mistakes``: names for
    teaching (see the module doc). Returns a :class:`LayerReport`; no
    ``.grad`` is changed. A MultiHeadAttention goes to
    :func:`~microtape.check.attention_report`.
    """
    if isinstance(layer, MultiHeadAttention):
        return attention_report(  # type: ignore[misc]  # forward_kwargs: the forward's own
            layer, *inputs, grad_output=grad_output, finite_differences=finite_differences, tolerance=tolerance,
            seed=seed, mistakes=mistakes, **forward_kwargs,
        )  # fmt: skip
    if not isinstance(layer, CheckedLayer):
        raise TypeError(
            f"layer_report(layer, ...): expected a layer with a hand-derived backward (LayerNorm, FeedForward, "
            f"TransformerEncoderLayer, TransformerDecoderLayer or MultiHeadAttention), got {type(layer).__name__}"
        )
    options = ReportOptions.parse(
        "layer_report", layer.dtype, tolerance=tolerance, finite_differences=finite_differences, seed=seed,
        mistakes=mistakes,
    )  # fmt: skip
    tolerance, fd_samples = options.tolerance, options.fd_samples
    try:
        arguments = inspect.signature(layer.forward).bind(*inputs, **forward_kwargs).arguments
    except TypeError as error:
        raise TypeError(
            f"layer_report: {type(layer).__name__}.forward does not take these arguments ({error})"
        ) from None
    chosen = _parse_mistakes(options.mistakes, layer)
    _check_needs(layer, chosen, arguments)
    checked = layer.check_call(*inputs, **forward_kwargs)  # every argument checked before the forward runs
    output_shape = np.shape(checked[0] if isinstance(checked, tuple) else checked)
    upstream, upstream_text = upstream_gradient(grad_output, output_shape, seed, layer.dtype, "layer_report")

    layer.forward(*inputs, **forward_kwargs)
    taped = layer.named_gradients(upstream, "tape")
    by_hand = layer.named_gradients(upstream, "analytic", links=_links(layer, chosen) or None)

    specs = _row_specs(layer)
    rows = _rows(specs, _wrong_formulas(layer, chosen), by_hand, taped, tolerance)
    fd_text = _add_finite_differences(layer, upstream, rows, fd_samples, tolerance, seed) if fd_samples else None
    labels = [f"{where}.{name}" if where else name for where, name in chosen]
    details = _describe(layer, arguments, upstream_text)
    if chosen:
        details.append("TEACHING MODE - mistakes injected into the hand-derived route: " + ", ".join(labels))
    title = f"{type(layer).__name__} backward check: hand-derived, sublayer by sublayer, against the tape"
    routes = {"gradients": taped.reverse_pass, "analytic": dict(by_hand)}
    return LayerReport(
        rows, title=title, config=_config(layer, arguments, tolerance, seed, grad_output), grad_output=upstream,
        mistakes=labels, atol=tolerance, rtol=tolerance, details=details, fd_text=fd_text,
        inherits=inherits_from(computed_from(specs)), **routes,
    )  # fmt: skip


def _rows(specs: Any, wrong: Any, by_hand: Any, taped: Any, tolerance: float) -> Any:
    """One row per spec: the hand-derived gradient against the taped one (a mistake's formula where injected)."""
    rows = []
    for spec in specs:
        formula, latex, note = wrong.get(spec.label, (spec.formula, spec.latex, ""))
        rows.append(
            make_row(
                spec.label,
                spec.name,
                formula,
                latex,
                by_hand[spec.name],
                taped[spec.name],
                atol=tolerance,
                rtol=tolerance,
                step=taped.completed_at.get(spec.name),
                note=note,
            )
        )
    return rows


def _add_finite_differences(layer: Any, upstream: Any, rows: Any, fd_samples: Any, tolerance: float, seed: int) -> str:
    """Estimate ``fd_samples`` entries of every row by finite differences; return how (the report's FD line)."""
    fd_tolerance = max(1e-6, 10 * tolerance)
    point = LayerPoint(layer, upstream, [row.name for row in rows])
    rng = np.random.default_rng(seed)
    for row in rows:
        add_finite_differences(row, point.sample(point.kind(row.name), row.name, fd_samples, rng), fd_tolerance)
    return (
        f"central, eps={EPS:g}, by the layer's forward on float64 numpy (forward_plain: no tape), at "
        f"{fd_samples} random entries of every row (seed={seed}; a step is replaced, then only what follows "
        f"re-runs); FD err = max|FD - taped|, must be <= {fd_tolerance:g} * (1 + max|taped|)"
    )


def _config(layer: Any, arguments: Any, tolerance: float, seed: int, grad_output: Any) -> Any:
    """The run's sizes and options, as plain data (the report's ``config``)."""
    return {
        "layer": type(layer).__name__,
        "dtype": np.dtype(layer.dtype).name,
        "training": layer.training,
        "shapes": {name: list(np.shape(getattr(value, "data", value))) for name, value in arguments.items()},
        "tolerance": tolerance,
        "seed": seed,
        "upstream": "given" if grad_output is not None else "standard normal",
    }
