"""MultiHeadAttention: the seed's layer, taped step by step and hand-derived.

This module lets you run, differentiate, inspect and check multi-head
attention::

    >>> import numpy as np, microtape as mt
    >>> attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((1, 4, 8))
    >>> y = attn(x)                                  # self-attention, a Tensor [1, 4, 8]
    >>> dx = attn.backward(np.ones((1, 4, 8)))        # dq + dk + dv, by the tape's reverse pass
    >>> attn.attention_weights.shape                  # [B, H, Tq, Tk]
    (1, 2, 4, 4)

The forward is :func:`~microtape.nn.attention.chain.attention_chain` (written
once, one named tape row per step: ``Q, K, V, Q_heads, …, scores,
scaled_scores, weights, context, merged, output``; ``print(attn.tape)``).
The backward runs two ways, and they must agree: ``method="tape"`` is the
tape's reverse pass (each op's VJP from :mod:`microtape.ops`);
``method="analytic"`` applies the hand-derived formulas of
:mod:`microtape.nn.attention.analytic` (``dP = dC Vᵀ``, ``dS = P ⊙ (dP − rowsum(dP ⊙
P))``, …), composed by hand, never through the tape. Both walk the one
derivation table of :mod:`microtape.nn.attention.derivation`: each step's forward,
its VJP per input and its formula, written once.

Self or cross: ``forward(x)`` is self-attention, and so is ``forward(q, k,
v)`` when ``q is k is v`` — the *same object*. Two different objects sharing
memory (``x`` and ``x.view()``) are cross-attention: ``backward`` then
returns only ``dq``; ``dk`` and ``dv`` come from :meth:`grad_key_input` and
:meth:`grad_value_input` (if key and value are the same memory, add them).

Tiled (flash) attention: ``MultiHeadAttention(..., block_size=16)`` computes
the core with the tiled kernel of :mod:`microtape.nn.attention.tiled`, recorded as
*one* tape row that keeps only ``O`` and the row log-sum-exp ``L`` (memory
``O(B·H·T·D)``, not ``O(B·H·T²)``); what is score-sized is recomputed on
request (:mod:`microtape.nn.attention.readout`). Dropout masks are
counter-based (:class:`~microtape.nn.dropout_mask.DropoutMask`), so both
paths with the same seed drop the same weights. The plumbing every
two-route layer shares is :class:`~microtape.nn.two_routes.TwoRouteLayer`'s.

Nothing half-done: every argument is checked before anything changes; a
forward records on the enclosing tapes (and advances the dropout counter)
only when it succeeds; an overflow is refused naming the step where it first
appears; and every array the layer hands out for reading is read-only.
Zoom to scalars (:meth:`MultiHeadAttention.trace_scalars`) and the PyTorch
bridge live beside this file (``scalar_trace.py``, ``attention_torch.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


import numbers
from dataclasses import dataclass, field

import numpy as np

from ...engine import Tape, gradients
from ...values.tensor import Tensor
from ..checks import (
    block_size_or_none,
    child_seeds,
    float_dtype,
    gradient_overflow_error,
    overflow_error,
    positive_int,
    probability,
)
from ..dropout_mask import DropoutMask
from ..linear import Linear
from ..two_routes import NamedGradients, TwoRouteLayer, read_only
from . import analytic, tiled
from . import call as attention_call
from .chain import attention_chain, attention_core, step_names
from .gradients import backward_order, gradient_per_input, named_tape_gradients
from .lean import LeanSwitch
from .readout import AttentionReadouts

__all__ = ["MultiHeadAttention", "NamedGradients", "DEFAULT_SCORE_MEMORY_LIMIT", "ROLES", "read_only"]

#: Refuse a forward whose score-sized arrays (kept on the tape, with their
#: gradients) would exceed this many bytes. Per layer: ``attn.max_score_bytes``.
DEFAULT_SCORE_MEMORY_LIMIT = 4 * 1024**3

PROJECTIONS = analytic.PROJECTIONS
ROLES = ("query", "key", "value")


@dataclass
class _Forward:
    """Everything one forward produced; replaced whole by the next forward."""

    tape: Tape
    output: Tensor
    inputs: dict  # role -> the Tensor node used for it
    products: dict  # role -> the projection product x Wᵀ that read that input
    nodes: dict  # step name -> node (the named steps of the chain)
    self_attention: bool
    mask: np.ndarray | None  # total additive mask [Tq, Tk] (tiled: only the user's; see last_mask)
    keep: np.ndarray | None  # dropout keep mask [B·H, Tq, Tk], scaled by 1/(1-p) (tiled: None, regenerated)
    batch: int
    dropout: DropoutMask | None = None  # what the keep mask is a function of
    tiled: bool = False  # the core is one tiled_attention row
    grads: dict = field(default_factory=dict)  # named gradients of the last backward


class MultiHeadAttention(LeanSwitch, AttentionReadouts, TwoRouteLayer):
    """Multi-head attention, with the contract of the site's attention-contract page.

    ``MultiHeadAttention(embed, num_heads, dropout=0.0, causal=False, *,
    seed=None, dtype=np.float64, block_size=None)``: four ``Linear(embed,
    embed)`` projections with bias (``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``); ``num_heads`` must divide ``embed``. Parameters and compute
    are in ``dtype`` (float64 for exact checks, float32 for speed); inputs of
    another dtype are cast. ``seed`` fixes both the initial weights and the
    dropout masks. A new layer is in training mode (dropout active when
    ``dropout > 0``); ``eval()`` turns dropout off. ``block_size=None`` runs
    the standard chain (every step a tape row); an integer runs the tiled
    kernel with queries and keys in blocks of that size (settable later:
    ``attn.block_size = 64``). ``lean=True`` records the forwards on a lean
    tape (:mod:`.attention_lean`): the same gradients, one score-sized array
    kept instead of seven; ``keep`` names steps to keep anyway (settable too).
    """

    # Set in __init__ (declared: the mixins and the reports read them).
    embed: int
    num_heads: int
    head_dim: int
    dropout: float
    causal: bool
    dtype: np.dtype
    _block_size: int | None
    _max_score_bytes: float
    _dropout_key: int
    _dropout_calls: int

    def __init__(
        self,
        embed: int,
        num_heads: int,
        dropout: float = 0.0,
        causal: bool = False,
        *,
        seed: int | None = None,
        dtype: DTypeLike = np.float64,
        block_size: int | None = None,
        lean: bool = False,
        keep: Sequence[str] = (),
    ) -> None:
        super().__init__()
        embed = positive_int(embed, "MultiHeadAttention(embed)")
        if isinstance(num_heads, bool) or not isinstance(num_heads, numbers.Integral) or num_heads <= 0:
            raise ValueError(f"MultiHeadAttention(num_heads={num_heads!r}): expected a positive integer")
        if embed % num_heads:
            raise ValueError(
                f"MultiHeadAttention(num_heads={num_heads}): must divide embed={embed} "
                f"(each head gets embed / num_heads features)"
            )
        dropout = probability(dropout, "MultiHeadAttention(dropout)")
        if not isinstance(causal, (bool, np.bool_)):
            raise ValueError(f"MultiHeadAttention(causal={causal!r}): expected True or False")
        dtype = float_dtype(dtype, "MultiHeadAttention(dtype)")
        block_size = block_size_or_none(block_size, "MultiHeadAttention(block_size)")
        parameter_bytes = 4 * (embed * embed + embed) * dtype.itemsize
        if parameter_bytes > DEFAULT_SCORE_MEMORY_LIMIT:
            raise MemoryError(
                f"MultiHeadAttention(embed={embed}): refused — four {embed}×{embed} projections need about "
                f"{parameter_bytes / 2**30:,.1f} GiB of parameters (limit {DEFAULT_SCORE_MEMORY_LIMIT / 2**30:g} GiB)"
            )
        self.embed = embed
        self.num_heads = int(num_heads)
        self.head_dim = embed // self.num_heads
        self.dropout = dropout
        self.causal = bool(causal)
        self.dtype = dtype
        self._block_size = block_size
        self.lean, self.keep = lean, keep  # (checked by the setters)
        self._max_score_bytes = DEFAULT_SCORE_MEMORY_LIMIT
        seeds = child_seeds(seed, len(PROJECTIONS) + 1, "MultiHeadAttention(seed)")
        for projection, child in zip(PROJECTIONS, seeds):
            setattr(self, projection, Linear(embed, embed, seed=child, dtype=dtype))
        # Dropout masks are a hash of (this key, the forward's number, the position).
        self._dropout_key = int(seeds[-1].generate_state(1, np.uint64)[0])
        self._dropout_calls = 0  # forwards that drew a dropout mask (advanced only on success)

    def __repr__(self) -> str:
        tiles = "" if self.block_size is None else f", block_size={self.block_size}"
        return (
            f"MultiHeadAttention(embed={self.embed}, num_heads={self.num_heads}, dropout={self.dropout}, "
            f"causal={self.causal}, dtype={np.dtype(self.dtype).name}{tiles}{self._lean_repr()})"
        )

    @property
    def block_size(self) -> Any:
        """None: the standard chain; an integer: the tiled kernel with blocks of that many queries and keys."""
        return self._block_size

    @block_size.setter
    def block_size(self, value: Any) -> None:
        self._block_size = block_size_or_none(value, "MultiHeadAttention.block_size")

    def twin(self, block_size: Any) -> Any:
        """A new layer with this one's weights (copied), dropout stream and mode, running with ``block_size``.

        ``attn.twin(None)`` is the standard chain of a tiled layer: its next
        forward draws the same dropout mask as this layer's next forward —
        what the tiled checks compare against.
        """
        other = MultiHeadAttention(
            self.embed, self.num_heads, self.dropout, self.causal, dtype=self.dtype, block_size=block_size
        )
        for (_, mine), (_, theirs) in zip(self.named_parameters(), other.named_parameters()):
            theirs.data[...] = mine.data
        other._dropout_key, other._dropout_calls = self._dropout_key, self._dropout_calls
        other._max_score_bytes = self._max_score_bytes
        return other.train(self.training)

    @property
    def max_score_bytes(self) -> Any:
        """The score-memory limit of one forward + backward, in bytes (default 4 GiB)."""
        return self._max_score_bytes

    @max_score_bytes.setter
    def max_score_bytes(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0 or value == float("inf"):  # type: ignore[operator]  # a Real compares
            raise ValueError(f"MultiHeadAttention.max_score_bytes = {value!r}: expected a positive, finite number")
        self._max_score_bytes = value  # type: ignore[assignment]  # a Real: checked above

    # -- checking a call (microtape/nn/attention_call.py: everything there runs before any state changes)

    def check_call(self, query: Any, key: Any = None, value: Any = None, mask: Any = None, **naming: Any) -> Any:
        """Check a forward's arguments exactly as :meth:`forward` does, changing nothing; an ``AttentionCall``.

        ``mask_name=`` and ``where=`` say what errors call the mask and the call (a layer that wraps this one
        passes its own names: ``tgt_mask``, ``TransformerDecoderLayer.forward``).
        """
        return attention_call.check_call(self, query, key, value, mask, **naming)

    def score_bytes(self, batch: int, q_len: int, k_len: int) -> Any:
        """Bytes of the score-sized arrays one forward + backward keeps (an upper bound)."""
        return attention_call.score_bytes(self, batch, q_len, k_len)

    def tiled_bytes(self, batch: int, q_len: int, k_len: int) -> Any:
        """Bytes the tiled core keeps and works in (an upper bound): ``O(B·H·T·D)`` plus one tile."""
        return attention_call.tiled_bytes(self, batch, q_len, k_len)

    # -- forward

    def forward(self, query: Any, key: Any = None, value: Any = None, mask: Any = None) -> Tensor:
        """Attention of ``query`` over ``key``/``value``; returns a Tensor ``[B, Tq, E]``.

        ``forward(x)`` is self-attention. ``mask`` is None or an additive float
        array ``[Tq, Tk]`` (0 allows, -1e9 or -inf suppresses). The tape of this
        call becomes ``self.tape``; a failed call changes nothing.
        """
        call = self.check_call(query, key, value, mask)
        dropout = keep = None
        if self.training and self.dropout > 0:
            dropout = DropoutMask(self.dropout, self._dropout_key, self._dropout_calls)
        params = dict(self.named_parameters())
        if self.block_size is None:
            if dropout is not None:
                heads = call.batch * self.num_heads
                keep = dropout.keep(heads, slice(0, call.q_len), slice(0, call.k_len), self.dtype)
            core = attention_core
        else:  # (the tiled kernel makes its causal and dropout masks tile by tile: the call has none)
            core = tiled.tiled_core(self.block_size, self.causal, dropout)
        record: dict[Any, Any] = {}
        self._check_lean_call(call)
        # All or nothing: the steps reach enclosing tapes only if the whole chain succeeds.
        # (Lean: the chain reads each step once, in the next step, so values go as it records.)
        lean = {"lean": True, "keep": self.keep, "read_once": True} if self.lean else {}
        with Tape.atomic(**lean) as tape, np.errstate(all="ignore"):
            if call.self_attention:
                x = self._input_node(call.given[0], call.arrays[0], "x")
                inputs = {"query": x, "key": x, "value": x}
            else:
                inputs = {role: self._input_node(call.given[i], call.arrays[i], role) for i, role in enumerate(ROLES)}
            output = attention_chain(
                inputs["query"], inputs["key"], inputs["value"], params, self.num_heads,
                call.causal_mask, call.user_mask, keep, record=record, core=core,
            )  # fmt: skip
            if not np.isfinite(output.data).all():
                raise overflow_error(tape, "MultiHeadAttention.forward", self.dtype)
        names = step_names()
        nodes = {node.name: node for node in tape.nodes if node.name in names}
        total_mask = call.user_mask if self.block_size is not None else call.total_mask
        self._last = _Forward(
            tape, output, inputs, record["products"], nodes, call.self_attention, total_mask, keep, call.batch,  # type: ignore[arg-type]  # Tensors in, a Tensor out
            dropout, self.block_size is not None,
        )  # fmt: skip
        if dropout is not None:
            self._dropout_calls += 1  # only now: a failed forward leaves the next mask as it was
        return output  # type: ignore[return-value]  # Tensors in, a Tensor out

    # -- what the last forward left (read-only; ``tape`` and ``last_output`` come from RecordedLayer)

    def gradient_names(self) -> Any:
        """The keys of :attr:`last_gradients` for the last forward (both routes give exactly these)."""
        last = self._require_forward("gradient_names()")
        names = [*last.nodes, *(name for name, _ in self.named_parameters()), *ROLES]
        return names + ["x"] if last.self_attention else names

    # -- backward

    def named_gradients(self, grad_output: Any, method: str = "tape", *, links: Any = None) -> Any:
        """Every named gradient of the last forward for ``grad_output`` — computed, never stored.

        Returns a :class:`NamedGradients` (a dict keyed as :meth:`gradient_names`):
        the chain's steps (``"context"`` is dC, ``"weights"`` dP,
        ``"scaled_scores"`` dS, ``"Q_heads"`` dQ, …), the parameters
        (``"q_proj.weight"``) and the inputs (``"query"``, ``"key"``, ``"value"``
        — what each projection sent back — and ``"x"`` for self-attention).
        ``method="tape"`` runs the tape's reverse pass, ``"analytic"`` the
        hand-derived chain; ``links`` swaps links of the latter (teaching
        mistakes, see :data:`microtape.ops.attention_links.LINKS`). No state changes.

        On the tiled path the tape's reverse pass runs the tiled backward (the
        ``tiled_attention`` row's VJP), and the analytic route the
        hand-derived chain on weights recomputed from ``Q``, ``K`` and ``L``:
        two independent routes, so they still check each other (the analytic
        one at the standard path's memory, refused above ``max_score_bytes``).
        """
        return super().named_gradients(grad_output, method, links=links)

    def backward(self, grad_output: Any, method: str = "tape") -> Any:
        """Backpropagate ``grad_output`` (``[B, Tq, E]``) through the last forward.

        Returns ``dq + dk + dv`` (the whole input gradient) for self-attention,
        ``dq`` for cross-attention. Parameter gradients are *added* into each
        projection's ``weight.grad`` / ``bias.grad``. ``method="tape"`` runs
        the tape's reverse pass; ``method="analytic"`` the hand-derived
        formulas. Nothing changes when it fails (bad argument, overflow).
        """
        return super().backward(grad_output, method)

    # -- the two routes (the scaffold, TwoRouteLayer, calls these)

    def _backward_names(self) -> Any:
        last = self._last
        return self._lean_backward_names(last, ROLES) if last.tape.lean else self.gradient_names()

    def _taped(self, last: Any, grad_output: Any, complete: Any) -> Any:
        if last.tape.lean:
            return self._lean_taped(last, grad_output, complete)
        # Steps are kept even for backward(): each role's gradient is read off its projection's step.
        return self._named_tape_gradients(gradients(last.output, grad_output, tape=last.tape, steps=True))

    def _analytic_gradients(self, grad_output: Any, links: Any) -> Any:
        if self._last.tiled:
            attention_call.require_score_memory(self, "backward(method='analytic')", 6)
        return analytic.attention_backward(grad_output, self.analytic_cache(), self._last.self_attention, links)

    def _input_gradients(self, grads: Any) -> Any:
        return gradient_per_input(self._last, grads)

    def _returned_input(self) -> Any:
        return "x" if self._last.self_attention else "query"

    def _named_tape_gradients(self, result: Any) -> Any:
        """The reverse pass ``result`` under the analytic route's names (see :mod:`.attention_gradients`)."""
        return named_tape_gradients(self, result)

    def _check_finite_gradients(self, grads: Any, method: Any) -> None:
        """Refuse a backward whose gradients overflowed, naming the first step (in backward order).

        An inf or NaN anywhere along the chain reaches the parameters and inputs
        (products and sums spread it), so only those are scanned unless one is bad.
        """
        ends = [name for name, _ in self.named_parameters()] + (["x"] if self._last.self_attention else list(ROLES))
        if all(np.isfinite(grads[name]).all() for name in ends):
            return
        where = f"MultiHeadAttention.backward(method={method!r})"
        names = [name for name in backward_order(self.gradient_names()) if name in grads]  # (lean: fewer)
        error = gradient_overflow_error(grads, names, where, self.dtype)
        if error is not None:
            raise error

    # -- zoom to scalars, and the PyTorch bridge (in files of their own)

    def trace_scalars(
        self, query: Any, key: Any = None, value: Any = None, mask: Any = None, max_ops: int = 200_000
    ) -> Any:
        """Run the same forward with one Scalar per number (tiny sizes only); see :mod:`.scalar_trace`."""
        from .scalar_trace import trace_scalars

        return trace_scalars(self, query, key, value, mask, max_ops=max_ops)

    @classmethod
    def from_torch(cls, module: Any, causal: bool = False, dtype: Any = np.float64) -> Any:
        """A layer with the weights of a ``torch.nn.MultiheadAttention`` (torch imported there only)."""
        from .torch_bridge import attention_from_torch

        return attention_from_torch(cls, module, causal=causal, dtype=dtype)

    def to_torch(self) -> Any:
        """An equivalent ``torch.nn.MultiheadAttention(batch_first=True)`` (float64 or float32)."""
        from .torch_bridge import attention_to_torch

        return attention_to_torch(self)
