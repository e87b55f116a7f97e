"""What a primitive is: :class:`Op`, the registry :data:`OPS`, and how ops get into it.

A primitive is plain data, like a row of PyTorch's ``derivatives.yaml``:

``forward(*inputs, **params)``
    computes the output from numpy arrays (or Python floats, for ``Scalar``).
``vjp(g, ans, *inputs, **params)``
    the vector-Jacobian product: given ``g`` (the gradient of the final result
    with respect to this op's output ``ans``) it returns one gradient per input,
    each of that input's shape; ``None`` for an input that is not
    differentiable (a mask: data, not a parameter). Built-in VJPs are written
    with the ops themselves (operators, methods, :meth:`Op.bind`): on plain
    arrays they are numpy, on Scalars and Tensors they record — so the reverse
    pass with ``create_graph=True`` is itself a recorded program.
``jvp(tangents, ans, *inputs, **params)``
    the Jacobian-vector product (forward mode): one tangent per input (``None``
    for a constant or an input with no tangent), returns the output's tangent.
``reads``
    which values the VJP reads: operand names and the output's name
    (``("a", "b")`` for mul, ``("p",)`` for softmax, ``()`` for scale). A
    lean tape (``Tape(lean=True)``) keeps only those; the shapes and dtypes
    of the others stay known. ``None`` (a user op that says nothing): all of them.
``inputs`` and ``grads``
    the operands' names and, per operand, the gradient it receives written for
    people — ``None`` for the non-differentiable ones. A formula is a template:
    ``{g}`` is the incoming gradient, ``{b}`` an operand, ``{exponent}`` a
    parameter, so a picture can print the student's own names (``g * {b}``
    becomes ``1 * d``) and the listing the generic ones (``g * b``).

Every op, built-in or yours, enters :data:`OPS` through :func:`register`:
the built-in families (:mod:`.elementwise`, :mod:`.reductions`,
:mod:`.shape`, :mod:`.linalg`, :mod:`.nn`) with :func:`primitive`, your own
with :func:`define`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..engine import Node, record
from ..engine.protocols import Value

__all__ = ["Op", "OPS", "define", "primitive", "register", "value_of", "DOMAINS", "Value", "Grads", "Axis", "Shape"]

# The types the ops' annotations use. A value (:data:`~microtape.engine.protocols.Value`) is an
# array, a float, or a Scalar/Tensor in a recorded pass; a VJP returns one gradient per input.
Grads: TypeAlias = tuple[Value, ...]
Axis: TypeAlias = int | tuple[int, ...] | None
Shape: TypeAlias = tuple[int, ...]

# A placeholder in a formula template: {g}, {x}, {exponent}.
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, eq=False)
class Op:
    """One primitive: its forward, its VJP (and JVP) and, per input, the gradient's formula.

    Call it on nodes to record it: ``op(x)``, ``op(a, b, name="y", **params)``
    returns a node of its first node input's kind (Scalar or Tensor).
    """

    name: str
    forward: Callable
    vjp: Callable
    inputs: tuple  # the operands' names, as the formulas call them: ("a", "b")
    grads: tuple  # per input: its gradient as a text template, or None (not differentiable)
    grads_latex: tuple  # the same in LaTeX (None where not differentiable)
    output: str = "y"  # what the formulas call the output
    note: str = ""  # a fact the formulas rely on, said once (dropout's keep ∈ {0, 1/(1-p)})
    # Where the inputs may come from when tests sample them: "real", "positive", "unit" (-1 < x < 1)
    # or "above_one" (x > 1: arccosh).
    domain: str = "real"
    # Example parameters, so tests can call every op without special cases.
    example_params: dict = field(default_factory=dict)
    # What a box in a graph shows of the parameters (pow "²", scale "×0.5"), or None.
    label: Callable | None = None
    builtin: bool = True
    # Forward mode: jvp(tangents, ans, *inputs, **params) -> the output's tangent (None: no forward mode).
    jvp: Callable | None = None
    # Does the VJP work on Scalars/Tensors (so it can be recorded and differentiated again)?
    higher_order: bool = True
    # The residuals slot: forward_saving(*inputs, **params) -> (output, residuals). The
    # residuals (what backward needs from the forward) are kept on the node and reach the
    # VJP as ``residuals=``; a VJP called without them must compute them again. (Kept for a
    # call with parameters — the tiled kernel always has its block size; without any, the
    # plain forward runs and the VJP recomputes.)
    forward_saving: Callable | None = None
    # What the VJP reads, by name (operands and the output): a lean tape keeps only these values.
    # None: everything (a user op that declares nothing). Shapes and dtypes are always kept.
    reads: Sequence[str] | None = None  # (kept as a tuple)
    # What the op's forward and its VJP allocate for their own step beyond what they return — numpy's
    # temporaries: a convolution's im2col columns and padded copy, the tiled op's scratch tiles — in
    # bytes, from the shapes alone: scratch(shapes, itemsize, **params) -> (forward, vjp), ``shapes``
    # the output's then each input's. The memory view counts them during that step (they are gone
    # after it). None: nothing worth counting (elementwise ops, reductions, views).
    scratch: Callable | None = None
    # The VJP the Scalar fast path calls, set from ``vjp`` (so ``dataclasses.replace(op, vjp=...)``
    # changes both): ``vjp`` itself, or the elementwise derivative inside a VJP made by
    # :func:`.broadcasting.unbroadcasting` (floats never broadcast: nothing to sum back).
    float_vjp: Callable = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "float_vjp", getattr(self.vjp, "for_floats", self.vjp))
        if self.reads is not None:
            names = (*self.inputs, self.output)
            if not isinstance(self.reads, (tuple, list)) or not all(name in names for name in self.reads):
                raise ValueError(f"op {self.name!r}: reads={self.reads!r} must name what its VJP reads among {names}")
            object.__setattr__(self, "reads", tuple(self.reads))

    # -- what a lean tape keeps

    @property
    def reads_output(self) -> bool:
        """Does the VJP read the op's output? (True when the op declares nothing.)"""
        return self.reads is None or self.output in self.reads

    @property
    def read_inputs(self) -> tuple[int, ...]:
        """Positions of the inputs whose values the VJP reads (all of them when the op declares nothing)."""
        if self.reads is None:
            return tuple(range(self.arity))
        return tuple(i for i, name in enumerate(self.inputs) if name in self.reads)

    # -- what the op is, as data

    @property
    def arity(self) -> int:
        return len(self.inputs)

    @property
    def differentiable(self) -> tuple[bool, ...]:
        """One bool per input: does the op pass a gradient to it?"""
        return tuple(formula is not None for formula in self.grads)

    @property
    def constant_inputs(self) -> tuple[int, ...]:
        """Positions of the inputs that receive no gradient (masks)."""
        return tuple(i for i, formula in enumerate(self.grads) if formula is None)

    def formula_for(self, position: int, names: Any = None) -> str | None:
        """The gradient of input ``position`` as text, placeholders filled in.

        ``names`` maps placeholders (``"g"``, operand names, the output's name,
        parameter names) to what to print; the rest print as themselves.
        None for an input that is not differentiable.
        """
        template = self.grads[position]
        if template is None:
            return None
        names = names or {}
        return _PLACEHOLDER.sub(lambda m: str(names.get(m.group(1), m.group(1))), template)

    @property
    def formula(self) -> str:
        """The whole VJP on one line: ``grad_a = g * b;  grad_b = g * a``."""
        parts = [
            f"grad_{name} = {self.formula_for(i)}" if self.grads[i] is not None else f"{name}: constant (no gradient)"
            for i, name in enumerate(self.inputs)
        ]
        text = ";  ".join(parts)
        return f"{text}  ({self.note})" if self.note else text

    @property
    def latex(self) -> str:
        r"""The whole VJP in LaTeX: ``\bar a = \bar y\, b,\quad \bar b = \bar y\, a``."""
        return r",\quad ".join(latex for latex in self.grads_latex if latex is not None)

    def describe(self, params: dict[str, Any] | None) -> str:
        """What a picture shows of this op: ``pow ²``, ``scale ×0.5``, or just its name."""
        extra = self.label(params or {}) if self.label is not None else ""
        return f"{self.name} {extra}" if extra else self.name

    def __repr__(self) -> str:
        return f"Op({self.name!r}: {self.formula})"

    # -- running it

    def bind(self, *operands: Any, **params: Any) -> Any:
        """Apply the op the way a VJP does: plain values compute, tape values record.

        This is Autodidax's ``bind``: ``exp.bind(x)`` is ``numpy.exp(x)`` for an
        array and a recorded ``exp`` for a Tensor, so one derivative, written
        once, serves the plain reverse pass and the recorded one
        (``create_graph=True``). Plain operands beside a node become constants.
        """
        for like in operands:
            if isinstance(like, Node):
                break
        else:
            return self.forward(*operands, **params)
        kind = like.__class__
        inputs = tuple(x if isinstance(x, Node) else kind._constant(x, like) for x in operands)
        return record(self, inputs, params or None)

    def __call__(self, *operands: Any, name: str | None = None, **params: Any) -> Any:
        """Run this op on Scalars/Tensors (numbers and arrays become constants) and record it.

        Returns a node of the first node input's kind (typed Any: a Scalar or a Tensor, as the inputs say).
        """
        if len(operands) != self.arity:
            raise TypeError(
                f"op {self.name!r} takes {self.arity} input{'s' if self.arity != 1 else ''} "
                f"({', '.join(self.inputs)}), got {len(operands)}"
            )
        nodes = [x for x in operands if isinstance(x, Node)]
        if not nodes:
            raise TypeError(f"op {self.name!r}: give at least one Scalar or Tensor input, got only plain values")
        kind = nodes[0].__class__
        inputs = []
        for position, x in enumerate(operands):
            if not isinstance(x, Node):
                x = kind._constant(x, nodes[0])
            elif not isinstance(x, kind):
                raise TypeError(
                    f"op {self.name!r}: input {self.inputs[position]!r} is a {type(x).__name__} but the first "
                    f"input is a {kind.__name__}; Scalars and Tensors do not mix"
                )
            if x.requires_grad and self.grads[position] is None:
                raise ValueError(
                    f"op {self.name!r}: input {self.inputs[position]!r} is not differentiable (a constant), "
                    "so it must not require a gradient"
                )
            inputs.append(x)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"op {self.name!r}: name must be a string, got {type(name).__name__}")
        return record(self, tuple(inputs), params or None, name)


#: Every op by name: the built-in ones (all registered by ``import microtape``), then any you :func:`define`.
OPS: dict[str, Op] = {}

#: Where an op's inputs may lie (its ``domain``): what tests sample from.
DOMAINS = ("real", "positive", "unit", "above_one")

_DEFAULT_INPUTS = {1: ("x",), 2: ("a", "b"), 3: ("a", "b", "c")}


def value_of(x: Value) -> Value:
    """The number or array inside ``x`` (its ``.data`` for a Scalar or Tensor).

    VJPs use it for what is *not* differentiated: a comparison, a sign, the
    position of a maximum — constants of the derivative, never recorded.
    """
    return x.data if isinstance(x, Node) else x


def register(op: Op) -> Op:
    """Add ``op`` to :data:`OPS` and return it.

    A built-in name is taken for good (registering another op under it is
    refused); one of your own ops may be replaced by a new one of the same name.
    """
    if not isinstance(op, Op):
        raise TypeError(f"register(op): expected a microtape.ops.Op, got {type(op).__name__}")
    existing = OPS.get(op.name)
    if existing is not None and existing is not op and (existing.builtin or op.builtin):
        raise ValueError(f"register({op.name!r}): {op.name!r} is a built-in op and cannot be redefined")
    OPS[op.name] = op
    return op


def primitive(
    name: str,
    forward: Callable[..., Any],
    vjp: Callable[..., Any],
    grads: Sequence[str | None],
    latex: Sequence[str | None] | str,
    *,
    inputs: Sequence[str] | None = None,
    **fields: Any,
) -> Op:
    """Make and register a built-in op (one formula per input; None marks a constant input).

    This is how every built-in family, and the tiled attention kernel, adds its ops.
    """
    grads, latex = tuple(grads), tuple(latex)
    inputs = tuple(inputs or _DEFAULT_INPUTS[len(grads)])
    if not len(inputs) == len(grads) == len(latex):
        raise ValueError(f"primitive({name!r}): give one operand name, formula and LaTeX per input")
    return register(Op(name, forward, vjp, inputs, grads, latex, **fields))


def define(
    name: str,
    forward: Callable[..., Any],
    vjp: Callable[..., Any],
    formula: str | Sequence[str | None],
    latex: Sequence[str | None] | str | None = None,
    *,
    inputs: Sequence[str] | None = None,
    output: Any = "y",
    note: str = "",
    domain: str = "real",
    example_params: dict[str, Any] | None = None,
    label: Callable[[dict[str, Any]], str] | None = None,
    jvp: Callable[..., Any] | None = None,
    higher_order: bool = False,
    reads: Sequence[str] | None = None,
) -> Op:
    """Define your own op and return it; call it on Scalars or Tensors to record it.

    ``forward(*inputs, **params)`` computes the output (numpy arrays, or floats
    for Scalars); ``vjp(g, ans, *inputs, **params)`` returns one gradient per
    input (a tuple; ``None`` for a non-differentiable input). ``formula`` is
    one string for a one-input op, or one per input (``None`` for a
    non-differentiable one) — write ``{x}`` for an operand and ``{g}`` for the
    incoming gradient, and graphs print the real names there. ``inputs`` names
    the operands (default ``x``, or ``a, b, …``)::

        sigmoid = mt.ops.define(
            "sigmoid",
            forward=lambda x: 1 / (1 + np.exp(-x)),
            vjp=lambda g, s, x: (g * s * (1 - s),),
            formula="{g} * s * (1 - s)",
        )
        y = sigmoid(mt.Tensor(np.zeros(3), requires_grad=True))

    Higher order: say ``higher_order=True`` when your ``vjp`` works on Scalars
    and Tensors too (operators and microtape ops only, no ``np.`` calls on its
    arguments); then ``create_graph=True`` records it. Otherwise a
    ``create_graph=True`` pass through your op is refused, naming it.
    ``jvp(tangents, ans, *inputs, **params)`` adds forward mode (``mt.jvp``).
    ``reads`` names the values your ``vjp`` reads (operands and ``output``,
    e.g. ``reads=("y",)`` for the sigmoid above): a lean tape then drops the
    others. Without it a lean tape keeps every value your op touches.

    Redefining one of your own ops replaces it (so a notebook cell can be run
    again); the built-in names are refused.
    """
    _check_functions(name, forward, vjp, jvp, higher_order)
    grads, latex, names = _formulas(name, formula, latex, inputs)
    if domain not in DOMAINS:
        raise ValueError(f"define({name!r}, domain={domain!r}): expected one of {', '.join(map(repr, DOMAINS))}")
    op = Op(
        name,
        forward,
        vjp,
        names,
        grads,
        latex,
        output=output,
        note=note,
        domain=domain,
        example_params=dict(example_params or {}),
        label=label,
        builtin=False,
        jvp=jvp,
        higher_order=higher_order,
        reads=reads,
    )
    return register(op)


def _check_functions(name: Any, forward: Any, vjp: Any, jvp: Any, higher_order: Any) -> None:
    """:func:`define`'s checks of the name and the functions (a clear error naming the argument)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"define(name={name!r}): expected a name like 'sigmoid' (letters, digits, _)")
    if name in OPS and OPS[name].builtin:
        raise ValueError(f"define({name!r}): {name!r} is a built-in op and cannot be redefined; choose another name")
    for what, fn in (("forward", forward), ("vjp", vjp)):
        if not callable(fn):
            raise TypeError(f"define({name!r}, {what}=...): expected a function, got {type(fn).__name__}")
    if jvp is not None and not callable(jvp):
        raise TypeError(f"define({name!r}, jvp=...): expected a function or None, got {type(jvp).__name__}")
    if not isinstance(higher_order, bool):
        raise TypeError(f"define({name!r}, higher_order={higher_order!r}): expected True or False")


def _formulas(
    name: str, formula: Any, latex: Any, inputs: Sequence[str] | None
) -> tuple[tuple[str | None, ...], tuple[str | None, ...], tuple[str, ...]]:
    """:func:`define`'s formulas, LaTeX and operand names, one per input, checked (the arity is the formulas')."""
    grads = (formula,) if isinstance(formula, str) else formula
    if not isinstance(grads, Sequence) or not grads or not all(f is None or isinstance(f, str) for f in grads):
        raise TypeError(
            f"define({name!r}, formula=...): expected a string (one input) or a list with one string per "
            f"input (None for a non-differentiable one), got {formula!r}"
        )
    if all(f is None for f in grads):
        raise ValueError(f"define({name!r}, formula=...): at least one input must be differentiable")
    arity = len(grads)
    if latex is None:
        latex = [None if f is None else r"\text{" + f.replace("{", "").replace("}", "") + "}" for f in grads]
    elif isinstance(latex, str):
        latex = [latex]
    if len(latex) != arity:
        raise ValueError(f"define({name!r}, latex=...): give one LaTeX formula per input ({arity})")
    names = tuple(inputs) if inputs is not None else _DEFAULT_INPUTS.get(arity, tuple(f"x{i}" for i in range(arity)))
    if len(names) != arity or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise ValueError(f"define({name!r}, inputs={inputs!r}): expected {arity} operand names")
    return tuple(grads), tuple(latex), names
