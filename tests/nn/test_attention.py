"""MultiHeadAttention: forward, both backward routes, self vs cross, dropout, weights.

The references here never come from the layer's own output:

* :func:`reference_attention` recomputes the forward head by head with plain
  numpy slicing (head ``h`` owns features ``h·D .. (h+1)·D``);
* gradients are checked against central finite differences of that
  reference (:func:`numeric_gradient`), against
  :func:`microtape.check.gradcheck` of the layer itself, and against the
  numpy-only module :mod:`microtape.nn.attention.analytic`;
* the taped and analytic backward routes must agree to 1e-12 in float64.

(PyTorch cross-checks live in ``test_golden_torch.py`` and ``test_torch_live.py``.)
"""

import math
from dataclasses import dataclass

import numpy as np
import pytest

import microtape as mt
from microtape.nn.attention import analytic
from microtape.nn.masks import causal_mask

PARAMETER_NAMES = [
    f"{projection}.{kind}" for projection in ("q_proj", "k_proj", "v_proj", "out_proj") for kind in ("weight", "bias")
]
EXACT = dict(rtol=1e-12, atol=1e-12)  # float64: taped vs analytic
FD = dict(rtol=1e-6, atol=1e-7)  # float64: against central differences


# ---------------------------------------------------------------- references


def numpy_forward(query, key, value, params, num_heads, mask=None, keep=None):
    """The forward in plain numpy, written out here; returns ``(output, cache)`` for ``analytic``.

    Independent of the layer's chain (``microtape.nn.attention.chain``): the
    heads are split with ``analytic.split_heads`` (a reshape), the rest is numpy.
    """
    batch, depth = query.shape[0], query.shape[-1] // num_heads
    q = query @ params["q_proj.weight"].T + params["q_proj.bias"]
    k = key @ params["k_proj.weight"].T + params["k_proj.bias"]
    v = value @ params["v_proj.weight"].T + params["v_proj.bias"]
    q_heads, k_heads, v_heads = (analytic.split_heads(t, num_heads) for t in (q, k, v))
    scores = q_heads @ k_heads.transpose(0, 2, 1) / math.sqrt(depth)
    if mask is not None:
        scores = scores + mask
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    used = weights if keep is None else weights * keep
    merged = analytic.merge_heads(used @ v_heads, batch)
    output = merged @ params["out_proj.weight"].T + params["out_proj.bias"]
    cache = dict(query=query, key=key, value=value, Q_heads=q_heads, K_heads=k_heads, V_heads=v_heads,
                 weights=weights, keep=keep, merged=merged, params=params, num_heads=num_heads)  # fmt: skip
    return output, cache


def reference_attention(layer, query, key, value, mask=None, keep=None):
    """The forward, head by head, from the layer's parameter *values*.

    Returns ``(output [B, Tq, E], weights [B, H, Tq, Tk])``. ``mask`` is the
    total additive mask ``[Tq, Tk]``; ``keep`` the saved dropout mask
    ``[B·H, Tq, Tk]`` (already scaled by ``1/(1-p)``).
    """
    p = {name: tensor.data.astype(np.float64) for name, tensor in layer.named_parameters()}
    heads, depth = layer.num_heads, layer.embed // layer.num_heads
    Q = query @ p["q_proj.weight"].T + p["q_proj.bias"]
    K = key @ p["k_proj.weight"].T + p["k_proj.bias"]
    V = value @ p["v_proj.weight"].T + p["v_proj.bias"]
    batch, q_len, k_len = query.shape[0], query.shape[1], key.shape[1]
    context = np.zeros((batch, q_len, layer.embed))
    weights = np.zeros((batch, heads, q_len, k_len))
    for b in range(batch):
        for h in range(heads):
            cols = slice(h * depth, (h + 1) * depth)
            scores = Q[b, :, cols] @ K[b, :, cols].T / math.sqrt(depth)
            if mask is not None:
                scores = scores + mask
            e = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights[b, h] = e / e.sum(axis=1, keepdims=True)
            used = weights[b, h] if keep is None else weights[b, h] * keep[b * heads + h]
            context[b, :, cols] = used @ V[b, :, cols]
    return context @ p["out_proj.weight"].T + p["out_proj.bias"], weights


def numeric_gradient(fn, array, upstream, eps=1e-6):
    """Central differences of ``Σ upstream ⊙ fn()`` w.r.t. every entry of ``array`` (perturbed in place)."""
    grad = np.zeros(array.shape)
    for index in np.ndindex(array.shape):
        saved = array[index]
        array[index] = saved + eps
        plus = np.sum(upstream * fn())
        array[index] = saved - eps
        minus = np.sum(upstream * fn())
        array[index] = saved
        grad[index] = (plus - minus) / (2 * eps)
    return grad


# ---------------------------------------------------------------- the cases


@dataclass
class Case:
    name: str
    embed: int = 8
    heads: int = 2
    batch: int = 2
    q_len: int = 4
    k_len: int = 4
    cross: bool = False
    causal: bool = False
    mask: str | None = None  # None, "mixed" (biases and -1e9) or "neg_inf"
    dropout: float = 0.0


CASES = [
    Case("self"),
    Case("cross", q_len=3, k_len=5, cross=True),
    Case("masked", mask="mixed"),
    Case("cross_masked", q_len=3, k_len=5, cross=True, mask="mixed"),
    Case("neg_inf_mask", mask="neg_inf"),
    Case("causal", causal=True),
    Case("causal_masked", causal=True, mask="mixed"),
    Case("dropout", dropout=0.3),
    Case("dropout_causal_cross", cross=True, causal=True, dropout=0.5, mask="mixed"),
    Case("one_head", heads=1),
    Case("head_per_feature", embed=4, heads=4),
    Case("batch_one", batch=1, q_len=2, k_len=3, cross=True),
]
CASE_IDS = [case.name for case in CASES]


def make_mask(case, rng):
    """An additive ``[Tq, Tk]`` mask; column 0 always stays allowed (so causal rows keep a key)."""
    if case.mask is None:
        return None
    blocked = rng.random((case.q_len, case.k_len)) < 0.4
    blocked[:, 0] = False
    if case.mask == "neg_inf":
        return np.where(blocked, -np.inf, 0.0)
    return np.where(blocked, -1e9, rng.uniform(-1.0, 1.0, (case.q_len, case.k_len)))


def build(case, seed=0, dtype=np.float64):
    """The layer, its inputs (query, key, value: one array for self), mask and an upstream gradient."""
    rng = np.random.default_rng(seed + 100)
    attn = mt.nn.MultiHeadAttention(
        case.embed, case.heads, dropout=case.dropout, causal=case.causal, seed=seed, dtype=dtype
    )
    query = rng.standard_normal((case.batch, case.q_len, case.embed))
    if case.cross:
        key = rng.standard_normal((case.batch, case.k_len, case.embed))
        value = rng.standard_normal((case.batch, case.k_len, case.embed))
    else:
        key = value = query
    mask = make_mask(case, rng)
    upstream = rng.standard_normal((case.batch, case.q_len, case.embed))
    return attn, query, key, value, mask, upstream


def run(attn, case, query, key, value, mask):
    """Forward in the form the case asks for (``forward(x)`` for self)."""
    if case.cross:
        return attn(query, key, value, mask=mask)
    return attn(query, mask=mask)


def total_mask(case, mask):
    parts = [m for m in (causal_mask(case.q_len) if case.causal else None, mask) if m is not None]
    return sum(parts) if parts else None


def expected_names(case):
    """The named gradients every backward must report for this case."""
    names = {"output", "merged", "context", "weights", "scaled_scores", "scores"}
    names |= {"Q_heads", "K_heads", "V_heads", "Q", "K", "V", "query", "key", "value"}
    names |= set(PARAMETER_NAMES)
    if not case.cross:
        names.add("x")
    if case.dropout:
        names.add("dropped_weights")
    if case.causal:
        names.add("causal_scores")
    if case.mask:
        names.add("masked_scores")
    return names


def backward_both_ways(attn, upstream):
    """Run the taped then the analytic backward on the same forward; return both results."""
    attn.zero_grad()
    tape_input = attn.backward(upstream, method="tape")
    tape_grads = attn.last_gradients
    tape_params = {name: t.grad.copy() for name, t in attn.named_parameters()}
    attn.zero_grad()
    analytic_input = attn.backward(upstream, method="analytic")
    analytic_grads = attn.last_gradients
    analytic_params = {name: t.grad.copy() for name, t in attn.named_parameters()}
    return (tape_input, tape_grads, tape_params), (analytic_input, analytic_grads, analytic_params)


# ---------------------------------------------------------------- taped vs analytic


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_taped_and_analytic_backward_agree(case):
    """Every named gradient (dC, dP, dS, dQ, dK, dV, dW, db, inputs) agrees to 1e-12."""
    attn, query, key, value, mask, upstream = build(case)
    run(attn, case, query, key, value, mask)
    (t_in, t_grads, t_params), (a_in, a_grads, a_params) = backward_both_ways(attn, upstream)

    names = expected_names(case)
    assert names <= set(t_grads), f"taped route misses {names - set(t_grads)}"
    assert names <= set(a_grads), f"analytic route misses {names - set(a_grads)}"
    for name in sorted(set(t_grads) & set(a_grads)):
        assert t_grads[name].shape == a_grads[name].shape, name
        np.testing.assert_allclose(t_grads[name], a_grads[name], **EXACT, err_msg=name)
    np.testing.assert_allclose(t_in, a_in, **EXACT)
    for name in PARAMETER_NAMES:
        np.testing.assert_allclose(t_params[name], a_params[name], **EXACT, err_msg=name)
        # The named gradient and the accumulated .grad are the same quantity.
        np.testing.assert_allclose(t_grads[name], t_params[name], **EXACT, err_msg=name)
    returned = "query" if case.cross else "x"
    np.testing.assert_allclose(t_in, t_grads[returned], **EXACT)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_forward_matches_head_by_head_reference(case):
    """Output and attention weights equal the per-head numpy recomputation."""
    attn, query, key, value, mask, _ = build(case)
    output = run(attn, case, query, key, value, mask)
    assert isinstance(output, mt.Tensor)
    assert output.shape == (case.batch, case.q_len, case.embed)
    ref_out, ref_weights = reference_attention(attn, query, key, value, total_mask(case, mask), attn.dropout_keep)
    np.testing.assert_allclose(output.data, ref_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(attn.attention_weights, ref_weights, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_input_gradients_match_finite_differences(case, method):
    """The returned dq (cross) or dq+dk+dv (self), and dk, dv, equal central differences.

    With dropout on, the saved mask is held fixed in the reference.
    """
    attn, query, key, value, mask, upstream = build(case)
    run(attn, case, query, key, value, mask)
    full_mask, keep = total_mask(case, mask), attn.dropout_keep
    returned = attn.backward(upstream, method=method)

    def forward():  # reads query, key, value as numeric_gradient perturbs them (for self: all one array)
        return reference_attention(attn, query, key, value, full_mask, keep)[0]

    if case.cross:
        np.testing.assert_allclose(returned, numeric_gradient(forward, query, upstream), **FD)
        np.testing.assert_allclose(attn.grad_key_input(), numeric_gradient(forward, key, upstream), **FD)
        np.testing.assert_allclose(attn.grad_value_input(), numeric_gradient(forward, value, upstream), **FD)
    else:
        assert query is key is value
        np.testing.assert_allclose(returned, numeric_gradient(forward, query, upstream), **FD)


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_parameter_gradients_match_finite_differences(case, method):
    """``weight.grad`` / ``bias.grad`` of all four projections equal central differences."""
    attn, query, key, value, mask, upstream = build(case)
    run(attn, case, query, key, value, mask)
    full_mask, keep = total_mask(case, mask), attn.dropout_keep
    attn.zero_grad()
    attn.backward(upstream, method=method)
    for name, tensor in attn.named_parameters():
        # Perturbs tensor.data in place: the reference reads the layer's current values.
        numeric = numeric_gradient(
            lambda: reference_attention(attn, query, key, value, full_mask, keep)[0], tensor.data, upstream
        )
        np.testing.assert_allclose(tensor.grad, numeric, **FD, err_msg=name)


# ---------------------------------------------------------------- gradcheck of the whole layer


GRADCHECK = dict(eps=1e-6, atol=1e-7, rtol=1e-5)


def small_layer(**kwargs):
    return mt.nn.MultiHeadAttention(4, 2, seed=5, **kwargs).eval()


def test_gradcheck_self_attention_input():
    """gradcheck of ``x -> attn(x)`` (taped, via ``output.backward``)."""
    attn = small_layer()
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    result = mt.check.gradcheck(lambda t: attn(t), x, **GRADCHECK)
    assert result.ok, str(result)


def test_gradcheck_cross_attention_inputs():
    """gradcheck of ``(q, k, v) -> attn(q, k, v)`` with Tq != Tk."""
    attn = small_layer()
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 2, 4)), rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    result = mt.check.gradcheck(lambda a, b, c: attn(a, b, c), q, k, v, **GRADCHECK)
    assert result.ok, str(result)
    assert len(result.per_input) == 3


def test_gradcheck_causal_and_masked_input():
    """gradcheck through the causal mask plus a user mask."""
    attn = small_layer(causal=True)
    rng = np.random.default_rng(2)
    mask = np.array([[0.0, -1e9, 0.3], [0.0, -1e9, -0.5], [-0.2, 0.0, -1e9]])
    x = rng.standard_normal((1, 3, 4))
    result = mt.check.gradcheck(lambda t: attn(t, mask=mask), x, **GRADCHECK)
    assert result.ok, str(result)


def _set_parameters(attn, tensors):
    for name, tensor in zip(PARAMETER_NAMES, tensors, strict=True):
        projection, kind = name.split(".")
        setattr(getattr(attn, projection), kind, tensor)


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_gradcheck_every_parameter(cross):
    """gradcheck w.r.t. all eight parameters: the closure installs the perturbed Tensors."""
    attn = small_layer(dropout=0.4)  # eval(): dropout off, so every call computes the same function
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 3, 4))
    k, v = (rng.standard_normal((2, 2, 4)), rng.standard_normal((2, 2, 4))) if cross else (q, q)
    originals = attn.parameters()

    def fn(*params):
        _set_parameters(attn, params)
        return attn(q, k, v)

    try:
        result = mt.check.gradcheck(fn, *[p.data for p in originals], **GRADCHECK)
    finally:
        _set_parameters(attn, originals)
    assert result.ok, str(result)
    assert result.checked == 4 * (16 + 4)


def test_dropout_finite_differences_with_saved_mask():
    """Dropout on: both routes equal central differences of the numpy forward with the saved mask."""
    attn = mt.nn.MultiHeadAttention(4, 2, dropout=0.5, seed=9)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4))
    output = attn(x)
    keep = attn.dropout_keep
    assert keep is not None and np.any(keep == 0)
    params = {name: t.data for name, t in attn.named_parameters()}

    def forward_with_saved_mask():
        return numpy_forward(x, x, x, params, 2, keep=keep)[0]

    np.testing.assert_allclose(output.data, forward_with_saved_mask(), rtol=1e-12, atol=1e-13)
    upstream = rng.standard_normal(output.shape)
    numeric_x = numeric_gradient(forward_with_saved_mask, x, upstream)
    numeric_params = {
        name: numeric_gradient(forward_with_saved_mask, array, upstream) for name, array in params.items()
    }
    for method in ("tape", "analytic"):
        attn.zero_grad()
        np.testing.assert_allclose(attn.backward(upstream, method=method), numeric_x, **FD, err_msg=method)
        for name, tensor in attn.named_parameters():
            np.testing.assert_allclose(tensor.grad, numeric_params[name], **FD, err_msg=f"{method} {name}")
        np.testing.assert_array_equal(attn.dropout_keep, keep)  # backward draws no new mask


# ---------------------------------------------------------------- float32


F32 = dict(rtol=2e-4, atol=2e-5)  # float32 has ~7 digits; a few dozen ops lose one or two


def test_float32_taped_and_analytic_agree():
    """In float32 both routes agree to rtol 2e-4 / atol 2e-5, and match float64 to the same."""
    case = Case("causal_masked_f32", causal=True, mask="mixed")
    attn32, query, key, value, mask, upstream = build(case, dtype=np.float32)
    out32 = run(attn32, case, query, key, value, mask)
    assert out32.dtype == np.float32
    assert attn32.attention_weights.dtype == np.float32
    (t_in, t_grads, t_params), (a_in, a_grads, a_params) = backward_both_ways(attn32, upstream)
    for name in sorted(set(t_grads) & set(a_grads)):
        np.testing.assert_allclose(t_grads[name], a_grads[name], **F32, err_msg=name)
    np.testing.assert_allclose(t_in, a_in, **F32)

    attn64 = mt.nn.MultiHeadAttention(8, 2, causal=True)
    for (_, p64), (_, p32) in zip(attn64.named_parameters(), attn32.named_parameters(), strict=True):
        p64.data[...] = p32.data
    out64 = run(attn64, case, query, key, value, mask)
    np.testing.assert_allclose(out32.data, out64.data, **F32)
    np.testing.assert_allclose(t_in, attn64.backward(upstream), **F32)
    for name, tensor in attn64.named_parameters():
        np.testing.assert_allclose(t_params[name], tensor.grad, **F32, err_msg=name)


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_float32_gradients_stay_float32(method):
    """A float32 layer's input and parameter gradients are float32 on both routes."""
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0, dtype=np.float32)
    x = np.random.default_rng(0).standard_normal((2, 3, 8))  # float64 input is cast
    attn(x)
    returned = attn.backward(np.ones((2, 3, 8)), method=method)
    assert returned.dtype == np.float32
    wrong = {name: str(t.grad.dtype) for name, t in attn.named_parameters() if t.grad.dtype != np.float32}
    assert not wrong, f"float64 gradients in a float32 layer: {wrong}"


# ---------------------------------------------------------------- accumulation and inputs


@pytest.mark.parametrize("second", ["tape", "analytic"])
@pytest.mark.parametrize("first", ["tape", "analytic"])
def test_parameter_gradients_accumulate_and_zero_grad_clears(first, second):
    """Two backward calls add their parameter gradients; ``zero_grad`` sets them to None."""
    attn, query, key, value, mask, upstream = build(CASES[0])
    attn(query)
    attn.zero_grad()
    attn.backward(upstream, method=first)
    once = {name: t.grad.copy() for name, t in attn.named_parameters()}
    attn.backward(upstream, method=second)
    for name, tensor in attn.named_parameters():
        np.testing.assert_allclose(tensor.grad, 2 * once[name], rtol=1e-12, atol=1e-14, err_msg=name)
    attn.zero_grad()
    assert all(t.grad is None for t in attn.parameters())


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_tensor_input_receives_its_gradient(method):
    """A ``Tensor(requires_grad=True)`` input gets ``.grad`` equal to the returned gradient."""
    attn, query, *_, upstream = build(CASES[0])
    x = mt.Tensor(query, requires_grad=True)
    attn(x)
    returned = attn.backward(mt.Tensor(upstream), method=method)
    np.testing.assert_allclose(x.grad, returned, **EXACT)


def test_numpy_float32_input_is_cast_to_layer_dtype():
    """A float32 array into a float64 layer: computed in float64, same as the float64 array."""
    attn, query, *_ = build(CASES[0])
    a = attn(query.astype(np.float32)).data
    b = attn(query.astype(np.float32).astype(np.float64)).data
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- the identity rule


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_same_object_three_times_is_self_attention(method):
    """``forward(x, x, x)`` equals ``forward(x)``: same output, backward returns dq+dk+dv."""
    attn, x, *_, upstream = build(CASES[0])
    y_self = attn(x).data
    d_self = attn.backward(upstream, method=method)
    y_three = attn(x, x, x).data
    d_three = attn.backward(upstream, method=method)
    np.testing.assert_array_equal(y_three, y_self)
    np.testing.assert_allclose(d_three, d_self, **EXACT)
    grads = attn.last_gradients
    np.testing.assert_allclose(d_three, grads["query"] + grads["key"] + grads["value"], **EXACT)
    numeric = numeric_gradient(lambda: reference_attention(attn, x, x, x)[0], x, upstream)
    np.testing.assert_allclose(d_three, numeric, **FD)


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_views_are_cross_attention(method):
    """``forward(x, x.view(), x.view())`` is cross: returns dq only; dq + dk + dv is the self gradient."""
    attn, x, *_, upstream = build(CASES[0])
    attn(x)
    d_self = attn.backward(upstream, method=method)
    y_cross = attn(x, x.view(), x.view())
    dq = attn.backward(upstream, method=method)
    np.testing.assert_allclose(y_cross.data, reference_attention(attn, x, x, x)[0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dq + attn.grad_key_input() + attn.grad_value_input(), d_self, rtol=1e-11, atol=1e-12)
    assert not np.allclose(dq, d_self, atol=1e-6), "dq alone should differ from the whole self gradient"
    frozen = x.copy()  # key and value stay put while the query is perturbed
    numeric_dq = numeric_gradient(lambda: reference_attention(attn, x, frozen, frozen)[0], x, upstream)
    np.testing.assert_allclose(dq, numeric_dq, **FD)


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_key_is_value_but_query_differs(method):
    """Key and value the same object, query different: cross; dk and dv stay separate, their sum is d(kv)."""
    case = Case("kv", q_len=3, k_len=5, cross=True)
    attn, query, kv, _, _, upstream = build(case)
    attn(query, kv, kv)
    dq = attn.backward(upstream, method=method)
    dk, dv = attn.grad_key_input(), attn.grad_value_input()
    kv_copy = kv.copy()
    numeric_dk = numeric_gradient(lambda: reference_attention(attn, query, kv, kv_copy)[0], kv, upstream)
    numeric_dv = numeric_gradient(lambda: reference_attention(attn, query, kv_copy, kv)[0], kv, upstream)
    numeric_dkv = numeric_gradient(lambda: reference_attention(attn, query, kv, kv)[0], kv, upstream)
    np.testing.assert_allclose(dk, numeric_dk, **FD)
    np.testing.assert_allclose(dv, numeric_dv, **FD)
    np.testing.assert_allclose(dk + dv, numeric_dkv, **FD)

    # The same numbers as with two separate (equal) key and value arrays.
    attn(query, kv, kv_copy)
    np.testing.assert_allclose(attn.backward(upstream, method=method), dq, **EXACT)
    np.testing.assert_allclose(attn.grad_key_input() + attn.grad_value_input(), dk + dv, **EXACT)


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_shared_key_value_tensor_gets_the_sum(method):
    """A Tensor used as both key and value accumulates ``dk + dv`` in its ``.grad``."""
    case = Case("kv", q_len=3, k_len=5, cross=True)
    attn, query, kv_array, _, _, upstream = build(case)
    kv = mt.Tensor(kv_array, requires_grad=True)
    attn(query, kv, kv)
    attn.backward(upstream, method=method)
    np.testing.assert_allclose(kv.grad, attn.grad_key_input() + attn.grad_value_input(), **EXACT)


# ---------------------------------------------------------------- dropout


def dropout_layer(seed=11, p=0.4):
    return mt.nn.MultiHeadAttention(8, 2, dropout=p, seed=seed)


def test_dropout_same_seed_reproduces():
    """Two layers with the same seed: same weights, same dropout masks, same outputs."""
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    a, b = dropout_layer(), dropout_layer()
    for _ in range(2):
        np.testing.assert_array_equal(a(x).data, b(x).data)
        np.testing.assert_array_equal(a.dropout_keep, b.dropout_keep)
    c = dropout_layer(seed=12)
    c(x)
    assert not np.array_equal(c.dropout_keep, a.dropout_keep)


def test_dropout_draws_a_new_mask_each_forward():
    """In training, consecutive forwards use fresh masks."""
    attn = dropout_layer()
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    attn(x)
    first = attn.dropout_keep.copy()
    attn(x)
    assert not np.array_equal(first, attn.dropout_keep)


def test_eval_equals_no_dropout_layer():
    """``eval()`` turns dropout off: same as a dropout=0 layer with copied weights."""
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    attn = dropout_layer().eval()
    assert attn.training is False
    plain = mt.nn.MultiHeadAttention(8, 2, dropout=0.0, seed=999)
    for (_, mine), (_, theirs) in zip(attn.named_parameters(), plain.named_parameters(), strict=True):
        theirs.data[...] = mine.data
    np.testing.assert_array_equal(attn(x).data, plain(x).data)
    assert attn.dropout_keep is None
    np.testing.assert_array_equal(attn.dropped_attention_weights, attn.attention_weights)
    upstream = np.ones((2, 5, 8))
    np.testing.assert_allclose(attn.backward(upstream), plain.backward(upstream), **EXACT)
    assert attn.train() is attn and attn.training is True
    attn(x)
    assert attn.dropout_keep is not None


def test_dropout_is_inverted_and_weights_are_pre_dropout():
    """Kept entries are ``weights / (1-p)``, dropped ones 0; ``attention_weights`` is before dropout."""
    p = 0.4
    attn = dropout_layer(p=p)
    x = np.random.default_rng(0).standard_normal((4, 16, 8))
    attn(x)
    keep = attn.dropout_keep
    assert keep.shape == (4 * 2, 16, 16)
    assert set(np.unique(keep)) <= {0.0, 1 / (1 - p)}
    kept_fraction = np.mean(keep > 0)
    assert kept_fraction == pytest.approx(1 - p, abs=0.04)  # 2048 draws: sd ≈ 0.011

    weights, dropped = attn.attention_weights, attn.dropped_attention_weights
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    kept = keep.reshape(weights.shape) > 0
    np.testing.assert_allclose(dropped[kept], weights[kept] / (1 - p), rtol=1e-14)
    assert np.all(dropped[~kept] == 0.0)


def test_dropout_mask_used_by_both_routes():
    """Both backward routes use the saved mask: dropped entries get no score gradient from dP̃."""
    attn = dropout_layer(p=0.5)
    x = np.random.default_rng(1).standard_normal((2, 4, 8))
    attn(x)
    upstream = np.random.default_rng(2).standard_normal((2, 4, 8))
    params = {name: t.data for name, t in attn.named_parameters()}
    _, cache = numpy_forward(x, x, x, params, 2, keep=attn.dropout_keep)
    reference = analytic.attention_backward(upstream, cache, self_attention=True)
    dropped_where = attn.dropout_keep == 0
    for method in ("tape", "analytic"):
        attn.backward(upstream, method=method)
        grads = attn.last_gradients
        for name in ("dropped_weights", "weights", "scaled_scores", "x"):
            np.testing.assert_allclose(grads[name], reference[name], **EXACT, err_msg=f"{method} {name}")
        assert np.all(grads["weights"][dropped_where] == 0.0)  # dP = dP̃ ⊙ keep


# ---------------------------------------------------------------- attention weights and their gradients


def test_attention_weights_shape_rows_and_masks():
    """``[B, H, Tq, Tk]``, rows sum to 1, masked entries exactly 0."""
    case = Case("w", q_len=3, k_len=5, cross=True, mask="mixed")
    attn, query, key, value, mask, _ = build(case)
    attn(query, key, value, mask=mask)
    weights = attn.attention_weights
    assert weights.shape == (2, 2, 3, 5)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-13)
    assert np.all(weights[:, :, mask <= -1e9] == 0.0)
    assert np.all(weights[:, :, mask > -1e9] > 0.0)
    np.testing.assert_array_equal(attn.last_mask, mask)


def test_causal_weights_are_lower_triangular():
    """Causal: every weight above the diagonal is exactly 0, the first row is all on key 0."""
    attn = mt.nn.MultiHeadAttention(8, 4, causal=True, seed=0)
    attn(np.random.default_rng(0).standard_normal((2, 6, 8)))
    weights = attn.attention_weights
    upper = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert np.all(weights[..., upper] == 0.0)
    np.testing.assert_allclose(weights[..., 0, 0], 1.0, rtol=1e-15)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-13)


def test_neg_inf_mask_gives_finite_gradients():
    """A ``-inf`` mask zeroes the weights and leaves every gradient finite."""
    case = Case("neg_inf", mask="neg_inf")
    attn, x, _, _, mask, upstream = build(case)
    attn(x, mask=mask)
    assert np.all(attn.attention_weights[:, :, np.isneginf(mask)] == 0.0)
    for method in ("tape", "analytic"):
        attn.backward(upstream, method=method)
        for name, grad in attn.last_gradients.items():
            assert np.all(np.isfinite(grad)), f"{method}: {name} has non-finite entries"


@pytest.mark.parametrize("method", ["tape", "analytic"])
def test_grad_scores_and_grad_weights(method):
    """dS and dP ``[B, H, Tq, Tk]`` equal the numpy-only module's; each dS row sums to 0."""
    case = Case("g", q_len=3, k_len=5, cross=True, mask="mixed")
    attn, query, key, value, mask, upstream = build(case)
    attn(query, key, value, mask=mask)
    attn.backward(upstream, method=method)
    params = {name: t.data for name, t in attn.named_parameters()}
    _, cache = numpy_forward(query, key, value, params, 2, mask=mask)
    reference = analytic.attention_backward(upstream, cache)
    d_scores, d_weights = attn.grad_scores(), attn.grad_weights()
    assert d_scores.shape == d_weights.shape == (2, 2, 3, 5)
    np.testing.assert_allclose(d_scores, reference["scaled_scores"].reshape(2, 2, 3, 5), **EXACT)
    np.testing.assert_allclose(d_weights, reference["weights"].reshape(2, 2, 3, 5), **EXACT)
    # softmax's Jacobian has zero row sums: Σ_j dS_ij = Σ_j P_ij (dP_ij − Σ_k dP_ik P_ik) = 0.
    np.testing.assert_allclose(d_scores.sum(axis=-1), 0.0, atol=1e-13)
    # By hand from the weights: dS = P ⊙ (dP − rowsum(dP ⊙ P)).
    P = attn.attention_weights
    np.testing.assert_allclose(d_scores, P * (d_weights - (d_weights * P).sum(-1, keepdims=True)), **EXACT)


# ---------------------------------------------------------------- the tape


def test_tape_has_every_named_step_in_order():
    """The layer's tape names each step; causal mask is added before the user mask."""
    attn = mt.nn.MultiHeadAttention(8, 2, dropout=0.2, causal=True, seed=0)
    assert attn.tape is None
    x = np.random.default_rng(0).standard_normal((1, 4, 8))
    mask = np.zeros((4, 4))
    attn(x, mask=mask)
    assert isinstance(attn.tape, mt.Tape)
    order = [eq.name for eq in attn.tape if eq.name]
    expected = ["Q", "K", "V", "Q_heads", "K_heads", "V_heads", "scores", "scaled_scores", "causal_scores",
                "masked_scores", "weights", "dropped_weights", "context", "merged", "output"]  # fmt: skip
    assert [name for name in order if name in expected] == expected
    assert attn.tape.find("weights").op.name == "softmax"
    first_tape = attn.tape
    attn(x)
    assert attn.tape is not first_tape  # each forward gets its own tape


def test_enclosing_tape_records_the_layer():
    """Inside ``mt.Tape()``, the layer's ops appear on the outer tape too, and the outer backward agrees."""
    attn, x_array, *_, upstream = build(CASES[0])
    x = mt.Tensor(x_array, requires_grad=True)
    with mt.Tape() as outer:
        y = attn(x)
        loss = (y * y).sum()
    outer_nodes = outer.nodes
    inner_nodes = attn.tape.nodes
    positions = [next(i for i, n in enumerate(outer_nodes) if n is node) for node in inner_nodes]
    assert positions == sorted(positions)  # the same order
    assert len(outer_nodes) > len(inner_nodes)  # plus the loss
    attn.zero_grad()
    outer.backward(loss)
    outer_params = {name: t.grad.copy() for name, t in attn.named_parameters()}
    outer_dx = x.grad.copy()
    attn.zero_grad()
    dx = attn.backward(2 * y.data, method="analytic")  # d(Σ y²)/dy = 2y
    np.testing.assert_allclose(outer_dx, dx, **EXACT)
    for name, tensor in attn.named_parameters():
        np.testing.assert_allclose(outer_params[name], tensor.grad, **EXACT, err_msg=name)


def test_two_layers_on_one_tape():
    """A small model of two layers: both layers' steps land on the enclosing tape."""
    first, second = mt.nn.MultiHeadAttention(8, 2, seed=1), mt.nn.MultiHeadAttention(8, 4, seed=2)
    x = np.random.default_rng(0).standard_normal((1, 3, 8))
    with mt.Tape() as outer:
        y = second(first(x))
    nodes = set(outer.nodes)
    assert set(first.tape.nodes) <= nodes and set(second.tape.nodes) <= nodes
    assert len(outer) == len(first.tape) + len(second.tape)
    assert y is outer.nodes[-1]


# ---------------------------------------------------------------- parameters and modes


def test_parameters_and_projections():
    """Four Linear(E, E) projections with bias, listed in a fixed order."""
    attn = mt.nn.MultiHeadAttention(6, 3, seed=0)
    assert [name for name, _ in attn.named_parameters()] == PARAMETER_NAMES
    assert attn.parameters() == [t for _, t in attn.named_parameters()]
    for projection in ("q_proj", "k_proj", "v_proj", "out_proj"):
        layer = getattr(attn, projection)
        assert isinstance(layer, mt.nn.Linear)
        assert layer.weight.shape == (6, 6) and layer.bias.shape == (6,)
    assert attn.head_dim == 2


def test_seed_gives_the_same_weights_and_new_layers_train():
    """The same seed: identical weights; a new layer starts in training mode."""
    a, b = mt.nn.MultiHeadAttention(8, 2, seed=4), mt.nn.MultiHeadAttention(8, 2, seed=4)
    for (name, ta), (_, tb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        np.testing.assert_array_equal(ta.data, tb.data, err_msg=name)
    assert a.training is True
    # The four projections are initialised independently.
    assert not np.array_equal(a.q_proj.weight.data, a.k_proj.weight.data)


def test_tensor_input_of_another_dtype_stays_connected():
    """A float32 ``Tensor(requires_grad=True)`` into a float64 layer inside a tape keeps its gradient.

    The layer casts inputs to its dtype; that cast must not silently cut the
    input off the enclosing graph (either the gradient arrives, or the call
    is refused with a clear error about the dtype).
    """
    attn = mt.nn.MultiHeadAttention(4, 2, seed=0)
    x = mt.Tensor(np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32), requires_grad=True)
    upstream = np.random.default_rng(1).standard_normal((1, 3, 4))
    with mt.Tape() as outer:
        try:
            y = attn(x)
        except (TypeError, ValueError) as error:
            assert "dtype" in str(error) or "float32" in str(error), str(error)
            return
    outer.backward(y, upstream)
    assert x.grad is not None, "the float32 input received no gradient: the cast cut it off the graph"
    expected = attn.backward(upstream, method="analytic")
    np.testing.assert_allclose(x.grad, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "cross"),
    [({}, False), ({"causal": True, "dropout": 0.3}, False), ({}, True), ({"block_size": 2, "causal": True}, False)],
)
def test_both_routes_give_the_same_named_gradients(kwargs, cross):
    """last_gradients has exactly the same keys by the tape and by hand (no route-only rows like xW^T)."""
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0, **kwargs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8))
    args = (x, rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))) if cross else (x,)
    attn(*args)
    upstream = rng.standard_normal((2, 4, 8))
    attn.backward(upstream, method="tape")
    taped = attn.last_gradients
    attn.backward(upstream, method="analytic")
    by_hand = attn.last_gradients
    assert set(taped) == set(by_hand) == set(attn.gradient_names())
    assert not any("xW^T" in name or name.endswith("^T") for name in taped)
    for name in taped:
        np.testing.assert_allclose(taped[name], by_hand[name], rtol=1e-10, atol=1e-12, err_msg=name)
