"""The scalar engine vs micrograd: long chains, and an MLP's per-sample training step.

One process per (engine, workload, size, GC setting)::

    python -m benchmarks.scalar '{"engine": "microtape", "workload": "chain", "n": 100000, "gc": true}'

``engine``: ``microtape`` (``mt.Scalar``) or ``micrograd`` (``micrograd==0.1.0``'s ``Value``).

``chain``
    ``y = y * 0.999 + 0.001`` repeated until ``n`` operations are recorded
    (each step wraps its two constants, in both engines), then
    ``y.backward()``. Reports build throughput (ops/s) and backward
    throughput (nodes/s). micrograd's topological sort is recursive: the
    worker first tries it at Python's default recursion limit and records
    whether that failed, then raises the limit (in this process only) so the
    backward can be timed at all.
``mlp``
    ``MLP(3, [16, 16, 1])`` (micrograd's ``nn.MLP``; ours is
    :mod:`benchmarks.scalar_mlp`, the same code on ``mt.Scalar``), one
    training step per sample: forward, squared error, zero the gradients,
    backward, SGD update. Reports samples/s.
``recursion_limit``
    only micrograd: the shortest chain whose backward raises
    ``RecursionError`` at the default recursion limit.

Times are CPU time of the worker process (``time.process_time``; wall-clock
time is reported beside it). ``gc: false`` disables Python's cyclic garbage collector while timing
(micrograd's closures make a reference cycle per operation, so much of its
build time is the collector's; microtape's graph has no cycles).
"""

import gc
import random
import sys
import time

from ._harness import emit, summary

DEFAULT_RECURSION_LIMIT = sys.getrecursionlimit()


def _engine(name):
    if name == "microtape":
        import microtape as mt

        return mt.Scalar
    if name == "micrograd":
        from micrograd.engine import Value

        return Value
    raise ValueError(f"unknown engine {name!r}")


def build_chain(leaf_class, n):
    """A chain of ``n`` ops starting from one leaf: ``y = y * 0.999 + 0.001``."""
    y = leaf_class(0.5)
    for _ in range(n // 2):
        y = y * 0.999 + 0.001
    return y


def chain(spec):
    leaf_class = _engine(spec["engine"])
    n, repeats = spec["n"], spec.get("repeats", 3)
    default_limit_ok = None
    if spec["engine"] == "micrograd":
        y = build_chain(leaf_class, n)
        try:
            y.backward()
            default_limit_ok = True
        except RecursionError:
            default_limit_ok = False
        del y
        # micrograd's build_topo recurses once per node (plus a margin).
        sys.setrecursionlimit(max(DEFAULT_RECURSION_LIMIT, n + 10_000))
    gc.collect()
    builds, backwards, walls = [], [], []
    for _ in range(repeats):
        if not spec["gc"]:
            gc.disable()
        w0, t0 = time.perf_counter(), time.process_time()
        y = build_chain(leaf_class, n)
        t1 = time.process_time()
        y.backward()
        t2, w2 = time.process_time(), time.perf_counter()
        gc.enable()
        builds.append(t1 - t0)
        backwards.append(t2 - t1)
        walls.append(w2 - w0)
        del y
        gc.collect()  # untimed: start each repeat from a clean heap
    return {
        "build": summary(builds),
        "backward": summary(backwards),
        "wall": summary(walls),
        "ops": n // 2 * 2,
        "default_limit_ok": default_limit_ok,
        "recursion_limit": sys.getrecursionlimit(),
    }


def _mlp(engine):
    random.seed(1337)
    if engine == "microtape":
        from .scalar_mlp import MLP
    else:
        from micrograd.nn import MLP
    return MLP(3, [16, 16, 1])


def mlp(spec):
    engine = spec["engine"]
    model = _mlp(engine)
    params = model.parameters()
    rng = random.Random(0)
    samples = [([rng.uniform(-1, 1) for _ in range(3)], rng.uniform(-1, 1)) for _ in range(64)]
    zero = None if engine == "microtape" else 0

    def train_step(x, target):
        loss = (model(x) - target) ** 2
        for p in params:
            p.grad = zero
        loss.backward()
        for p in params:
            p.data -= 0.01 * p.grad

    block = spec.get("block", 64)
    blocks, walls = [], []
    for i in range(spec.get("blocks", 10) + 1):
        if not spec["gc"]:
            gc.disable()
        w0, t0 = time.perf_counter(), time.process_time()
        for j in range(block):
            train_step(*samples[j % len(samples)])
        elapsed, wall = time.process_time() - t0, time.perf_counter() - w0
        gc.enable()
        if i:  # the first block is a warm-up
            blocks.append(elapsed)
            walls.append(wall)
    return {"block": block, "time": summary(blocks), "wall": summary(walls), "parameters": len(params)}


def recursion_limit(spec):
    """The shortest chain whose micrograd backward fails at the default limit (bisection)."""
    leaf_class = _engine("micrograd")
    low, high = 10, 20_000  # backward works at `low`, fails at `high`

    def fails(n):
        try:
            build_chain(leaf_class, n).backward()
            return False
        except RecursionError:
            return True

    assert not fails(low) and fails(high)
    while high - low > 2:
        middle = (low + high) // 2 // 2 * 2
        if fails(middle):
            high = middle
        else:
            low = middle
    return {"fails_at_ops": high, "works_at_ops": low, "limit": sys.getrecursionlimit()}


WORKLOADS = {"chain": chain, "mlp": mlp, "recursion_limit": recursion_limit}


if __name__ == "__main__":
    import json

    spec = json.loads(sys.argv[1])
    result = WORKLOADS[spec["workload"]](spec)
    result.update(spec)
    emit(result)
