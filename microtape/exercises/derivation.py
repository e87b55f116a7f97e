r"""A teacher's own stepped exercise, from a forward written once on Tensors.

This module lets a teacher add an exercise to the lab without writing its
answer, its stub or its trials::

    import numpy as np
    import microtape.exercises as ex

    def forward(x, w):
        h = (x @ w).tanh()
        return {"h": h, "loss": (h * h).sum()}

    def inputs(rng, size):
        n = {"visible": 3, "hidden": 5, "large": 400}[size]
        return {"x": rng.standard_normal((n, 4)), "w": rng.standard_normal((4, 2))}

    ex.derivation("tanh_square", forward, inputs=inputs, steps=["h", "w"])

The student writes ``tanh_square(x, w)`` returning
``{"grad_h": ..., "grad_w": ...}``; each step is judged link by link
(:mod:`.links`). The exercise is registered when it is made: listed, stubbed,
checked, scored and graded like a built-in one (``--exercises FILE.py`` on
the command line loads the teacher's file in the grader's process; the
student's code still runs only in the box).

What is asked of the arguments
------------------------------
``forward(**arrays)`` gets every array as a Tensor that requires a gradient
and returns a dict of named Tensors with the scalar ``"loss"`` in it.
``inputs(rng, size)`` returns a dict of float64 arrays, one per parameter of
the forward, for ``size`` ``"visible"`` (the trials a student sees),
``"hidden"`` (graded, drawn from the class secret) and ``"large"`` (one
graded trial, the same for the whole class: big enough that numerical
differentiation runs out of time). ``steps`` names the dict's intermediates
or the forward's inputs whose gradients the student returns, in derivation
order from the loss back. Everything is checked here, once, by running the
forward on a visible and a hidden trial: a bad argument is a ``ValueError``
or ``TypeError`` naming it, and nothing is registered.
"""

import inspect
import keyword
import textwrap
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..engine import Tape, gradients
from ..values.tensor import Tensor
from .registry import EXERCISES, Exercise, Mistake, Step, register

__all__ = ["derivation", "SIZES", "VISIBLE_TRIALS", "HIDDEN_TRIALS"]

#: The sizes ``inputs(rng, size)`` is asked for.
SIZES = ("visible", "hidden", "large")
#: How many trials of each kind a derivation has (the hidden ones add the one large trial).
VISIBLE_TRIALS = 3
HIDDEN_TRIALS = 3


def derivation(
    name: str,
    forward: Callable,
    *,
    inputs: Callable,
    steps: Iterable[str],
    points: int | Mapping[str, int] | None = None,
    mistakes: Iterable[Mistake] = (),
    carry_forward: bool = True,
    title: str = "",
) -> Exercise:
    """Make, register and return a stepped exercise from ``forward`` (see the module docstring).

    ``points``: each step's points — None (1 each), one integer for every
    step, or a dict by step name (``"h"`` or ``"grad_h"``; steps left out get
    1). ``mistakes``: :class:`~microtape.exercises.registry.Mistake`\\ s, each
    a function with the student's signature returning the steps it changes
    (``{"grad_h": ...}``) and naming the step it breaks (``step=``); a kind
    of your own needs ``kind_label=``. ``carry_forward=False``: a step right
    only from a wrong upstream step (*carried*) earns nothing.
    """
    _check_name(name)
    parameters = _parameters(forward)
    steps = _check_steps_argument(steps)
    if not callable(inputs):
        raise TypeError(f"derivation(inputs=...): expected a function inputs(rng, size), got {type(inputs).__name__}")
    if not isinstance(carry_forward, bool):
        raise TypeError(f"derivation(carry_forward={carry_forward!r}): expected True or False")
    if not isinstance(title, str):
        raise TypeError(f"derivation(title=...): expected a string, got {type(title).__name__}")
    chain = _Chain(name, forward, inputs, parameters, steps)
    shapes = chain.validate()
    outputs = _outputs(steps, chain.after, _points(points, steps))
    stub, source = _stub(name, parameters, outputs, shapes, forward, title)
    exercise = Exercise(
        name=name,
        title=title or f"{name}: " + " → ".join(f"grad_{step}" for step in steps),
        stub=stub,
        make_inputs=chain.make_inputs,
        tape_gradients=chain.tape_gradients,
        outputs=outputs,
        mistakes=_mistakes(mistakes, outputs, name),
        visible=tuple({"size": "visible"} for _ in range(VISIBLE_TRIALS)),
        hidden=(*({"size": "hidden"} for _ in range(HIDDEN_TRIALS)), {"size": "large", "shared": True}),
        record=chain.record,
        carry_forward=carry_forward,
        source=source,
    )
    return register(exercise)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(
            f"derivation(name={name!r}): expected a Python identifier (the student's function is called so)"
        )
    if name in EXERCISES:
        raise ValueError(f"derivation(name={name!r}): an exercise of that name is already registered; choose another")


def _parameters(forward: Any) -> Any:
    if not callable(forward):
        raise TypeError(f"derivation(forward=...): expected a function of arrays, got {type(forward).__name__}")
    try:
        signature = inspect.signature(forward)
    except (TypeError, ValueError):
        raise TypeError("derivation(forward=...): its signature cannot be read; write it with def") from None
    names = []
    for parameter in signature.parameters.values():
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise ValueError(
                f"derivation(forward=...): parameter {parameter.name!r} must be a plain named one "
                "(no *args, **kwargs or positional-only): the student's function takes the same"
            )
        names.append(parameter.name)
    if not names:
        raise ValueError("derivation(forward=...): the forward takes no arrays; it must take at least one")
    return tuple(names)


def _check_steps_argument(steps: Any) -> Any:
    if isinstance(steps, str) or not isinstance(steps, Iterable):
        raise TypeError(f"derivation(steps={steps!r}): expected a list of names, e.g. ['logits', 'h', 'w']")
    steps = list(steps)
    if not steps:
        raise ValueError("derivation(steps=[]): name at least one step")
    for step in steps:
        if not isinstance(step, str) or not step.isidentifier():
            raise ValueError(
                f"derivation(steps=...): {step!r} is not a name (each step is a key of the forward's dict)"
            )
    if len(set(steps)) != len(steps):
        raise ValueError(f"derivation(steps={steps!r}): a step is named twice")
    if "loss" in steps:
        raise ValueError("derivation(steps=...): 'loss' is not a step (its gradient is 1); name what comes before it")
    return tuple(steps)


class _Chain:
    """The teacher's forward and inputs, checked, and what the exercise needs of them."""

    def __init__(self, name: str, forward: Any, inputs: Any, parameters: Any, steps: Any) -> None:
        self.name = name
        self.forward = forward
        self.inputs = inputs
        self.parameters = parameters
        self.steps = steps
        self.after: dict[Any, Any] = {}

    def draw(self, rng: np.random.Generator, size: Any) -> Any:
        """``inputs(rng, size)``, checked: a dict of float64 arrays, one per parameter of the forward."""
        drawn = self.inputs(rng, size)
        if not isinstance(drawn, Mapping):
            raise TypeError(f"derivation(inputs=...): inputs(rng, {size!r}) returned a {type(drawn).__name__}; "
                            f"expected a dict of float64 arrays with keys {', '.join(self.parameters)}")  # fmt: skip
        keys = list(drawn)
        if set(keys) != set(self.parameters):
            extra = [k for k in keys if k not in self.parameters]
            absent = [p for p in self.parameters if p not in keys]
            raise ValueError(f"derivation(inputs=...): inputs(rng, {size!r}) returned the keys {keys}; expected the "
                             f"parameters {list(self.parameters)} (missing {absent}, extra {extra})")  # fmt: skip
        for key in self.parameters:
            value = drawn[key]
            if not isinstance(value, np.ndarray) or value.dtype != np.float64:
                what = f"{type(value).__name__}" + (f" of dtype {value.dtype}" if isinstance(value, np.ndarray) else "")
                raise TypeError(f"derivation(inputs=...): inputs(rng, {size!r})[{key!r}] is a {what}; expected a "
                                "float64 numpy array (np.asarray(..., dtype=np.float64))")  # fmt: skip
        return {key: drawn[key] for key in self.parameters}

    def make_inputs(self, rng: np.random.Generator, case: dict[str, Any]) -> Any:
        return self.draw(rng, case["size"])

    def run(self, inputs: dict[str, Any]) -> Any:
        """The forward on Tensors, on a new tape: ``(tape, {name: Tensor})``, each node named by its key."""
        arrays = {key: Tensor(inputs[key], requires_grad=True, name=key) for key in self.parameters}
        with Tape() as tape:
            named = self.forward(**arrays)
        return tape, arrays, named

    def record(self, inputs: dict[str, Any]) -> Any:
        tape, arrays, named = self.run(inputs)
        for key, value in named.items():
            if key not in arrays:
                value.name = key
        return tape, named["loss"]

    def tape_gradients(self, inputs: dict[str, Any]) -> Any:
        tape, loss = self.record(inputs)
        found = gradients(loss, tape=tape)
        values = []
        for step in self.steps:
            node = tape.variable(step)
            values.append(np.array(found[node], dtype=np.float64) if node in found else np.zeros_like(node.data))
        return tuple(values)

    def validate(self) -> Any:
        """Run the forward on a visible and a hidden trial and check everything; ``{step: shape}`` (visible)."""
        self.draw(np.random.default_rng(1), "large")
        self.draw(np.random.default_rng(2), "hidden")
        visible = self.draw(np.random.default_rng(0), "visible")
        tape, arrays, named = self.run(visible)
        self._check_returned(named, arrays)
        self._find_order(tape, named, arrays)
        tape, _ = self.record(visible)
        for step in self.steps:  # each step is found on the tape by its name (the links and the picture look it up)
            try:
                tape.variable(step)
            except KeyError:
                raise ValueError(f"derivation(forward=...): another value of the forward is also named {step!r} "
                                 "(a name= given to an op): name it otherwise") from None  # fmt: skip
        shapes = {step: np.shape((arrays | dict(named))[step].data) for step in self.steps}
        return shapes

    def _check_returned(self, named: Any, arrays: Any) -> None:
        where = "derivation(forward=...)"
        if not isinstance(named, Mapping):
            raise TypeError(f"{where}: the forward returned a {type(named).__name__}; expected a dict of named "
                            'Tensors with the scalar "loss" in it')  # fmt: skip
        if "loss" not in named:
            raise ValueError(f'{where}: the forward\'s dict has no "loss" (its keys: {list(named)})')
        for key, value in named.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ValueError(f"{where}: the key {key!r} of the forward's dict is not a name")
            if not isinstance(value, Tensor):
                raise TypeError(f"{where}: {key!r} is a {type(value).__name__}; expected a Tensor computed from "
                                "the inputs (write the forward with Tensor operations)")  # fmt: skip
            if key in arrays and value is not arrays[key]:
                raise ValueError(f"{where}: the key {key!r} is also a parameter's name; name it otherwise")
        if np.shape(named["loss"].data) != ():
            raise ValueError(f'{where}: "loss" has shape {np.shape(named["loss"].data)}; expected a scalar '
                             "(shape (), e.g. .sum() or .mean())")  # fmt: skip
        owners: dict[Any, Any] = {}
        for key, value in named.items():
            if id(value) in owners and key not in arrays:
                raise ValueError(f"{where}: {owners[id(value)]!r} and {key!r} are the same Tensor; name each once")
            owners[id(value)] = key
        for step in self.steps:
            if step not in named and step not in arrays:
                raise ValueError(f"derivation(steps=...): {step!r} is neither a key of the forward's dict "
                                 f"({', '.join(k for k in named if k != 'loss')}) nor a parameter "
                                 f"({', '.join(self.parameters)})")  # fmt: skip
            if step in named and step not in arrays and not named[step].requires_grad:
                raise ValueError(f"derivation(steps=...): {step!r} does not depend on any input: it has no gradient")

    def _find_order(self, tape: Any, named: Any, arrays: Any) -> None:
        """Each step's ``after`` (the steps its gradient is computed from), and a check of the steps' order."""
        nodes = {step: (named[step] if step in named else arrays[step]) for step in self.steps}
        for step, node in nodes.items():
            if node.op is not None:
                try:
                    tape.index_of(node)
                except ValueError:
                    raise ValueError(f"derivation(forward=...): {step!r} was not computed in the forward") from None
        reached, direct = _reached_from(tape, nodes, stop=False), _reached_from(tape, nodes, stop=True)
        for i, step in enumerate(self.steps):
            later = [other for other in self.steps[i + 1 :] if other in reached[step]]
            if later:
                raise ValueError(f"derivation(steps=...): {later[0]!r} is computed from {step!r}, so its gradient "
                                 f"comes first: list the steps in derivation order, from the loss back")  # fmt: skip
            self.after["grad_" + step] = tuple("grad_" + other for other in self.steps[:i] if other in direct[step])


def _reached_from(tape: Any, nodes: Any, stop: Any) -> Any:
    """``{step: the steps whose nodes are computed from it}`` (the steps its gradient is computed from).

    ``stop=True``: only the first step on each path (the walk goes no further than a step), so the
    steps its gradient is computed from *directly* — every one of them, when several paths leave it.
    """
    by_node = {node: step for step, node in nodes.items()}
    readers: dict[Any, Any] = {}
    for equation in tape.nodes:
        for x in equation.inputs:
            readers.setdefault(x, []).append(equation)
    reached = {}
    for step, node in nodes.items():
        found, todo, seen = set(), [node], set()
        while todo:
            current = todo.pop()
            for reader in readers.get(current, ()):
                if reader not in seen:
                    seen.add(reader)
                    if reader in by_node:
                        found.add(by_node[reader])
                        if stop:
                            continue
                    todo.append(reader)
        reached[step] = found
    return reached


def _points(points: Any, steps: Any) -> Any:
    if points is None:
        return dict.fromkeys(steps, 1)
    if isinstance(points, bool):
        raise TypeError(f"derivation(points={points!r}): expected None, a positive integer or a dict by step")
    if isinstance(points, (int, np.integer)):
        if points < 1:
            raise ValueError(f"derivation(points={points!r}): expected a positive integer")
        return dict.fromkeys(steps, int(points))
    if not isinstance(points, Mapping):
        raise TypeError(f"derivation(points={points!r}): expected None, a positive integer or a dict by step")
    chosen = dict.fromkeys(steps, 1)
    for key, value in points.items():
        step = key.removeprefix("grad_") if isinstance(key, str) and key.removeprefix("grad_") in steps else key
        if step not in chosen:
            raise ValueError(f"derivation(points=...): {key!r} is not a step (the steps: {', '.join(steps)})")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"derivation(points=...): {key!r} is worth {value!r}; expected a whole number ≥ 0")
        chosen[step] = int(value)
    return chosen


def _outputs(steps: Any, after: Any, points: Any) -> Any:
    return tuple(Step(f"grad_{step}", step, points[step], after=after[f"grad_{step}"], node=step) for step in steps)


def _mistakes(mistakes: Any, outputs: Any, name: str) -> Any:
    if isinstance(mistakes, Mistake) or not isinstance(mistakes, Iterable):
        raise TypeError("derivation(mistakes=...): expected a list of ex.Mistake")
    names = {output.name for output in outputs}
    checked = []
    for mistake in mistakes:
        if not isinstance(mistake, Mistake):
            raise TypeError(f"derivation(mistakes=...): expected ex.Mistake objects, got {type(mistake).__name__}")
        step = mistake.step if mistake.step in names else f"grad_{mistake.step}"
        if step not in names:
            raise ValueError(f"derivation(mistakes=...): mistake {mistake.name!r} names the step {mistake.step!r}; "
                             f"expected one of {', '.join(sorted(names))}")  # fmt: skip
        if not callable(mistake.fn):
            raise TypeError(f"derivation(mistakes=...): mistake {mistake.name!r} has no function to run")
        checked.append(mistake if step == mistake.step else _with_step(mistake, step))
    if len({m.name for m in checked}) != len(checked):
        raise ValueError(f"derivation(mistakes=...): two mistakes of {name} share a name")
    return tuple(checked)


def _with_step(mistake: Any, step: Any) -> Any:
    from dataclasses import replace

    return replace(mistake, step=step)


def _stub(name: str, parameters: Any, outputs: Any, shapes: Any, forward: Any, title: str) -> Any:
    """The student's stub: a function with the forward's parameters, the prompt as its docstring, and its source."""
    doc = _prompt(name, parameters, outputs, shapes, forward, title)

    def stub(*args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{name}: return {{{', '.join(repr(o.name) + ': ...' for o in outputs[:2])}, ...}}")

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    stub.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in parameters]
    )
    returned = ", ".join(f"'{o.name}': ..." for o in outputs[:2]) + (", ..." if len(outputs) > 2 else "")
    source = (
        f"def {name}({', '.join(parameters)}):\n"
        + textwrap.indent(f'r"""{doc}\n"""', "    ")
        + f'\n    raise NotImplementedError("{name}: return {{{returned}}}")\n'
    )
    return stub, source


def _prompt(name: str, parameters: Any, outputs: Any, shapes: Any, forward: Any, title: str) -> Any:
    try:
        code = textwrap.dedent(inspect.getsource(forward)).rstrip()
    except (OSError, TypeError):
        code = f"(the forward {getattr(forward, '__name__', '')}: its source is not available)"
    width = max(len(output.name) for output in outputs) + 4
    lines = [
        title or f"{name}: a derivation, one named step at a time.",
        "",
        "The forward (every argument a float64 array; on the tape, each a Tensor):",
        "",
        textwrap.indent(code.replace('"""', "'''"), "    "),
        "",
        f"Arguments: {', '.join(parameters)} (numpy float64 arrays). L is the loss.",
        "",
        "Return a dict with every step of the derivation, from the loss back (shapes of a visible trial):",
    ]
    for output in outputs:
        source = f"  (from {', '.join(output.after)})" if output.after else ""
        shape = list(shapes[output.node])
        lines.append(f"    {output.name!r:<{width}} dL/d{output.node}, shaped like {output.node} {shape}{source}")
    lines += [
        "Each step is checked twice against the tape: against the true gradient, and against what the",
        "tape computes from your own upstream steps. A step right from a wrong upstream step is",
        "carried: the error is named where it was made, not at every later step.",
    ]
    return "\n".join(lines)
