"""Zoom to scalars: the attention forward with one Scalar per number.

This module lets a tiny attention be traced at micrograd granularity::

    attn = mt.nn.MultiHeadAttention(4, 2, seed=0)
    trace = attn.trace_scalars(np.random.default_rng(0).standard_normal((1, 3, 4)))
    len(trace.tape)                # one equation per scalar multiply, add, exp, …
    trace.backward(g)
    trace.gradients()              # the same numbers as the tensor route

It runs *the same* forward code (:func:`~microtape.nn.attention.chain.attention_chain`)
on :class:`~microtape.values.scalar_array.ScalarArray` inputs. The graph groups the
attention core per head (``attention.head0``, …): at scalar granularity every
number belongs to one head.
"""

import numbers
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...engine import Tape
from ...values.scalar_array import ScalarArray
from .. import masks
from .call import check_inputs
from .chain import HEADS, attention_chain

__all__ = ["ScalarTrace", "trace_scalars", "scalar_op_estimate"]


@dataclass
class ScalarTrace:
    """The result of :meth:`MultiHeadAttention.trace_scalars`."""

    tape: Tape
    output: ScalarArray
    inputs: dict  # role -> ScalarArray
    params: dict  # "q_proj.weight" -> ScalarArray

    def backward(self, grad_output: Any = None) -> None:
        """Backpropagate ``sum(grad_output * output)`` through every scalar op."""
        self.output.backward(grad_output)

    def gradients(self) -> Any:
        """``{name: numpy array}`` for every input and parameter."""
        grads = {name: array.grad for name, array in self.params.items()}
        grads.update({role: array.grad for role, array in self.inputs.items()})
        return grads


def scalar_op_estimate(batch: int, q_len: int, k_len: int, embed: int) -> Any:
    """About how many scalar ops the trace records (projections, then the attention core)."""
    return 4 * batch * (q_len + 2 * k_len) * embed * embed + 6 * batch * q_len * k_len * embed


def trace_scalars(
    attn: Any, query: Any, key: Any = None, value: Any = None, mask: Any = None, max_ops: int = 200_000
) -> "ScalarTrace":
    """Run ``attn``'s forward with one Scalar per number (tiny sizes only).

    Returns a :class:`ScalarTrace`: its ``tape`` has one equation per scalar
    multiply/add/exp/…; ``trace.backward(g)`` then ``trace.gradients()`` give
    the same numbers as the tensor route. Uses the dropout mask of the last
    forward if dropout is active. Sizes are checked before anything is built.
    """
    if isinstance(max_ops, bool) or not isinstance(max_ops, numbers.Integral) or max_ops < 1:
        raise ValueError(f"MultiHeadAttention.trace_scalars(max_ops={max_ops!r}): expected a positive integer")
    call = check_inputs(attn, query, key, value)
    estimate = scalar_op_estimate(call.batch, call.q_len, call.k_len, attn.embed)
    if estimate > max_ops:
        raise ValueError(
            f"MultiHeadAttention.trace_scalars: about {estimate:,} scalar ops for B={call.batch}, Tq={call.q_len}, "
            f"Tk={call.k_len}, E={attn.embed} (limit max_ops={max_ops:,}); the scalar trace is for tiny examples "
            "such as E <= 4, T <= 3"
        )
    call = attn.check_call(query, key, value, mask)
    keep = None
    if attn.training and attn.dropout > 0:
        last_keep = attn.dropout_keep
        if last_keep is None or last_keep.shape != (call.batch * attn.num_heads, call.q_len, call.k_len):
            raise ValueError(
                "trace_scalars with dropout active: run forward() on the same sizes first "
                "(its mask is reused), or call eval()"
            )
        keep = last_keep
    arrays = [np.asarray(array, dtype=np.float64) for array in call.arrays]
    if call.self_attention:
        x = ScalarArray.leaves(arrays[0], name="x")
        inputs = {"x": x}
        query_s = key_s = value_s = x
    else:
        inputs = {role: ScalarArray.leaves(arrays[i], name=role) for i, role in enumerate(("query", "key", "value"))}
        query_s, key_s, value_s = inputs["query"], inputs["key"], inputs["value"]
    params = {name: ScalarArray.leaves(tensor.data, name=name) for name, tensor in attn.named_parameters()}
    # A tiled layer's call carries no whole causal mask (its tiles make their own): build one here.
    causal_mask = call.causal_mask
    if causal_mask is None and attn.causal:
        causal_mask = masks.causal_mask(call.q_len, attn.dtype)
    record = {}
    with Tape() as tape:
        output = attention_chain(
            query_s, key_s, value_s, params, attn.num_heads, causal_mask, call.user_mask, keep, record=record
        )
    _tag_heads(tape, [record[name] for name in HEADS], attn.num_heads, call.batch)
    _name_by_head(tape, attn.num_heads, call.batch)
    return ScalarTrace(tape, output, inputs, params)


#: The attention core's steps, laid out [B·H, Tq, Tk] (scores …) or [B·H, Tq, D] (context).
_PER_HEAD = re.compile(r"^(scores|scaled_scores|causal_scores|masked_scores|weights|dropped_weights|context)"
                       r"\[(\d+),(\d+),(\d+)\]$")  # fmt: skip


def _name_by_head(tape: Any, num_heads: int, batch: int) -> None:
    """``scores[5,1,2]`` (row 5 of B·H) becomes ``scores[h1,q1,k2]`` — or ``[b1,h1,q1,k2]`` for a batch.

    The core's arrays stack batch and heads on their first axis; a student
    reads a score by head, query and key.
    """
    for node in tape.nodes:
        match = _PER_HEAD.match(node.name or "")
        if match is None:
            continue
        step, row, i, j = match.group(1), int(match.group(2)), match.group(3), match.group(4)
        b, h = divmod(row, num_heads)
        last = "d" if step == "context" else "k"
        where = f"h{h},q{i},{last}{j}" if batch == 1 else f"b{b},h{h},q{i},{last}{j}"
        node.name = f"{step}[{where}]"


def _tag_heads(tape: Any, heads: Any, num_heads: int, batch: int) -> None:
    """Move each scalar op of the attention core into its head's module ("attention.head1").

    At scalar granularity every number belongs to one head: a score of head h
    is made from head h's Q and K entries, its softmax from head h's scores,
    and so on. We start from the split Q, K, V entries and follow the tape
    forward; the graph then draws one cluster per head. (Tensor ops cover all
    heads at once, so the tensor trace has no per-head rows to group.)
    """
    head_of = {}
    for array in heads:
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
