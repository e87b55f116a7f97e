"""The Transformer part: an encoder layer's forward + backward, and one training step of the toy model.

Each (part, implementation, size, dtype) is measured in a process of its own::

    python -m benchmarks.transformer '{"part": "encoder", "impl": "tape", "B": 8, "T": 128, "E": 256, "H": 8,
                                       "ff": 1024, "dtype": "float32"}'
    python -m benchmarks.transformer '{"part": "train_step", "impl": "microtape"}'

``encoder`` — a post-norm ``TransformerEncoderLayer`` (relu, no mask, no
dropout), one step = forward + backward producing dx and every parameter
gradient:

``numpy``     :mod:`benchmarks.numpy_encoder`, by hand — the reference of the ratios;
``tape``      ``layer(x); layer.backward(g)`` (the tape's reverse pass);
``analytic``  the same forward, then ``layer.backward(g, method="analytic")``;
``torch``     ``layer.to_torch()``: PyTorch's own ``nn.TransformerEncoderLayer``, eager.

``train_step`` — one step of ``microtape train``'s model (the default
configuration: embed 32, 2 heads, ff 64, one layer, 64 sequences of 8
digits, float32): forward, cross-entropy, backward, Adam. ``microtape`` runs
it on the tape; ``torch`` runs the same model converted with ``to_torch()``
(:mod:`benchmarks.torch_transformer`). Both report the loss of their first
step on the same batch, from the same weights, so the parent can show they
compute the same thing.
"""

import gc
import sys
import time
import tracemalloc

import numpy as np

from . import numpy_encoder
from ._harness import emit, summary, time_calls

TINY = {"B": 1, "T": 6, "E": 16, "H": 2, "ff": 24}

#: numpy_encoder's parameter names -> microtape's.
NAMES = {
    **{f"W{l}": f"self_attn.{p}_proj.weight" for l, p in zip("qkvo", ("q", "k", "v", "out"))},
    **{f"b{l}": f"self_attn.{p}_proj.bias" for l, p in zip("qkvo", ("q", "k", "v", "out"))},
    "W1": "linear1.weight", "b1": "linear1.bias", "W2": "linear2.weight", "b2": "linear2.bias",
    "gn1": "norm1.weight", "ben1": "norm1.bias", "gn2": "norm2.weight", "ben2": "norm2.bias",
}  # fmt: skip


def _case(B, T, E, ff, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, E)).astype(dtype)
    grad_y = rng.standard_normal((B, T, E)).astype(dtype)
    return x, grad_y, numpy_encoder.init_params(E, ff, dtype, seed=seed + 1)


def _microtape_layer(params, heads, ff, dtype):
    import microtape as mt

    embed = params["Wq"].shape[0]
    layer = mt.nn.TransformerEncoderLayer(embed, heads, ff, dtype=dtype)
    ours = dict(layer.named_parameters())
    for name, value in params.items():
        ours[NAMES[name]].data[...] = value
    return layer


def make_encoder_step(impl, x, grad_y, params, heads, ff):
    """A function running one forward + backward; returns dx as a numpy array."""
    if impl == "numpy":

        def step():
            y, saved = numpy_encoder.forward(x, params, heads)
            return numpy_encoder.backward(grad_y, saved, params, heads)[0]

        return step
    layer = _microtape_layer(params, heads, ff, x.dtype)
    if impl in ("tape", "analytic"):

        def step():
            layer.zero_grad()
            layer(x)
            return layer.backward(grad_y, method=impl)

        return step
    if impl == "torch":
        import torch

        from . import torch_transformer

        module = layer.to_torch()
        tx, tg = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(grad_y)
        return lambda: torch_transformer.encoder_step(module, tx, tg).numpy()
    raise ValueError(f"unknown impl {impl!r}")


def encoder_worker(spec):
    impl, dtype = spec["impl"], np.dtype(spec["dtype"])
    # 1. Correctness on a tiny case (a benchmark of wrong math is worthless), and warm-up.
    x, grad_y, params = _case(TINY["B"], TINY["T"], TINY["E"], TINY["ff"], dtype)
    expected = make_encoder_step("numpy", x, grad_y, params, TINY["H"], TINY["ff"])()
    got = make_encoder_step(impl, x, grad_y, params, TINY["H"], TINY["ff"])()
    error = float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))
    if not error < (1e-4 if dtype == np.float32 else 1e-10):
        raise AssertionError(f"{impl}: dx differs from the numpy encoder by {error:.3g} (relative)")
    # 2. Memory of one step at the real size, then 3. time.
    B, T, E, H, ff = spec["B"], spec["T"], spec["E"], spec["H"], spec["ff"]
    x, grad_y, params = _case(B, T, E, ff, dtype)
    step = make_encoder_step(impl, x, grad_y, params, H, ff)
    gc.collect()
    tracemalloc.start()
    step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    times = time_calls(step, spec.get("repeats", 20), spec.get("budget", 5.0))
    return {
        "impl": impl,
        "time": summary(times["cpu"]),
        "wall": summary(times["wall"]),
        "tracemalloc_peak": None if impl == "torch" else peak,
        "check_error": error,
    }


def train_step_worker(spec):
    from microtape.train import TinyTransformer, TrainConfig
    from microtape.train.tasks import HeldOut, training_batch

    config = TrainConfig()
    model = TinyTransformer(
        config.vocab, config.length, config.embed, config.heads, config.ff_dim, config.layers,
        seed=0, dtype=config.dtype,
    )  # fmt: skip
    held_out = HeldOut(config.task, 10, config.length, config.vocab, seed=1)
    ids, targets = training_batch(config.task, np.random.default_rng(2), config.batch, config.length, 10, held_out)
    if spec["impl"] == "microtape":
        import microtape as mt

        optimizer = mt.optim.Adam(model.parameters(), lr=config.lr)

        def step():
            with mt.Tape() as tape:
                loss = mt.nn.cross_entropy(model(ids), targets)
            optimizer.zero_grad()
            tape.backward(loss)
            optimizer.step()
            return float(loss.data)

    else:
        import torch

        from . import torch_transformer

        torch_model = torch_transformer.TorchTiny(model)
        optimizer = torch.optim.Adam(torch_model.parameters(), lr=config.lr)
        torch_ids, torch_targets = torch.from_numpy(ids), torch.from_numpy(targets)

        def step():
            return torch_transformer.train_step(torch_model, optimizer, torch_ids, torch_targets)

    first_loss = step()
    started = time.perf_counter()
    times = time_calls(step, spec.get("repeats", 300), spec.get("budget", 8.0))
    return {
        "impl": spec["impl"],
        "first_loss": first_loss,
        "time": summary(times["cpu"]),
        "wall": summary(times["wall"]),
        "elapsed": time.perf_counter() - started,
    }


def worker(spec):
    return encoder_worker(spec) if spec["part"] == "encoder" else train_step_worker(spec)


if __name__ == "__main__":
    import json

    emit(worker(json.loads(sys.argv[1])))
