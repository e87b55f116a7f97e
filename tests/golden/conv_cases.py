"""The convolution, pooling, batch-norm and recurrent cases PyTorch answers in ``convolution.npz`` — numpy only.

Each case is a small JSON-able config; its inputs (and the layers' parameters)
are drawn from the case's seed by :func:`draw_inputs`, so the fixture stores
only torch's answers and the inputs' fingerprints. :func:`run_microtape` runs
a case through microtape and returns the same keys
``make_golden_conv.run_torch`` returns for PyTorch:

``output``                 the op's or layer's output (``hs`` for a cell unrolled over T steps)
``grad/<input>``           the gradient of each input (x, weight, bias, h0, the cells' parameters)
``running_mean`` ...       batch norm: its running statistics after the train steps, and ``eval_output``

The upstream gradient of every output is drawn from the seed too; for a cell
the loss is ``Σ_t ⟨upstream_t, h_t⟩`` (backpropagation through all T steps).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CONV_FILE = Path(__file__).resolve().parent / "convolution.npz"

# fmt: off
OP_CASES = [
    {"name": "conv1d", "kind": "conv1d", "x": [2, 2, 6], "weight": [3, 2, 3], "bias": True, "stride": 1, "padding": 0},
    {"name": "conv1d_stride2_pad1", "kind": "conv1d", "x": [2, 2, 8], "weight": [3, 2, 3], "bias": False,
     "stride": 2, "padding": 1},
    {"name": "conv1d_stride3_pad2_tail", "kind": "conv1d", "x": [1, 2, 9], "weight": [2, 2, 4], "bias": True,
     "stride": 3, "padding": 2},
    {"name": "conv2d", "kind": "conv2d", "x": [1, 2, 5, 5], "weight": [2, 2, 3, 3], "bias": True,
     "stride": 1, "padding": 0},
    {"name": "conv2d_stride21_pad10", "kind": "conv2d", "x": [1, 3, 6, 5], "weight": [2, 3, 3, 2], "bias": True,
     "stride": [2, 1], "padding": [1, 0]},
    {"name": "conv2d_stride2_pad2", "kind": "conv2d", "x": [1, 1, 5, 5], "weight": [2, 1, 2, 3], "bias": False,
     "stride": 2, "padding": 2},
    {"name": "max_pool2d", "kind": "max_pool2d", "x": [1, 2, 4, 4], "kernel": 2, "stride": None},
    {"name": "max_pool2d_overlap_ties", "kind": "max_pool2d", "x": [1, 2, 5, 5], "kernel": [3, 2], "stride": [1, 2],
     "integers": True},
    {"name": "avg_pool2d", "kind": "avg_pool2d", "x": [1, 2, 6, 6], "kernel": 3, "stride": None},
    {"name": "avg_pool2d_overlap", "kind": "avg_pool2d", "x": [1, 2, 5, 7], "kernel": [2, 3], "stride": [1, 2]},
]
LAYER_CASES = [
    {"name": "Conv1d", "kind": "Conv1d", "in": 2, "out": 3, "kernel_size": 3, "stride": 2, "padding": 1,
     "x": [2, 2, 7]},
    {"name": "Conv2d", "kind": "Conv2d", "in": 2, "out": 3, "kernel_size": [3, 2], "stride": 1, "padding": [1, 0],
     "x": [1, 2, 5, 4]},
    {"name": "BatchNorm_BC", "kind": "BatchNorm", "x": [6, 3], "steps": 2, "momentum": 0.1},
    {"name": "BatchNorm_BCHW", "kind": "BatchNorm", "x": [3, 2, 2, 3], "steps": 2, "momentum": 0.3},
    {"name": "RNNCell_tanh", "kind": "RNNCell", "input": 3, "hidden": 3, "batch": 2, "steps": 4,
     "nonlinearity": "tanh"},
    {"name": "RNNCell_relu", "kind": "RNNCell", "input": 2, "hidden": 3, "batch": 2, "steps": 3,
     "nonlinearity": "relu"},
    {"name": "GRUCell", "kind": "GRUCell", "input": 2, "hidden": 3, "batch": 2, "steps": 3},
]
# fmt: on
CASES = OP_CASES + LAYER_CASES
CELL_PARAMETERS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def _seed(name):
    return sum(ord(c) * (i + 1) for i, c in enumerate(name))


def _conv_output_shape(config):
    x, w = config["x"], config["weight"]
    n = len(x) - 2
    stride = [config["stride"]] * n if isinstance(config["stride"], int) else config["stride"]
    padding = [config["padding"]] * n if isinstance(config["padding"], int) else config["padding"]
    spatial = [(length + 2 * p - k) // s + 1 for length, k, s, p in zip(x[2:], w[2:], stride, padding)]
    return [x[0], w[0], *spatial]


def _pool_output_shape(config):
    kernel = [config["kernel"]] * 2 if isinstance(config["kernel"], int) else config["kernel"]
    stride = kernel if config["stride"] is None else config["stride"]
    stride = [stride] * 2 if isinstance(stride, int) else stride
    return [*config["x"][:2], *((n - k) // s + 1 for n, k, s in zip(config["x"][2:], kernel, stride))]


def _layer_output_shape(config):
    n = len(config["x"]) - 2
    pair = lambda v: [v] * n if isinstance(v, int) else v  # noqa: E731
    kernel, stride, padding = pair(config["kernel_size"]), pair(config["stride"]), pair(config["padding"])
    spatial = [(length + 2 * p - k) // s + 1 for length, k, s, p in zip(config["x"][2:], kernel, stride, padding)]
    return [config["x"][0], config["out"], *spatial], [config["out"], config["in"], *kernel]


def draw_inputs(config):
    """The case's inputs, parameters and upstream gradients, drawn from its seed (numpy only)."""
    rng = np.random.default_rng(_seed(config["name"]))
    kind = config["kind"]
    if kind in ("conv1d", "conv2d"):
        arrays = {"x": rng.standard_normal(config["x"]), "weight": rng.standard_normal(config["weight"])}
        if config["bias"]:
            arrays["bias"] = rng.standard_normal(config["weight"][0])
        arrays["upstream"] = rng.standard_normal(_conv_output_shape(config))
        return arrays
    if kind in ("max_pool2d", "avg_pool2d"):
        x = rng.standard_normal(config["x"])
        # Integers: ties inside windows, which max pooling must break as PyTorch does.
        upstream = rng.standard_normal(_pool_output_shape(config))
        return {"x": np.round(x) if config.get("integers") else x, "upstream": upstream}
    if kind in ("Conv1d", "Conv2d"):
        out_shape, weight_shape = _layer_output_shape(config)
        return {
            "x": rng.standard_normal(config["x"]),
            "weight": rng.standard_normal(weight_shape) * 0.5,
            "bias": rng.standard_normal(config["out"]),
            "upstream": rng.standard_normal(out_shape),
        }
    if kind == "BatchNorm":
        channels = config["x"][1]
        arrays = {"weight": 1 + 0.5 * rng.standard_normal(channels), "bias": rng.standard_normal(channels)}
        for step in range(config["steps"]):
            arrays[f"x{step}"] = 2 + 3 * rng.standard_normal(config["x"])
            arrays[f"upstream{step}"] = rng.standard_normal(config["x"])
        arrays["x_eval"] = rng.standard_normal(config["x"])
        return arrays
    gates = 3 if kind == "GRUCell" else 1
    rows, batch, steps = gates * config["hidden"], config["batch"], config["steps"]
    return {
        "xs": rng.standard_normal((steps, batch, config["input"])),
        "h0": rng.standard_normal((batch, config["hidden"])),
        "weight_ih": rng.standard_normal((rows, config["input"])) * 0.6,
        "weight_hh": rng.standard_normal((rows, config["hidden"])) * 0.6,
        "bias_ih": rng.standard_normal(rows) * 0.3,
        "bias_hh": rng.standard_normal(rows) * 0.3,
        "upstream": rng.standard_normal((steps, batch, config["hidden"])),
    }


# ---------------------------------------------------------------- microtape's side


def _run_op(mt, config, arrays):
    leaves = {key: mt.Tensor(value, requires_grad=True) for key, value in arrays.items() if key != "upstream"}
    if config["kind"] in ("conv1d", "conv2d"):
        function = getattr(mt, config["kind"])
        y = function(leaves["x"], leaves["weight"], leaves.get("bias"), config["stride"], config["padding"])
    else:
        y = getattr(mt, config["kind"])(leaves["x"], config["kernel"], config["stride"])
    y.backward(arrays["upstream"])
    return {"output": y.data, **{f"grad/{key}": leaf.grad for key, leaf in leaves.items()}}


def _run_conv_layer(mt, config, arrays):
    layer = getattr(mt.nn, config["kind"])(
        config["in"], config["out"], config["kernel_size"], config["stride"], config["padding"]
    )
    layer.weight.data[...] = arrays["weight"]
    layer.bias.data[...] = arrays["bias"]
    x = mt.Tensor(arrays["x"], requires_grad=True)
    y = layer(x)
    y.backward(arrays["upstream"])
    return {"output": y.data, "grad/x": x.grad, "grad/weight": layer.weight.grad, "grad/bias": layer.bias.grad}


def _run_batchnorm(mt, config, arrays):
    norm = mt.nn.BatchNorm(config["x"][1], momentum=config["momentum"])
    norm.weight.data[...] = arrays["weight"]
    norm.bias.data[...] = arrays["bias"]
    results = {}
    for step in range(config["steps"]):
        norm.zero_grad()
        x = mt.Tensor(arrays[f"x{step}"], requires_grad=True)
        y = norm(x)
        y.backward(arrays[f"upstream{step}"])
        results.update({f"output{step}": y.data, f"grad{step}/x": x.grad})
        results.update({f"grad{step}/weight": norm.weight.grad, f"grad{step}/bias": norm.bias.grad})
    results.update({"running_mean": norm.running_mean, "running_var": norm.running_var})
    norm.eval()
    results["eval_output"] = norm(arrays["x_eval"]).data
    return results


def _run_cell(mt, config, arrays):
    if config["kind"] == "GRUCell":
        cell = mt.nn.GRUCell(config["input"], config["hidden"])
    else:
        cell = mt.nn.RNNCell(config["input"], config["hidden"], nonlinearity=config["nonlinearity"])
    for key in CELL_PARAMETERS:
        getattr(cell, key).data[...] = arrays[key]
    xs = [mt.Tensor(x, requires_grad=True) for x in arrays["xs"]]
    h0 = mt.Tensor(arrays["h0"], requires_grad=True)
    h, hs, loss = h0, [], 0.0
    for x, upstream in zip(xs, arrays["upstream"]):
        h = cell(x, h)
        hs.append(h.data)
        loss = loss + (h * upstream).sum()
    loss.backward()
    results = {"output": np.stack(hs), "grad/xs": np.stack([x.grad for x in xs]), "grad/h0": h0.grad}
    results.update({f"grad/{key}": getattr(cell, key).grad for key in CELL_PARAMETERS})
    return results


def run_microtape(mt, config, arrays=None):
    """microtape's answers for one case (``arrays``: the drawn inputs, drawn again when not given)."""
    arrays = draw_inputs(config) if arrays is None else arrays
    kind = config["kind"]
    if kind in ("conv1d", "conv2d", "max_pool2d", "avg_pool2d"):
        return _run_op(mt, config, arrays)
    if kind in ("Conv1d", "Conv2d"):
        return _run_conv_layer(mt, config, arrays)
    if kind == "BatchNorm":
        return _run_batchnorm(mt, config, arrays)
    return _run_cell(mt, config, arrays)


# ---------------------------------------------------------------- the file


def fingerprint(arrays):
    """Shape, sum and sum of squares of each input: enough to tell the inputs torch saw from others."""
    return {key: [list(np.shape(v)), float(np.sum(v)), float(np.sum(np.square(v)))] for key, v in arrays.items()}


def pack(answers):
    """``{case name: {key: array}}`` (torch's answers) as npz entries: one flat array per case, one JSON index.

    The index holds each case's config, its inputs' fingerprint and the layout
    (key, shape) of its flat array: few entries keep the file a few KB.
    """
    index = []
    entries = {}
    for config in CASES:
        name = config["name"]
        keys = sorted(answers[name])
        layout = [[key, list(np.shape(answers[name][key]))] for key in keys]
        index.append({"config": config, "fingerprint": fingerprint(draw_inputs(config)), "layout": layout})
        entries[name] = np.concatenate([np.asarray(answers[name][key], dtype=np.float64).ravel() for key in keys])
    entries["_index"] = np.array(json.dumps(index, sort_keys=True))
    return entries


def load(path=CONV_FILE):
    """``{name: {"config", "fingerprint", "answers": {key: array}}}`` from the fixture."""
    with np.load(path) as npz:
        stored = {}
        for entry in json.loads(str(npz["_index"])):
            name = entry["config"]["name"]
            flat, start, answers = npz[name], 0, {}
            for key, shape in entry["layout"]:
                size = int(np.prod(shape, dtype=int))
                answers[key] = flat[start : start + size].reshape(shape)
                start += size
            assert start == flat.size, f"{name}: the layout does not cover the stored array"
            stored[name] = {"config": entry["config"], "fingerprint": entry["fingerprint"], "answers": answers}
    return stored
