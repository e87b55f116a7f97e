"""Cases for the second-order and forward-mode cross-checks against PyTorch (float64).

Each case is one function ``y = f(x1, ...)`` written twice — with microtape
(``mt``) and with torch (``torch``, which receives the torch module first) —
and is judged through the scalar loss

    loss(x) = Σ u ⊙ y + ½ Σ y ⊙ y            (u: a fixed random cotangent)

so that even a linear op has a non-zero second derivative (``Jᵀ J w``):
the fixture keeps ``y``, the gradient of the loss, its Hessian times fixed
directions ``w`` (``Σ_i ∂²loss/∂x ∂x_i · w_i``) and the forward-mode ``J v``
of ``f`` itself. There is one case per registered op (``OP_CASE_NAMES``
must cover :data:`microtape.ops.OPS`), then attention written from
primitives (causal and padding masks, dropout with a fixed mask), the
``MultiHeadAttention`` layer, and a Transformer encoder layer.

``make_golden_second_order.py`` writes ``second_order.npz`` with torch;
``run_second_order`` recomputes everything with microtape. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

import microtape as mt

SECOND_ORDER_FILE = Path(__file__).resolve().parent / "second_order.npz"
MASKED = -1e9


class Case(NamedTuple):
    name: str
    shapes: tuple  # one shape per input
    mt: Callable  # (*Tensors) -> Tensor
    torch: Callable  # (torch, *torch tensors) -> torch tensor
    domains: tuple = ()  # per input: "real" (default) or "positive"
    second: bool = True  # False: the op refuses create_graph (only y, the gradient and J v are kept)


def _idx(torch, values):
    return torch.tensor(values, dtype=torch.long)


_PICK = np.array([0, 2, 2])


def _op_cases():
    c = Case
    return [
        c("add", ((2, 3), (3,)), lambda a, b: a + b, lambda torch, a, b: a + b),
        c("sub", ((2, 3), (2, 1)), lambda a, b: a - b, lambda torch, a, b: a - b),
        c("mul", ((2, 3), (3,)), lambda a, b: a * b, lambda torch, a, b: a * b),
        c("div", ((2, 3), (3,)), lambda a, b: a / b, lambda torch, a, b: a / b, ("real", "positive")),
        c("neg", ((2, 3),), lambda x: -x, lambda torch, x: -x),
        c("scale", ((2, 3),), lambda x: x.scale(0.5), lambda torch, x: x * 0.5),
        c("pow", ((2, 3),), lambda x: x**1.5, lambda torch, x: x**1.5, ("positive",)),
        c("exp", ((2, 3),), lambda x: x.exp(), lambda torch, x: x.exp()),
        c("log", ((2, 3),), lambda x: x.log(), lambda torch, x: x.log(), ("positive",)),
        c("tanh", ((2, 3),), lambda x: x.tanh(), lambda torch, x: x.tanh()),
        c("relu", ((2, 3),), lambda x: x.relu(), lambda torch, x: x.relu()),
        c("sqrt", ((2, 3),), lambda x: x.sqrt(), lambda torch, x: x.sqrt(), ("positive",)),
        c("abs", ((2, 3),), lambda x: x.abs(), lambda torch, x: x.abs()),
        c("sigmoid", ((2, 3),), lambda x: x.sigmoid(), lambda torch, x: x.sigmoid()),
        c(
            "gelu",
            ((2, 3),),
            lambda x: x.gelu(),
            lambda torch, x: torch.nn.functional.gelu(x, approximate="tanh"),
        ),
        c(
            "add_constant",
            ((2, 3),),
            lambda x: x.add_constant(np.array([0.0, MASKED, 0.5])),
            lambda torch, x: x + torch.tensor([0.0, MASKED, 0.5], dtype=x.dtype),
        ),
        c(
            "dropout",
            ((2, 3),),
            lambda x: x.dropout(np.array([[2.0, 0.0, 2.0], [0.0, 2.0, 2.0]])),
            lambda torch, x: x * torch.tensor([[2.0, 0.0, 2.0], [0.0, 2.0, 2.0]], dtype=x.dtype),
        ),
        c("maximum", ((2, 3), (3,)), lambda a, b: a.maximum(b), lambda torch, a, b: torch.maximum(a, b)),
        c("minimum", ((2, 3), (3,)), lambda a, b: a.minimum(b), lambda torch, a, b: torch.minimum(a, b)),
        c("sum", ((2, 3),), lambda x: x.sum(axis=1), lambda torch, x: x.sum(1)),
        c("mean", ((2, 3),), lambda x: x.mean(axis=0, keepdims=True), lambda torch, x: x.mean(0, keepdim=True)),
        c("max", ((2, 3),), lambda x: x.max(axis=-1), lambda torch, x: torch.amax(x, -1)),
        c("logsumexp", ((2, 3),), lambda x: x.logsumexp(axis=-1), lambda torch, x: torch.logsumexp(x, -1)),
        c("softmax", ((2, 3),), lambda x: x.softmax(axis=-1), lambda torch, x: torch.softmax(x, -1)),
        c("log_softmax", ((2, 3),), lambda x: x.log_softmax(axis=-1), lambda torch, x: torch.log_softmax(x, -1)),
        c("matmul", ((2, 3, 4), (4, 2)), lambda a, b: a @ b, lambda torch, a, b: a @ b),
        c("reshape", ((2, 3),), lambda x: x.reshape(3, 2), lambda torch, x: x.reshape(3, 2)),
        c("transpose", ((2, 3, 2),), lambda x: x.transpose(2, 0, 1), lambda torch, x: x.permute(2, 0, 1)),
        c("cast", ((2, 3),), lambda x: x.astype(np.float64), lambda torch, x: x.to(torch.float64)),
        c(
            "broadcast_to",
            ((3, 1),),
            lambda x: mt.ops.broadcast_to(x, shape=(2, 3, 4)),
            lambda torch, x: torch.broadcast_to(x, (2, 3, 4)),
        ),
        c("take", ((2, 3),), lambda x: x.take(_PICK, axis=1), lambda torch, x: x.index_select(1, _idx(torch, _PICK))),
        c(
            "scatter_add",
            ((2, 3),),
            lambda x: mt.ops.scatter_add(x, shape=(2, 4), indices=_PICK, axis=1),
            lambda torch, x: torch.zeros(2, 4, dtype=x.dtype).index_add(1, _idx(torch, _PICK), x),
        ),
        c("index", ((3, 4),), lambda x: x[1:, _PICK], lambda torch, x: x[1:, _idx(torch, _PICK)]),
        c(
            "index_add",
            ((3, 3),),
            lambda x: mt.ops.index_add(x, shape=(3, 4), key=(slice(None), _PICK)),
            lambda torch, x: torch.zeros(3, 4, dtype=x.dtype).index_add(1, _idx(torch, _PICK), x),
        ),
        c(
            "concatenate",
            ((2, 3), (2, 2)),
            lambda a, b: mt.concatenate([a, b], axis=1),
            lambda torch, a, b: torch.cat([a, b], 1),
        ),
        *_more_op_cases(),
        c(
            "tiled_attention",
            ((2, 5, 3), (2, 5, 3), (2, 5, 3)),
            lambda q, k, v: mt.ops.OPS["tiled_attention"](q, k, v, block_size=2, causal=True),
            lambda torch, q, k, v: _torch_core(torch, q, k, v, _causal(5)),
            second=False,
        ),
    ]


_CONDITION = np.array([[True, False, True], [False, False, True]])


def _more_op_cases():
    """The numpy surface of a course: trig, logs and powers, two-input ops, choices, scans, einsum, norm."""
    c, ops = Case, mt.ops
    unary = [  # (name, microtape op, torch's function of (torch, x), the input's domain)
        ("sin", ops.sin, lambda torch, x: torch.sin(x), "real"),
        ("cos", ops.cos, lambda torch, x: torch.cos(x), "real"),
        ("tan", ops.tan, lambda torch, x: torch.tan(x), "unit"),
        ("arcsin", ops.arcsin, lambda torch, x: torch.asin(x), "unit"),
        ("arccos", ops.arccos, lambda torch, x: torch.acos(x), "unit"),
        ("arctan", ops.arctan, lambda torch, x: torch.atan(x), "real"),
        ("sinh", ops.sinh, lambda torch, x: torch.sinh(x), "real"),
        ("cosh", ops.cosh, lambda torch, x: torch.cosh(x), "real"),
        ("log1p", ops.log1p, lambda torch, x: torch.log1p(x), "positive"),
        ("expm1", ops.expm1, lambda torch, x: torch.expm1(x), "real"),
        ("log2", ops.log2, lambda torch, x: torch.log2(x), "positive"),
        ("log10", ops.log10, lambda torch, x: torch.log10(x), "positive"),
        ("exp2", ops.exp2, lambda torch, x: torch.exp2(x), "real"),
        # torch has no cbrt: the real cube root written out (the inputs are never 0).
        ("cbrt", ops.cbrt, lambda torch, x: torch.sign(x) * x.abs() ** (1 / 3), "real"),
        ("square", ops.square, lambda torch, x: torch.square(x), "real"),
        ("reciprocal", ops.reciprocal, lambda torch, x: torch.reciprocal(x), "positive"),
        ("arcsinh", ops.arcsinh, lambda torch, x: torch.asinh(x), "real"),
        ("arccosh", ops.arccosh, lambda torch, x: torch.acosh(x), "above_one"),
        ("arctanh", ops.arctanh, lambda torch, x: torch.atanh(x), "unit"),
    ]
    cases = [c(name, ((2, 3),), lambda x, op=op: op(x), fn, (domain,)) for name, op, fn, domain in unary]
    return cases + [
        c("logaddexp", ((2, 3), (3,)), ops.logaddexp, lambda torch, a, b: torch.logaddexp(a, b)),
        c("logaddexp2", ((2, 3), (3,)), ops.logaddexp2, lambda torch, a, b: torch.logaddexp2(a, b)),
        c("arctan2", ((2, 3), (3,)), ops.arctan2, lambda torch, a, b: torch.atan2(a, b)),
        c("power", ((2, 3), (3,)), ops.power, lambda torch, a, b: torch.pow(a, b), ("positive", "real")),
        c(
            "clip",
            ((2, 3),),
            lambda x: ops.clip(x, lower=-0.5, upper=1.0),
            lambda torch, x: torch.clamp(x, -0.5, 1.0),
        ),
        c(
            "where",
            ((2, 3), (3,)),
            lambda a, b: ops.where(_CONDITION, a, b),
            lambda torch, a, b: torch.where(torch.tensor(_CONDITION), a, b),
        ),
        c("min", ((2, 3),), lambda x: x.min(axis=-1), lambda torch, x: torch.amin(x, -1)),
        c("prod", ((2, 3),), lambda x: x.prod(axis=1), lambda torch, x: torch.prod(x, 1)),
        c("cumsum", ((2, 3),), lambda x: x.cumsum(axis=1), lambda torch, x: torch.cumsum(x, 1)),
        c("cumprod", ((2, 3),), lambda x: x.cumprod(axis=1), lambda torch, x: torch.cumprod(x, 1)),
        c("norm", ((2, 3),), lambda x: x.norm(axis=-1), lambda torch, x: torch.linalg.vector_norm(x, dim=-1)),
        c(
            "einsum",
            ((2, 3), (3, 4)),
            lambda a, b: mt.einsum("ij,jk->ik", a, b),
            lambda torch, a, b: torch.einsum("ij,jk->ik", a, b),
        ),
        *_convolution_cases(),
    ]


def _torch_conv_weight_grad(torch, x, z, shape, stride, padding):
    """torch has no op for a convolution's weight gradient: take it by autograd, as a differentiable result."""
    zero = torch.zeros(shape, dtype=x.dtype, requires_grad=True)
    product = (torch.nn.functional.conv2d(x, zero, stride=stride, padding=padding) * z).sum()
    return torch.autograd.grad(product, zero, create_graph=True)[0]


def _convolution_cases():
    c, ops = Case, mt.ops
    return [
        c(
            "conv",
            ((1, 2, 5, 5), (2, 2, 3, 3)),
            lambda x, w: mt.conv2d(x, w, stride=2, padding=1),
            lambda torch, x, w: torch.nn.functional.conv2d(x, w, stride=2, padding=1),
        ),
        c(  # input 6, kernel 3, stride 2, padding 1: the last input is in no window (torch's output_padding=1)
            "conv_transpose",
            ((1, 2, 3), (2, 3, 3)),
            lambda z, w: ops.conv_transpose(z, w, input_shape=(1, 3, 6), stride=(2,), padding=(1,)),
            lambda torch, z, w: torch.nn.functional.conv_transpose1d(z, w, stride=2, padding=1, output_padding=1),
        ),
        c(
            "conv_weight_grad",
            ((1, 2, 5, 4), (1, 3, 3, 1)),
            lambda x, z: ops.conv_weight_grad(x, z, kernel_size=(3, 3), stride=(2, 2), padding=(1, 0)),
            lambda torch, x, z: _torch_conv_weight_grad(torch, x, z, (3, 2, 3, 3), (2, 2), (1, 0)),
        ),
        c(
            "max_pool2d",
            ((1, 2, 4, 5),),
            lambda x: mt.max_pool2d(x, 2, stride=(1, 2)),
            lambda torch, x: torch.nn.functional.max_pool2d(x, 2, stride=(1, 2)),
        ),
        c(
            "avg_pool2d",
            ((1, 2, 5, 4),),
            lambda x: mt.avg_pool2d(x, 3, stride=1),
            lambda torch, x: torch.nn.functional.avg_pool2d(x, 3, stride=1),
        ),
    ]


def _causal(length):
    return np.triu(np.full((length, length), MASKED), k=1)


def _torch_core(torch, q, k, v, mask, keep=None):
    weights = torch.softmax(q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1]) + torch.tensor(mask, dtype=q.dtype), -1)
    if keep is not None:
        weights = weights * torch.tensor(keep, dtype=q.dtype)
    return weights @ v


# ---------------------------------------------------------------- attention and a Transformer layer

_EMBED, _HEADS, _LENGTH = 8, 2, 4
_RNG = np.random.default_rng(2313)
_WEIGHTS = [_RNG.standard_normal((_EMBED, _EMBED)) / np.sqrt(_EMBED) for _ in range(4)]
_PADDING = np.where(np.arange(_LENGTH)[None, :] == _LENGTH - 1, MASKED, 0.0) * np.ones((_LENGTH, 1))
_MASK = _causal(_LENGTH) + _PADDING * (np.arange(_LENGTH)[:, None] > 0)  # row 0 keeps its only key
_KEEP = (_RNG.random((1, _HEADS, _LENGTH, _LENGTH)) < 0.75) / 0.75


def _split(x):
    return x.reshape(1, _LENGTH, _HEADS, _EMBED // _HEADS).transpose(0, 2, 1, 3)


def _torch_split(x):
    return x.reshape(1, _LENGTH, _HEADS, _EMBED // _HEADS).permute(0, 2, 1, 3)


def _mt_attention(x):
    """Attention from primitives: projections, heads, masked scores, softmax, dropout, context."""
    q, k, v = (_split(x @ w.T) for w in _WEIGHTS[:3])
    scores = (q @ k.transpose(0, 1, 3, 2)).scale(1 / np.sqrt(_EMBED // _HEADS)).add_constant(_MASK)
    context = scores.softmax(axis=-1).dropout(_KEEP) @ v
    return context.transpose(0, 2, 1, 3).reshape(1, _LENGTH, _EMBED) @ _WEIGHTS[3].T


def _torch_attention(torch, x):
    w = [torch.tensor(a, dtype=x.dtype) for a in _WEIGHTS]
    q, k, v = (_torch_split(x @ wi.T) for wi in w[:3])
    context = _torch_core(torch, q, k, v, _MASK, _KEEP)
    return context.permute(0, 2, 1, 3).reshape(1, _LENGTH, _EMBED) @ w[3].T


def _attention_layer():
    return mt.nn.MultiHeadAttention(_EMBED, _HEADS, causal=True, seed=5)


def _torch_attention_layer(torch, x):
    module = _attention_layer().to_torch()
    return module(x, x, x, attn_mask=torch.tensor(_MASK, dtype=x.dtype), need_weights=False)[0]


def _encoder_layer():
    layer = mt.nn.TransformerEncoderLayer(_EMBED, _HEADS, 16, activation="gelu", seed=7)
    layer.eval()
    return layer


def _torch_encoder_layer(torch, x):
    module = _encoder_layer().to_torch()
    module.eval()
    return module(x, src_mask=torch.tensor(_MASK, dtype=x.dtype))


LAYER_CASES = [
    Case("attention_from_primitives", ((1, _LENGTH, _EMBED),), _mt_attention, _torch_attention),
    Case(
        "multihead_attention_layer",
        ((1, _LENGTH, _EMBED),),
        lambda x: _attention_layer()(x, mask=_PADDING * (np.arange(_LENGTH)[:, None] > 0)),
        _torch_attention_layer,
    ),
    Case(
        "encoder_layer",
        ((2, _LENGTH, _EMBED),),
        lambda x: _encoder_layer()(x, mask=_MASK),
        _torch_encoder_layer,
    ),
]

OP_CASES = _op_cases()
CASES = OP_CASES + LAYER_CASES
OP_CASE_NAMES = [case.name for case in OP_CASES]


def make_arrays(case, seed=23):
    """The inputs, cotangent ``u``, second-order directions ``w`` and tangents ``v`` of a case (seeded)."""
    rng = np.random.default_rng([seed, len(case.name), sum(map(ord, case.name))])
    domains = case.domains or ("real",) * len(case.shapes)
    draw = {
        "positive": lambda shape: rng.uniform(0.5, 2.0, shape),
        "unit": lambda shape: rng.uniform(-0.9, 0.9, shape),
        "above_one": lambda shape: rng.uniform(1.5, 3.0, shape),
        "real": rng.standard_normal,
    }
    inputs = [draw[domain](shape) for shape, domain in zip(case.shapes, domains)]
    output = case.mt(*[mt.Tensor(x) for x in inputs])
    return {
        "inputs": inputs,
        "u": rng.standard_normal(output.shape),
        "w": [rng.standard_normal(x.shape) for x in inputs],
        "v": [rng.standard_normal(x.shape) for x in inputs],
    }


def run_microtape(case, arrays):
    """``{"output", "grads", "hvps", "jvp"}`` by microtape (``hvps`` empty for a first-order-only op)."""
    tensors = [mt.Tensor(x.copy(), requires_grad=True) for x in arrays["inputs"]]
    y = case.mt(*tensors)
    loss = (y * arrays["u"]).sum() + (y * y).sum().scale(0.5)
    grads = mt.gradients(loss, create_graph=case.second)
    first = [grads[t] for t in tensors]
    hvps = []
    if case.second:
        along = None
        for g, w in zip(first, arrays["w"]):
            term = (g * w).sum()
            along = term if along is None else along + term
        second = mt.gradients(along)
        hvps = [second[t] for t in tensors]
    _, tangent = mt.jvp(case.mt, tuple(arrays["inputs"]), tuple(arrays["v"]))
    return {
        "output": y.data,
        "grads": [np.asarray(getattr(g, "data", g)) for g in first],
        "hvps": hvps,
        "jvp": tangent,
    }


def run_torch(torch, case, arrays):
    """The same numbers by torch (double backward and ``torch.func.jvp``).

    Attention runs torch's plain (math) kernel: its fused CPU kernels have no double backward.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return _run_torch(torch, case, arrays)


def _run_torch(torch, case, arrays):
    xs = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in arrays["inputs"]]
    y = case.torch(torch, *xs)
    u = torch.tensor(arrays["u"], dtype=torch.float64)
    loss = (y * u).sum() + 0.5 * (y * y).sum()
    first = torch.autograd.grad(loss, xs, create_graph=case.second)
    hvps = []
    if case.second:
        along = sum((g * torch.tensor(w)).sum() for g, w in zip(first, arrays["w"]))
        hvps = [
            np.zeros(x.shape) if h is None else h.detach().numpy()
            for h, x in zip(torch.autograd.grad(along, xs, allow_unused=True), xs)
        ]
    primals = tuple(torch.tensor(x, dtype=torch.float64) for x in arrays["inputs"])
    tangents = tuple(torch.tensor(v, dtype=torch.float64) for v in arrays["v"])
    _, tangent = torch.func.jvp(lambda *args: case.torch(torch, *args), primals, tangents)
    return {
        "output": y.detach().numpy(),
        "grads": [g.detach().numpy() for g in first],
        "hvps": hvps,
        "jvp": tangent.detach().numpy(),
    }


def pack(results):
    """``{case/output, case/grad<i>, case/hvp<i>, case/jvp}`` for ``np.savez``."""
    flat = {}
    for name, result in results.items():
        flat[f"{name}/output"] = result["output"]
        flat[f"{name}/jvp"] = result["jvp"]
        for i, g in enumerate(result["grads"]):
            flat[f"{name}/grad{i}"] = g
        for i, h in enumerate(result["hvps"]):
            flat[f"{name}/hvp{i}"] = h
    return flat


def load(name, path=SECOND_ORDER_FILE):
    """One case's stored torch results, in the form ``run_microtape`` returns."""
    with np.load(path) as data:
        keys = [k for k in data.files if k.startswith(name + "/")]
        count = lambda prefix: sum(1 for k in keys if k.startswith(f"{name}/{prefix}"))  # noqa: E731
        return {
            "output": data[f"{name}/output"],
            "jvp": data[f"{name}/jvp"],
            "grads": [data[f"{name}/grad{i}"] for i in range(count("grad"))],
            "hvps": [data[f"{name}/hvp{i}"] for i in range(count("hvp"))],
        }
