"""The same self-attention math in PyTorch eager (autograd), one thread.

Imported only by the torch worker, under an interpreter that has torch.
Not ``nn.MultiheadAttention`` (whose fused kernel never materialises the
scores): the same matmuls, softmax and reshapes as
:mod:`benchmarks.numpy_attention`, differentiated by torch's autograd —
and, for the tiled comparison, the same layer with the fused core
(``scaled_dot_product_attention``, what ``nn.MultiheadAttention`` calls).
"""

import math

import torch

torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:  # already set: harmless
    pass


def _split(t, heads):
    batch, length, embed = t.shape
    return t.reshape(batch, length, heads, embed // heads).transpose(1, 2).reshape(batch * heads, length, -1)


def _merge(t, batch):
    heads_total, length, depth = t.shape
    heads = heads_total // batch
    return t.reshape(batch, heads, length, depth).transpose(1, 2).reshape(batch, length, heads * depth)


def forward(x, params, heads):
    batch, _, embed = x.shape
    q = _split(x @ params["Wq"].T + params["bq"], heads)
    k = _split(x @ params["Wk"].T + params["bk"], heads)
    v = _split(x @ params["Wv"].T + params["bv"], heads)
    scores = q @ k.transpose(1, 2) / math.sqrt(embed // heads)
    weights = torch.softmax(scores, dim=-1)
    merged = _merge(weights @ v, batch)
    return merged @ params["Wo"].T + params["bo"]


def fused_forward(x, params, heads, causal=False):
    """The same layer with torch's fused ``scaled_dot_product_attention`` as its core (no score matrix kept)."""
    batch, length, embed = x.shape
    q, k, v = (
        (x @ params["W" + name].T + params["b" + name]).reshape(batch, length, heads, -1).transpose(1, 2)
        for name in "qkv"
    )
    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return context.transpose(1, 2).reshape(batch, length, embed) @ params["Wo"].T + params["bo"]


def step(x, params, grad_y, heads, fused=False, causal=False):
    """One forward + backward; leaves gradients in ``.grad``. ``fused``: the fused core (``causal`` there only)."""
    x.grad = None
    for p in params.values():
        p.grad = None
    y = fused_forward(x, params, heads, causal) if fused else forward(x, params, heads)
    y.backward(grad_y)
    return x.grad
