"""CheckedLayer: a layer whose backward runs two ways — by its tape and by hand.

This module holds what LayerNorm, FeedForward and the Transformer encoder and
decoder layers share (MultiHeadAttention, the first such layer, keeps its own
copy of these ideas in ``attention.py``)::

    layer(x)                                  # forward, on a tape of its own: layer.tape
    layer.named_gradients(g, "tape")          # every named gradient, by the tape's reverse pass
    layer.named_gradients(g, "analytic")      # the same keys, by the hand-derived links
    dx = layer.backward(g)                    # either route, then added into the .grad fields
    layer.forward_plain(inputs, params)       # the same forward on float64 numpy, nothing recorded

* A forward is **all or nothing**: it records on ``Tape.atomic()`` (the
  enclosing tapes see it only if it finishes), and when it fails the dropout
  generators are rewound and every sub-layer's last forward put back.
* ``named_gradients`` **writes nothing**; the two routes return exactly the
  keys of :meth:`CheckedLayer.gradient_names`, which is what
  :func:`microtape.check.layer_report` lines up row by row.
* ``backward`` changes state only once every gradient is computed and finite.

A subclass provides ``check_call``, ``forward`` (through
:meth:`CheckedLayer._record_forward`), ``gradient_names``,
``_analytic_gradients``, ``analytic_cache`` and ``forward_plain``.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine import Tape, gradients
from ..values.tensor import Tensor
from .checks import input_array, overflow_error

# attention.py's _overflow names the first step of a tape that overflowed: reused as it is.
from .two_routes import NamedGradients, TwoRouteLayer, read_only

__all__ = ["CheckedLayer", "LastForward", "named", "sequence_array"]


def named(value: Any, name: str | None) -> Any:
    """Give a step its name (listings, graphs and reports use it; a Plain value may be replaced then)."""
    value.name = name
    return value


def sequence_array(value: Any, argument: str, where: str, embed: int, dtype: Any) -> Any:
    """A ``[B, T, E]`` input with ``E == embed``, as a finite array of ``dtype``; clear errors otherwise."""
    data = input_array(value, argument, where, dtype, finite=False)
    if data.ndim != 3:
        raise ValueError(f"{where}: {argument} must be rank 3 [B, T, E], got shape {data.shape}")
    if data.shape[-1] != embed:
        raise ValueError(f"{where}: {argument} has shape {data.shape}; its last axis must be embed={embed}")
    if 0 in data.shape:
        raise ValueError(f"{where}: {argument} has shape {data.shape}; no axis may be empty")
    return input_array(data, argument, where, dtype)  # now the finite check


@dataclass
class LastForward:
    """Everything one forward produced; replaced whole by the next forward."""

    output: Tensor
    inputs: dict  # role ("x", "memory") -> the Tensor node the tape starts from
    nodes: dict  # gradient name -> node on the tape (the named steps)
    saved: dict  # what the hand-derived backward reads: numpy arrays
    constants: dict = field(default_factory=dict)  # masks and dropout keeps, for forward_plain
    tape: Tape | None = None
    grads: dict = field(default_factory=dict)  # the named gradients of the last backward


class CheckedLayer(TwoRouteLayer):
    """The shared machinery of a layer with a taped and a hand-derived backward (see the module doc)."""

    #: The forward's inputs, in order; the first is the one ``backward`` returns the gradient of.
    input_roles: tuple[str, ...] = ("x",)
    #: Each layer's own: check ``forward``'s arguments as ``forward`` does, changing nothing.
    check_call: Callable[..., Any]

    # -- the last forward

    @property
    def last_inputs(self) -> Any:
        """``{role: array}``: the inputs of the last forward (read-only)."""
        return {role: read_only(node.data) for role, node in self._require_forward("last_inputs").inputs.items()}

    def step_value(self, name: str) -> Any:
        """The value of the named step ``name`` (a key of :meth:`gradient_names`) in the last forward, read-only."""
        nodes = self._require_forward("step_value()").nodes
        if name not in nodes:
            raise KeyError(f"{type(self).__name__}.step_value({name!r}): not a step; steps are {', '.join(nodes)}")
        return read_only(nodes[name].data)

    def _record_forward(self, run: Any) -> Any:
        """Run ``run()`` — it returns a :class:`LastForward` — on an atomic tape; keep it only if it succeeds."""
        snapshot = _snapshot(self)
        try:
            with Tape.atomic() as tape, np.errstate(all="ignore"):
                last = run()
                if not np.isfinite(last.output.data).all():
                    raise overflow_error(tape, f"{type(self).__name__}.forward", self.dtype)
        except BaseException:
            _restore(snapshot)
            raise
        last.tape = tape
        self._last = last
        return last.output

    # -- the two routes

    def _tape_extras(self, grads: Any) -> NamedGradients:
        """Gradients the reverse pass does not name directly (a sub-layer's own steps); none by default.

        ``grads`` holds the layer's named gradients and ``grads.reverse_pass``,
        the one pass they came from: extras are read off it, never a second
        pass. Returns a :class:`NamedGradients` with ``completed_at`` (indices
        on this layer's tape).
        """
        return NamedGradients()

    def _taped(self, last: Any, grad_output: Any, complete: Any) -> Any:
        # The complete set (for reports and walks) keeps the pass's steps; backward() needs none.
        result = gradients(last.output, grad_output, tape=last.tape, steps=complete)
        index_of = {node: i for i, node in enumerate(last.tape.nodes)}
        grads = NamedGradients(reverse_pass=result)
        for name, node in last.nodes.items():
            grads[name], grads.completed_at[name] = result[node], index_of.get(node)
        for name, node in [*self.named_parameters(), *last.inputs.items()]:
            grads[name], grads.completed_at[name] = result[node], result.completed_at(node)
        if complete:
            extras = self._tape_extras(grads)
            grads.update(extras)
            grads.completed_at.update(extras.completed_at)
        return grads

    # -- the same forward on plain numpy

    def forward_plain(self, inputs: Any, params: Any, replace: Any = None) -> Any:
        """The last forward's computation on float64 numpy (:class:`~microtape.values.plain.Plain`), recording nothing.

        ``inputs`` maps input roles to arrays, ``params`` parameter names to
        arrays; the masks and dropout masks are the last forward's.
        ``replace`` maps step names (those of :meth:`gradient_names`) to
        arrays that take the step's place — so a finite difference can nudge
        an intermediate. Returns the output array.
        """
        raise NotImplementedError


# What a forward changes in a (sub-)layer besides its output: its last forward,
# and where its dropout stream stands (a generator, or attention's counter).
_FORWARD_STATE = ("_last", "_dropout_calls")


def _snapshot(layer: Any) -> Any:
    """What a failed forward must put back: every (sub-)layer's last forward and dropout stream."""
    saved = []
    for _, module in layer.named_modules():
        state = module.__dict__
        fields = {name: state[name] for name in _FORWARD_STATE if name in state}
        rng = state.get("_rng")
        if fields or rng is not None:
            saved.append((module, fields, rng, None if rng is None else rng.bit_generator.state))
    return saved


def _restore(saved: Any) -> None:
    for module, fields, rng, state in saved:
        for name, value in fields.items():
            object.__setattr__(module, name, value)
        if rng is not None:
            rng.bit_generator.state = state
