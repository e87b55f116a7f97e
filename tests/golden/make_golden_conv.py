"""Make the PyTorch references of convolution, pooling, BatchNorm and the recurrent cells: ``convolution.npz``.

Run it from the repository root with a Python that has torch (CPU is enough)::

    .venv/bin/pip install torch==2.13.0
    .venv/bin/python tests/golden/make_golden_conv.py

Every case of ``conv_cases.py`` runs through PyTorch in float64 (``F.conv1d``,
``F.conv2d``, ``F.max_pool2d``, ``F.avg_pool2d``, ``nn.Conv1d``/``nn.Conv2d``,
``nn.BatchNorm1d``/``nn.BatchNorm2d`` in train then eval mode, ``nn.RNNCell``
and ``nn.GRUCell`` unrolled over T steps). Parameters are set from the case's
arrays by name. ``tests/ops/test_conv_golden.py`` and
``tests/nn/test_conv_layers.py`` import :func:`run_torch` for their live checks.
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

from golden.conv_cases import CASES, CELL_PARAMETERS, CONV_FILE, draw_inputs, pack  # noqa: E402


def _leaf(array):
    return torch.tensor(array, dtype=torch.float64, requires_grad=True)


def _numpy(tensor):
    return tensor.detach().numpy().copy()


def _run_op(config, arrays):
    leaves = {key: _leaf(value) for key, value in arrays.items() if key != "upstream"}
    kind = config["kind"]
    if kind in ("conv1d", "conv2d"):
        function = F.conv1d if kind == "conv1d" else F.conv2d
        stride, padding = config["stride"], config["padding"]
        stride = tuple(stride) if isinstance(stride, list) else stride
        padding = tuple(padding) if isinstance(padding, list) else padding
        y = function(leaves["x"], leaves["weight"], leaves.get("bias"), stride=stride, padding=padding)
    else:
        function = F.max_pool2d if kind == "max_pool2d" else F.avg_pool2d
        kernel, stride = config["kernel"], config["stride"]
        y = function(leaves["x"], tuple(kernel) if isinstance(kernel, list) else kernel,
                     tuple(stride) if isinstance(stride, list) else stride)  # fmt: skip
    y.backward(torch.tensor(arrays["upstream"]))
    return {"output": _numpy(y), **{f"grad/{key}": _numpy(leaf.grad) for key, leaf in leaves.items()}}


def _pair(value):
    return tuple(value) if isinstance(value, list) else value


def _run_conv_layer(config, arrays):
    kind = torch.nn.Conv1d if config["kind"] == "Conv1d" else torch.nn.Conv2d
    layer = kind(config["in"], config["out"], _pair(config["kernel_size"]), _pair(config["stride"]),
                 _pair(config["padding"]), dtype=torch.float64)  # fmt: skip
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(arrays["weight"]))
        layer.bias.copy_(torch.tensor(arrays["bias"]))
    x = _leaf(arrays["x"])
    y = layer(x)
    y.backward(torch.tensor(arrays["upstream"]))
    return {"output": _numpy(y), "grad/x": _numpy(x.grad), "grad/weight": _numpy(layer.weight.grad),
            "grad/bias": _numpy(layer.bias.grad)}  # fmt: skip


def _run_batchnorm(config, arrays):
    kind = torch.nn.BatchNorm1d if len(config["x"]) in (2, 3) else torch.nn.BatchNorm2d
    norm = kind(config["x"][1], momentum=config["momentum"], dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor(arrays["weight"]))
        norm.bias.copy_(torch.tensor(arrays["bias"]))
    results = {}
    for step in range(config["steps"]):
        norm.zero_grad()
        x = _leaf(arrays[f"x{step}"])
        y = norm(x)
        y.backward(torch.tensor(arrays[f"upstream{step}"]))
        results.update({f"output{step}": _numpy(y), f"grad{step}/x": _numpy(x.grad)})
        results.update({f"grad{step}/weight": _numpy(norm.weight.grad), f"grad{step}/bias": _numpy(norm.bias.grad)})
    results.update({"running_mean": _numpy(norm.running_mean), "running_var": _numpy(norm.running_var)})
    norm.eval()
    results["eval_output"] = _numpy(norm(torch.tensor(arrays["x_eval"])))
    return results


def _run_cell(config, arrays):
    if config["kind"] == "GRUCell":
        cell = torch.nn.GRUCell(config["input"], config["hidden"], dtype=torch.float64)
    else:
        cell = torch.nn.RNNCell(config["input"], config["hidden"], nonlinearity=config["nonlinearity"],
                                dtype=torch.float64)  # fmt: skip
    with torch.no_grad():
        for key in CELL_PARAMETERS:
            getattr(cell, key).copy_(torch.tensor(arrays[key]))
    xs = [_leaf(x) for x in arrays["xs"]]
    h0 = _leaf(arrays["h0"])
    h, hs, loss = h0, [], 0.0
    for x, upstream in zip(xs, arrays["upstream"]):
        h = cell(x, h)
        hs.append(_numpy(h))
        loss = loss + (h * torch.tensor(upstream)).sum()
    loss.backward()
    results = {"output": np.stack(hs), "grad/xs": np.stack([_numpy(x.grad) for x in xs]), "grad/h0": _numpy(h0.grad)}
    results.update({f"grad/{key}": _numpy(getattr(cell, key).grad) for key in CELL_PARAMETERS})
    return results


def run_torch(config, arrays=None):
    """PyTorch's answers for one case: the same keys as ``conv_cases.run_microtape``."""
    arrays = draw_inputs(config) if arrays is None else arrays
    kind = config["kind"]
    if kind in ("conv1d", "conv2d", "max_pool2d", "avg_pool2d"):
        return _run_op(config, arrays)
    if kind in ("Conv1d", "Conv2d"):
        return _run_conv_layer(config, arrays)
    if kind == "BatchNorm":
        return _run_batchnorm(config, arrays)
    return _run_cell(config, arrays)


def main():
    answers = {config["name"]: run_torch(config) for config in CASES}
    np.savez_compressed(CONV_FILE, **pack(answers))
    print(f"wrote {CONV_FILE} ({CONV_FILE.stat().st_size} bytes, {len(CASES)} cases, torch {torch.__version__})")


if __name__ == "__main__":
    main()
