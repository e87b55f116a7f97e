"""What MultiHeadAttention's last forward and backward leave, read back (read-only).

This module lets you look at a layer after it ran::

    attn.attention_weights          # P [B, H, Tq, Tk], before dropout
    attn.dropped_attention_weights  # after dropout
    attn.last_mask, attn.dropout_keep
    attn.grad_scores(), attn.grad_weights()         # dS, dP of the last backward
    attn.grad_key_input(), attn.grad_value_input()  # dk, dv (cross-attention)
    attn.analytic_cache()           # what the hand-derived backward reads

On the tiled path nothing score-sized was kept: weights, masks and score
gradients are recomputed here on request (from ``Q``, ``K``, the saved
log-sum-exp ``L`` and the dropout counter), within the layer's memory limit.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

from ...engine.lean import not_kept_error
from .. import masks
from ..two_routes import read_only
from . import analytic, tiled
from . import call as attention_call

if TYPE_CHECKING:
    from ...values.tensor import Tensor

__all__ = ["AttentionReadouts"]


class AttentionReadouts:
    """The read-only views of MultiHeadAttention's last forward and backward (a mixin: the layer holds ``_last``)."""

    if TYPE_CHECKING:  # what the layer that mixes this in has (MultiHeadAttention)
        _last: Any
        num_heads: int
        causal: bool
        dtype: np.dtype

        def _require_forward(self, what: str) -> Any: ...
        def named_parameters(self) -> list[tuple[str, Tensor]]: ...

    def _per_head(self, array: Any) -> Any:
        return read_only(array.reshape(self._last.batch, self.num_heads, *array.shape[1:]))

    def _weights(self, what: str) -> Any:
        """``P [B·H, Tq, Tk]`` of the last forward: the tape's ``weights``, or (tiled) ``exp(S − L)`` recomputed."""
        last = self._require_forward(what)
        if not last.tiled:
            return last.nodes["weights"].data
        attention_call.require_score_memory(self, what, 2)
        return tiled.recomputed_weights(last.nodes["context"])

    def _keep(self) -> Any:
        """The dropout mask of the last forward (None without dropout): saved, or (tiled) regenerated."""
        last = self._last
        if last is None or not last.tiled:
            return None if last is None else last.keep
        if last.dropout is not None:
            attention_call.require_score_memory(self, "dropout_keep", 2)
        return tiled.recomputed_keep(last.nodes["context"])

    @property
    def attention_weights(self) -> Any:
        """``[B, H, Tq, Tk]``: the softmax weights of the last forward, *before* dropout (read-only).

        On the tiled path nothing score-sized was kept: they are recomputed
        here, ``P = exp(S − L)`` from ``Q``, ``K`` and the saved log-sum-exp ``L``.
        """
        return self._per_head(self._weights("attention_weights"))

    @property
    def dropped_attention_weights(self) -> Any:
        """``[B, H, Tq, Tk]``: the weights *after* dropout (the same as before when it is off)."""
        last = self._require_forward("dropped_attention_weights")
        if last.tiled:
            weights, keep = self._weights("dropped_attention_weights"), self._keep()
            return self._per_head(weights if keep is None else weights * keep)
        node = last.nodes.get("dropped_weights", last.nodes["weights"])
        return self._per_head(node.data)

    @property
    def last_mask(self) -> Any:
        """The total additive mask ``[Tq, Tk]`` of the last forward (causal + user), or None.

        On the tiled path (which never builds the causal part whole) it is built here.
        """
        last = self._last
        if last is None or not (last.tiled and self.causal):
            return None if last is None else read_only(last.mask)
        total = masks.causal_mask(last.nodes["Q_heads"].shape[1], self.dtype)
        return read_only(total if last.mask is None else total + last.mask)

    @property
    def dropout_keep(self) -> Any:
        """The dropout mask ``[B·H, Tq, Tk]`` (1/(1-p) where kept, 0 where dropped), or None.

        Saved by the standard path; regenerated here on the tiled path (it is
        a pure function of the seed, the forward's number and the position).
        """
        return read_only(self._keep())

    def _last_grad(self, name: str, what: str) -> Any:
        last = self._require_forward(what)
        grads = last.grads
        if not grads:
            raise RuntimeError(f"MultiHeadAttention.{what}: call backward() first")
        if name not in grads and last.tape.lean:
            raise not_kept_error(f"{name} (MultiHeadAttention.{what})", "gradient", name)
        return read_only(grads[name])

    def _score_gradient(self, name: str, what: str) -> Any:
        """A score-sized gradient of the last backward: kept by the standard path, recomputed when tiled."""
        last = self._require_forward(what)
        if not last.tiled:
            return self._last_grad(name, what)
        grad_context = self._last_grad("context", what)
        attention_call.require_score_memory(self, what, 5)
        heads = [last.nodes[step].data for step in ("Q_heads", "K_heads", "V_heads")]
        core = analytic.attention_core_backward(grad_context, *heads, self._weights(what), self._keep())  # type: ignore[call-arg]  # three heads
        return core[name]

    def grad_scores(self) -> Any:
        """dS ``[B, H, Tq, Tk]``: the gradient of the (scaled, masked) scores, last backward.

        On the tiled path it is recomputed from the last backward's dC and the recomputed weights.
        """
        return self._per_head(self._score_gradient("scaled_scores", "grad_scores()"))

    def grad_weights(self) -> Any:
        """dP ``[B, H, Tq, Tk]``: the gradient of the attention weights, last backward (recomputed when tiled)."""
        return self._per_head(self._score_gradient("weights", "grad_weights()"))

    def grad_key_input(self) -> Any:
        """dk of the last backward (cross-attention; for self it is part of the returned sum)."""
        return self._last_grad("key", "grad_key_input()")

    def grad_value_input(self) -> Any:
        """dv of the last backward (cross-attention; for self it is part of the returned sum)."""
        return self._last_grad("value", "grad_value_input()")

    def analytic_cache(self) -> Any:
        """The numpy values the analytic backward reads, taken from the last forward (read-only)."""
        last = self._require_forward("analytic_cache()")
        cache = {role: read_only(node.data) for role, node in last.inputs.items()}
        for name in ("Q_heads", "K_heads", "V_heads", "merged"):
            cache[name] = read_only(last.nodes[name].data)
        cache["weights"] = read_only(self._weights("analytic_cache()"))  # recomputed on the tiled path
        cache["keep"] = read_only(self._keep())
        cache["params"] = {name: read_only(tensor.data) for name, tensor in self.named_parameters()}
        cache["num_heads"] = self.num_heads
        return cache
