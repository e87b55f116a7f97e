"""Module: what every layer shares — parameters with dotted names, train/eval, zero_grad.

This module lets you build layers out of layers, PyTorch-style::

    class TwoLayers(mt.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = mt.nn.Linear(4, 8, seed=0)
            self.second = mt.nn.Linear(8, 2, seed=1)

        def forward(self, x):
            with self.scope():
                return self.second(self.first(x).tanh())

    model = TwoLayers()
    [name for name, _ in model.named_parameters()]
    # ['first.weight', 'first.bias', 'second.weight', 'second.bias']

Assigning a :class:`~microtape.Tensor` that requires a gradient to a public
attribute registers it as a parameter; assigning a Module registers it as a
child (names starting with ``_`` are private state, never registered).
Over a parameter only a parameter (a leaf Tensor with ``requires_grad=True``)
or ``None`` may be assigned, and over a child only a Module or ``None`` —
PyTorch's rule: ``lin.weight = lin.weight * 2`` raises ``TypeError`` instead
of silently dropping the weight from ``parameters()`` (change the numbers in
place, ``lin.weight.data *= 2``, or assign a new parameter). A
parameter's ``name`` (what tape listings and graphs print) is its dotted path
from the outermost module: ``q_proj.weight`` in an attention
layer, ``self_attn.q_proj.weight`` once that layer sits in an encoder. A
module's :meth:`scope` tags the operations it runs with its attribute name,
so graphs draw one box per module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine import Node, Tape, module_scope
from ..engine.boundary import sum_into_grad
from ..values.tensor import Tensor

__all__ = ["Module", "RecordedLayer", "add_to_grads"]


class Module:
    """The base of every layer: ``parameters``, ``named_parameters``, ``zero_grad``, ``train``/``eval``.

    Subclasses call ``super().__init__()`` first, assign their parameters and
    sub-layers as attributes, and define ``forward``; calling the module calls
    ``forward``. ``training`` is True for a new module (dropout active).
    """

    # Set in __init__ with object.__setattr__ (neither parameters nor sub-layers):
    training: bool
    _parameters: dict[str, Tensor]
    _modules: dict[str, Module]
    _path: str

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_path", "")  # dotted path from the outermost module ("" for it)
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        _check_replacement(self, name, value)
        # A replacement keeps its place (a dict key assigned again does not move), as in PyTorch.
        if name.startswith("_"):
            pass  # private state (the last input, a cache) is never a parameter or a child
        elif isinstance(value, Module):
            self._parameters.pop(name, None)
            self._modules[name] = value
            value._set_path(_join(self._path, name))
        elif _is_parameter(value):
            self._modules.pop(name, None)
            self._parameters[name] = value
            value.name = _join(self._path, name)
        else:
            self._parameters.pop(name, None)
            self._modules.pop(name, None)
        object.__setattr__(self, name, value)

    def _set_path(self, path: Any) -> None:
        """Rename this module's parameters (and its children's) after it was placed at ``path``."""
        object.__setattr__(self, "_path", path)
        for name, tensor in self._parameters.items():
            tensor.name = _join(path, name)
        for name, child in self._modules.items():
            child._set_path(_join(path, name))

    # -- parameters

    def named_parameters(self) -> list[tuple[str, Tensor]]:
        """``[(dotted name, Tensor), ...]``: own parameters first, then each child's, in assignment order.

        Names are relative to this module (``q_proj.weight`` for an attention
        layer). A parameter shared by two children is listed once.
        """
        named, seen = [], set()
        for name, tensor in self._parameters.items():
            if id(tensor) not in seen:
                seen.add(id(tensor))
                named.append((name, tensor))
        for child_name, child in self._modules.items():
            for name, tensor in child.named_parameters():
                if id(tensor) not in seen:
                    seen.add(id(tensor))
                    named.append((f"{child_name}.{name}", tensor))
        return named

    def parameters(self) -> list[Tensor]:
        """The parameter Tensors, in the order of :meth:`named_parameters`."""
        return [tensor for _, tensor in self.named_parameters()]

    def named_modules(self) -> Any:
        """``[(dotted name, Module), ...]``: this module (name ``""``) and every descendant."""
        named = [("", self)]
        for child_name, child in self._modules.items():
            named += [(_join(child_name, name), module) for name, module in child.named_modules()]
        return named

    def children(self) -> Any:
        return list(self._modules.values())

    def zero_grad(self) -> None:
        """Forget every parameter gradient (set ``.grad`` to None)."""
        for tensor in self.parameters():
            tensor.grad = None

    # -- modes

    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active); ``train(False)`` is :meth:`eval`. Returns the module."""
        if not isinstance(mode, bool):
            raise TypeError(f"{type(self).__name__}.train(mode={mode!r}): expected True or False")
        for _, module in self.named_modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """Evaluation mode: no dropout. Returns the module."""
        return self.train(False)

    # -- running

    def scope(self) -> Any:
        """A context that tags the operations run inside with this module's name (for graphs)."""
        return module_scope(self._path.rpartition(".")[2])

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        output = self.forward(*args, **kwargs)
        # The last forward's output and inputs, kept until the next forward (as a recorded layer keeps
        # its tape): what ``tape`` reads, so the memory view and the graph can draw any layer that ran.
        object.__setattr__(self, "_last_call", {"output": output, "inputs": [*args, *kwargs.values()]})
        return output

    @property
    def tape(self) -> Tape | None:
        """A :class:`~microtape.Tape` of the last forward: the operations from its inputs to its output.

        None before the first forward, or when the forward returned no Scalar
        or Tensor. What made the inputs (an earlier layer, an earlier step of
        a recurrent cell) is not on it. A layer that records its forward on a
        tape of its own (attention, the Transformer layers) returns that tape.
        """
        last = self.__dict__.get("_last_call")
        if last is None or not isinstance(last["output"], Node):
            return None
        if "tape" not in last:  # found once, on first asking: the same Tape until the next forward
            last["tape"] = Tape.of(last["output"], inputs=[x for x in last["inputs"] if isinstance(x, Node)])
        return last["tape"]


def _is_parameter(value: Any) -> Any:
    return isinstance(value, Tensor) and value.requires_grad and value.is_leaf


def _check_replacement(module: Any, name: str, value: Any) -> None:
    """PyTorch's rule: over a parameter only a parameter or None, over a child only a Module or None."""
    owner = type(module).__name__
    if name in module._parameters and value is not None and not _is_parameter(value):
        what = "a computed Tensor" if isinstance(value, Tensor) and not value.is_leaf else _kind(value)
        raise TypeError(
            f"{owner}.{name} = ...: {name!r} is a parameter and cannot be replaced by {what} (it would silently "
            f"leave parameters()); assign a leaf Tensor with requires_grad=True or None, or change the numbers "
            f"in place: {name}.data[...] = ..."
        )
    if name in module._modules and value is not None and not isinstance(value, Module):
        raise TypeError(
            f"{owner}.{name} = ...: {name!r} is a child module and cannot be replaced by {_kind(value)}; "
            "assign a Module or None"
        )


def _kind(value: Any) -> str:
    if isinstance(value, Tensor):
        return "a Tensor that does not require a gradient"
    return f"a {type(value).__name__}"


def _join(prefix: Any, name: str) -> Any:
    # Either part may be empty: the outermost module's path, a module's own entry in named_modules().
    return f"{prefix}.{name}" if prefix and name else prefix or name


class RecordedLayer(Module):
    """A module whose forward keeps what it recorded: its tape and output, until the next forward.

    Subclasses store one record of the last forward in ``self._last`` (with
    ``tape`` and ``output`` fields); this class gives them the same ways to
    read it back, and the same error before the first forward.
    """

    def __init__(self) -> None:
        super().__init__()
        self._last: Any = None

    def _require_forward(self, what: str) -> Any:
        if self._last is None:
            raise RuntimeError(f"{type(self).__name__}.{what}: call forward() first")
        return self._last

    @property
    def tape(self) -> Any:
        """The :class:`~microtape.Tape` of the last forward (None before the first)."""
        return None if self._last is None else self._last.tape

    @property
    def last_output(self) -> Any:
        """The output node of the last forward (None before the first)."""
        return None if self._last is None else self._last.output

    def _commit_backward(self, grads: Any, input_grads: Any) -> None:
        """A backward's one change of state, once every gradient is computed and finite.

        By the tape route, the reverse pass is added into ``.grad`` (every node
        on the path, as ``backward()`` does); by the analytic route, the
        parameters' gradients and ``input_grads`` (``[(input node, gradient)]``).
        The named gradients become the last backward's.
        """
        if grads.reverse_pass is not None:
            grads.reverse_pass.accumulate()
        else:
            add_to_grads([(tensor, grads[name]) for name, tensor in self.named_parameters()] + list(input_grads))
        self._last.grads = grads


def add_to_grads(pairs: Any) -> None:
    """``node.grad += grad`` for each ``(node, grad)`` — all or nothing.

    Every sum is made (and each existing ``.grad`` checked) before any is
    written, so a ``.grad`` that cannot take its gradient fails the call with
    every ``.grad`` as it was. A first gradient gets memory of its own.
    """
    summed = [(node, np.array(grad) if node.grad is None else sum_into_grad(node, grad)) for node, grad in pairs]
    for node, total in summed:
        node.grad = total
