"""What a picture reads from a computation: its equations, leaves, names and gradients.

This module lets every picture start from the same facts::

    program = collect(tape)              # or a result, a layer, a scalar trace
    program.equations, program.leaves    # in tape order / order of first use
    program.name(node)                   # the student's name for it: "Q_heads", "q_proj.weight^T"
    program.kinds[j]                     # "input", "parameter" or "constant"
    trace = trace_backward(program)      # the reverse pass, step by step (writes nothing)

Which leaf is what (the rule every picture uses):

* **constant**: it needs no gradient (a mask, the dropout keep-mask, the ``2``
  in ``2 * a``);
* **parameter**: it needs a gradient and is a parameter of a model — of the
  layer you drew (``graph(layer)``), of the modules or tensors you pass as
  ``parameters=`` (``parameters=model`` or ``model.parameters()``, or names),
  or of a scalar trace (its ``params``);
* **input**: every other leaf that needs a gradient. So a plain expression
  ``tanh(a*b + a**2)`` has inputs ``a`` and ``b``; a small MLP's ``w1`` is a
  parameter once you say whose parameters it is — never because of its name.

The reverse pass is :func:`microtape.gradients` (one exact pass from the
chosen output, whatever ``.grad`` holds from earlier calls). A scalar trace
has a whole array of outputs: its pass is seeded with the upstream gradient
of every output at once (the gradient of ``L = Σ g ⊙ output``).
"""

import contextvars
from typing import Any, Protocol

import numpy as np

from ..engine import Node, Tape, gradients
from .text import fmt, peak

__all__ = ["Program", "BackwardTrace", "Recorded", "collect", "trace_backward", "leaf_kind", "parameter_set"]


class Recorded(Protocol):
    """A layer that has run: it keeps the tape of its last forward (None before the first).

    Every ``nn`` layer with a recorded forward is one (MultiHeadAttention, LayerNorm, the Transformer
    layers …), and so is a model of yours that exposes ``tape``: the pictures draw any of them.
    """

    @property
    def tape(self) -> Tape | None: ...


class Program:
    """The equations of a computation in order, the leaves they read, and everyone's name.

    ``equations[i]`` is the i-th equation (its position on the tape);
    ``leaves[j]`` the j-th leaf in order of first use; ``uses[j]`` lists
    ``(equation index, operand position)`` for every use of leaf ``j`` and
    ``consumers[i]`` the equations that read equation ``i``. ``outputs``: the
    result(s) the backward pass starts from (one node, or every entry of a
    scalar trace's output). ``kinds[j]``: what leaf ``j`` is (see the module
    docstring).
    """

    def __init__(self, equations: Any, tape: Any, outputs: Any, parameters: Any = (frozenset(), frozenset())) -> None:
        self.equations = equations
        self.tape = tape
        self.outputs = list(outputs)
        self.output = self.outputs[0] if len(self.outputs) == 1 else None
        self.index = index = {node: i for i, node in enumerate(equations)}
        leaves: list[Any]
        leaf_index: dict[Any, Any]
        uses: list[Any]
        consumers: list[list[Any]]
        self.leaves, self.leaf_index, self.uses = leaves, leaf_index, uses = [], {}, []  # type: ignore[var-annotated]  # the locals are
        self.consumers = consumers = [[] for _ in equations]
        for i, node in enumerate(equations):  # bound names: once per input of every equation
            for position, x in enumerate(node.inputs):
                k = index.get(x)
                if k is not None:
                    consumers[k].append(i)
                    continue
                j = leaf_index.get(x)
                if j is None:
                    j = leaf_index[x] = len(leaves)
                    leaves.append(x)
                    uses.append([])
                uses[j].append((i, position))
        self.kinds = [leaf_kind(x, parameters) for x in self.leaves]
        self.names = _display_names(self)
        # What the gradients are gradients *of*: the output's name, or L = Σ g ⊙ output.
        self.loss_name = self.names[self.output] if self.output is not None else "L"

    def name(self, node: Any) -> Any:
        """The name a picture prints for ``node`` (a listing name, or one derived from it)."""
        return self.names[node]


def _display_names(program: Any) -> Any:
    """``tape.variable_names()``, plus names for what the listing leaves anonymous.

    An unnamed transpose of a named value is ``name^T`` (a Linear's ``W.T``
    reads ``q_proj.weight^T``); an unnamed one-number constant is its value.
    """
    names = program.tape.variable_names()
    for leaf in program.leaves:
        names.setdefault(leaf, f"in{len(names)}")
    taken = set(names.values())
    for node in program.equations:
        if node.name or node.op.name != "transpose" or not _swaps_last_axes(node):
            continue
        derived = f"{names[node.inputs[0]]}^T"
        if derived not in taken:
            names[node] = derived
            taken.add(derived)
    written: dict[
        Any, Any
    ] = {}  # a constant's text by value: a long chain reads the same few constants thousands of times
    for leaf in program.leaves:
        if leaf.name or leaf.requires_grad:
            continue
        data = leaf.data
        if data.__class__ is float:  # a Scalar constant: no array made for it (a long scalar trace has many)
            text = written.get(data)
            if text is None:
                text = written[data] = fmt(data)
            names[leaf] = text
        elif np.size(data) == 1:
            names[leaf] = fmt(np.reshape(data, -1)[0])
    return names


def _swaps_last_axes(node: Any) -> Any:
    axes = (node.params or {}).get("axes")
    ndim = np.ndim(node.data)
    return axes is None and ndim == 2 or axes is not None and tuple(axes) == (*range(ndim - 2), ndim - 1, ndim - 2)


# ---------------------------------------------------------------- what is a parameter


def parameter_set(parameters: Any) -> Any:
    """The parameters a caller named, as ``(nodes, names)``: nodes by identity, names as strings.

    Accepts a Module (anything with ``parameters()``), a scalar array (its
    entries), a node, a name, or any iterable of those.
    """
    nodes, names = set(), set()
    pending = [parameters]
    while pending:
        item = pending.pop()
        if item is None:
            continue
        if isinstance(item, Node):
            nodes.add(item)
        elif isinstance(item, str):
            names.add(item)
        elif callable(getattr(item, "parameters", None)):
            pending.extend(item.parameters())
        elif isinstance(getattr(item, "items", None), np.ndarray):
            nodes.update(item.items.flat)  # a ScalarArray: one Scalar per entry
        elif isinstance(item, dict):
            pending.extend(item.values())
        else:
            try:
                pending.extend(item)
            except TypeError:
                raise TypeError(
                    f"parameters=...: expected a Module, Tensors/Scalars or their names, got {type(item).__name__}"
                ) from None
    return frozenset(nodes), frozenset(names)


def leaf_kind(leaf: Any, parameters: Any = (frozenset(), frozenset())) -> str:
    """``"constant"``, ``"parameter"`` or ``"input"`` (see the module docstring)."""
    if not leaf.requires_grad:
        return "constant"
    nodes, names = parameters
    if leaf in nodes or (leaf.name is not None and leaf.name in names):
        return "parameter"
    return "input"


# ---------------------------------------------------------------- sources


def collect(source: Any, output: Any = None, parameters: Any = None) -> "Program":
    """The :class:`Program` of a tape, a result node, a layer's last forward, or a scalar trace."""
    given = parameter_set(parameters)
    owned: tuple[frozenset[Any], frozenset[Any]] = (frozenset(), frozenset())
    outputs = None
    if isinstance(source, (Tape, Node)):
        tape = source
    else:
        tape = getattr(source, "tape", None)
        if not isinstance(tape, Tape):
            if hasattr(source, "tape"):
                raise ValueError(
                    f"{type(source).__name__}.tape is {tape!r}: run a forward pass first, then draw its tape"
                )
            raise TypeError(
                "expected a Tape, a Scalar/Tensor result, a layer with a .tape or a scalar trace, "
                f"got {type(source).__name__}"
            )
        if callable(getattr(source, "parameters", None)):
            owned = parameter_set(source)  # a layer: its own parameters
        elif isinstance(getattr(source, "params", None), dict):
            owned = parameter_set(source.params)  # a scalar trace
            items = getattr(getattr(source, "output", None), "items", None)
            if output is None and isinstance(items, np.ndarray):
                outputs = [x for x in items.flat if isinstance(x, Node) and x.op is not None]
    kinds = (given[0] | owned[0], given[1] | owned[1])
    if isinstance(tape, Node):
        if output is not None and output is not tape:
            raise ValueError("output=...: pass it only with a Tape (a result node is its own output)")
        whole = Tape.of(tape)
        if not len(whole):
            raise ValueError(f"{tape!r} is a leaf: no operation made it, so there is no graph to draw")
        return Program(whole.nodes, whole, [tape], kinds)
    equations = tape.nodes
    if not equations:
        raise ValueError("the tape is empty: nothing was recorded (did any input have requires_grad=True?)")
    if output is not None:
        if not isinstance(output, Node):
            raise TypeError(f"output: expected a Scalar or Tensor, got {type(output).__name__}")
        if not any(node is output for node in equations):
            raise ValueError(f"output: {output!r} is not recorded on this tape")
        outputs = [output]
    return Program(equations, tape, outputs or [equations[-1]], kinds)


# ---------------------------------------------------------------- the backward pass


class BackwardTrace:
    """The reverse pass from the program's output(s), step by step.

    ``order[s]`` is the equation handled at engine step ``s`` (reverse tape
    order, only equations on the path); ``grad_out[i]`` the complete gradient
    of equation ``i``'s output; ``sent[s]`` what step ``s``'s VJP sent to each
    input; ``total[node]`` every node's final gradient; ``seeds`` what the
    outputs start with; ``uses[node]`` how many contributions a node receives
    in all. :meth:`noise` says below which size a node's gradient is rounding
    noise.
    """

    def __init__(self, program: Any, result: Any, seeds: Any) -> None:
        self.program = program
        index = program.index
        steps = [step for step in result.steps if step.equation.output in index]
        self.order = [index[step.equation.output] for step in steps]
        self.step_of = {i: s for s, i in enumerate(self.order)}
        self.grad_out = {index[step.equation.output]: step.grad_output for step in steps}
        self.sent = [step.grad_inputs for step in steps]
        self.total = {node: result[node] for node in result if node in index or node in program.leaf_index}
        self.seeds = seeds
        self.uses = dict.fromkeys(seeds, 1)
        self._terms: dict[Any, Any] = {}  # node -> the size of the terms its gradient is summed from
        for i, sent in zip(self.order, self.sent, strict=True):
            g = self.grad_out[i]
            for x, gx in zip(program.equations[i].inputs, sent, strict=True):
                if x.requires_grad and gx is not None:
                    self.uses[x] = self.uses.get(x, 0) + 1
                    # A VJP that sums entries (a broadcast bias) adds up terms of the size of g.
                    term = max(peak(gx), peak(g) if np.size(gx) < np.size(g) else 0.0)
                    self._terms[x] = max(self._terms.get(x, 0.0), term)
        single = np.asarray(program.outputs[0].data).dtype == np.float32
        self.relative_noise = 1e-5 if single else 1e-12

    def __len__(self) -> int:
        return len(self.order)

    def noise(self, node: Any) -> Any:
        """Below this size an entry of ``node``'s gradient is rounding noise, not a value.

        Noise is what cancellation leaves: terms that cancel in exact arithmetic
        sum to about ``1e-16`` of their size in float64 (``k_proj.bias`` in
        attention: softmax ignores a shift of all of a row's scores, so the
        bias's gradient, a sum of ``dK`` entries, is 0). The terms are the
        contributions the node receives, and the entries of ``g`` that a
        summing VJP (a broadcast bias) adds up. A gradient that is small
        because every term is small — a vanishing gradient — is a value. So:
        1e-12 of the largest term (1e-5 in float32); a seed is never noise.
        """
        return self.relative_noise * self._terms.get(node, 0.0)

    def received(self, upto: Any) -> Any:
        """``{node: (gradient so far, contributions so far)}`` after engine steps ``0..upto``."""
        return self.received_series([upto])[0]

    def received_series(self, stops: Any) -> Any:
        """:meth:`received` at each engine step of the sorted list ``stops``, in one sweep."""
        so_far = {node: (g, 1) for node, g in self.seeds.items()}
        snapshots, s = [], 0
        for stop in stops:
            while s <= min(stop, len(self.order) - 1):
                node = self.program.equations[self.order[s]]
                for x, gx in zip(node.inputs, self.sent[s], strict=True):
                    if gx is None or not x.requires_grad:
                        continue
                    previous = so_far.get(x)
                    so_far[x] = (gx, 1) if previous is None else (previous[0] + gx, previous[1] + 1)
                s += 1
            snapshots.append(dict(so_far))
        return snapshots


def trace_backward(program: Any, grad: Any = None) -> "BackwardTrace":
    """The reverse pass of ``program`` (nothing is written, nothing recorded).

    One output: the seed is ``grad`` if given, else the output's ``.grad`` if
    a backward already ran (so the picture shows the same numbers), else
    ones. Several outputs (a scalar trace): ``grad`` is an array of their
    shape (default ones), and the pass is that of ``L = Σ grad ⊙ output``.
    """
    if program.output is not None:
        output = program.output
        result = gradients(output, output.grad if grad is None else grad, tape=program.tape, steps=True)
        return BackwardTrace(program, result, {output: result.seed})
    outputs = program.outputs
    weights = np.ones(len(outputs)) if grad is None else np.asarray(getattr(grad, "data", grad), dtype=np.float64)
    if weights.size != len(outputs):
        raise ValueError(f"grad=...: {weights.size} numbers for an output of {len(outputs)} entries")
    weights = [float(w) for w in weights.reshape(-1)]
    # Build L = Σ wᵢ·outputᵢ in an empty context: no tape the caller has open records it.
    total = contextvars.Context().run(lambda: sum(o * w for o, w in zip(outputs, weights, strict=True)))
    result = gradients(total, steps=True)
    return BackwardTrace(program, result, dict(zip(outputs, weights, strict=True)))
