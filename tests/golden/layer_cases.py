"""Transformer-piece test cases: configurations and seeded numpy data (no torch), and the ``layers.npz`` format.

``make_golden_layers.py`` turns every case into a PyTorch reference; the
tests (``test_golden_layers.py`` without torch, ``test_torch_layers_live.py``
with it) run microtape on the same data (``run_layers.py``).

A case is a plain dict: ``name``, ``kind`` (one of :data:`KINDS`) and the
kind's sizes and options; ``make_case(config)`` draws its arrays from
``config["seed"]``. Parameters are keyed by microtape's names
(``self_attn.q_proj.weight``, ``linear1.weight``, ``norm1.weight``, …).

``layers.npz`` (written by :func:`pack_cases`, read by :func:`load_cases`)::

    _index                   JSON list of case names, in order
    <case>/config            JSON configuration
    <case>/fingerprint       JSON {input name: [shape, sum, sum of squares]} of the inputs torch saw
    <case>/out/<name>        a torch result (output, grad/<name>, a trajectory, ...)

The inputs themselves are not stored (they would triple the file): readers
draw them again with :func:`make_case`, and the fingerprint proves they are
the arrays torch was given. JSON is stored as 0-d unicode arrays, so
``np.load`` needs no pickle.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MASKED = -1e9
LAYERS_FILE = Path(__file__).resolve().parent / "layers.npz"

KINDS = ("op", "layernorm", "feedforward", "encoder", "decoder", "cross_entropy", "embedding", "optimizer")

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _case(name, kind, seed, **config):
    return {"name": name, "kind": kind, "seed": seed, **config}


# Index keys in JSON (see index_key).
INDEX_SLICES = [["slice", 1, None, None], ["..."], ["slice", None, None, 2]]
INDEX_REPEATS = [["array", [0, 0, 3, 1]], ["int", 1], ["none"]]

#: Primitive ops against their torch counterparts (value and gradient).
OP_CASES = [
    _case("op_gelu", "op", 100, op="gelu", shape=[3, 7]),
    _case("op_gelu_wide", "op", 101, op="gelu", shape=[50], scale=4.0),
    _case("op_sigmoid", "op", 102, op="sigmoid", shape=[4, 5], scale=6.0),
    _case("op_log_softmax", "op", 103, op="log_softmax", shape=[3, 4, 5], axis=1),
    _case("op_logsumexp", "op", 104, op="logsumexp", shape=[3, 6], axis=-1, keepdims=False),
    _case("op_logsumexp_keep", "op", 105, op="logsumexp", shape=[2, 3, 4], axis=0, keepdims=True),
    _case("op_sqrt", "op", 106, op="sqrt", shape=[5, 3], positive=True),
    _case("op_abs", "op", 107, op="abs", shape=[4, 4], zeros=True),
    _case("op_maximum_ties", "op", 108, op="maximum", shape=[4, 5], ties=True),
    _case("op_minimum_ties", "op", 109, op="minimum", shape=[4, 5], ties=True),
    _case("op_take_repeats", "op", 110, op="take", shape=[3, 6, 2], axis=1, indices=[0, 4, 4, 1, 4, 0]),
    _case("op_concatenate", "op", 111, op="concatenate", shape=[2, 3], other=[2, 5], axis=1),
    _case("op_stack", "op", 112, op="stack", shape=[3, 4], axis=1),
    _case("op_var", "op", 113, op="var", shape=[3, 8], axis=-1, keepdims=True),
    # t[1:, ..., ::2] and t[[0, 0, 3, 1], 1, None] (a row read twice): the index op.
    _case("op_index_slices", "op", 114, op="index", shape=[3, 4, 5], key=INDEX_SLICES),
    _case("op_index_repeats", "op", 115, op="index", shape=[4, 3, 2], key=INDEX_REPEATS),
]

LAYERNORM_CASES = [
    _case("layernorm_16", "layernorm", 1, shape=[2, 5, 16], normalized=[16], eps=1e-5),
    _case("layernorm_2d", "layernorm", 2, shape=[3, 4, 6], normalized=[4, 6], eps=1e-3),
]

FEEDFORWARD_CASES = [
    _case("ff_relu", "feedforward", 3, B=2, T=5, E=8, ff=16, activation="relu"),
    _case("ff_gelu", "feedforward", 4, B=3, T=4, E=12, ff=20, activation="gelu"),
]

ENCODER_CASES = [
    _case("encoder_relu", "encoder", 10, B=2, T=5, E=16, H=4, ff=32, activation="relu", mask=None),
    _case("encoder_gelu_causal", "encoder", 11, B=3, T=6, E=12, H=3, ff=16, activation="gelu", mask="causal"),
    _case("encoder_relu_mask", "encoder", 12, B=1, T=7, E=8, H=2, ff=24, activation="relu", mask="random"),
    _case("encoder_gelu_six_heads", "encoder", 13, B=2, T=9, E=12, H=6, ff=16, activation="gelu", mask=None),
]

DECODER_CASES = [
    _case("decoder_relu", "decoder", 20, B=2, T=5, S=7, E=8, H=2, ff=12, activation="relu", tgt_mask=None),
    _case("decoder_gelu_causal", "decoder", 21, B=2, T=6, S=4, E=12, H=3, ff=16, activation="gelu", tgt_mask="causal"),
    _case(
        "decoder_relu_causal_memory_mask",
        "decoder",
        22,
        B=3,
        T=4,
        S=6,
        E=8,
        H=4,
        ff=16,
        activation="relu",
        tgt_mask="causal",
        memory_mask=True,
    ),  # fmt: skip
    _case("decoder_gelu_square", "decoder", 23, B=1, T=5, S=5, E=8, H=8, ff=20, activation="gelu", tgt_mask=None),
]

CROSS_ENTROPY_CASES = [
    _case("cross_entropy_2d", "cross_entropy", 30, shape=[6, 5], ignore_index=None),
    _case("cross_entropy_3d_ignore", "cross_entropy", 31, shape=[2, 4, 7], ignore_index=-100),
    _case("cross_entropy_large_logits", "cross_entropy", 32, shape=[3, 4], ignore_index=None, scale=300.0),
]

EMBEDDING_CASES = [
    _case("embedding_repeats", "embedding", 40, num=7, dim=5, ids_shape=[3, 6], id_range=3),
]

OPTIMIZER_CASES = [
    _case("sgd", "optimizer", 50, optimizer="SGD", lr=0.1, momentum=0.0, steps=20),
    _case("sgd_momentum", "optimizer", 51, optimizer="SGD", lr=0.05, momentum=0.9, steps=20),
    _case("adam", "optimizer", 52, optimizer="Adam", lr=0.01, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.0, steps=20),
    _case(
        "adam_weight_decay",
        "optimizer",
        53,
        optimizer="Adam",
        lr=0.02,
        betas=[0.8, 0.99],
        eps=1e-6,
        weight_decay=0.1,
        steps=20,
    ),  # fmt: skip
]

CASES = [
    *OP_CASES,
    *LAYERNORM_CASES,
    *FEEDFORWARD_CASES,
    *ENCODER_CASES,
    *DECODER_CASES,
    *CROSS_ENTROPY_CASES,
    *EMBEDDING_CASES,
    *OPTIMIZER_CASES,
]
CASES_BY_NAME = {case["name"]: case for case in CASES}


# --------------------------------------------------------------------------
# Seeded data
# --------------------------------------------------------------------------


def _uniform(rng, bound, shape):
    return rng.uniform(-bound, bound, shape)


def _linear(rng, params, name, fan_in, fan_out):
    """``name.weight [out, in]`` and ``name.bias [out]``, uniform in ±1/√in (PyTorch's default)."""
    bound = 1.0 / np.sqrt(fan_in)
    params[f"{name}.weight"] = _uniform(rng, bound, (fan_out, fan_in))
    params[f"{name}.bias"] = _uniform(rng, bound, (fan_out,))


def _norm(rng, params, name, shape):
    """A LayerNorm's weight near 1 and bias near 0 — but not exactly, so that γ and β matter."""
    params[f"{name}.weight"] = 1.0 + 0.2 * rng.standard_normal(shape)
    params[f"{name}.bias"] = 0.1 * rng.standard_normal(shape)


def _mask(rng, kind, rows, cols):
    if kind is None or kind is False:
        return None
    if kind == "causal":
        return np.where(np.triu(np.ones((rows, cols), dtype=bool), k=1), MASKED, 0.0)
    mask = np.where(rng.random((rows, cols)) < 0.3, MASKED, 0.0)
    mask[:, 0] = 0.0  # every query keeps at least one key
    return mask


def index_key(parts):
    """A case's index key, written in JSON (``[["slice", 1, None, None], ["..."], ["int", 1], …]``), as a tuple."""
    key = []
    for kind, *values in parts:
        if kind == "slice":
            key.append(slice(*values))
        elif kind == "array":
            key.append(np.array(values[0], dtype=np.intp))
        else:
            key.append({"int": values[0] if values else None, "...": Ellipsis, "none": None}[kind])
    return tuple(key)


def _op_arrays(config, rng):
    shape = tuple(config["shape"])
    scale = config.get("scale", 1.0)
    x = scale * rng.standard_normal(shape)
    if config.get("positive"):
        x = np.abs(x) + 0.5
    if config.get("zeros"):
        x.flat[::5] = 0.0
    arrays = {"a": x}
    op = config["op"]
    if op in ("maximum", "minimum"):
        b = rng.standard_normal(shape)
        b.flat[::3] = x.flat[::3]  # exact ties: the gradient is shared
        arrays["b"] = b
    elif op == "concatenate":
        arrays["b"] = rng.standard_normal(tuple(config["other"]))
    elif op == "stack":
        arrays["b"] = rng.standard_normal(shape)
        arrays["c"] = rng.standard_normal(shape)
    return arrays


def make_case(config):
    """``{input name: array}`` of a case, drawn from its seed (the same every time)."""
    rng = np.random.default_rng(config["seed"])
    kind = config["kind"]
    arrays = {}
    if kind == "op":
        arrays.update(_op_arrays(config, rng))
    elif kind == "layernorm":
        arrays["x"] = 2.0 * rng.standard_normal(tuple(config["shape"])) + 0.5
        _norm(rng, arrays, "norm", tuple(config["normalized"]))
        arrays["weight"], arrays["bias"] = arrays.pop("norm.weight"), arrays.pop("norm.bias")
    elif kind == "feedforward":
        arrays["x"] = rng.standard_normal((config["B"], config["T"], config["E"]))
        _linear(rng, arrays, "linear1", config["E"], config["ff"])
        _linear(rng, arrays, "linear2", config["ff"], config["E"])
    elif kind in ("encoder", "decoder"):
        E = config["E"]
        arrays["x"] = rng.standard_normal((config["B"], config["T"], E))
        attentions = ("self_attn",) if kind == "encoder" else ("self_attn", "multihead_attn")
        if kind == "decoder":
            arrays["memory"] = rng.standard_normal((config["B"], config["S"], E))
        for attention in attentions:
            for projection in PROJECTIONS:
                _linear(rng, arrays, f"{attention}.{projection}", E, E)
        _linear(rng, arrays, "linear1", E, config["ff"])
        _linear(rng, arrays, "linear2", config["ff"], E)
        for index in range(1, len(attentions) + 2):
            _norm(rng, arrays, f"norm{index}", (E,))
        if kind == "encoder":
            mask = _mask(rng, config["mask"], config["T"], config["T"])
            if mask is not None:
                arrays["mask"] = mask
        else:
            for name, rows, cols, kind_of in (
                ("tgt_mask", config["T"], config["T"], config.get("tgt_mask")),
                ("memory_mask", config["T"], config["S"], "random" if config.get("memory_mask") else None),
            ):
                mask = _mask(rng, kind_of, rows, cols)
                if mask is not None:
                    arrays[name] = mask
    elif kind == "cross_entropy":
        shape = tuple(config["shape"])
        arrays["logits"] = config.get("scale", 1.0) * rng.standard_normal(shape)
        targets = rng.integers(0, shape[-1], shape[:-1])
        if config["ignore_index"] is not None:
            targets.flat[::3] = config["ignore_index"]
        arrays["targets"] = targets
    elif kind == "embedding":
        arrays["weight"] = rng.standard_normal((config["num"], config["dim"]))
        arrays["ids"] = rng.integers(0, config["id_range"], tuple(config["ids_shape"]))
    elif kind == "optimizer":
        # A small regression problem: loss = mean((tanh(x Wᵀ + b) − y)²).
        arrays["x"] = rng.standard_normal((8, 4))
        arrays["y"] = rng.standard_normal((8, 3))
        arrays["weight"] = 0.5 * rng.standard_normal((3, 4))
        arrays["bias"] = 0.1 * rng.standard_normal(3)
    if kind in ("op", "layernorm", "feedforward", "encoder", "decoder", "embedding"):
        arrays["grad_output"] = rng.standard_normal(_output_shape(config, arrays))
    return arrays


def _output_shape(config, arrays):
    kind = config["kind"]
    if kind == "embedding":
        return tuple(config["ids_shape"]) + (config["dim"],)
    if kind != "op":
        return arrays["x"].shape
    a = arrays["a"]
    op = config["op"]
    if op == "logsumexp" or op == "var":
        return np.sum(a, axis=config["axis"], keepdims=config["keepdims"]).shape
    if op == "take":
        return np.take(a, config["indices"], axis=config["axis"]).shape
    if op == "index":
        return a[index_key(config["key"])].shape
    if op == "concatenate":
        return np.concatenate([a, arrays["b"]], axis=config["axis"]).shape
    if op == "stack":
        return np.stack([a, arrays["b"], arrays["c"]], axis=config["axis"]).shape
    return a.shape


# --------------------------------------------------------------------------
# The file
# --------------------------------------------------------------------------


def _json(value):
    return np.array(json.dumps(value, sort_keys=True))


def fingerprint(arrays):
    """``{name: [shape, sum, sum of squares]}``: enough to tell whether two sets of inputs are the same."""
    return {
        name: [list(np.shape(a)), float(np.sum(a)), float(np.sum(np.square(a, dtype=np.float64)))]
        for name, a in sorted(arrays.items())
    }


def pack_cases(results):
    """Flatten ``[{"config", "inputs", "outputs"}]`` into the entries of ``layers.npz``."""
    entries = {"_index": _json([result["config"]["name"] for result in results])}
    for result in results:
        name = result["config"]["name"]
        entries[f"{name}/config"] = _json(result["config"])
        entries[f"{name}/fingerprint"] = _json(fingerprint(result["inputs"]))
        for key, array in result["outputs"].items():
            entries[f"{name}/out/{key}"] = np.asarray(array)
    return entries


def load_cases(path=LAYERS_FILE):
    """``{name: {"config", "fingerprint", "inputs", "outputs"}}``: the stored results, the inputs drawn again."""
    with np.load(path) as npz:
        cases = {}
        for name in json.loads(str(npz["_index"])):
            config = json.loads(str(npz[f"{name}/config"]))
            prefix = f"{name}/out/"
            cases[name] = {
                "config": config,
                "fingerprint": json.loads(str(npz[f"{name}/fingerprint"])),
                "inputs": make_case(config),
                "outputs": {key[len(prefix) :]: npz[key] for key in npz.files if key.startswith(prefix)},
            }
    return cases
