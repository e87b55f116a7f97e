"""Make the PyTorch references of the Transformer pieces: ``tests/golden/layers.npz``.

Run it from the repository root with a Python that has torch (CPU is enough)::

    .venv/bin/pip install torch==2.13.0
    .venv/bin/python tests/golden/make_golden_layers.py

Every case of ``layer_cases.py`` is run through PyTorch in float64: the new
ops, ``nn.LayerNorm``, a ``Sequential`` feed-forward block,
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` (post-norm,
``batch_first=True``; gelu as ``GELU(approximate="tanh")``),
``F.cross_entropy``, ``nn.Embedding`` and 20 steps of ``optim.SGD`` /
``optim.Adam``. Weights are set from the case's arrays by explicit name
mapping here — never through microtape's own ``from_torch``/``to_torch``,
which the tests check separately. ``tests/nn/test_torch_layers_live.py``
imports these functions to compute the same references live.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

TESTS_DIR = str(Path(__file__).resolve().parent.parent)
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

from golden.layer_cases import CASES, LAYERS_FILE, index_key, make_case, pack_cases  # noqa: E402
from golden.make_golden import build_torch_attention, split_torch_parameter_grads, to_numpy  # noqa: E402

TORCH_OPS = {
    "gelu": lambda a, c: F.gelu(a, approximate="tanh"),
    "sigmoid": lambda a, c: torch.sigmoid(a),
    "log_softmax": lambda a, c: F.log_softmax(a, dim=c["axis"]),
    "logsumexp": lambda a, c: torch.logsumexp(a, dim=c["axis"], keepdim=c["keepdims"]),
    "sqrt": lambda a, c: torch.sqrt(a),
    "abs": lambda a, c: torch.abs(a),
    "maximum": lambda a, b, c: torch.maximum(a, b),
    "minimum": lambda a, b, c: torch.minimum(a, b),
    "take": lambda a, c: torch.index_select(a, c["axis"], torch.tensor(c["indices"])),
    "index": lambda a, c: a[
        tuple(torch.from_numpy(k) if isinstance(k, np.ndarray) else k for k in index_key(c["key"]))
    ],
    "concatenate": lambda a, b, c: torch.cat([a, b], dim=c["axis"]),
    "stack": lambda a, b, d, c: torch.stack([a, b, d], dim=c["axis"]),
    "var": lambda a, c: torch.var(a, dim=c["axis"], keepdim=c["keepdims"], unbiased=False),
}


def leaf(array):
    return torch.tensor(array, dtype=torch.float64, requires_grad=True)


def _activation(name):
    return F.relu if name == "relu" else torch.nn.GELU(approximate="tanh")


def _set(parameter, array):
    with torch.no_grad():
        parameter.copy_(torch.from_numpy(np.asarray(array, dtype=np.float64)))


def _set_linear(module, arrays, name):
    _set(module.weight, arrays[f"{name}.weight"])
    _set(module.bias, arrays[f"{name}.bias"])


def _attention_params(arrays, attention):
    prefix = f"{attention}."
    return {key[len(prefix) :]: value for key, value in arrays.items() if key.startswith(prefix)}


def op_reference(config, arrays):
    operands = [leaf(arrays[key]) for key in ("a", "b", "c") if key in arrays]
    output = TORCH_OPS[config["op"]](*operands, config)
    output.backward(torch.from_numpy(arrays["grad_output"]))
    results = {"output": to_numpy(output)}
    for key, operand in zip(("a", "b", "c"), operands):
        results[f"grad/{key}"] = to_numpy(operand.grad)
    return results


def layernorm_reference(config, arrays):
    module = torch.nn.LayerNorm(tuple(config["normalized"]), eps=config["eps"], dtype=torch.float64)
    _set(module.weight, arrays["weight"])
    _set(module.bias, arrays["bias"])
    x = leaf(arrays["x"])
    output = module(x)
    output.backward(torch.from_numpy(arrays["grad_output"]))
    return {
        "output": to_numpy(output),
        "grad/x": to_numpy(x.grad),
        "grad/weight": to_numpy(module.weight.grad),
        "grad/bias": to_numpy(module.bias.grad),
    }


def feedforward_reference(config, arrays):
    linear1 = torch.nn.Linear(config["E"], config["ff"], dtype=torch.float64)
    linear2 = torch.nn.Linear(config["ff"], config["E"], dtype=torch.float64)
    _set_linear(linear1, arrays, "linear1")
    _set_linear(linear2, arrays, "linear2")
    x = leaf(arrays["x"])
    output = linear2(_activation(config["activation"])(linear1(x)))
    output.backward(torch.from_numpy(arrays["grad_output"]))
    results = {"output": to_numpy(output), "grad/x": to_numpy(x.grad)}
    for name, module in (("linear1", linear1), ("linear2", linear2)):
        results[f"grad/{name}.weight"] = to_numpy(module.weight.grad)
        results[f"grad/{name}.bias"] = to_numpy(module.bias.grad)
    return results


def transformer_reference(config, arrays):
    """A post-norm encoder or decoder layer, weights set by name; output, input and parameter gradients."""
    encoder = config["kind"] == "encoder"
    torch_class = torch.nn.TransformerEncoderLayer if encoder else torch.nn.TransformerDecoderLayer
    module = torch_class(
        config["E"], config["H"], config["ff"], dropout=0.0, activation=_activation(config["activation"]),
        batch_first=True, norm_first=False, dtype=torch.float64,
    )  # fmt: skip
    attentions = ("self_attn",) if encoder else ("self_attn", "multihead_attn")
    for attention in attentions:
        built = build_torch_attention(config["E"], config["H"], _attention_params(arrays, attention))
        getattr(module, attention).load_state_dict(built.state_dict())
    _set_linear(module.linear1, arrays, "linear1")
    _set_linear(module.linear2, arrays, "linear2")
    norms = [f"norm{i}" for i in range(1, len(attentions) + 2)]
    for norm in norms:
        _set_linear(getattr(module, norm), arrays, norm)
    x = leaf(arrays["x"])

    def mask(name):
        return torch.from_numpy(arrays[name]) if name in arrays else None

    if encoder:
        output = module(x, src_mask=mask("mask"))
        inputs = {"x": x}
    else:
        memory = leaf(arrays["memory"])
        output = module(x, memory, tgt_mask=mask("tgt_mask"), memory_mask=mask("memory_mask"))
        inputs = {"x": x, "memory": memory}
    output.backward(torch.from_numpy(arrays["grad_output"]))
    results = {"output": to_numpy(output)}
    results.update({f"grad/{name}": to_numpy(tensor.grad) for name, tensor in inputs.items()})
    for attention in attentions:
        for name, grad in split_torch_parameter_grads(getattr(module, attention), config["E"]).items():
            results[f"grad/{attention}.{name}"] = grad
    for name in ("linear1", "linear2", *norms):
        results[f"grad/{name}.weight"] = to_numpy(getattr(module, name).weight.grad)
        results[f"grad/{name}.bias"] = to_numpy(getattr(module, name).bias.grad)
    return results


def cross_entropy_reference(config, arrays):
    logits = leaf(arrays["logits"])
    targets = torch.from_numpy(arrays["targets"])
    # torch wants the classes on axis 1: [B, T, V] -> [B, V, T].
    moved = logits if logits.ndim == 2 else logits.movedim(-1, 1)
    ignore = -100 if config["ignore_index"] is None else config["ignore_index"]
    loss = F.cross_entropy(moved, targets, ignore_index=ignore)
    loss.backward()
    return {"loss": to_numpy(loss), "grad/logits": to_numpy(logits.grad)}


def embedding_reference(config, arrays):
    module = torch.nn.Embedding(config["num"], config["dim"], dtype=torch.float64)
    _set(module.weight, arrays["weight"])
    output = module(torch.from_numpy(arrays["ids"]))
    output.backward(torch.from_numpy(arrays["grad_output"]))
    return {"output": to_numpy(output), "grad/weight": to_numpy(module.weight.grad)}


def optimizer_reference(config, arrays):
    """The parameters after each of ``steps`` steps on ``mean((tanh(x Wᵀ + b) − y)²)``."""
    weight, bias = leaf(arrays["weight"]), leaf(arrays["bias"])
    x, y = torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["y"])
    if config["optimizer"] == "SGD":
        optimizer = torch.optim.SGD([weight, bias], lr=config["lr"], momentum=config["momentum"])
    else:
        optimizer = torch.optim.Adam(
            [weight, bias], lr=config["lr"], betas=tuple(config["betas"]), eps=config["eps"],
            weight_decay=config["weight_decay"], foreach=False,
        )  # fmt: skip
    weights, biases, losses = [], [], []
    for _ in range(config["steps"]):
        optimizer.zero_grad()
        loss = ((torch.tanh(x @ weight.T + bias) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        weights.append(to_numpy(weight))
        biases.append(to_numpy(bias))
    return {"weights": np.stack(weights), "biases": np.stack(biases), "losses": np.array(losses)}


REFERENCES = {
    "op": op_reference,
    "layernorm": layernorm_reference,
    "feedforward": feedforward_reference,
    "encoder": transformer_reference,
    "decoder": transformer_reference,
    "cross_entropy": cross_entropy_reference,
    "embedding": embedding_reference,
    "optimizer": optimizer_reference,
}


def torch_reference(config):
    """``{"config", "inputs", "outputs"}`` of one case: its seeded arrays and torch's answers."""
    arrays = make_case(config)
    return {"config": config, "inputs": arrays, "outputs": REFERENCES[config["kind"]](config, arrays)}


def main() -> None:
    torch.use_deterministic_algorithms(True)
    results = [torch_reference(config) for config in CASES]
    np.savez_compressed(LAYERS_FILE, **pack_cases(results))
    print(f"wrote {LAYERS_FILE} ({LAYERS_FILE.stat().st_size / 1024:.1f} KiB, {len(results)} cases)")


if __name__ == "__main__":
    main()
