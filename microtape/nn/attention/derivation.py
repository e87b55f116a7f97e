"""Attention's derivation, written once: every intermediate's forward, VJP, formula and dependencies.

This module lets every part of microtape read *one* description of the
attention chain, as PyTorch's ``derivatives.yaml`` does for its ops. Each
:class:`Step` of the core says how its value is computed (``forward``, on
Tensors, ScalarArrays or plain arrays), how the gradient goes back to each
input (``vjp``: the hand-derived links of :data:`LINKS`), what that reads like
(per input, plain text and LaTeX) and which report rows it is computed from
(``sources``). Who reads it:

* the taped forward (:func:`microtape.nn.attention.chain.attention_core`)
  runs the steps in order, one named tape row each;
* the hand-derived backward (:func:`microtape.nn.attention.analytic.attention_core_backward`)
  walks them in reverse, calling each step's ``vjp``;
* the step-by-step report, the layer reports and the captions
  (:func:`gradient_rows`, :func:`formula_of`) print their formulas.

A new intermediate — an ALiBi bias, say — is one more :class:`Step` in
:data:`ATTENTION` (and its consumer's ``inputs`` naming it): it then runs in
the forward, is differentiated by the analytic route, and appears as a row in
the reports and in the pictures' captions.

The chain, one head (a step whose ``when`` is not met is skipped: its output
*is* its input, as a missing mask adds nothing)::

    scaled_scores   S  = Q Kᵀ / √d              dQ = dS K / √d,  dK = dSᵀ Q / √d
    weights         P  = softmax(S + M)         dS = P ⊙ (dP − rowsum(dP ⊙ P))   (M: constant masks)
    dropped_weights P̃  = P ⊙ keep  (dropout)    dP = dP̃ ⊙ keep
    context         C  = P̃ V                    dP̃ = dC Vᵀ,  dV = P̃ᵀ dC

Around the core, the projections (``Q = x_q W_qᵀ + b_q``, …, ``y = merged
W_oᵀ + b_o``; :data:`PROJECTIONS`) all follow Linear's one rule, and the head
split and merge only move numbers (:func:`split_heads`, :func:`merge_heads`).
The primitives' derivatives (softmax's VJP) come from the op registry
(:mod:`microtape.ops`): written once, beside their forwards.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...engine import Node
from ...ops.attention_links import LINKS

__all__ = [
    "Step",
    "Projection",
    "ATTENTION",
    "PROJECTIONS",
    "HEADS",
    "present_steps",
    "step_names",
    "run_forward",
    "run_backward",
    "gradient_rows",
    "formula_of",
    "step_formulas",
    "parameter_rows",
    "input_rows",
    "attention_rows",
    "computed_from",
    "constant_beside",
]

#: The split heads: the core's inputs (their gradients are reported as dQ, dK, dV).
HEADS = ("Q_heads", "K_heads", "V_heads")


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Step:
    """One intermediate of the attention core, everything about it in one place.

    ``name`` is its tape name, ``label`` the name of its gradient in reports
    (None: not a row of its own) and ``symbol``/``symbol_latex`` how formulas
    write it. ``inputs`` are the names it is computed from; ``forward(*inputs,
    constants)`` computes it (constants: ``scale``, ``causal_mask``, ``mask``,
    ``keep``) and ``vjp(links, g, output, *inputs, constants)`` returns one
    gradient per input (an input value the analytic route does not keep is
    None). ``grads`` and ``grads_latex`` are those gradients as formulas —
    ``{out}`` is this step's symbol, ``{0}``, ``{1}`` its inputs' — each
    computed from this step's gradient (its row's dependency). ``also`` names
    other tape rows this step's forward records (``scores``, the masked
    scores) and ``also_grads(g, sent, constants)`` their gradients (``sent``:
    what ``vjp`` returned). ``when`` (``"keep"`` or None) names the constant
    that must be given for the step to run.

    Why a Step is not an :class:`microtape.ops.Op` (it looks like one: a
    forward, a VJP, formulas per input). A Step is a *composition* of ops,
    not a primitive: ``scaled_scores`` is ``matmul`` then ``scale``, ``weights``
    is the masks' ``add_constant`` rows then ``softmax`` — several named rows
    of the tape, each an ``Op`` with its own VJP, which the engine's reverse
    pass differentiates. Made one ``Op``, the step would be one row on the
    tape, and the rows the reports, the pictures and the exercises name
    (``scores``, ``causal_scores``, …) would be gone. The Step's ``vjp`` is
    the hand-derived *link* of that composition, and the analytic route
    (:func:`run_backward`) walks the links outside the engine on purpose: it
    is the independent opinion the reports hold the tape to, so it must not
    share the engine's reverse pass it checks. :func:`run_forward` is not a
    runner either: it calls each step's ``forward``, whose ops the engine
    records (or, on plain arrays, only computes).
    """

    name: str
    label: str | None
    symbol: str
    symbol_latex: str
    inputs: tuple
    forward: Callable
    forward_text: str
    forward_latex: str
    vjp: Callable
    grads: tuple
    grads_latex: tuple
    also: tuple = ()
    also_grads: Callable | None = None
    when: str | None = None


def _scores_forward(q_heads: Any, k_heads: Any, c: Any) -> Any:
    scores = q_heads.matmul(k_heads.swapaxes(-1, -2, name="K_heads^T"), name="scores")
    return scores.scale(c["scale"], name="scaled_scores")


def constant_beside(like: Any, array: Any, name: str) -> Any:
    """``array`` (a mask, as the call checked it) as the constant an op of ``like``'s kind reads.

    The masks travel as arrays from the call to here; on a tape (``like`` a
    Tensor) the array becomes a leaf called ``name``, so the listing and the
    graphs show ``causal_mask``, ``mask``, ``dropout_keep``. Any other kind
    (ScalarArray, Plain) takes the array itself. A value that is already a
    node is used as it is (and keeps its own name).
    """
    if array is None or not isinstance(like, Node) or isinstance(array, Node):
        return array
    constant = type(like)._constant(array, like)
    constant.name = name
    return constant


def _weights_forward(scores: Any, c: Any) -> Any:
    # The masks are additive constants: a row of the tape each, when given.
    if c.get("causal_mask") is not None:
        scores = scores.add_constant(constant_beside(scores, c["causal_mask"], "causal_mask"), name="causal_scores")
    if c.get("mask") is not None:
        scores = scores.add_constant(constant_beside(scores, c["mask"], "mask"), name="masked_scores")
    return scores.softmax(-1, name="weights")


#: The attention core in forward order, from the split heads to the context.
ATTENTION = (
    Step(
        name="scaled_scores",
        label="dS",
        symbol="S",
        symbol_latex="S",
        inputs=("Q_heads", "K_heads"),
        forward=_scores_forward,
        forward_text="S = Q K^T / sqrt(d)",
        forward_latex=r"S = \frac{Q K^{\top}}{\sqrt d}",
        vjp=lambda links, g, out, q, k, c: links["scores"](g, q, k, c["scale"]),
        grads=("d{0} = d{out} K / sqrt(d)", "d{1} = d{out}^T Q / sqrt(d)"),
        grads_latex=(r"d{0} = \frac{{d{out}\, K}}{{\sqrt d}}", r"d{1} = \frac{{d{out}^{{\top}} Q}}{{\sqrt d}}"),
        also=("scores",),
        also_grads=lambda g, sent, c: {"scores": g * c["scale"]},
    ),
    Step(
        name="weights",
        label="dP",
        symbol="P",
        symbol_latex="P",
        inputs=("scaled_scores",),
        forward=_weights_forward,
        forward_text="P = softmax(S + M)   (row by row; M: the additive masks)",
        forward_latex=r"P = \mathrm{softmax}(S + M)",
        vjp=lambda links, g, out, s, c: (links["softmax"](g, out),),
        grads=("d{0} = P * (dP - rowsum(dP * P))",),
        grads_latex=(r"d{0} = P \odot (dP - \mathrm{{rowsum}}(dP \odot P))",),
        # The masks are added constants: the gradient passes through them unchanged.
        also=("causal_scores", "masked_scores"),
        also_grads=lambda g, sent, c: {"causal_scores": sent[0], "masked_scores": sent[0]},
    ),
    Step(
        name="dropped_weights",
        label="dP_dropped",
        symbol="P~",
        symbol_latex=r"\tilde P",
        inputs=("weights",),
        forward=lambda p, c: p.dropout(constant_beside(p, c["keep"], "dropout_keep"), name="dropped_weights"),
        forward_text="P~ = P * keep   (keep = 1/(1-p) kept, 0 dropped)",
        forward_latex=r"\tilde P = P \odot \mathrm{keep}",
        vjp=lambda links, g, out, p, c: (links["dropout"](g, c["keep"]),),
        grads=("d{0} = d{out} * keep   (keep = 1/(1-p) kept, 0 dropped)",),
        grads_latex=(r"d{0} = d{out} \odot \mathrm{{keep}}",),
        when="keep",
    ),
    Step(
        name="context",
        label="dC",
        symbol="C",
        symbol_latex="C",
        inputs=("dropped_weights", "V_heads"),
        forward=lambda used, v, c: used.matmul(v, name="context"),
        forward_text="C = P~ V",
        forward_latex=r"C = \tilde P V",
        vjp=lambda links, g, out, used, v, c: links["context"](g, used, v),
        grads=("d{0} = d{out} V^T", "d{1} = {0}^T d{out}"),
        grads_latex=(r"d{0} = d{out}\, V^{{\top}}", r"d{1} = {0}^{{\top}} d{out}"),
    ),
)


#: How the core's inputs and its output are written and labelled (they are computed outside it).
OUTSIDE = {
    "Q_heads": ("dQ", "Q", "Q"),
    "K_heads": ("dK", "K", "K"),
    "V_heads": ("dV", "V", "V"),
}

#: The row of dC: the gradient the head merge and out_proj send back to the context.
CONTEXT_ROW = ("dC", "context", "dC = split_heads(dy W_o)", r"dC = \mathrm{split}(dy\, W_o)")


# ---------------------------------------------------------------- reading the table


def present_steps(table: Any, constants: Any) -> Any:
    """The steps that run with these constants, and ``{name: the name it stands for}``.

    A step whose ``when`` constant is None is skipped: its name then stands
    for its first input (no dropout: ``dropped_weights`` is ``weights``).
    """
    alias: dict[Any, Any]
    steps, alias = [], {}
    for step in table:
        if step.when is not None and constants.get(step.when) is None:
            alias[step.name] = alias.get(step.inputs[0], step.inputs[0])
        else:
            steps.append(step)
    return steps, alias


def step_names(table: Any) -> Any:
    """Every tape name the core's steps record, in forward order."""
    names = []
    for step in table:
        names += [name for name in (*step.also, step.name) if name not in names]
    return tuple(names)


def run_forward(table: Any, heads: Any, constants: Any) -> Any:
    """Run the core's steps on the split heads ``{"Q_heads": …}``; returns ``{name: value}``."""
    steps, alias = present_steps(table, constants)
    values = dict(heads)
    for step in steps:
        values[step.name] = step.forward(*[values[alias.get(n, n)] for n in step.inputs], constants)
    return values


def run_backward(table: Any, grad_output: Any, values: Any, constants: Any, links: Any = None) -> Any:
    """Walk the core backwards from the gradient of its last step: ``{name: gradient}``.

    ``values`` holds what the forward kept (the heads, ``weights``); a value
    the walk needs and does not have is passed as None. ``links`` replaces
    links of :data:`LINKS`. Gradients reaching one name twice are added.
    """
    link = {**LINKS, **(links or {})}
    steps, alias = present_steps(table, constants)
    grads = {steps[-1].name: grad_output}
    for step in reversed(steps):
        g = grads[step.name]
        names = [alias.get(n, n) for n in step.inputs]
        sent = step.vjp(link, g, values.get(step.name), *[values.get(n) for n in names], constants)
        for name, grad in zip(names, sent, strict=True):
            grads[name] = grads[name] + grad if name in grads else grad
        if step.also_grads is not None:
            grads.update(step.also_grads(g, sent, constants))
    return grads


def _symbols(table: Any, alias: Any, latex: Any) -> Any:
    symbols = {name: (text_latex if latex else text) for name, (_, text, text_latex) in OUTSIDE.items()}
    symbols.update({step.name: (step.symbol_latex if latex else step.symbol) for step in table})
    return {**symbols, **{name: symbols[target] for name, target in alias.items()}}


def _labels(table: Any, alias: Any) -> Any:
    labels = {name: label for name, (label, _, _) in OUTSIDE.items()}
    labels.update({step.name: step.label for step in table})
    return {**labels, **{name: labels[target] for name, target in alias.items()}}


def gradient_rows(table: Any, constants: Any) -> Any:
    """The core's report rows in backward order: ``(label, name, formula, latex, sources)``.

    First dC, then, walking the steps backwards, one row per input of each
    step (a skipped step's rows are its input's: no dropout, no dP̃ row).
    ``sources`` are the labels the row is computed from.
    """
    steps, alias = present_steps(table, constants)
    text, latex, labels = _symbols(table, alias, False), _symbols(table, alias, True), _labels(table, alias)
    rows: list[tuple[Any, ...]] = [(*CONTEXT_ROW, ())]
    # A step without a row of its own passes on the dependency of the row it came from.
    depends: dict[str, tuple[str, ...]] = {steps[-1].name: ("dC",)}
    for step in reversed(steps):
        sources = (labels[step.name],) if labels[step.name] else depends.get(step.name, ())
        names = [alias.get(n, n) for n in step.inputs]
        symbols, symbols_latex = [text[n] for n in names], [latex[n] for n in names]
        for position, target in enumerate(names):
            depends[target] = sources
            if labels.get(target) is None:
                continue
            formula = step.grads[position].format(*symbols, out=text[step.name])
            formula_latex = step.grads_latex[position].format(*symbols_latex, out=latex[step.name])
            rows.append((labels[target], target, formula, formula_latex, sources))
    return rows


def formula_of(table: Any, name: str, constants: Any = None) -> Any:
    """The gradient formula of the intermediate called ``name`` (plain text), or None if the table has none.

    ``constants`` as for the forward (default: every optional step present).
    """
    if constants is None:
        constants = {step.when: True for step in table if step.when is not None}
    for label, row_name, formula, _, _ in gradient_rows(table, constants):
        if row_name == name or label == name:
            return formula
    return None


def step_formulas(table: Any, name: str, recorded: Any = ()) -> Any:
    """What the step called ``name`` sends back to its inputs, as plain-text formulas ([] if no step has that name).

    ``recorded`` are its inputs' names as a tape recorded them: one that is a
    table name is written with its own symbol (without dropout, the context's
    input is ``P``, not ``P~``); the others as the table declares them.
    """
    step = next((step for step in table if step.name == name), None)
    if step is None:
        return []
    text = _symbols(table, {}, False)
    recorded = list(recorded)[: len(step.inputs)]
    recorded += [None] * (len(step.inputs) - len(recorded))
    symbols = [text[r] if r in text else text[d] for r, d in zip(recorded, step.inputs, strict=True)]
    return [template.format(*symbols, out=step.symbol) for template in step.grads]


# ---------------------------------------------------------------- the projections (Linear's one rule)


@dataclass(frozen=True)
class Projection:
    """One of the four Linear maps around the core: ``out = x Wᵀ + b`` (dx = dout W, dW = Σ doutᵀ x, db = Σ dout)."""

    module: str  # "q_proj"
    letter: str  # "q": the subscript of W and b in formulas
    role: str  # the input's name ("query"), or "merged" for out_proj
    grad_out: str  # the gradient of its output, as formulas write it
    grad_out_latex: str
    source: tuple  # the report rows its output's gradient is computed from

    def parameter_rows(self) -> Any:
        """``(label, name, formula, latex, sources)`` of dW and db."""
        w, g, g_latex = self.letter, self.grad_out, self.grad_out_latex
        x, x_latex = ("merged", r"C_{\mathrm{merged}}") if self.role == "merged" else (f"x_{w}", f"x_{w}")
        weight = (f"dW_{w} = sum_rows {g}^T {x}", rf"dW_{w} = \sum {g_latex}^{{\top}} {x_latex}")
        bias = (f"db_{w} = sum_rows {g}", rf"db_{w} = \sum_{{\mathrm{{rows}}}} {g_latex}")
        weight_row = (f"dW_{w}", f"{self.module}.weight", *weight, self.source)
        return [weight_row, (f"db_{w}", f"{self.module}.bias", *bias, self.source)]

    def input_row(self) -> Any:
        """``(label, name, formula, latex, sources)`` of the gradient this projection sends to its input."""
        w, g, g_latex = self.letter, self.grad_out, self.grad_out_latex
        label = f"d{self.role[0]}"
        return (label, self.role, f"{label} = {g} W_{w}", rf"{label} = {g_latex}\, W_{w}", self.source)


#: out_proj first: it is the last map of the forward, so its gradients come first.
PROJECTIONS = (
    Projection("out_proj", "o", "merged", "dy", "dy", ()),
    Projection("q_proj", "q", "query", "merge(dQ)", r"\mathrm{merge}(dQ)", ("dQ",)),
    Projection("k_proj", "k", "key", "merge(dK)", r"\mathrm{merge}(dK)", ("dK",)),
    Projection("v_proj", "v", "value", "merge(dV)", r"\mathrm{merge}(dV)", ("dV",)),
)


def parameter_rows() -> Any:
    """Every projection's dW and db rows, out_proj first: ``(label, name, formula, latex, sources)``."""
    return [row for projection in PROJECTIONS for row in projection.parameter_rows()]


def input_rows(self_attention: Any) -> Any:
    """The input rows: one per role (cross), or their sum ``dx`` (self: one input feeds all three)."""
    rows = [projection.input_row() for projection in PROJECTIONS if projection.role != "merged"]
    if not self_attention:
        return rows
    terms = [(row[2].partition(" = ")[2], row[3].partition(" = ")[2]) for row in rows]
    sources = tuple(source for row in rows for source in row[4])
    text, latex = " + ".join(t for t, _ in terms), " + ".join(t for _, t in terms)
    return [("dx", "x", f"dx = {text}", f"dx = {latex}", sources)]


def attention_rows(self_attention: Any, dropout: bool) -> Any:
    """Every row of an attention report, in backward order: ``(label, name, formula, latex, sources)``.

    The core's (from the table, with the dropout steps if ``dropout``), each
    projection's parameters, then the inputs.
    """
    core = gradient_rows(ATTENTION, {"keep": True if dropout else None})
    return core + parameter_rows() + input_rows(self_attention)


def computed_from() -> Any:
    """``{label: sources}`` over every configuration (dropout or not, self or cross); rows from dy alone left out."""
    found: dict[Any, Any] = {}
    for self_attention in (True, False):
        for dropout in (False, True):
            for label, _, _, _, sources in attention_rows(self_attention, dropout):
                found[label] = tuple(dict.fromkeys((*found.get(label, ()), *sources)))
    return {label: sources for label, sources in found.items() if sources}
