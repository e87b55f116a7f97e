"""How long drawing a tape takes: ``microtape.viz.graph`` (Python) and ``dot`` (Graphviz).

One process per graph::

    python -m benchmarks.graph '{"kind": "chain", "n": 1000, "detail": "full"}'

``kind``:

``attention``  the tape of a small causal ``MultiHeadAttention(8, 2)`` on
               ``x [1, 4, 8]`` (the size of the demo), forward and backward
               pictures;
``chain``      a scalar chain of ``n`` operations (each reads the previous
               result and a constant);
``mlp``        scalar ``MLP(3, [4, 4, 1])`` losses summed over enough
               samples to reach about ``n`` operations — every weight is
               read by every sample, the shared-leaf shape that makes
               ``dot`` slow.

``modules``    a scalar chain in ``n`` modules of 3 ops each (issue 24: the
               backward-frames player of a 1,000-module tape), drawn as
               ``backward_frames`` — collapsed to one box per module;
``frames``     the demo attention's backward pass as a flip-book:
               ``backward_frames`` (one ``dot`` layout for all frames) and
               every frame drawn by ``neato -n2`` (the ``dot`` column);
               "boxes drawn" is the number of frames.

``detail`` is passed to ``microtape.viz.graph``: ``"full"`` draws every
equation, ``"auto"`` collapses reshape chains and, above 150 boxes, draws a
summary per module. The DOT source is rendered to SVG by running ``dot``
directly (with a timeout, reported as such).
"""

import random
import subprocess
import sys
import time
import warnings

from ._harness import emit


def _attention_tape():
    import numpy as np

    import microtape as mt

    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 4, 8))
    attn(x)
    attn.backward(np.ones((1, 4, 8)))
    return attn.tape


def _chain_tape(n):
    import microtape as mt

    with mt.Tape() as tape:
        y = mt.Scalar(0.5, name="x")
        for _ in range(n // 2):
            y = y * 0.999 + 0.001
    return tape


def _mlp_tape(n):
    import microtape as mt

    from .scalar_mlp import MLP

    random.seed(0)
    model = MLP(3, [4, 4, 1])
    rng = random.Random(1)
    with mt.Tape() as tape:
        total = mt.Scalar(0.0, name="zero")
        while len(tape) < n:
            x = [rng.uniform(-1, 1) for _ in range(3)]
            total = total + (model(x) - rng.uniform(-1, 1)) ** 2
    return tape


def _count_boxes(source):
    """Node statements in DOT source (not edges, not graph/node/edge defaults)."""
    count = 0
    for line in source.splitlines():
        words = line.split()
        if "[" in line and "->" not in line and words and words[0] not in ("graph", "node", "edge", "subgraph"):
            count += 1
    return count


def _frames():
    import microtape as mt
    from microtape.viz.demo import demo_attention

    attn, _, grad_output = demo_attention()
    t0 = time.perf_counter()
    frames = mt.viz.backward_frames(attn, grad=grad_output)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    frames.svgs()
    render = time.perf_counter() - t0
    picture = {"backward": True, "build": build, "render": render, "timeout": None, "boxes": len(frames)}
    return {"equations": len(attn.tape), "pictures": [picture]}


def _module_frames(n):
    """``backward_frames`` of a chain in ``n`` modules: laid out once, collapsed (issue 24's second target)."""
    import microtape as mt

    with mt.Tape() as tape:
        y = mt.Scalar(0.5, name="x")
        for k in range(n):
            with mt.module_scope(f"block{k}"):
                for _ in range(3):
                    y = (y * 0.9).tanh()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        frames = mt.viz.backward_frames(tape)
        build = time.perf_counter() - t0
    picture = {"backward": True, "build": build, "render": 0.0, "timeout": None, "boxes": len(frames)}
    return {"equations": len(tape), "pictures": [picture]}


def worker(spec):
    import microtape as mt

    if not hasattr(mt.viz, "graph"):
        return {"skipped": "microtape.viz.graph is not available"}
    kind, n = spec["kind"], spec.get("n")
    if kind == "frames":
        return _frames()
    if kind == "modules":
        return _module_frames(n)
    tape = {"attention": _attention_tape, "chain": lambda: _chain_tape(n), "mlp": lambda: _mlp_tape(n)}[kind]()
    timeout = spec.get("timeout", 30)
    results = []
    for backward in (False, True) if kind == "attention" else (False,):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            digraph = mt.viz.graph(tape, backward=backward, detail=spec["detail"])
            build = time.perf_counter() - t0
        source = digraph.source
        t0 = time.perf_counter()
        try:
            subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, timeout=timeout, check=True)
            render = time.perf_counter() - t0
        except subprocess.TimeoutExpired:
            render = None
        results.append(
            {
                "backward": backward,
                "build": build,
                "render": render,
                "timeout": timeout,
                "boxes": _count_boxes(source),
            }
        )
    return {"equations": len(tape), "pictures": results}


if __name__ == "__main__":
    import json

    spec = json.loads(sys.argv[1])
    result = worker(spec)
    result.update(spec)
    emit(result)
