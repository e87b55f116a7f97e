"""The local derivative of one use of a value, in the op's own words and with this run's numbers.

This module lets the explorer's panel say, for ``y = a·b + a²``, what each
use of ``a`` contributes::

    local_derivative(program, i, position)
    # {"expr": "a·b", "symbol": "∂(a·b)/∂a", "text": "b", "numbers": "", "value": -3.0, ...}

The words come from the op's definition (:attr:`microtape.ops.Op.grads`, a
template for the gradient sent to each input, ``"{g} * {b}"``): the local
derivative is that template with the incoming gradient ``g`` set to 1 —
``∂y/∂a = b`` — and its value, for a Scalar, is the VJP run on this
equation's own numbers with ``g = 1``. For a Tensor the local derivative is
a Jacobian, so the panel shows the VJP itself (``dX = dY @ W^T``) and
its LaTeX (:attr:`microtape.ops.Op.grads_latex`).
"""

import re
from typing import Any

import numpy as np

from ..text import fmt, number

__all__ = ["expression", "local_derivative", "local_template", "tidy"]

# How people write the ops that have an infix form; everything else reads op(args).
INFIX = {
    "add": "{a} + {b}",
    "sub": "{a} − {b}",
    "mul": "{a}·{b}",
    "div": "{a} / {b}",
    "neg": "−{x}",
    "matmul": "{a} @ {b}",
}
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_EXPONENT_MINUS_ONE = re.compile(r"\*\*\((\(?-?[\d.]+\)?)-1\)")
_SMALL_POWER = re.compile(r"\*\*(-?\d)(?![\d.])")
_NUMBER_TIMES_NAME = re.compile(r"(?<![\w.])(\d+)·([A-Za-z_%])")


def expression(node: Any, names: Any) -> Any:
    """The equation's right-hand side as a person writes it: ``a·b``, ``a²``, ``tanh(%2)``."""
    op = node.op
    operands = [_operand(names[x]) for x in node.inputs]
    if op.name == "pow":
        label = op.label(node.params or {}) if op.label is not None else ""
        return f"{operands[0]}{label}" if label and label[0] in "⁰¹²³⁴⁵⁶⁷⁸⁹⁻" else f"{operands[0]}^{label}"
    template = INFIX.get(op.name)
    if template is not None and len(operands) == op.arity:
        return template.format(**dict(zip(op.inputs, operands, strict=True)))
    return f"{op.name}({', '.join(names[x] for x in node.inputs)})"


def _operand(name: str) -> Any:
    """A name inside a formula: bracketed when it is itself an expression (``q_proj.weight^T`` stays)."""
    return f"({name})" if any(c in name for c in " +−-·/") else name


def local_template(template: Any) -> Any:
    """The gradient template with the incoming gradient set to 1: ``"{g} * {b}"`` → ``"{b}"``."""
    if template.startswith("{g} * "):
        return template[len("{g} * ") :]
    if template.startswith("-{g} * "):
        return "-" + template[len("-{g} * ") :]
    return template.replace("{g}", "1")


def tidy(text: str) -> Any:
    """A filled-in scalar formula, written as on paper: ``2 * a**(2-1)`` → ``2a``, ``b**2`` → ``b²``."""

    def lowered(match: Any) -> str:
        exponent = float(match.group(1).strip("()"))
        return f"**{fmt(exponent - 1)}"

    text = _EXPONENT_MINUS_ONE.sub(lowered, text)
    text = re.sub(r"\*\*1(?![\d.])", "", text)
    text = _SMALL_POWER.sub(lambda m: m.group(1).translate(_SUPERSCRIPT), text)
    text = text.replace(" * ", "·").replace("-", "−")
    return _NUMBER_TIMES_NAME.sub(r"\1\2", text)


def _fill(op: Any, node: Any, template: Any, names: Any) -> Any:
    values = dict(zip(op.inputs, names[: op.arity], strict=True))
    values[op.output] = names[-1]
    for key, value in (node.params or {}).items():
        numeric = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
        values[key] = number(value) if numeric else key
    return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), m.group(1))), template)


def local_derivative(program: Any, i: Any, position: Any) -> Any:
    """What use ``position`` of equation ``i`` says about its input: the symbol, the formula, the numbers.

    Returns a dict: ``expr`` (the equation written out), ``symbol``
    (``∂(a·b)/∂a``), ``text`` (the local derivative, ``b``), ``numbers`` (the
    same with this run's numbers, when that says more than the value),
    ``value`` (a Scalar's local derivative; None for a Tensor), ``latex``
    (the op's VJP for this input) and, for a Scalar, ``vjp`` (the VJP's
    template with the student's names; a Tensor's ``text`` is that VJP).
    """
    node = program.equations[i]
    op = node.op
    x = node.inputs[position]
    names = [program.name(v) for v in node.inputs] + [program.name(node)]
    expr = expression(node, program.names)
    template = op.grads[position]
    latex = op.grads_latex[position] if position < len(op.grads_latex) else None
    entry = {"expr": expr, "symbol": f"∂({expr})/∂{program.name(x)}", "latex": latex}
    if template is None:
        return {**entry, "text": "none: this input is data (no gradient)", "numbers": "", "value": None, "vjp": ""}
    scalar = node.data.__class__ is float
    local = local_template(template)
    entry["vjp"] = _fill(op, node, template.replace("{g}", f"d{names[-1]}"), names).replace("^T^T", "")
    entry["text"] = tidy(_fill(op, node, local, names)) if scalar else entry.pop("vjp")
    entry["numbers"], entry["value"] = "", None
    if scalar:
        value = _scalar_local(node, position)
        entry["value"] = value
        if value is not None:
            numbers = [number(v.data) for v in node.inputs] + [number(node.data)]
            filled = tidy(_fill(op, node, local, numbers))
            if filled not in (tidy(fmt(value)), tidy(number(value)), entry["text"]):
                entry["numbers"] = filled
    return entry


def _scalar_local(node: Any, position: Any) -> Any:
    """∂y/∂input for a Scalar equation: its VJP on this run's numbers with ``g = 1`` (None if not computable)."""
    try:
        inputs = [float(x.data) for x in node.inputs]
        sent = node.op.float_vjp(1.0, float(node.data), *inputs, **(node.params or {}))[position]
    except (TypeError, ValueError, ZeroDivisionError, IndexError):
        return None  # (a value a lean tape dropped, or an op that needs its residuals)
    return None if sent is None else float(sent)
