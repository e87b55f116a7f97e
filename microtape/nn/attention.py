"""MultiHeadAttention: the seed's layer, taped step by step and hand-derived.

This module lets you run, differentiate, inspect and check multi-head
attention::

    >>> import numpy as np, microtape as mt
    >>> attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=0)
    >>> x = np.random.default_rng(0).standard_normal((1, 4, 8))
    >>> y = attn(x)                                  # self-attention, a Tensor [1, 4, 8]
    >>> dx = attn.backward(np.ones((1, 4, 8)))        # dq + dk + dv, by replaying the tape
    >>> attn.attention_weights.shape                  # [B, H, Tq, Tk]
    (1, 2, 4, 4)

The forward, one named row on the tape per step (``print(attn.tape)``)::

    Q, K, V = query Wqᵀ + bq,  key Wkᵀ + bk,  value Wvᵀ + bv     [B, T, E]
    Q_heads, K_heads, V_heads  = split into H heads             [B·H, T, D],  D = E / H
    scores         = Q_heads K_headsᵀ                           [B·H, Tq, Tk]
    scaled_scores  = scores / √D       (so the softmax does not saturate as D grows)
    causal_scores  = scaled_scores + causal mask   (if causal: -1e9 above the diagonal)
    masked_scores  = … + mask          (if a mask is given: additive, 0 allows)
    weights        = softmax(…)        row by row: each query's weights over keys sum to 1
    dropped_weights = weights ⊙ keep    (training with dropout: keep = bernoulli(1-p)/(1-p))
    context        = weights V_heads                            [B·H, Tq, D]
    merged         = heads merged back                          [B, Tq, E]
    output         = merged Woᵀ + bo

The backward can run two ways, and they must agree: ``method="tape"``
replays the tape (each op's VJP from :mod:`microtape.ops`);
``method="analytic"`` applies the hand-derived formulas of
:mod:`microtape.nn.analytic` (``dP = dC Vᵀ``, ``dS = P ⊙ (dP − rowsum(dP ⊙
P))``, …), which import nothing but numpy.

Self or cross: ``forward(x)`` is self-attention, and so is ``forward(q, k,
v)`` when ``q is k is v`` — the *same object*. Two different objects sharing
memory (``x`` and ``x.view()``) are cross-attention: ``backward`` then
returns only ``dq``; ``dk`` and ``dv`` come from :meth:`grad_key_input` and
:meth:`grad_value_input` (if key and value are the same memory, add them).

Zoom to scalars: :meth:`MultiHeadAttention.trace_scalars` runs the *same*
forward code (:func:`attention_chain`) on :class:`~microtape.scalar_array.
ScalarArray` inputs, so every multiply, add and exp is its own Scalar on the
tape — and gives the same gradients as the tensor trace.
"""

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from .. import ops
from ..scalar_array import ScalarArray
from ..tape import Tape, module_scope
from ..tensor import Tensor
from . import analytic, masks
from .linear import Linear, _float_dtype, _positive_int, linear

__all__ = ["MultiHeadAttention", "attention_chain", "DEFAULT_SCORE_MEMORY_LIMIT"]

#: Refuse a forward whose score-sized arrays (kept on the tape, with their
#: gradients) would exceed this many bytes. Per layer: ``attn.max_score_bytes``.
DEFAULT_SCORE_MEMORY_LIMIT = 4 * 1024**3

PROJECTIONS = analytic.PROJECTIONS
ROLES = ("query", "key", "value")


# ---------------------------------------------------------------- the chain, written once


def _project(x, params, projection, name):
    with module_scope(projection):
        return linear(x, params[f"{projection}.weight"], params[f"{projection}.bias"], name=name)


def _split_heads(x, num_heads, name):
    batch, length, embed = x.shape
    depth = embed // num_heads
    # [B, T, E] -> [B, T, H, D] -> [B, H, T, D] -> [B·H, T, D]
    return (
        x.reshape(batch, length, num_heads, depth)
        .transpose(0, 2, 1, 3)
        .reshape(batch * num_heads, length, depth, name=name)
    )


def _merge_heads(x, batch, name):
    heads_total, length, depth = x.shape
    num_heads = heads_total // batch
    # [B·H, T, D] -> [B, H, T, D] -> [B, T, H, D] -> [B, T, E]
    return (
        x.reshape(batch, num_heads, length, depth)
        .transpose(0, 2, 1, 3)
        .reshape(batch, length, num_heads * depth, name=name)
    )


def attention_chain(query, key, value, params, num_heads, causal_mask=None, mask=None, keep=None, steps=None):
    """The attention forward, written once against Tensor's methods.

    Runs on :class:`~microtape.Tensor` (one tape row per step) and on
    :class:`~microtape.scalar_array.ScalarArray` (one tape row per scalar
    operation). ``params`` maps ``"q_proj.weight"``, ``"q_proj.bias"``, … to
    arrays of the same kind; the masks and ``keep`` are constants. If
    ``steps`` is a dict, the per-head arrays are put in it (``"Q_heads"``, …).
    """
    batch, _, embed = query.shape
    depth = embed // num_heads
    Q = _project(query, params, "q_proj", "Q")
    K = _project(key, params, "k_proj", "K")
    V = _project(value, params, "v_proj", "V")
    with module_scope("attention"):
        q_heads = _split_heads(Q, num_heads, "Q_heads")
        k_heads = _split_heads(K, num_heads, "K_heads")
        v_heads = _split_heads(V, num_heads, "V_heads")
        if steps is not None:
            steps.update(Q_heads=q_heads, K_heads=k_heads, V_heads=v_heads)
        scores = q_heads.matmul(k_heads.swapaxes(-1, -2, name="K_heads^T"), name="scores")
        scores = scores.scale(1.0 / math.sqrt(depth), name="scaled_scores")
        if causal_mask is not None:
            scores = scores.add_constant(causal_mask, name="causal_scores")
        if mask is not None:
            scores = scores.add_constant(mask, name="masked_scores")
        weights = scores.softmax(-1, name="weights")
        used = weights if keep is None else weights.dropout(keep, name="dropped_weights")
        context = used.matmul(v_heads, name="context")
        merged = _merge_heads(context, batch, "merged")
    return _project(merged, params, "out_proj", "output")


# ---------------------------------------------------------------- what a forward leaves behind


@dataclass
class _Forward:
    """Everything one forward produced; replaced whole by the next forward."""

    tape: Tape
    output: Tensor
    inputs: dict  # role -> the Tensor node used for it
    projection_inputs: dict  # role -> the matmul node that read that input
    nodes: dict  # tape name -> node (the named steps of the chain)
    self_attention: bool
    mask: np.ndarray | None  # total additive mask [Tq, Tk]
    keep: np.ndarray | None  # dropout keep mask [B·H, Tq, Tk], scaled by 1/(1-p)
    batch: int
    grads: dict = field(default_factory=dict)  # named gradients of the last backward


@dataclass
class ScalarTrace:
    """The result of :meth:`MultiHeadAttention.trace_scalars`."""

    tape: Tape
    output: ScalarArray
    inputs: dict  # role -> ScalarArray
    params: dict  # "q_proj.weight" -> ScalarArray

    def backward(self, grad_output=None):
        """Backpropagate ``sum(grad_output * output)`` through every scalar op."""
        self.output.backward(grad_output)

    def gradients(self):
        """``{name: numpy array}`` for every input and parameter."""
        grads = {name: array.grad() for name, array in self.params.items()}
        grads.update({role: array.grad() for role, array in self.inputs.items()})
        return grads


# ---------------------------------------------------------------- the layer


class MultiHeadAttention:
    """Multi-head attention with the seed library's contract.

    ``MultiHeadAttention(embed, num_heads, dropout=0.0, causal=False, *,
    seed=None, dtype=np.float64)``: four ``Linear(embed, embed)`` projections
    with bias (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``); ``num_heads``
    must divide ``embed``. Parameters and compute are in ``dtype`` (float64
    for exact checks, float32 for speed); inputs of another dtype are cast.
    ``seed`` fixes both the initial weights and the dropout masks. A new layer
    is in training mode (dropout active when ``dropout > 0``); ``eval()``
    turns dropout off.
    """

    def __init__(self, embed, num_heads, dropout=0.0, causal=False, *, seed=None, dtype=np.float64):
        embed = _positive_int(embed, "MultiHeadAttention(embed)")
        if isinstance(num_heads, bool) or not isinstance(num_heads, numbers.Integral) or num_heads <= 0:
            raise ValueError(f"MultiHeadAttention(num_heads={num_heads!r}): expected a positive integer")
        if embed % num_heads:
            raise ValueError(
                f"MultiHeadAttention(num_heads={num_heads}): must divide embed={embed} "
                f"(each head gets embed / num_heads features)"
            )
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"MultiHeadAttention(dropout={dropout!r}): expected a probability with 0 <= dropout < 1")
        if not isinstance(causal, (bool, np.bool_)):
            raise ValueError(f"MultiHeadAttention(causal={causal!r}): expected True or False")
        dtype = _float_dtype(dtype, "MultiHeadAttention(dtype)")
        self.embed = embed
        self.num_heads = int(num_heads)
        self.head_dim = embed // self.num_heads
        self.dropout = float(dropout)
        self.causal = bool(causal)
        self.dtype = dtype
        self.training = True
        self.max_score_bytes = DEFAULT_SCORE_MEMORY_LIMIT
        seeds = np.random.SeedSequence(seed).spawn(len(PROJECTIONS) + 1)
        for projection, child in zip(PROJECTIONS, seeds):
            setattr(self, projection, Linear(embed, embed, seed=child, dtype=dtype, name=projection))
        self._rng = np.random.default_rng(seeds[-1])
        self._last = None

    def __repr__(self):
        return (
            f"MultiHeadAttention(embed={self.embed}, num_heads={self.num_heads}, dropout={self.dropout}, "
            f"causal={self.causal}, dtype={np.dtype(self.dtype).name})"
        )

    # -- parameters and modes

    def named_parameters(self):
        """``[("q_proj.weight", Tensor), ("q_proj.bias", Tensor), …]`` in a fixed order."""
        return [
            (f"{projection}.{name}", tensor)
            for projection in PROJECTIONS
            for name, tensor in getattr(self, projection).named_parameters()
        ]

    def parameters(self):
        return [tensor for _, tensor in self.named_parameters()]

    def zero_grad(self):
        """Forget all parameter gradients (set them to None)."""
        for tensor in self.parameters():
            tensor.grad = None

    def train(self, mode=True):
        """Training mode: dropout is applied (when ``dropout > 0``)."""
        self.training = bool(mode)
        return self

    def eval(self):
        """Evaluation mode: no dropout."""
        return self.train(False)

    # -- input checking (everything here runs before any state changes)

    def _array_of(self, value, argument):
        if isinstance(value, Tensor):
            data = value.data
        elif isinstance(value, np.ndarray):
            data = value
        else:
            raise TypeError(
                f"MultiHeadAttention.forward: {argument} must be a Tensor or numpy array [B, T, E], "
                f"got {type(value).__name__}"
            )
        if data.dtype.kind not in "fiu":
            raise TypeError(f"MultiHeadAttention.forward: {argument} must hold real numbers, got dtype {data.dtype}")
        if data.ndim != 3:
            raise ValueError(f"MultiHeadAttention.forward: {argument} must be rank 3 [B, T, E], got shape {data.shape}")
        if data.shape[-1] != self.embed:
            raise ValueError(
                f"MultiHeadAttention.forward: {argument} has shape {data.shape}; its last axis must be "
                f"embed={self.embed}"
            )
        if 0 in data.shape:
            raise ValueError(f"MultiHeadAttention.forward: {argument} has shape {data.shape}; no axis may be empty")
        if not np.all(np.isfinite(data)):
            where = tuple(int(i) for i in np.argwhere(~np.isfinite(data))[0])
            raise ValueError(
                f"MultiHeadAttention.forward: {argument} contains {data[where]} at index {where}; inputs must be finite"
            )
        return data

    def _check_mask(self, mask, q_len, k_len):
        if mask is None:
            return None
        if isinstance(mask, Tensor):
            mask = mask.data
        mask = np.asarray(mask)
        if mask.dtype == np.bool_:
            raise TypeError(
                "MultiHeadAttention.forward: mask is boolean, but masks here are additive floats "
                "(0 = may attend, a large negative number such as -1e9 = suppressed). Convert it with "
                "microtape.nn.masks.from_bool(allowed) (True = may attend)."
            )
        if mask.dtype.kind not in "fiu":
            raise TypeError(f"MultiHeadAttention.forward: mask must be an additive float array, got dtype {mask.dtype}")
        if mask.shape != (q_len, k_len):
            raise ValueError(
                f"MultiHeadAttention.forward: mask has shape {mask.shape}; expected [Tq, Tk] = {[q_len, k_len]}"
            )
        if np.any(np.isnan(mask)) or np.any(mask == np.inf):
            raise ValueError(
                "MultiHeadAttention.forward: mask contains NaN or +inf; use 0 to allow and -1e9 or -inf to suppress"
            )
        return mask.astype(self.dtype)

    def _check_rows(self, total_mask):
        blocked = np.all(masks.suppressed(total_mask), axis=-1)
        if np.any(blocked):
            row = int(np.flatnonzero(blocked)[0])
            raise ValueError(
                f"MultiHeadAttention.forward: query row {row} has no valid key — every entry of mask row "
                f"{row} (causal mask included) is <= {masks.SUPPRESSED_BELOW:g}. Its softmax would be meaningless; "
                "leave at least one key allowed in every row."
            )

    def score_bytes(self, batch, q_len, k_len):
        """Bytes of the score-sized arrays one forward + backward keeps."""
        values = batch * self.num_heads * q_len * k_len
        # scores, scaled_scores, weights (+ causal/masked scores, + dropout's
        # keep and dropped weights), and a gradient for each.
        copies = 3 + self.causal + 1 + (2 if self.training and self.dropout > 0 else 0)
        return 2 * copies * values * np.dtype(self.dtype).itemsize

    def _check_memory(self, batch, q_len, k_len):
        needed = self.score_bytes(batch, q_len, k_len)
        if needed > self.max_score_bytes:
            values = batch * self.num_heads * q_len * k_len
            raise MemoryError(
                f"MultiHeadAttention.forward: refused — the scores hold B·H·Tq·Tk = {batch}·{self.num_heads}·"
                f"{q_len}·{k_len} = {values:,} values, and the tape keeps several such arrays and their "
                f"gradients: about {needed:,} bytes ({needed / 2**30:.2f} GiB), over the limit of "
                f"{self.max_score_bytes:,} bytes. Use shorter sequences or a smaller batch, or raise "
                "attn.max_score_bytes. (Attention memory is quadratic in T; this is not FlashAttention.)"
            )

    def _parse(self, query, key, value, mask):
        """Validate every argument; return what the forward needs. Changes nothing."""
        if (key is None) != (value is None):
            raise ValueError("MultiHeadAttention.forward: give both key and value, or neither (self-attention)")
        self_attention = key is None or (query is key and key is value)
        if key is None:
            key = value = query
        q_data = self._array_of(query, "query")
        k_data = q_data if key is query else self._array_of(key, "key")
        v_data = k_data if value is key else self._array_of(value, "value")
        if k_data.shape[:2] != v_data.shape[:2]:
            raise ValueError(
                f"MultiHeadAttention.forward: key {k_data.shape} and value {v_data.shape} must share B and Tk"
            )
        if q_data.shape[0] != k_data.shape[0]:
            raise ValueError(
                f"MultiHeadAttention.forward: query has batch {q_data.shape[0]} but key/value have "
                f"{k_data.shape[0]}; B must match"
            )
        batch, q_len, k_len = q_data.shape[0], q_data.shape[1], k_data.shape[1]
        if self.causal and q_len != k_len:
            raise ValueError(f"MultiHeadAttention.forward: causal attention needs Tq == Tk, got Tq={q_len}, Tk={k_len}")
        user_mask = self._check_mask(mask, q_len, k_len)
        causal = masks.causal_mask(q_len, self.dtype) if self.causal else None
        total = None
        for part in (causal, user_mask):
            if part is not None:
                total = part if total is None else total + part
        if total is not None:
            self._check_rows(total)
        self._check_memory(batch, q_len, k_len)
        return self_attention, (query, key, value), batch, q_len, k_len, causal, user_mask, total

    def _input_node(self, value, role):
        """The Tensor the tape starts from for this input (shares memory; no copy)."""
        if isinstance(value, Tensor) and value.requires_grad:
            # Part of a larger taped computation: keep it connected (a cast is recorded too).
            return value if value.dtype == self.dtype else value.astype(self.dtype)
        data = value.data if isinstance(value, Tensor) else value
        return Tensor(data.astype(self.dtype, copy=False), requires_grad=True, name=role)

    # -- forward

    def forward(self, query, key=None, value=None, mask=None):
        """Attention of ``query`` over ``key``/``value``; returns a Tensor ``[B, Tq, E]``.

        ``forward(x)`` is self-attention. ``mask`` is None or an additive float
        array ``[Tq, Tk]`` (0 allows, -1e9 or -inf suppresses). The tape of this
        call becomes ``self.tape``; a failed call changes nothing.
        """
        self_attention, raw, batch, q_len, k_len, causal, user_mask, total = self._parse(query, key, value, mask)
        if self_attention:
            x = self._input_node(raw[0], "x")
            inputs = {"query": x, "key": x, "value": x}
        else:
            inputs = {role: self._input_node(raw[i], role) for i, role in enumerate(ROLES)}
            if raw[1] is raw[2]:
                inputs["value"] = inputs["key"]  # the same object stays one node
        keep = None
        if self.training and self.dropout > 0:
            shape = (batch * self.num_heads, q_len, k_len)
            kept = self._rng.random(shape) >= self.dropout
            keep = (kept / (1.0 - self.dropout)).astype(self.dtype)
        params = {name: tensor for name, tensor in self.named_parameters()}
        constants = {
            "causal_mask": None if causal is None else Tensor(causal, name="causal_mask"),
            "mask": None if user_mask is None else Tensor(user_mask, name="mask"),
            "keep": None if keep is None else Tensor(keep, name="dropout_keep"),
        }
        with Tape() as tape:
            output = attention_chain(
                inputs["query"], inputs["key"], inputs["value"], params, self.num_heads,
                constants["causal_mask"], constants["mask"], constants["keep"],
            )  # fmt: skip
        nodes = {node.name: node for node in tape.nodes if node.name}
        projection_inputs = {role: nodes[letter].inputs[0] for role, letter in zip(ROLES, "QKV")}
        for role, matmul in projection_inputs.items():
            assert matmul.op is ops.matmul and matmul.inputs[0] is inputs[role], f"{role} projection not found"
        self._last = _Forward(tape, output, inputs, projection_inputs, nodes, self_attention, total, keep, batch)
        return output

    __call__ = forward

    # -- what the last forward left

    def _require_forward(self, what):
        if self._last is None:
            raise RuntimeError(f"MultiHeadAttention.{what}: call forward() first")
        return self._last

    @property
    def tape(self):
        """The :class:`~microtape.Tape` of the last forward (None before the first)."""
        return None if self._last is None else self._last.tape

    def _per_head(self, array):
        batch = self._last.batch
        return array.reshape(batch, self.num_heads, *array.shape[1:])

    @property
    def attention_weights(self):
        """``[B, H, Tq, Tk]``: the softmax weights of the last forward, *before* dropout."""
        last = self._require_forward("attention_weights")
        return self._per_head(last.nodes["weights"].data)

    @property
    def dropped_attention_weights(self):
        """``[B, H, Tq, Tk]``: the weights *after* dropout (the same as before when it is off)."""
        last = self._require_forward("dropped_attention_weights")
        node = last.nodes.get("dropped_weights", last.nodes["weights"])
        return self._per_head(node.data)

    @property
    def last_mask(self):
        """The total additive mask ``[Tq, Tk]`` of the last forward (causal + user), or None."""
        return None if self._last is None else self._last.mask

    @property
    def dropout_keep(self):
        """The saved dropout mask ``[B·H, Tq, Tk]`` (scaled by 1/(1-p)), or None."""
        return None if self._last is None else self._last.keep

    @property
    def last_gradients(self):
        """``{name: array}``: every named gradient of the last backward (either route)."""
        return dict(self._require_forward("last_gradients").grads)

    def _last_grad(self, name, what):
        grads = self._require_forward(what).grads
        if not grads:
            raise RuntimeError(f"MultiHeadAttention.{what}: call backward() first")
        return grads[name]

    def grad_scores(self):
        """dS ``[B, H, Tq, Tk]``: the gradient of the (scaled, masked) scores, last backward."""
        return self._per_head(self._last_grad("scaled_scores", "grad_scores()"))

    def grad_weights(self):
        """dP ``[B, H, Tq, Tk]``: the gradient of the attention weights, last backward."""
        return self._per_head(self._last_grad("weights", "grad_weights()"))

    def grad_key_input(self):
        """dk of the last backward (cross-attention; for self it is part of the returned sum)."""
        return self._last_grad("key", "grad_key_input()")

    def grad_value_input(self):
        """dv of the last backward (cross-attention; for self it is part of the returned sum)."""
        return self._last_grad("value", "grad_value_input()")

    # -- backward

    def backward(self, grad_output, method="tape"):
        """Backpropagate ``grad_output`` (``[B, Tq, E]``) through the last forward.

        Returns ``dq + dk + dv`` (the whole input gradient) for self-attention,
        ``dq`` for cross-attention. Parameter gradients are *added* into each
        projection's ``weight.grad`` / ``bias.grad``. ``method="tape"`` replays
        the tape; ``method="analytic"`` uses the hand-derived formulas.
        """
        last = self._require_forward("backward()")
        if method not in ("tape", "analytic"):
            raise ValueError(f"MultiHeadAttention.backward(method={method!r}): expected 'tape' or 'analytic'")
        grad_output = np.asarray(grad_output.data if isinstance(grad_output, Tensor) else grad_output)
        if grad_output.shape != last.output.shape:
            raise ValueError(
                f"MultiHeadAttention.backward: grad_output has shape {grad_output.shape}; expected the "
                f"output's shape {last.output.shape}"
            )
        if grad_output.dtype.kind not in "fiu" or not np.all(np.isfinite(grad_output)):
            raise ValueError("MultiHeadAttention.backward: grad_output must hold finite real numbers")
        grad_output = grad_output.astype(self.dtype, copy=False)
        grads = self._backward_tape(grad_output) if method == "tape" else self._backward_analytic(grad_output)
        last.grads = grads
        return grads["x"] if last.self_attention else grads["query"]

    def _backward_tape(self, grad_output):
        last = self._last
        param_names = {id(tensor): name for name, tensor in self.named_parameters()}
        role_of = {id(node): role for role, node in last.projection_inputs.items()}
        grads = {}
        for step in last.tape.backward_steps(last.output, grad_output):
            node = step.equation.output
            if node.name:
                grads[node.name] = step.grad_output
            role = role_of.get(id(node))
            if role is not None:
                grads[role] = step.grad_inputs[0]  # what this projection sent to its input
            for x, grad in zip(node.inputs, step.grad_inputs):
                name = param_names.get(id(x))
                if name is not None:
                    grads[name] = grad if name not in grads else grads[name] + grad
        if last.self_attention:
            grads["x"] = grads["query"] + grads["key"] + grads["value"]
        return grads

    def analytic_cache(self):
        """The numpy values the analytic backward reads, taken from the last forward."""
        last = self._require_forward("analytic_cache()")
        cache = {role: node.data for role, node in last.inputs.items()}
        for name in ("Q_heads", "K_heads", "V_heads", "weights", "merged"):
            cache[name] = last.nodes[name].data
        cache["keep"] = last.keep
        cache["params"] = {name: tensor.data for name, tensor in self.named_parameters()}
        cache["num_heads"] = self.num_heads
        return cache

    def _backward_analytic(self, grad_output):
        last = self._last
        grads = analytic.attention_backward(grad_output, self.analytic_cache(), last.self_attention)
        if last.keep is None:
            grads.pop("dropped_weights", None)
        present = {name for name in last.nodes} | set(ROLES) | {"x"} | {name for name, _ in self.named_parameters()}
        grads = {name: grad for name, grad in grads.items() if name in present}
        # Leaves accumulate, as the taped route does.
        for name, tensor in self.named_parameters():
            tensor.grad = grads[name] if tensor.grad is None else tensor.grad + grads[name]
        if last.self_attention:
            _accumulate(last.inputs["query"], grads["x"])
        else:
            for role in ROLES:
                _accumulate(last.inputs[role], grads[role])
        return grads

    # -- zoom to scalars

    def trace_scalars(self, query, key=None, value=None, mask=None, max_ops=200_000):
        """Run the same forward with one Scalar per number (tiny sizes only).

        Returns a :class:`ScalarTrace`: its ``tape`` has one equation per
        scalar multiply/add/exp/…; ``trace.backward(g)`` then
        ``trace.gradients()`` give the same numbers as the tensor route. Uses
        the dropout mask of the last forward if dropout is active.
        """
        self_attention, raw, batch, q_len, k_len, causal, user_mask, total = self._parse(query, key, value, mask)
        embed = self.embed
        estimate = 4 * batch * (q_len + 2 * k_len) * embed * embed + 6 * batch * q_len * k_len * embed
        if estimate > max_ops:
            raise ValueError(
                f"MultiHeadAttention.trace_scalars: about {estimate:,} scalar ops for B={batch}, Tq={q_len}, "
                f"Tk={k_len}, E={embed} (limit max_ops={max_ops:,}); the scalar trace is for tiny examples "
                "such as E <= 4, T <= 3"
            )
        keep = None
        if self.training and self.dropout > 0:
            if (
                self._last is None
                or self._last.keep is None
                or self._last.keep.shape != (batch * self.num_heads, q_len, k_len)
            ):
                raise ValueError(
                    "trace_scalars with dropout active: run forward() on the same sizes first "
                    "(its mask is reused), or call eval()"
                )
            keep = self._last.keep
        arrays = [np.asarray(getattr(x, "data", x), dtype=np.float64) for x in raw]
        if self_attention:
            x = ScalarArray.leaves(arrays[0], name="x")
            inputs = {"x": x}
            query_s = key_s = value_s = x
        else:
            inputs = {role: ScalarArray.leaves(arrays[i], name=role) for i, role in enumerate(ROLES)}
            query_s, key_s, value_s = inputs["query"], inputs["key"], inputs["value"]
        params = {name: ScalarArray.leaves(tensor.data, name=name) for name, tensor in self.named_parameters()}
        heads = {}
        with Tape() as tape:
            output = attention_chain(
                query_s, key_s, value_s, params, self.num_heads, causal, user_mask, keep, steps=heads
            )
        _tag_heads(tape, heads, self.num_heads, batch)
        return ScalarTrace(tape, output, inputs, params)

    # -- PyTorch bridge

    @classmethod
    def from_torch(cls, module, causal=False, dtype=np.float64):
        """A layer with the weights of a ``torch.nn.MultiheadAttention`` (torch imported here only)."""
        import torch  # noqa: F401  (only to fail clearly if missing)

        embed, heads = module.embed_dim, module.num_heads
        if getattr(module, "in_proj_weight", None) is None:
            raise ValueError("from_torch: separate q/k/v projection weights (kdim/vdim != embed) are not supported")
        if module.in_proj_bias is None or module.out_proj.bias is None:
            raise ValueError("from_torch: the module must have biases (bias=True)")
        if getattr(module, "bias_k", None) is not None or getattr(module, "add_zero_attn", False):
            raise ValueError("from_torch: add_bias_kv and add_zero_attn are not supported")
        layer = cls(embed, heads, dropout=float(module.dropout), causal=causal, dtype=dtype)
        weight = module.in_proj_weight.detach().cpu().double().numpy()
        bias = module.in_proj_bias.detach().cpu().double().numpy()
        for i, projection in enumerate(("q_proj", "k_proj", "v_proj")):
            getattr(layer, projection).weight.data[...] = weight[i * embed : (i + 1) * embed]
            getattr(layer, projection).bias.data[...] = bias[i * embed : (i + 1) * embed]
        layer.out_proj.weight.data[...] = module.out_proj.weight.detach().cpu().double().numpy()
        layer.out_proj.bias.data[...] = module.out_proj.bias.detach().cpu().double().numpy()
        layer.train(module.training)
        return layer

    def to_torch(self):
        """An equivalent ``torch.nn.MultiheadAttention(batch_first=True)`` (float64 or float32)."""
        import torch

        torch_dtype = torch.float64 if self.dtype == np.float64 else torch.float32
        module = torch.nn.MultiheadAttention(
            self.embed, self.num_heads, dropout=self.dropout, bias=True, batch_first=True, dtype=torch_dtype
        )
        with torch.no_grad():
            module.in_proj_weight.copy_(
                torch.from_numpy(
                    np.concatenate([self.q_proj.weight.data, self.k_proj.weight.data, self.v_proj.weight.data])
                )
            )
            module.in_proj_bias.copy_(
                torch.from_numpy(np.concatenate([self.q_proj.bias.data, self.k_proj.bias.data, self.v_proj.bias.data]))
            )
            module.out_proj.weight.copy_(torch.from_numpy(self.out_proj.weight.data))
            module.out_proj.bias.copy_(torch.from_numpy(self.out_proj.bias.data))
        module.train(self.training)
        return module


def _tag_heads(tape, heads, num_heads, batch):
    """Move each scalar op of the attention core into its head's module ("attention.head1").

    At scalar granularity every number belongs to one head: a score of head h
    is made from head h's Q and K entries, its softmax from head h's scores,
    and so on. We start from the split Q, K, V entries and follow the tape
    forward; the graph then draws one cluster per head. (Tensor ops cover all
    heads at once, so the tensor trace has no per-head rows to group.)
    """
    head_of = {}
    for array in heads.values():
        for row, entries in enumerate(array.items):
            for entry in entries.flat:
                head_of[entry] = row
    for node in tape.nodes:
        if not node.module.endswith("attention"):
            continue
        rows = {head_of[x] for x in node.inputs if x in head_of}
        if len(rows) == 1:
            row = rows.pop()
            head_of[node] = row
            index, head = divmod(row, num_heads)
            node.module += f".head{head}" if batch == 1 else f".batch{index}.head{head}"


def _accumulate(node, grad):
    node.grad = grad if node.grad is None else node.grad + grad
