"""What the pictures read from a computation: its equations, leaves and gradients.

This module turns "a tape, or the output of some computation" into a
:class:`Program` — the equations in order, the leaves in order of first use,
who uses what — and reads the reverse pass (:func:`microtape.gradients`, which
writes nothing) into a :class:`BackwardTrace`, so a graph can show the
gradient of every node after any step. Every picture of a backward pass is
one exact pass from the chosen output, whatever ``.grad`` holds from earlier
calls (gradients of leaves accumulate across calls; a picture shows one pass).
"""

import numpy as np

from ..nn.masks import SUPPRESSED_BELOW
from ..tape import Node, Tape, gradients

__all__ = ["Program", "BackwardTrace", "collect", "trace_backward", "leaf_kind"]

# Words in a leaf's name that mark it as a parameter (``q_proj.weight``, ``bias``).
PARAMETER_WORDS = ("weight", "bias")


class Program:
    """The equations of a computation in order, and the leaves they read.

    ``equations[i]`` is drawn as node ``n{i}``; for a :class:`Tape`, ``i`` is the
    position on the tape. ``leaves[j]`` (inputs, parameters, constants, in the
    order they are first used) is drawn as ``x{j}``. ``uses[j]`` lists
    ``(equation index, operand position)`` for every use of leaf ``j``.
    """

    def __init__(self, equations, output, tape):
        self.equations = equations
        self.output = output
        self.tape = tape
        self.index = {node: i for i, node in enumerate(equations)}
        self.leaves = []
        self.leaf_index = {}
        self.uses = []
        self.consumers = [[] for _ in equations]  # equation i -> equations reading it
        for i, node in enumerate(equations):
            for position, x in enumerate(node.inputs):
                j = self.index.get(x)
                if j is not None:
                    self.consumers[j].append(i)
                    continue
                k = self.leaf_index.get(x)
                if k is None:
                    k = self.leaf_index[x] = len(self.leaves)
                    self.leaves.append(x)
                    self.uses.append([])
                self.uses[k].append((i, position))


def _source_tape(source):
    """Accept a layer (anything with a ``.tape``) as the tape of its last forward."""
    if isinstance(source, (Tape, Node)):
        return source
    tape = getattr(source, "tape", None)
    if isinstance(tape, Tape):
        return tape
    if hasattr(source, "tape"):
        raise ValueError(f"{type(source).__name__}.tape is {tape!r}: run a forward pass first, then draw its tape")
    raise TypeError(f"expected a Tape, a Scalar/Tensor result or a layer with a .tape, got {type(source).__name__}")


def collect(source, output=None):
    """Build the :class:`Program` of a tape, a result node, or a layer's last forward."""
    source = _source_tape(source)
    if isinstance(source, Tape):
        equations = source.nodes
        if not equations:
            raise ValueError("the tape is empty: nothing was recorded (did any input have requires_grad=True?)")
        if output is None:
            output = equations[-1]
        elif not isinstance(output, Node):
            raise TypeError(f"output: expected a Scalar or Tensor, got {type(output).__name__}")
        elif not any(node is output for node in equations):
            raise ValueError(f"output: {output!r} is not recorded on this tape")
        return Program(equations, output, source)
    if output is not None and output is not source:
        raise ValueError("output=...: pass it only with a Tape (a result node is its own output)")
    tape = Tape.of(source)
    return Program(tape.nodes, source, tape)


def leaf_kind(leaf, parameters=None):
    """``"constant"``, ``"parameter"`` or ``"input"`` — the rule the graphs use.

    * constant: it does not require a gradient (masks, dropout keep-masks, the
      ``2`` in ``2 * a``);
    * parameter: it requires a gradient and either is in ``parameters`` (nodes
      or names given by the caller) or its name contains ``weight`` or ``bias``
      (``q_proj.weight``, ``bias``, ``w_hidden``'s cousin ``weight_q``);
    * input: every other leaf that requires a gradient (``x``, ``a``).
    """
    if not leaf.requires_grad:
        return "constant"
    if parameters is not None:
        for p in parameters:
            if p is leaf or (isinstance(p, str) and p == leaf.name):
                return "parameter"
    name = (leaf.name or "").lower()
    if any(word in name for word in PARAMETER_WORDS):
        return "parameter"
    return "input"


class BackwardTrace:
    """The backward pass from ``program.output``, step by step.

    ``order[s]`` is the equation handled at step ``s`` (reverse tape order,
    only the equations the output depends on); ``grad_out[i]`` the complete
    gradient ``g`` of equation ``i``'s output; ``sent[s]`` what step ``s``'s
    VJP sent to each input. :meth:`leaf_grads` adds up what leaves received.
    """

    def __init__(self, program, order, grad_out, sent):
        self.program = program
        self.order = order
        self.step_of = {i: s for s, i in enumerate(order)}
        self.grad_out = grad_out
        self.sent = sent

    def __len__(self):
        return len(self.order)

    def leaf_grads(self, upto):
        """Gradient received by each leaf (index -> array/float) after steps ``0..upto``."""
        program = self.program
        received = {}
        for s in range(min(upto + 1, len(self.order))):
            node = program.equations[self.order[s]]
            for x, gx in zip(node.inputs, self.sent[s], strict=True):
                j = program.leaf_index.get(x)
                if j is None or gx is None or not x.requires_grad:
                    continue
                received[j] = gx if j not in received else received[j] + gx
        return received


def trace_backward(program, grad=None):
    """The reverse pass of ``program``, step by step (nothing is written).

    The seed is ``grad`` if given, else the output's ``.grad`` if a backward
    already ran (so the picture shows the same numbers), else ones.
    """
    output = program.output
    if grad is None:
        grad = output.grad
    result = gradients(output, grad, tape=program.tape, steps=True)
    order = [step.index for step in result.steps]
    grad_out = {step.index: step.grad_output for step in result.steps}
    sent = [step.grad_inputs for step in result.steps]
    return BackwardTrace(program, order, grad_out, sent)


# ---------------------------------------------------------------- summaries

MASKED_AT = SUPPRESSED_BELOW  # an additive mask value at or below this counts as "masked"


def fmt(value):
    """A number in 4 significant digits (no ``-0``)."""
    value = float(value)
    if value == 0.0:
        return "0"
    return f"{value:.4g}"


def shape_text(data):
    return "[" + ",".join(str(n) for n in np.shape(data)) + "]"


def value_summary(data, constant=False):
    """One short line describing a value: ``0.7071`` or ``mean 0.01 · |max| 1.3``."""
    if data.__class__ is float:
        return fmt(data)
    array = np.asarray(data)
    if array.size == 1:
        return fmt(array.reshape(-1)[0])
    masked = ~np.isfinite(array) | (array <= MASKED_AT)
    count = int(masked.sum())
    if constant:
        if count:
            return f"masked {count}/{array.size}"
        distinct = np.unique(array)
        if distinct.size <= 2 and distinct[0] == 0.0:
            kept = int(np.count_nonzero(array))
            scale = f" ×{fmt(distinct[-1])}" if distinct.size == 2 and distinct[-1] != 1.0 else ""
            return f"kept {kept}/{array.size}{scale}"
    rest = array[~masked]
    if rest.size == 0:
        return f"all {count} masked"
    text = f"mean {fmt(rest.mean())} · |max| {fmt(np.abs(rest).max())}"
    if count:
        text += f" · {count} masked"
    return text


def grad_summary(grad):
    """One short line describing a gradient: ``grad 0.07`` or ``‖grad‖ 1.2 · |max| 0.4``."""
    if grad is None:
        return "no grad"
    if grad.__class__ is float:
        return f"grad {fmt(grad)}"
    array = np.asarray(grad)
    if array.size == 1:
        return f"grad {fmt(array.reshape(-1)[0])}"
    return f"‖grad‖ {fmt(np.linalg.norm(array))} · |max| {fmt(np.abs(array).max())}"
