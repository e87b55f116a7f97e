"""Make the PyTorch reference fixtures for the cross-check tests.

Run it from the repository root with a Python that has torch (CPU is enough)::

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install numpy torch==2.13.0
    /tmp/torchvenv/bin/python tests/golden/make_golden.py

It writes ``tests/golden/expressions.npz`` and ``tests/golden/attention.npz``
(the key scheme is documented in ``load.py``).  Everything is seeded, so
re-running it reproduces the same files (up to torch's own floating-point
behaviour).  ``tests/nn/test_torch_live.py`` imports the functions below to
compute the same references live, so the torch logic exists only here.

Torch is only a *reference*: microtape never imports it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

# Make this directory importable as the package ``golden`` (``tests/`` on the
# path), both when run as a script and when imported by the tests.
TESTS_DIR = str(Path(__file__).resolve().parent.parent)
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

from golden.attention_cases import ATTENTION_CASES, PROJECTIONS, make_case  # noqa: E402
from golden.expressions import EXPRESSIONS, Expression, make_upstream  # noqa: E402
from golden.load import (  # noqa: E402
    ATTENTION_FILE,
    EXPRESSIONS_FILE,
    pack_attention_cases,
    pack_expression_fixtures,
)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A float64 numpy copy of a torch tensor."""
    return tensor.detach().cpu().numpy().astype(np.float64, copy=True)


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


def torch_expression_reference(expression: Expression) -> dict:
    """Run one expression on torch; return its fixture dict.

    The dict has ``name, config, inputs, upstream, output, grads`` (the format
    of ``load.load_expression_fixtures``).  The inputs come from the
    expression's seeded generator; the upstream gradient from
    ``expressions.make_upstream``.
    """
    inputs = expression.make_inputs()
    leaves = [torch.tensor(array, dtype=torch.float64, requires_grad=True) for array in inputs]
    output = expression.fn(*leaves)
    upstream = make_upstream(expression, tuple(output.shape))
    output.backward(torch.from_numpy(upstream))
    return {
        "name": expression.name,
        "config": {
            "description": expression.description,
            "input_shapes": [list(shape) for shape in expression.input_shapes],
            "seed": expression.seed,
        },
        "inputs": inputs,
        "upstream": upstream,
        "output": to_numpy(output),
        "grads": [to_numpy(leaf.grad) for leaf in leaves],
    }


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


def build_torch_attention(E: int, H: int, params: dict[str, np.ndarray]):
    """A float64 ``torch.nn.MultiheadAttention`` holding the given weights.

    Torch packs the q, k and v projections into one ``in_proj_weight``
    ``[3E, E]`` (rows ``0:E`` are q, ``E:2E`` k, ``2E:3E`` v) and one
    ``in_proj_bias`` ``[3E]``; the output projection is ``out_proj``.
    """
    module = torch.nn.MultiheadAttention(E, H, dropout=0.0, bias=True, batch_first=True, dtype=torch.float64)
    in_proj_weight = np.concatenate([params["q_proj.weight"], params["k_proj.weight"], params["v_proj.weight"]], axis=0)
    in_proj_bias = np.concatenate([params["q_proj.bias"], params["k_proj.bias"], params["v_proj.bias"]], axis=0)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.from_numpy(in_proj_weight))
        module.in_proj_bias.copy_(torch.from_numpy(in_proj_bias))
        module.out_proj.weight.copy_(torch.from_numpy(params["out_proj.weight"]))
        module.out_proj.bias.copy_(torch.from_numpy(params["out_proj.bias"]))
    return module


def split_torch_parameter_grads(module, E: int) -> dict[str, np.ndarray]:
    """Torch's parameter gradients, unpacked into ``q_proj.weight`` ... ``out_proj.bias``."""
    weight_grad = to_numpy(module.in_proj_weight.grad)
    bias_grad = to_numpy(module.in_proj_bias.grad)
    grads = {}
    for index, projection in enumerate(PROJECTIONS[:3]):  # q, k, v
        rows = slice(index * E, (index + 1) * E)
        grads[f"{projection}.weight"] = weight_grad[rows]
        grads[f"{projection}.bias"] = bias_grad[rows]
    grads["out_proj.weight"] = to_numpy(module.out_proj.weight.grad)
    grads["out_proj.bias"] = to_numpy(module.out_proj.bias.grad)
    return grads


def torch_attention_reference(config: dict) -> dict:
    """Make a case's data (``attention_cases.make_case``) and add torch's answers.

    Adds ``output``, ``attention_weights`` (per head, ``[B, H, Tq, Tk]``),
    ``input_grads`` and ``param_grads``.  Each distinct input is one torch
    leaf; when one tensor plays several roles (self-attention's ``x``, or
    ``key_value``), torch sums the gradients of its roles into it.
    """
    case = make_case(config)
    module = build_torch_attention(config["E"], config["H"], case["params"])

    leaves = {
        name: torch.tensor(array, dtype=torch.float64, requires_grad=True) for name, array in case["inputs"].items()
    }
    if config["kind"] == "self":
        query = key = value = leaves["x"]
    elif config["kind"] == "cross":
        query, key, value = leaves["query"], leaves["key"], leaves["value"]
    elif config["kind"] == "cross_kv_same":
        query = leaves["query"]
        key = value = leaves["key_value"]
    else:
        raise ValueError(f"unknown case kind {config['kind']!r}")

    attn_mask = None
    if case["torch_mask"] is not None:
        attn_mask = torch.from_numpy(case["torch_mask"])

    output, weights = module(
        query,
        key,
        value,
        attn_mask=attn_mask,
        need_weights=True,
        average_attn_weights=False,
    )
    output.backward(torch.from_numpy(case["grad_output"]))

    case["output"] = to_numpy(output)
    case["attention_weights"] = to_numpy(weights)
    case["input_grads"] = {name: to_numpy(leaf.grad) for name, leaf in leaves.items()}
    case["param_grads"] = split_torch_parameter_grads(module, config["E"])
    return case


# --------------------------------------------------------------------------
# Writing the files
# --------------------------------------------------------------------------


def main() -> None:
    """Compute every reference and write both ``.npz`` files."""
    torch.use_deterministic_algorithms(True)

    expression_fixtures = [torch_expression_reference(expr) for expr in EXPRESSIONS]
    np.savez_compressed(EXPRESSIONS_FILE, **pack_expression_fixtures(expression_fixtures))

    attention_cases = [torch_attention_reference(config) for config in ATTENTION_CASES]
    np.savez_compressed(ATTENTION_FILE, **pack_attention_cases(attention_cases))

    for path in (EXPRESSIONS_FILE, ATTENTION_FILE):
        print(f"wrote {path} ({path.stat().st_size / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
