"""The attention layer's lean switch: ``MultiHeadAttention(..., lean=True, keep=("weights",))``.

This module lets a layer record its forwards on a lean tape (see
:mod:`microtape.engine.lean`): only the values the backward pass reads are kept —
for attention that is one score-sized array (the weights ``P``) instead of
four, and no score-sized gradient instead of three. ``backward`` gives the
same numbers, bit for bit; what was not kept (``scores``, dS, dP, the
step-by-step reports) is refused with a message saying how to keep it.
``keep`` names steps whose values and gradients stay anyway:
``keep=("weights",)`` lets a lean layer draw the dP heatmap.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

from ...engine import gradients
from ...engine.lean import check_keep

if TYPE_CHECKING:
    from ...values.tensor import Tensor
from ...values.tensor import Tensor
from ..two_routes import NamedGradients
from .chain import step_names

__all__ = ["LeanSwitch", "lean_tape_gradients"]


class LeanSwitch:
    """``lean`` and ``keep`` for a layer with ``_last`` (a mixin of :class:`~microtape.nn.MultiHeadAttention`)."""

    if TYPE_CHECKING:  # what the layer that mixes this in has (MultiHeadAttention)
        _last: Any
        num_heads: int
        causal: bool
        dtype: np.dtype

        def _require_forward(self, what: str) -> Any: ...
        def named_parameters(self) -> list[tuple[str, Tensor]]: ...

    @property
    def lean(self) -> Any:
        """Record the next forwards lean: keep only what the backward pass reads (default False).

        The gradients ``backward`` gives are the same, bit for bit; the score-sized
        values and gradients nobody reads (``scores``, ``scaled_scores``, dS, dP…)
        are not kept, so the step-by-step reports and gradient heatmaps are refused
        (the attention weights, which the backward reads, stay).
        """
        return self._lean

    @lean.setter
    def lean(self, value: Any) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{type(self).__name__}.lean = {value!r}: expected True or False")
        self._lean = bool(value)

    @property
    def keep(self) -> Any:
        """Steps whose values and gradients a lean forward keeps anyway (``("weights",)``: dP for a heatmap)."""
        return self._keep_steps

    @keep.setter
    def keep(self, steps: Any) -> None:
        steps = check_keep(steps, type(self).__name__)
        unknown = [name for name in steps if name not in step_names()]
        if unknown:
            raise ValueError(
                f"{type(self).__name__}(keep={steps!r}): {unknown[0]!r} is not a step; the steps are {step_names()}"
            )
        self._keep_steps = steps

    def _lean_repr(self) -> Any:
        if not self.lean:
            return ""
        return f", lean=True, keep={self.keep}" if self.keep else ", lean=True"

    def _check_lean_call(self, call: Any) -> None:
        """Refuse, before anything changes, a lean cross-attention whose roles share one taped Tensor.

        (A lean backward reads each role's gradient off its own input node; arrays get a node per role.)
        """
        taped = [id(x) for x in call.given if isinstance(x, Tensor) and x.requires_grad]
        if self.lean and not call.self_attention and len(set(taped)) < len(taped):
            raise ValueError(
                f"{type(self).__name__}.forward: lean=True needs self-attention or three separate inputs; the "
                "same taped Tensor was given for two of query, key and value. Set attn.lean = False for this call"
            )

    def _lean_backward_names(self, last: Any, roles: Any) -> Any:
        """What a lean backward keeps: the kept steps', the parameters' and the inputs' gradients."""
        inputs = ["x"] if last.self_attention else list(roles)
        steps = [name for name in last.tape.keep if name in last.nodes]
        return steps + [name for name, _ in self.named_parameters()] + inputs

    def _lean_taped(self, last: Any, grad_output: Any, complete: Any) -> Any:
        if complete:
            raise ValueError(
                f"{type(self).__name__}.named_gradients(method='tape'): the last forward was recorded lean, so "
                "the steps' gradients are not kept; set attn.lean = False and run forward again "
                "(or use method='analytic')"
            )
        return lean_tape_gradients(self, gradients(last.output, grad_output, tape=last.tape))


def lean_tape_gradients(layer: Any, result: Any) -> Any:
    """The gradients a lean forward's reverse pass ``result`` keeps: parameters, inputs and ``layer.keep``'s steps.

    Self-attention's ``x`` is what its node received: the three projections'
    contributions, summed by the pass in the order the full route sums them
    (v, k, then q), so the numbers are the same bit for bit.
    """
    last = layer._last
    grads = NamedGradients(reverse_pass=result)
    for name in result.tape.keep:
        if name in last.nodes:  # (a kept step the last forward did not run, dropout's say, has none)
            grads[name] = result[last.nodes[name]]
    for name, tensor in layer.named_parameters():
        grads[name] = result[tensor]
    if last.self_attention:
        grads["x"] = result[last.inputs["query"]]
    else:
        for role, node in last.inputs.items():
            grads[role] = result[node]
    return grads
