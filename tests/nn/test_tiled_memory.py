"""What the taped tiled path keeps of size ``T·E``, beyond the tape-free kernel (structure, never times).

``MultiHeadAttention(..., block_size=b)`` keeps every value and gradient its
tape shows, and the benchmarks (``python -m benchmarks --only tiled``) measure
its peak against the tiled kernel with no tape
(:mod:`benchmarks.numpy_tiled_attention`). These tests pin down which
``[B, T, E]``-sized arrays exist at the end of one forward + backward, so a
copy that sneaks in (a merged-heads copy, a second sum of ``dx``) is caught
on any machine. The list and what it is made of are in
``benchmarks/RESULTS.md`` ("Tiled memory: the floor").
"""

import gc
import tracemalloc

import numpy as np

import microtape as mt
from benchmarks import attention as bench

B, T, E, H, BLOCK = 1, 1024, 32, 2, 32
UNIT = B * T * E * 8  # bytes of one float64 [B, T, E] array; a tile ([B·H, 32, 32]) is 1/16 of it


def _owner(array):
    while array.base is not None:
        array = array.base
    return id(array)


def _kept_arrays(attn):
    """``{memory owner: ["name.data", "name.grad", …]}`` over the tape's T·E-sized values and gradients."""
    owners = {}
    for node in [*attn.tape.nodes, *attn.tape.leaves()]:
        for field in ("data", "grad"):
            array = getattr(node, field)
            if isinstance(array, np.ndarray) and array.size == B * T * E:
                name = node.name or (node.op.name if node.op else "leaf")
                owners.setdefault(_owner(array), []).append(f"{name}.{field}")
    return owners


def _layer_step():
    rng = np.random.default_rng(0)
    x, grad = rng.standard_normal((B, T, E)), rng.standard_normal((B, T, E))
    attn = mt.nn.MultiHeadAttention(E, H, seed=0, block_size=BLOCK)
    attn(x)
    return attn, attn.backward(grad)


def test_the_tape_keeps_each_of_these_arrays_once():
    attn, dx = _layer_step()
    owners = sorted(sorted(names) for names in _kept_arrays(attn).values())
    views = ["reshape", "transpose"]  # the steps of a head split or merge: views, no memory of their own
    expected = [
        *[["xW^T.data"]] * 4,  # the four projections' products x Wᵀ: each row's value, shown by listings and graphs
        *[[f"{a}.data", *(f"{v}.data" for v in views), f"{a}_heads.data"] for a in "QKV"],  # Q_heads: a view of Q
        ["context.data", "merged.data", *(f"{v}.data" for v in views)],  # merged: a view of O
        ["output.data"],
        *[[f"{a}.grad", f"{a}_heads.grad", *(f"{v}.grad" for v in views), "xW^T.grad"] for a in "QKV"],
        ["context.grad", "merged.grad", *(f"{v}.grad" for v in views)],  # dC: a view of d merged
        ["output.grad", "xW^T.grad"],  # the seed (a copy of the caller's), handed on by the bias's add
        ["x.data"],  # the caller's array itself (float64 in, no cast)
        ["x.grad"],  # the sum of the three projections' contributions
    ]
    assert owners == sorted(sorted(names) for names in expected)
    nodes = {node.name: node for node in attn.tape.nodes}
    assert np.shares_memory(nodes["merged"].data, nodes["context"].data)
    assert np.shares_memory(nodes["Q"].grad, nodes["Q_heads"].grad)
    # The named gradient of x is the reverse pass's own sum (the same array as x's .grad), not a second sum.
    x = attn._last.inputs["query"]
    assert np.shares_memory(attn.last_gradients["x"], x.grad)
    assert not np.shares_memory(dx, x.grad)  # what backward returns is the caller's own


def _peak_units(step):
    gc.collect()
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1] / UNIT
    finally:
        tracemalloc.stop()


def test_a_tiled_step_peaks_at_twenty_arrays_of_T_by_E_about_eight_over_the_kernel():
    x, grad, params = bench._case(B, T, E, np.float64)
    taped = _peak_units(bench.make_step("tiled", x, grad, params, H, block_size=BLOCK))
    kernel = _peak_units(bench.make_step("numpy-tiled", x, grad, params, H, block_size=BLOCK))
    # Kernel: Q, K, V, O, y, dQ, dK, dV and its backward's temporaries (≈ 12.4). The tape adds the four
    # products' values, the seed's copy, the three projections' dx parts and dx (≈ 19.8, see RESULTS.md).
    assert kernel < 13.0, f"the kernel peaked at {kernel:.2f} arrays of T·E"
    assert taped < 20.2, f"the taped tiled step peaked at {taped:.2f} arrays of T·E (kernel: {kernel:.2f})"
    assert taped - kernel < 8.0, f"the tape adds {taped - kernel:.2f} arrays of T·E to the kernel's {kernel:.2f}"


def test_recorded_lean_a_tiled_step_peaks_within_a_fifth_of_the_kernel():
    """``lean=True`` keeps only what the backward reads: Q, K, V, O, L and the gradients on their way."""
    x, grad, params = bench._case(B, T, E, np.float64)
    lean_step = bench.make_step("tiled-lean", x, grad, params, H, block_size=BLOCK)
    lean = _peak_units(lean_step)
    kernel = _peak_units(bench.make_step("numpy-tiled", x, grad, params, H, block_size=BLOCK))
    assert lean < 1.2 * kernel, f"the lean tiled step peaked at {lean:.2f} arrays of T·E (kernel: {kernel:.2f})"
    # The same dx as the full tape, bit for bit.
    np.testing.assert_array_equal(lean_step(), bench.make_step("tiled", x, grad, params, H, block_size=BLOCK)())
