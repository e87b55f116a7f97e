"""Run the Transformer-piece cases on microtape and compare with a torch reference.

Shared by ``tests/nn/test_golden_layers.py`` (references from the committed
``layers.npz``) and ``tests/nn/test_torch_layers_live.py`` (references computed
by torch on the spot). A reference is ``{"config", "inputs", "outputs"}``
(see ``layer_cases.py``). ``mt`` is passed in, so this folder stays
importable without microtape (for ``make_golden_layers.py``).

Layers get their weights by *name* (``dict(layer.named_parameters())``),
never through ``from_torch``: the bridge is checked on its own.
"""

from __future__ import annotations

import numpy as np

from .layer_cases import index_key
from .run_microtape import assert_close

MICROTAPE_OPS = {
    "gelu": lambda a, c: a.gelu(),
    "sigmoid": lambda a, c: a.sigmoid(),
    "log_softmax": lambda a, c: a.log_softmax(c["axis"]),
    "logsumexp": lambda a, c: a.logsumexp(c["axis"], keepdims=c["keepdims"]),
    "sqrt": lambda a, c: a.sqrt(),
    "abs": lambda a, c: a.abs(),
    "maximum": lambda a, b, c: a.maximum(b),
    "minimum": lambda a, b, c: a.minimum(b),
    "take": lambda a, c: a.take(np.array(c["indices"]), axis=c["axis"]),
    "index": lambda a, c: a[index_key(c["key"])],
    "var": lambda a, c: a.var(c["axis"], keepdims=c["keepdims"]),
}


def run_op(mt, reference):
    config, inputs, expected = reference["config"], reference["inputs"], reference["outputs"]
    keys = [key for key in ("a", "b", "c") if key in inputs]
    operands = [mt.Tensor(inputs[key].copy(), requires_grad=True) for key in keys]
    op = config["op"]
    if op == "concatenate":
        output = mt.concatenate(operands, axis=config["axis"])
    elif op == "stack":
        output = mt.stack(operands, axis=config["axis"])
    else:
        output = MICROTAPE_OPS[op](*operands, config)
    output.backward(inputs["grad_output"])
    assert_close(output.data, expected["output"], f"{config['name']}: output")
    for key, operand in zip(keys, operands):
        assert_close(operand.grad, expected[f"grad/{key}"], f"{config['name']}: grad of {key}")


def build_layer(mt, config, inputs):
    """The microtape layer of a case (float64), its parameters copied in by name."""
    kind = config["kind"]
    if kind == "layernorm":
        layer = mt.nn.LayerNorm(tuple(config["normalized"]), eps=config["eps"])
    elif kind == "feedforward":
        layer = mt.nn.FeedForward(config["E"], config["ff"], config["activation"])
    elif kind == "encoder":
        layer = mt.nn.TransformerEncoderLayer(config["E"], config["H"], config["ff"], activation=config["activation"])
    else:
        layer = mt.nn.TransformerDecoderLayer(config["E"], config["H"], config["ff"], activation=config["activation"])
    params = dict(layer.named_parameters())
    assert sorted(params) == sorted(name for name in inputs if name in params), "a parameter has no case data"
    for name, tensor in params.items():
        tensor.data[...] = inputs[name]
    return layer


def layer_forward(layer, config, inputs):
    kind = config["kind"]
    if kind == "encoder":
        return layer(inputs["x"], mask=inputs.get("mask"))
    if kind == "decoder":
        return layer(inputs["x"], inputs["memory"], inputs.get("tgt_mask"), inputs.get("memory_mask"))
    return layer(inputs["x"])


def run_layer(mt, reference, method="tape"):
    """Forward, then ``backward(grad_output, method)``: output, dx (d memory) and every parameter gradient."""
    config, inputs, expected = reference["config"], reference["inputs"], reference["outputs"]
    name = config["name"]
    layer = build_layer(mt, config, inputs)
    output = layer_forward(layer, config, inputs)
    assert_close(output.data, expected["output"], f"{name}: output")
    layer.zero_grad()
    dx = layer.backward(inputs["grad_output"], method=method)
    assert_close(dx, expected["grad/x"], f"{name}: dx ({method})")
    if config["kind"] == "decoder":
        assert_close(layer.grad_memory_input(), expected["grad/memory"], f"{name}: d memory ({method})")
    for param, tensor in layer.named_parameters():
        assert_close(tensor.grad, expected[f"grad/{param}"], f"{name}: grad of {param} ({method})")
    return layer


def run_cross_entropy(mt, reference):
    config, inputs, expected = reference["config"], reference["inputs"], reference["outputs"]
    logits = mt.Tensor(inputs["logits"].copy(), requires_grad=True)
    loss = mt.nn.cross_entropy(logits, inputs["targets"], ignore_index=config["ignore_index"])
    loss.backward()
    assert_close(loss.data, expected["loss"], f"{config['name']}: loss")
    assert_close(logits.grad, expected["grad/logits"], f"{config['name']}: grad of logits (tape)")
    by_hand = mt.nn.analytic_blocks.cross_entropy_backward(inputs["logits"], inputs["targets"], config["ignore_index"])
    assert_close(by_hand, expected["grad/logits"], f"{config['name']}: grad of logits (by hand)")


def run_embedding(mt, reference):
    config, inputs, expected = reference["config"], reference["inputs"], reference["outputs"]
    for method in ("tape", "analytic"):
        embedding = mt.nn.Embedding(config["num"], config["dim"])
        embedding.weight.data[...] = inputs["weight"]
        output = embedding(inputs["ids"])
        assert_close(output.data, expected["output"], f"{config['name']}: output")
        if method == "tape":
            output.backward(inputs["grad_output"])
        else:
            embedding.backward(inputs["grad_output"])
        assert_close(embedding.weight.grad, expected["grad/weight"], f"{config['name']}: grad of weight ({method})")


def run_optimizer(mt, reference):
    """``steps`` steps on the case's regression loss: every parameter after every step, and the losses."""
    config, inputs, expected = reference["config"], reference["inputs"], reference["outputs"]
    weight = mt.Tensor(inputs["weight"].copy(), requires_grad=True, name="weight")
    bias = mt.Tensor(inputs["bias"].copy(), requires_grad=True, name="bias")
    if config["optimizer"] == "SGD":
        optimizer = mt.optim.SGD([weight, bias], lr=config["lr"], momentum=config["momentum"])
    else:
        optimizer = mt.optim.Adam(
            [weight, bias], lr=config["lr"], betas=tuple(config["betas"]), eps=config["eps"],
            weight_decay=config["weight_decay"],
        )  # fmt: skip
    for step in range(config["steps"]):
        optimizer.zero_grad()
        error = (inputs["x"] @ weight.T + bias).tanh() - inputs["y"]
        loss = (error * error).mean()
        loss.backward()
        optimizer.step()
        where = f"{config['name']}, step {step + 1}"
        assert_close(loss.data, expected["losses"][step], f"{where}: loss")
        assert_close(weight.data, expected["weights"][step], f"{where}: weight")
        assert_close(bias.data, expected["biases"][step], f"{where}: bias")


def run_case(mt, reference, method="tape"):
    """The cross-check of one case of any kind (``method`` matters for layers only)."""
    kind = reference["config"]["kind"]
    if kind == "op":
        return run_op(mt, reference)
    if kind in ("layernorm", "feedforward", "encoder", "decoder"):
        return run_layer(mt, reference, method)
    return {"cross_entropy": run_cross_entropy, "embedding": run_embedding, "optimizer": run_optimizer}[kind](
        mt, reference
    )
