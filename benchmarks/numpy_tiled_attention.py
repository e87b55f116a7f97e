"""The numpy reference with microtape's tiled kernel as its core: the kernel's cost without a tape.

The projections, head split and merge are :mod:`benchmarks.numpy_attention`'s;
the attention core is :func:`microtape.nn.attention.tiled.tiled_forward` and
:func:`~microtape.nn.attention.tiled.tiled_backward` (numpy only), called directly.
Nothing else is kept, so its peak memory is the floor for the tiled path:
what ``MultiHeadAttention(..., block_size=b)`` pays on top of it is the tape
(every intermediate ``[B, T, E]`` value and gradient kept for inspection).
"""

from microtape.nn.attention import tiled

from . import numpy_attention as reference


def forward(x, params, heads, block_size, causal=False):
    """Self-attention of ``x`` ``[B, T, E]`` by the tiled kernel; returns ``(y, saved)``."""
    q, k, v = reference.project(x, params, heads)
    schedule = tiled.TileSchedule(q.shape[1], k.shape[1], block_size, causal)
    context, _ = tiled.tiled_forward(q, k, v, schedule)  # L is kept beside the context
    merged = reference._merge(context, x.shape[0])
    y = merged @ params["Wo"].T + params["bo"]
    return y, (x, q, k, v, context, merged, schedule)


def backward(grad_y, saved, params, heads):
    """Gradients of ``sum(grad_y * y)``: returns ``(dx, {"Wq": dWq, ...})``."""
    x, q, k, v, context, merged, schedule = saved
    grads = {}
    grad_merged, grads["Wo"], grads["bo"] = reference._linear_backward(grad_y, merged, params["Wo"])
    grad_heads = tiled.tiled_backward(reference._split(grad_merged, heads), context, q, k, v, schedule)
    return reference.projections_backward(grad_heads, x, params, grads), grads
