"""Multi-head attention test cases: configurations and seeded numpy data.

This module is numpy-only (no torch), so the torch-free tests can use it too.
``make_golden.py`` turns each case into a PyTorch reference.

A case *configuration* is a plain dict (it is stored as JSON in the fixture):

``name``
    short identifier, used in fixture keys and as the pytest id.
``kind``
    ``"self"``: one tensor ``x`` is query, key and value (the same object);
    ``"cross"``: three different tensors ``query``, ``key``, ``value``;
    ``"cross_kv_same"``: ``query`` plus one tensor ``key_value`` passed as
    both key and value (still cross-attention, because query differs).
``B, Tq, Tk, E, H``
    batch size, query length, key/value length, embedding size, heads.
``causal``
    add ``-1e9`` above the diagonal (needs ``Tq == Tk``).
``user_mask``
    also use a random additive ``[Tq, Tk]`` mask with some ``-1e9`` entries.
``seed``
    seed of the numpy generator that makes every array of the case.
``inputs``
    the names of the distinct input tensors, in order (depends on ``kind``).

Torch has no ``causal`` switch in this cross-check: it receives one additive
float mask, the causal mask plus the user mask (``torch_mask`` below).
microtape receives ``causal=True`` and the user mask separately.
"""

from __future__ import annotations

import numpy as np

MASKED = -1e9
"""The additive value that suppresses a score (0 allows it)."""

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
"""The four Linear layers of the attention block, in the order q, k, v, out."""

PARAMETER_NAMES = tuple(f"{projection}.{part}" for projection in PROJECTIONS for part in ("weight", "bias"))
"""``q_proj.weight, q_proj.bias, ..., out_proj.bias``: weights ``[E, E]``, biases ``[E]``."""

INPUT_NAMES_BY_KIND = {
    "self": ("x",),
    "cross": ("query", "key", "value"),
    "cross_kv_same": ("query", "key_value"),
}


def case_config(
    name: str,
    kind: str,
    B: int,
    Tq: int,
    Tk: int,
    E: int,
    H: int,
    *,
    causal: bool = False,
    user_mask: bool = False,
    seed: int,
) -> dict:
    """Build and sanity-check one case configuration."""
    if kind not in INPUT_NAMES_BY_KIND:
        raise ValueError(f"kind must be one of {sorted(INPUT_NAMES_BY_KIND)}, got {kind!r}")
    if kind == "self" and Tq != Tk:
        raise ValueError(f"self-attention needs Tq == Tk, got Tq={Tq}, Tk={Tk}")
    if causal and Tq != Tk:
        raise ValueError(f"a causal case needs Tq == Tk, got Tq={Tq}, Tk={Tk}")
    if E % H != 0:
        raise ValueError(f"H={H} must divide E={E}")
    return {
        "name": name,
        "kind": kind,
        "B": B,
        "Tq": Tq,
        "Tk": Tk,
        "E": E,
        "H": H,
        "causal": causal,
        "user_mask": user_mask,
        "seed": seed,
        "inputs": list(INPUT_NAMES_BY_KIND[kind]),
    }


# The fixed cases stored in tests/golden/attention.npz.
#   (B, Tq, Tk, E, H) sizes include H = 1 and H = E.
ATTENTION_CASES: list[dict] = [
    case_config("self_b2_t3_e8_h2", "self", 2, 3, 3, 8, 2, seed=11),
    case_config("cross_b1_tq4_tk5_e6_h3", "cross", 1, 4, 5, 6, 3, seed=12),
    case_config("cross_kv_same_b2_tq3_tk5_e8_h2", "cross_kv_same", 2, 3, 5, 8, 2, seed=13),
    case_config("self_user_mask_b2_t4_e8_h2", "self", 2, 4, 4, 8, 2, user_mask=True, seed=14),
    case_config("cross_user_mask_b1_tq3_tk5_e6_h3", "cross", 1, 3, 5, 6, 3, user_mask=True, seed=15),
    case_config("causal_self_b2_t5_e8_h1", "self", 2, 5, 5, 8, 1, causal=True, seed=16),
    case_config(
        "causal_plus_mask_self_b1_t4_e8_h2",
        "self",
        1,
        4,
        4,
        8,
        2,
        causal=True,
        user_mask=True,
        seed=17,
    ),
    case_config("heads_equal_embed_b1_t3_e4_h4", "self", 1, 3, 3, 4, 4, seed=18),
    case_config("cross_single_head_b2_tq3_tk4_e4_h1", "cross", 2, 3, 4, 4, 1, seed=19),
    case_config("causal_cross_b1_t4_e6_h2", "cross", 1, 4, 4, 6, 2, causal=True, seed=20),
    case_config(
        "causal_plus_mask_kv_same_b2_t3_e4_h2",
        "cross_kv_same",
        2,
        3,
        3,
        4,
        2,
        causal=True,
        user_mask=True,
        seed=21,
    ),
]


def random_case_config(seed: int) -> dict:
    """A random (but seeded) case for the live sweep in ``test_torch_live.py``."""
    rng = np.random.default_rng([seed, 7])
    H = int(rng.integers(1, 5))
    E = H * int(rng.integers(1, 4))
    B = int(rng.integers(1, 4))
    kind = str(rng.choice(["self", "cross", "cross_kv_same"]))
    Tq = int(rng.integers(1, 6))
    Tk = Tq if kind == "self" else int(rng.integers(1, 6))
    causal = bool(Tq == Tk and rng.random() < 0.5)
    user_mask = bool(rng.random() < 0.5)
    return case_config(
        f"random_seed{seed}",
        kind,
        B,
        Tq,
        Tk,
        E,
        H,
        causal=causal,
        user_mask=user_mask,
        seed=1000 + seed,
    )


def causal_additive_mask(T: int) -> np.ndarray:
    """``[T, T]`` additive mask: ``-1e9`` strictly above the diagonal, 0 elsewhere."""
    return np.triu(np.full((T, T), MASKED), k=1)


def random_user_mask(rng: np.random.Generator, Tq: int, Tk: int) -> np.ndarray:
    """``[Tq, Tk]`` additive mask with about a third of entries ``-1e9``.

    Entry ``[i, i % Tk]`` is always left at 0, so no row is fully masked --
    not even after adding a causal mask (for which ``Tq == Tk``, so the kept
    entry is the diagonal, which the causal mask allows).
    """
    mask = np.where(rng.random((Tq, Tk)) < 0.35, MASKED, 0.0)
    for row in range(Tq):
        mask[row, row % Tk] = 0.0
    return mask


def make_case(config: dict) -> dict:
    """The numpy data of a case (the "question"; torch supplies the answers).

    Every array is drawn from ``np.random.default_rng(config["seed"])``.
    Returns a dict with:

    ``name``, ``config``
        as given.
    ``inputs``
        ``{input name: array}`` for the names in ``config["inputs"]``; the
        query side (``x`` or ``query``) is ``[B, Tq, E]``, key/value ``[B, Tk, E]``.
    ``params``
        ``{"q_proj.weight": [E, E], "q_proj.bias": [E], ...}`` for q, k, v and
        out; weights have std ``1/sqrt(E)``, biases std 0.1.
    ``grad_output``
        ``[B, Tq, E]``, the upstream gradient of the layer's output.
    ``mask``
        the user's additive ``[Tq, Tk]`` mask, or None.
    ``torch_mask``
        the one additive mask torch receives (causal + user), or None.
    """
    rng = np.random.default_rng(config["seed"])
    B, Tq, Tk, E = config["B"], config["Tq"], config["Tk"], config["E"]

    inputs = {}
    for input_name in config["inputs"]:
        length = Tq if input_name in ("x", "query") else Tk
        inputs[input_name] = rng.normal(size=(B, length, E))

    params = {}
    for projection in PROJECTIONS:
        params[f"{projection}.weight"] = rng.normal(scale=1.0 / np.sqrt(E), size=(E, E))
        params[f"{projection}.bias"] = rng.normal(scale=0.1, size=(E,))

    grad_output = rng.normal(size=(B, Tq, E))

    user_mask = random_user_mask(rng, Tq, Tk) if config["user_mask"] else None
    torch_mask = None
    if user_mask is not None or config["causal"]:
        torch_mask = np.zeros((Tq, Tk))
        if user_mask is not None:
            torch_mask = torch_mask + user_mask
        if config["causal"]:
            torch_mask = torch_mask + causal_additive_mask(Tq)

    return {
        "name": config["name"],
        "config": config,
        "inputs": inputs,
        "params": params,
        "grad_output": grad_output,
        "mask": user_mask,
        "torch_mask": torch_mask,
    }
