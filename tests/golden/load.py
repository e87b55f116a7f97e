"""Read and write the golden fixtures (``.npz`` files) -- numpy only, no torch.

The key scheme lives here, in one place, so the writer (``make_golden.py``)
and the readers (the tests) cannot drift apart.

``expressions.npz``
    ``_index``                 JSON list of expression names, in order
    ``<name>/config``          JSON: description, input_shapes, seed
    ``<name>/input<i>``        the i-th input (0-d array for a scalar)
    ``<name>/upstream``        the upstream gradient given to ``backward``
    ``<name>/output``          the torch output
    ``<name>/grad<i>``         torch's gradient of the i-th input

``attention.npz``
    ``_index``                         JSON list of case names, in order
    ``<case>/config``                  JSON case configuration (see attention_cases.py)
    ``<case>/<input>``                 each distinct input: ``x``, or ``query``,
                                       ``key``, ``value``, or ``query``, ``key_value``
    ``<case>/q_proj.weight`` ...       the parameters: ``{q,k,v,out}_proj.{weight,bias}``
    ``<case>/grad_output``             upstream gradient ``[B, Tq, E]``
    ``<case>/mask``                    user additive mask ``[Tq, Tk]`` (only if any)
    ``<case>/torch_mask``              causal + user mask given to torch (only if any)
    ``<case>/output``                  torch output ``[B, Tq, E]``
    ``<case>/attention_weights``       per-head weights ``[B, H, Tq, Tk]``
    ``<case>/grad/<input>``            torch's gradient of each distinct input
    ``<case>/grad/q_proj.weight`` ...  torch's gradient of each parameter

JSON strings are stored as 0-d unicode arrays, so ``np.load`` never needs
``allow_pickle``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .attention_cases import PARAMETER_NAMES

GOLDEN_DIR = Path(__file__).resolve().parent
EXPRESSIONS_FILE = GOLDEN_DIR / "expressions.npz"
ATTENTION_FILE = GOLDEN_DIR / "attention.npz"


def _json_entry(value) -> np.ndarray:
    return np.array(json.dumps(value, sort_keys=True))


def _read_json(npz, key: str):
    return json.loads(str(npz[key]))


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


def pack_expression_fixtures(fixtures: list[dict]) -> dict[str, np.ndarray]:
    """Flatten expression fixtures (dicts as returned by ``load_expression_fixtures``)."""
    entries = {"_index": _json_entry([fixture["name"] for fixture in fixtures])}
    for fixture in fixtures:
        name = fixture["name"]
        entries[f"{name}/config"] = _json_entry(fixture["config"])
        for i, array in enumerate(fixture["inputs"]):
            entries[f"{name}/input{i}"] = np.asarray(array, dtype=np.float64)
        entries[f"{name}/upstream"] = np.asarray(fixture["upstream"], dtype=np.float64)
        entries[f"{name}/output"] = np.asarray(fixture["output"], dtype=np.float64)
        for i, array in enumerate(fixture["grads"]):
            entries[f"{name}/grad{i}"] = np.asarray(array, dtype=np.float64)
    return entries


def load_expression_fixtures(path: Path = EXPRESSIONS_FILE) -> dict[str, dict]:
    """Return ``{name: fixture}``; each fixture is a dict with keys
    ``name, config, inputs (list), upstream, output, grads (list)``."""
    with np.load(path) as npz:
        fixtures = {}
        for name in _read_json(npz, "_index"):
            config = _read_json(npz, f"{name}/config")
            count = len(config["input_shapes"])
            fixtures[name] = {
                "name": name,
                "config": config,
                "inputs": [npz[f"{name}/input{i}"] for i in range(count)],
                "upstream": npz[f"{name}/upstream"],
                "output": npz[f"{name}/output"],
                "grads": [npz[f"{name}/grad{i}"] for i in range(count)],
            }
    return fixtures


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


def pack_attention_cases(cases: list[dict]) -> dict[str, np.ndarray]:
    """Flatten attention cases (dicts as yielded by ``iter_attention_cases``)."""
    entries = {"_index": _json_entry([case["name"] for case in cases])}
    for case in cases:
        name = case["name"]
        entries[f"{name}/config"] = _json_entry(case["config"])
        for input_name, array in case["inputs"].items():
            entries[f"{name}/{input_name}"] = array
        for param_name, array in case["params"].items():
            entries[f"{name}/{param_name}"] = array
        entries[f"{name}/grad_output"] = case["grad_output"]
        for optional in ("mask", "torch_mask"):
            if case[optional] is not None:
                entries[f"{name}/{optional}"] = case[optional]
        entries[f"{name}/output"] = case["output"]
        entries[f"{name}/attention_weights"] = case["attention_weights"]
        for input_name, array in case["input_grads"].items():
            entries[f"{name}/grad/{input_name}"] = array
        for param_name, array in case["param_grads"].items():
            entries[f"{name}/grad/{param_name}"] = array
    return {key: np.asarray(value) for key, value in entries.items()}


def attention_case_names(path: Path = ATTENTION_FILE) -> list[str]:
    """The names of the stored attention cases, in order."""
    with np.load(path) as npz:
        return _read_json(npz, "_index")


def load_attention_case(name: str, path: Path = ATTENTION_FILE) -> dict:
    """One attention case as a dict (fresh arrays on every call).

    Keys: ``name, config, inputs, params, grad_output, mask, torch_mask,
    output, attention_weights, input_grads, param_grads``; ``inputs``,
    ``params``, ``input_grads`` and ``param_grads`` are ``{name: array}``
    dicts; ``mask``/``torch_mask`` are None when the case has none.
    """
    with np.load(path) as npz:
        config = _read_json(npz, f"{name}/config")

        def optional(key):
            full_key = f"{name}/{key}"
            return npz[full_key] if full_key in npz.files else None

        return {
            "name": name,
            "config": config,
            "inputs": {key: npz[f"{name}/{key}"] for key in config["inputs"]},
            "params": {key: npz[f"{name}/{key}"] for key in PARAMETER_NAMES},
            "grad_output": npz[f"{name}/grad_output"],
            "mask": optional("mask"),
            "torch_mask": optional("torch_mask"),
            "output": npz[f"{name}/output"],
            "attention_weights": npz[f"{name}/attention_weights"],
            "input_grads": {key: npz[f"{name}/grad/{key}"] for key in config["inputs"]},
            "param_grads": {key: npz[f"{name}/grad/{key}"] for key in PARAMETER_NAMES},
        }


def iter_attention_cases(path: Path = ATTENTION_FILE):
    """Yield every stored attention case as a dict (see ``load_attention_case``)."""
    for name in attention_case_names(path):
        yield load_attention_case(name, path)
