"""Attention forward + backward: microtape (tape, analytic) vs numpy by hand vs PyTorch.

Each (implementation, size, dtype) is measured in a process of its own::

    python -m benchmarks.attention '{"impl": "tape", "B": 4, "T": 32, "E": 64, "H": 4, "dtype": "float32"}'

``impl`` is one of

``numpy``     :class:`benchmarks.numpy_attention.Layer` — the reference every ratio is against;
``numpy-einsum``  the same, with softmax's row-dot as an einsum (as microtape's VJP does);
``tape``      the seed contract: ``attn.forward(x, mask=None)`` then ``attn.backward(g)`` (replays the
              tape), no ``zero_grad`` between steps — the call ``shared/bench``'s adapter makes;
``analytic``  the same forward, then ``.backward(g, method="analytic")``;
``tape-ops``  the arithmetic of ``tape`` alone: the ops of one recorded forward run again in tape order,
              then the reverse pass's loop over their VJPs — no layer around them (no checks, no named
              gradients, no ``.grad`` writes); ``tape`` minus ``tape-ops`` is what the layer and the
              engine add to the ops (:func:`replay_tape`);
``lean``      ``tape`` recorded lean (``MultiHeadAttention(..., lean=True)``: only what backward reads is kept);
``torch``     :mod:`benchmarks.torch_attention` (same math, torch autograd, eager);
``tiled``     ``MultiHeadAttention(..., block_size=b)`` then ``.backward(g)`` (the tiled kernel, one tape row);
``tiled-lean``  ``tiled`` recorded lean (``lean=True``: the tape keeps only what the backward reads);
``numpy-tiled``  :mod:`benchmarks.numpy_tiled_attention`: the numpy reference with the tiled kernel, no tape;
``torch-fused``  torch's fused ``scaled_dot_product_attention`` (:mod:`benchmarks.torch_attention`).

All run self-attention with no mask and no dropout, on the same inputs and
weights; ``"causal": true`` in the spec hides the future (every impl but
``torch``), ``"block_size"`` sets the tiles. One step is forward + backward
with every gradient produced (``dx`` and the eight parameter gradients). A
size the implementation refuses (microtape's memory guard) is reported as
``{"refused": message}``. The worker

1. checks its ``dx`` against the numpy reference on a tiny case (a benchmark
   of wrong math is worthless), which also warms up BLAS and lazy imports;
2. measures memory on one step: the tracemalloc peak (what numpy and Python
   allocate; blind to torch's allocator) and the growth of the process's peak
   RSS (``ru_maxrss``);
3. times ``repeats`` steps (after one warm-up step), within a time budget.
"""

import gc
import resource
import sys
import time
import tracemalloc

import numpy as np

from . import numpy_attention, numpy_tiled_attention
from ._harness import emit, summary, time_alternating, time_calls

TINY = {"B": 1, "T": 8, "E": 16, "H": 2}
TINY_BLOCK = 3  # the correctness check's tiles: 3 does not divide T=8


def _case(B, T, E, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, E)).astype(dtype)
    grad_y = rng.standard_normal((B, T, E)).astype(dtype)
    return x, grad_y, numpy_attention.init_params(E, dtype, seed=seed + 1)


def _make_numpy(x, grad_y, params, heads, rowdot="multiply", causal=False):
    layer = numpy_attention.Layer(params, heads, causal, rowdot)

    def step():
        layer.forward(x)
        return layer.backward(grad_y)

    return step


def _make_numpy_tiled(x, grad_y, params, heads, block_size, causal):
    def step():
        y, saved = numpy_tiled_attention.forward(x, params, heads, block_size, causal)
        return numpy_tiled_attention.backward(grad_y, saved, params, heads)[0]

    return step


def _layer(x, params, heads, causal=False, block_size=None, lean=False):
    """microtape's attention layer with the benchmark's weights."""
    import microtape as mt

    embed = x.shape[-1]
    attn = mt.nn.MultiHeadAttention(
        embed, heads, seed=0, dtype=x.dtype, causal=causal, block_size=block_size, lean=lean
    )
    for letter, projection in zip("qkvo", (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj), strict=True):
        projection.weight.data[...] = params["W" + letter]
        projection.bias.data[...] = params["b" + letter]
    return attn


def _make_microtape(x, grad_y, params, heads, method, causal=False, block_size=None, lean=False):
    attn = _layer(x, params, heads, causal, block_size, lean)

    def step():
        # The seed contract, called as the independent harness calls it: no zero_grad between steps
        # (parameter gradients add up, as the numpy layer's do), forward(x, mask=None), then backward.
        attn.forward(x, mask=None)
        return attn.backward(grad_y, method=method)

    return step


def replay_tape(attn, x, grad_y):
    """The seed call's arithmetic without the layer: a function running one forward + backward, returning dx.

    ``attn`` records one forward of ``x``; each call then runs that tape's ops
    again in order (``op.forward`` on the inputs' new values, written into the
    same nodes) and the reverse pass's own loop over their VJPs (seeded with
    ``grad_y``) — the same arrays in the same order as ``attn.forward(x)``
    then ``attn.backward(grad_y)``, so the same numbers, bit for bit
    (``tests/test_benchmark_harness.py``), and the same memory over time: the
    last step's values and gradients are let go when the new forward is
    complete, as the layer lets go of its last forward. What it leaves out is
    everything the layer and the engine do around the ops: checking the call
    and the gradients for overflow, naming the steps, the named gradients,
    ``.grad`` writes, a copy of ``dx`` for the caller, building the nodes.
    """
    from microtape.engine.reverse import _reverse

    attn.forward(x, mask=None)
    output, x_node, nodes = attn.last_output, attn.tape.variable("x"), attn.tape.nodes
    if any(node.op.forward_saving is not None for node in nodes):
        raise ValueError("replay_tape: an op that saves residuals (the tiled core) is not replayed")
    last_grads = None  # the last backward's gradients: the layer holds them until its next forward is done

    def step():
        nonlocal last_grads
        previous = [node.data for node in nodes]  # the last forward's values, held until this one is complete
        for node in nodes:
            node.data = np.asarray(node.op.forward(*[value.data for value in node.inputs], **(node.params or {})))
        del previous
        last_grads = None
        grads, _, _ = _reverse(nodes, output, grad_y)
        last_grads = grads
        return grads[x_node]

    return step


def _make_torch(x, grad_y, params, heads, fused=False, causal=False):
    import torch

    from . import torch_attention

    tx = torch.from_numpy(x).requires_grad_(True)
    tg = torch.from_numpy(grad_y)
    tparams = {name: torch.from_numpy(value).requires_grad_(True) for name, value in params.items()}

    def step():
        return torch_attention.step(tx, tparams, tg, heads, fused=fused, causal=causal).numpy()

    return step


def make_step(impl, x, grad_y, params, heads, causal=False, block_size=None):
    """A function running one forward + backward; returns dx as a numpy array."""
    if causal and impl in ("numpy-einsum", "torch"):
        raise ValueError(f"{impl}: no causal variant (use numpy, tape, analytic, tiled, numpy-tiled, torch-fused)")
    if impl == "numpy":
        return _make_numpy(x, grad_y, params, heads, causal=causal)
    if impl == "numpy-einsum":
        return _make_numpy(x, grad_y, params, heads, rowdot="einsum")
    if impl == "numpy-tiled":
        return _make_numpy_tiled(x, grad_y, params, heads, block_size, causal)
    if impl in ("tape", "analytic"):
        return _make_microtape(x, grad_y, params, heads, impl, causal)
    if impl == "tiled":
        return _make_microtape(x, grad_y, params, heads, "tape", causal, block_size)
    if impl == "tape-ops":
        return replay_tape(_layer(x, params, heads, causal), x, grad_y)
    if impl == "lean":
        return _make_microtape(x, grad_y, params, heads, "tape", causal, lean=True)
    if impl == "tiled-lean":
        return _make_microtape(x, grad_y, params, heads, "tape", causal, block_size, lean=True)
    if impl in ("torch", "torch-fused"):
        return _make_torch(x, grad_y, params, heads, fused=impl == "torch-fused", causal=causal)
    raise ValueError(f"unknown impl {impl!r}")


def _max_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB


def worker(spec):
    impl, dtype = spec["impl"], np.dtype(spec["dtype"])
    B, T, E, H = spec["B"], spec["T"], spec["E"], spec["H"]
    causal, block_size = spec.get("causal", False), spec.get("block_size")

    # 1. Correctness on a tiny case (and warm-up).
    x, grad_y, params = _case(TINY["B"], TINY["T"], TINY["E"], dtype)
    expected = _make_numpy(x, grad_y, params, TINY["H"], causal=causal)()
    got = make_step(impl, x, grad_y, params, TINY["H"], causal, block_size and TINY_BLOCK)()
    error = float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))
    tolerance = 1e-4 if dtype == np.float32 else 1e-10
    if not error < tolerance:
        raise AssertionError(f"{impl}: dx differs from the numpy reference by {error:.3g} (relative)")
    if got.dtype != dtype or expected.dtype != dtype:
        raise AssertionError(f"{impl}: dx is {got.dtype} (reference: {expected.dtype}), expected {dtype}")

    # 2. Memory of one step at the real size.
    x, grad_y, params = _case(B, T, E, dtype)
    step = make_step(impl, x, grad_y, params, H, causal, block_size)
    described = {"impl": impl, "dtype": dtype.name, "B": B, "T": T, "E": E, "H": H}
    described.update(causal=causal, block_size=block_size)
    gc.collect()
    rss_before = _max_rss_bytes()
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        result = step()
    except MemoryError as error:  # microtape's guard refuses before allocating
        tracemalloc.stop()
        return {**described, "refused": str(error)}
    first = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = _max_rss_bytes() - rss_before
    del result

    # 3. Time (with "alternate_with": this impl and that one, taking turns in this process).
    other = spec.get("alternate_with")
    if other is not None:
        return {**described, **_alternating(step, other, spec, x, grad_y, params, H, causal, block_size)}
    times = time_calls(step, **_timing(spec))
    return {
        **described,
        "time": summary(times["cpu"]),
        "wall": summary(times["wall"]),
        "user": summary(times["user"]),
        "faults": summary(times["faults"]),
        "first_step": first,
        "tracemalloc_peak": None if impl.startswith("torch") else peak,
        "rss_growth": rss_growth,
        "score_bytes": B * H * T * T * dtype.itemsize,
        "check_error": error,
    }


def _timing(spec):
    """How long to time, from the spec: at most ``repeats`` steps or ``budget`` seconds, at least ``min_repeats``."""
    return {
        "repeats": spec.get("repeats", 20),
        "budget": spec.get("budget", 10.0),
        "min_repeats": spec.get("min_repeats", 3),
        "warmup": spec.get("warmup", 1),
    }


def _alternating(step, other, spec, x, grad_y, params, heads, causal, block_size):
    """Time ``step``, the impl ``other`` and those of ``spec["also"]`` taking turns in this process; their medians.

    ``"also": ["tape-ops"]`` adds the seed call's arithmetic alone to the turns
    (what splits the seed path's time into the ops' and the layer's).
    """
    also = spec.get("also", [])
    steps = {"self": step, "other": make_step(other, x, grad_y, params, heads, causal, block_size)}
    steps.update({impl: make_step(impl, x, grad_y, params, heads, causal, block_size) for impl in also})
    times = time_alternating(steps, **_timing(spec))
    mine, theirs = times["self"], times["other"]
    return {
        "alternate_with": other,
        "time": summary(mine["cpu"]),
        "wall": summary(mine["wall"]),
        "other_time": summary(theirs["cpu"]),
        "other_wall": summary(theirs["wall"]),
        "also": {impl: summary(times[impl]["cpu"]) for impl in also},
    }


if __name__ == "__main__":
    import json

    emit(worker(json.loads(sys.argv[1])))
