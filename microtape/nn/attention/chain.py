"""The attention forward, written once: one function for Tensors, ScalarArrays and plain numpy.

This module lets every part of microtape run *the same* attention forward::

    attention_chain(query, key, value, params, num_heads, causal_mask, mask, keep)

* on :class:`~microtape.Tensor` inputs it records one named tape row per step
  (what ``MultiHeadAttention.forward`` does);
* on :class:`~microtape.values.scalar_array.ScalarArray` inputs, one row per scalar
  multiply, add and exp (``MultiHeadAttention.trace_scalars``);
* on :class:`~microtape.values.plain.Plain` arrays it records nothing — the
  finite-difference checker runs it in float64, replacing a named step when it
  nudges an intermediate.

The steps, and the tape name of each::

    Q, K, V        = query Wqᵀ + bq,  key Wkᵀ + bk,  value Wvᵀ + bv     [B, T, E]
    Q_heads, K_heads, V_heads = split into H heads                      [B·H, T, D],  D = E / H
    scores         = Q_heads K_headsᵀ                                   [B·H, Tq, Tk]
    scaled_scores  = scores / √D       (so the softmax does not saturate as D grows)
    causal_scores  = scaled_scores + causal mask   (if causal: -1e9 above the diagonal)
    masked_scores  = … + mask          (if a mask is given: additive, 0 allows)
    weights        = softmax(…)        row by row: each query's weights over keys sum to 1
    dropped_weights = weights ⊙ keep    (training with dropout: keep = 1/(1-p) or 0)
    context        = (dropped_)weights V_heads                          [B·H, Tq, D]
    merged         = heads merged back                                  [B, Tq, E]
    output         = merged Woᵀ + bo
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...engine import module_scope
from ...ops.attention_links import merge_heads, score_scale, split_heads
from ..linear import linear, linear_steps
from . import derivation
from .derivation import HEADS

if TYPE_CHECKING:
    from ...values.array_like import ArrayLike

__all__ = ["attention_chain", "attention_core", "HEADS", "step_names"]


def step_names() -> tuple[str, ...]:
    """The names of the chain's steps, in forward order (the masked and dropout steps appear only when used).

    The core's are the derivation table's, read at each call: a new step there is named here too.
    """
    return ("Q", "K", "V", *HEADS, *derivation.step_names(derivation.ATTENTION), "merged", "output")


def _named(value: ArrayLike, name: str) -> ArrayLike:
    """Give a step its name: the tape listing, graphs and reports call it that."""
    value.name = name
    return value


def attention_core(
    q_heads: ArrayLike,
    k_heads: ArrayLike,
    v_heads: ArrayLike,
    causal_mask: Any = None,
    mask: Any = None,
    keep: Any = None,
    record: dict[str, Any] | None = None,
) -> ArrayLike:
    """Scaled dot-product attention of ``[N, Tq, D]`` queries over ``[N, Tk, D]`` keys and values.

    Runs the steps of the derivation table (:data:`microtape.nn.attention.derivation.ATTENTION`),
    one named row each. ``causal_mask`` and ``mask`` are additive constants
    (``[Tq, Tk]``), ``keep`` the saved dropout mask (``[N, Tq, Tk]``, scaled
    by ``1/(1-p)``). Returns the context ``[N, Tq, D]``; with a ``record``
    dict, also puts the ``weights`` (before dropout) in it. Any number of
    leading axes works.
    """
    heads = {"Q_heads": q_heads, "K_heads": k_heads, "V_heads": v_heads}
    constants = {"scale": score_scale(q_heads.shape[-1]), "causal_mask": causal_mask, "mask": mask, "keep": keep}
    table = derivation.ATTENTION
    values = derivation.run_forward(table, heads, constants)
    if record is not None:
        record["weights"] = values["weights"]
    return values[table[-1].name]


def attention_chain(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    params: Mapping[str, Any],
    num_heads: int,
    causal_mask: Any = None,
    mask: Any = None,
    keep: Any = None,
    record: dict[str, Any] | None = None,
    core: Callable[..., ArrayLike] = attention_core,
) -> ArrayLike:
    """The multi-head attention forward; returns the output ``[B, Tq, E]``.

    ``params`` maps ``"q_proj.weight"``, ``"q_proj.bias"``, … to values of the
    inputs' kind; the masks and ``keep`` are constants. If ``record`` is a
    dict, the chain puts into it what the layer keeps: the split heads
    (``"Q_heads"``, …) and, under ``"products"``, each projection's product
    ``x Wᵀ`` by role (``{"query": …}``) — the step whose VJP sends the
    gradient back to that input. ``core`` computes the context from the split
    heads (``core(Q_heads, K_heads, V_heads, causal_mask, mask, keep)``): the
    step-by-step :func:`attention_core` by default, or the tiled kernel
    (:func:`microtape.nn.attention.tiled.tiled_core`), which records the core as one row.
    """
    batch = query.shape[0]
    projected: dict[str, ArrayLike] = {}
    products: dict[str, ArrayLike] = {}
    for role, projection, letter, x in (
        ("query", "q_proj", "Q", query),
        ("key", "k_proj", "K", key),
        ("value", "v_proj", "V", value),
    ):
        weight, bias = params[f"{projection}.weight"], params[f"{projection}.bias"]
        with module_scope(projection):
            products[role], projected[letter] = linear_steps(x, weight, bias, name=letter)
    with module_scope("attention"):
        heads = {name: _named(split_heads(projected[name[0]], num_heads), name) for name in HEADS}
        context = core(heads["Q_heads"], heads["K_heads"], heads["V_heads"], causal_mask, mask, keep)
        merged = _named(merge_heads(context, batch), "merged")
    if record is not None:
        record.update(heads, products=products)
    with module_scope("out_proj"):
        return linear(merged, params["out_proj.weight"], params["out_proj.bias"], name="output")
