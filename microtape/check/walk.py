"""Walk the backward pass one tape step at a time, checking as you go.

This module lets a notebook (or the graph's step-through frames) follow the
backward pass equation by equation::

    >>> import numpy as np, microtape as mt
    >>> attn = mt.nn.MultiHeadAttention(8, 2, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((1, 3, 8))
    >>> steps = mt.check.walk(attn, x)      # or walk(report), or walk(tape, output, analytic)
    >>> print(steps[0])                     # doctest: +SKIP
    step 1 of 28: tape[22]  output = add(%21, out_proj.bias)   [out_proj]
      incoming gradient d(output): float64[1, 3, 8], norm 4.76
      ...

Each :class:`WalkStep` is one equation ``y = op(inputs)`` as the backward
pass meets it, in reverse tape order: the gradient arriving at ``y`` (the
incoming ``g``), the VJP formula the tape applies, what it sends to each
input — and every checked row whose taped value is complete at this step,
with the hand-derived value beside it and their error. A named intermediate
is checked at its own step; a leaf (a parameter, an input) at the last step
that adds to its gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine import Tape, derivative_labels, gradients
from ..nn.attention.layer import MultiHeadAttention
from .attention_report import attention_report
from .compare import compare
from .rows import GradientReport

__all__ = ["WalkStep", "walk"]


def _describe_array(value: Any) -> str:
    if value is None:
        return "none (a constant)"
    if value.__class__ is float or np.ndim(value) == 0:
        return f"{float(value):.6g}"
    value = np.asarray(value)
    return f"{value.dtype.name}{list(value.shape)}, norm {np.linalg.norm(value):.4g}"


@dataclass
class WalkStep:
    """One equation of the backward pass, and the checks completed there."""

    number: int  # 1, 2, … in backward order
    total: int  # how many steps the pass has
    index: int  # the equation's position on the tape
    name: str  # the equation's output variable (its name, or %index)
    op: str
    formula: str  # the VJP the tape applies at this step
    latex: str
    module: str
    input_names: tuple
    grad_output: object  # g: the gradient arriving at the output
    grad_inputs: tuple  # what the VJP sends to each input (None for constants)
    rows: list = field(default_factory=list)  # checked rows completed at this step
    # walk(..., expressions=True): the equations this step's VJP records (create_graph=True)
    expression: tuple = ()

    @property
    def row(self) -> Any:
        """The check of this step's own output, if it has a named counterpart (else None)."""
        for row in self.rows:
            if row.name == self.name:
                return row
        return None

    @property
    def analytic(self) -> Any:
        """The hand-derived gradient of this step's output (None without a counterpart)."""
        row = self.row
        return None if row is None else row.analytic

    @property
    def max_abs_error(self) -> Any:
        row = self.row
        return None if row is None else row.max_abs_error

    @property
    def passed(self) -> Any:
        """True/False when some check completes here; None when there is nothing to check."""
        if not self.rows:
            return None
        return all(row.passed for row in self.rows)

    @property
    def equation(self) -> str:
        return f"{self.name} = {self.op}({', '.join(self.input_names)})"

    def __str__(self) -> str:
        where = f"   [{self.module}]" if self.module else ""
        lines = [
            f"step {self.number} of {self.total}: tape[{self.index}]  {self.equation}{where}",
            f"  incoming gradient d({self.name}): {_describe_array(self.grad_output)}",
            f"  VJP applied: {self.formula}",
        ]
        for input_name, grad in zip(self.input_names, self.grad_inputs, strict=True):
            lines.append(f"    sends to {input_name}: {_describe_array(grad)}")
        if self.expression:
            lines.append("  recorded as:")
            lines += [f"    {line}" for line in self.expression]
        for row in self.rows:
            verdict = "ok" if row.passed else "FAIL"
            lines.append(
                f"  check {row.label} ({row.name}): analytic norm {row.analytic_norm:.4g}, taped norm "
                f"{row.taped_norm:.4g}, max abs error {row.max_abs_error:.3e}  {verdict}"
            )
        return "\n".join(lines)


def walk(source: Any, *args: Any, expressions: bool = False, **kwargs: Any) -> list[WalkStep]:
    """The backward pass as a list of :class:`WalkStep`, in reverse tape order.

    ``source`` may be:

    * a report (from :func:`attention_report` or :func:`compare`): walks the
      backward pass that report checked;
    * a ``MultiHeadAttention``: the remaining arguments go to
      :func:`attention_report` (``walk(attn, x, causal_mask...)``);
    * a ``Tape``: ``walk(tape, output, analytic=None, grad=None)`` — with
      ``analytic`` (``{name: gradient}``) the steps carry :func:`compare`'s checks.

    ``expressions=True`` also runs the pass recorded (``create_graph=True``)
    and gives each step the equations its VJP records (``step.expression``,
    printed under "recorded as"): each gradient's own expression, in ops.

    No ``.grad`` is changed.
    """
    if not isinstance(expressions, bool):
        raise TypeError(f"walk(expressions={expressions!r}): expected True or False")
    if isinstance(source, GradientReport):
        if args or kwargs:
            raise TypeError("walk(report): a report takes no further arguments")
        return _steps(source.gradients, source.rows, expressions)
    if isinstance(source, MultiHeadAttention):
        return walk(attention_report(source, *args, **kwargs), expressions=expressions)
    if isinstance(source, Tape):
        return _walk_tape(source, *args, expressions=expressions, **kwargs)  # type: ignore[misc]  # kwargs: the tolerances
    raise TypeError(f"walk(source): expected a report, a MultiHeadAttention or a Tape, got {type(source).__name__}")


def _walk_tape(
    tape: Any, output: Any, analytic: Any = None, grad: Any = None, expressions: bool = False, **tolerances: Any
) -> Any:
    if analytic:
        return walk(compare(tape, output, analytic, grad, **tolerances), expressions=expressions)
    return _steps(gradients(output, grad, tape=tape, steps=True), [], expressions)


def _recorded_expressions(result: Any) -> Any:
    """``{label: (equation lines)}``: the same pass recorded, its equations grouped by the step that made them."""
    recorded = gradients(result.output, result.seed, tape=result.tape, create_graph=True)
    names = recorded.program.variable_names()  # type: ignore[union-attr]  # create_graph=True records one
    grouped: dict[Any, Any] = {}
    for equation in recorded.program:  # type: ignore[union-attr]  # create_graph=True records one
        args = ", ".join(names[x] for x in equation.inputs)
        grouped.setdefault(equation.module, []).append(f"{names[equation.output]} = {equation.op.name}({args})")
    return {label: tuple(lines) for label, lines in grouped.items()}


def _steps(result: Any, rows: Any, expressions: bool = False) -> Any:
    names = result.tape.variable_names()
    recorded = _recorded_expressions(result) if expressions else {}
    labels = derivative_labels(result.tape) if expressions else {}
    by_step: dict[Any, Any] = {}
    for row in rows:
        by_step.setdefault(row.step, []).append(row)
    steps = []
    total = len(result.steps)
    for number, step in enumerate(result.steps, start=1):
        equation = step.equation
        steps.append(
            WalkStep(
                number=number,
                total=total,
                index=step.index,
                name=names[equation.output],
                op=equation.op.name,
                formula=_formula_with_names(equation, names),
                latex=equation.op.latex,
                module=equation.module,
                input_names=tuple(names.get(x, x.name or "const") for x in equation.inputs),
                grad_output=step.grad_output,
                grad_inputs=tuple(step.grad_inputs),
                rows=by_step.get(step.index, []),
                expression=recorded.get(f"∂{labels.get(equation.output)}", ()),
            )
        )
    return steps


def _formula_with_names(equation: Any, names: Any) -> Any:
    """The VJP of one equation with the real operand names: ``dx = dy * W; dW = x^T @ dy``."""
    op = equation.op
    operands = {name: names.get(x, x.name or "const") for name, x in zip(op.inputs, equation.inputs)}
    operands.update({op.output: names[equation.output], "g": f"d{names[equation.output]}"})
    parts = [
        f"d{operands[name]} = {op.formula_for(i, operands)}"
        for i, name in enumerate(op.inputs)
        if op.grads[i] is not None and equation.inputs[i].requires_grad
    ]
    return ";  ".join(parts) or op.formula
