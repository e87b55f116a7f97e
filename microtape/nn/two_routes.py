"""TwoRouteLayer: the one scaffold of every layer whose backward runs by its tape and by hand.

This module holds the plumbing MultiHeadAttention, LayerNorm, FeedForward and
the Transformer encoder and decoder layers share::

    layer.named_gradients(g, "tape")       # every named gradient, by the tape's one reverse pass
    layer.named_gradients(g, "analytic")   # the same keys, by the hand-derived links
    dx = layer.backward(g)                 # either route, then added into the .grad fields
    layer.last_gradients                   # the named gradients of the last backward (read-only)

* ``named_gradients`` **writes nothing**: both routes return exactly the keys
  of ``gradient_names()``, which is what the step-by-step reports line up.
* ``backward`` checks its argument, computes every gradient, refuses an
  overflow naming the first step, and only then changes state (once).

A subclass says what is particular to it: ``gradient_names()``, the two
routes (``_taped(last, grad_output, complete)`` and
``_analytic_gradients(grad_output, links)``), which input gradients
``backward`` adds into (``_input_gradients``) and returns
(``_returned_input``), and, if it wants, how an overflow is found
(``_check_finite_gradients``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..values.tensor import Tensor
from .checks import gradient_array, gradient_overflow_error
from .module import RecordedLayer

__all__ = ["TwoRouteLayer", "NamedGradients", "read_only"]


def read_only(array: Any) -> Any:
    """A read-only view of ``array`` (None stays None): what a layer hands out for reading."""
    if array is None:
        return None
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


class NamedGradients(dict):
    """``{name: gradient}`` of one backward; by the tape route it also keeps the reverse pass.

    ``reverse_pass`` is the :class:`~microtape.engine.tape.Gradients` (with steps) the
    taped gradients came from, and ``completed_at[name]`` the tape index of the
    step after which that gradient is complete (what step-by-step walks use).
    Both are empty/None for the analytic route.
    """

    def __init__(self, *args: Any, reverse_pass: Any = None) -> None:
        super().__init__(*args)
        self.reverse_pass = reverse_pass
        self.completed_at: dict[Any, Any] = {}


class TwoRouteLayer(RecordedLayer):
    """The shared machinery of a layer with a taped and a hand-derived backward (see the module doc)."""

    # What each layer sets: its dtype (in __init__) and the roles of its forward's inputs.
    dtype: np.dtype
    input_roles: tuple[str, ...]

    @property
    def last_gradients(self) -> Any:
        """``{name: array}``: every named gradient of the last backward (read-only); the same keys by either route."""
        return {name: read_only(grad) for name, grad in self._require_forward("last_gradients").grads.items()}

    def _input_node(self, given: Any, data: Any, role: Any) -> Any:
        """The Tensor the tape starts from for an input (a taped Tensor stays connected; no copy)."""
        if isinstance(given, Tensor) and given.requires_grad:
            # Part of a larger taped computation: keep it connected (a cast is recorded too).
            return given if given.dtype == self.dtype else given.astype(self.dtype)
        return Tensor(data, requires_grad=True, name=role)

    # -- what a subclass says

    def gradient_names(self) -> Any:
        """The names :meth:`named_gradients` returns, in backward order."""
        raise NotImplementedError

    def _backward_names(self) -> Any:
        """The names ``backward`` keeps (``last_gradients``): all of them unless a subclass says fewer."""
        return self.gradient_names()

    def _taped(self, last: Any, grad_output: Any, complete: Any) -> Any:
        """The tape route: a :class:`NamedGradients` from one reverse pass (with its steps if ``complete``)."""
        raise NotImplementedError

    def _analytic_gradients(self, grad_output: Any, links: Any) -> Any:
        """The hand-derived route: ``{name: gradient}``."""
        raise NotImplementedError

    def _input_gradients(self, grads: Any) -> Any:
        """``[(input node, gradient)]`` that ``backward`` adds into (each input of the last forward)."""
        return [(node, grads[role]) for role, node in self._last.inputs.items()]

    def _returned_input(self) -> Any:
        """The name of the gradient ``backward`` returns (the first input's)."""
        return self.input_roles[0]

    def _check_finite_gradients(self, grads: Any, method: Any) -> None:
        """Refuse gradients that overflowed, naming the first one in backward order."""
        error = gradient_overflow_error(grads, grads, f"{type(self).__name__}.backward(method={method!r})", self.dtype)
        if error is not None:
            raise error

    # -- the two routes

    def named_gradients(self, grad_output: Any, method: str = "tape", *, links: Any = None) -> Any:
        """Every named gradient of the last forward for ``grad_output`` — computed, never stored.

        ``method="tape"`` runs the tape's reverse pass, ``"analytic"`` the
        hand-derived chain; ``links`` swaps links of the latter (teaching
        mistakes). Both return the keys of ``gradient_names()``, in that order.
        No state changes.
        """
        return self._gradients(grad_output, method, links, complete=True)

    def _gradients(self, grad_output: Any, method: Any, links: Any, complete: Any) -> Any:
        where = f"{type(self).__name__}.backward"
        last = self._require_forward("backward()")
        if method not in ("tape", "analytic"):
            raise ValueError(f"{where}(method={method!r}): expected 'tape' or 'analytic'")
        if links is not None and method != "analytic":
            raise ValueError(f"{type(self).__name__}.named_gradients(links=...): links replace analytic steps only")
        grad_output = gradient_array(grad_output, "grad_output", where, last.output.shape, self.dtype)
        names = self.gradient_names() if complete else self._backward_names()
        with np.errstate(all="ignore"):
            if method == "tape":
                found = self._taped(last, grad_output, complete)
            else:
                found = NamedGradients(self._analytic_gradients(grad_output, links))
        grads = NamedGradients({name: found[name] for name in names}, reverse_pass=found.reverse_pass)
        grads.completed_at = found.completed_at
        self._check_finite_gradients(grads, method)
        return grads

    def backward(self, grad_output: Any, method: str = "tape") -> Any:
        """Backpropagate ``grad_output`` through the last forward; returns the gradient of the first input.

        Parameter gradients are *added* into ``.grad`` (so are the inputs',
        when they are Tensors of yours). ``method="tape"`` replays the tape,
        ``method="analytic"`` runs the hand-derived formulas. Nothing changes
        when it fails (a bad argument, an overflow).
        """
        grads = self._gradients(grad_output, method, None, complete=False)
        self._commit_backward(grads, self._input_gradients(grads))
        return np.array(grads[self._returned_input()])
