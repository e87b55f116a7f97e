"""Cross-check the Transformer pieces against PyTorch, using committed fixtures (no torch needed).

``tests/golden/layers.npz`` was made by PyTorch (``make_golden_layers.py``,
torch 2.13.0, float64). microtape recomputes every result and must agree to
1e-10: the new ops (gelu against ``approximate="tanh"``, ties of
maximum/minimum, take with repeated indices, …), LayerNorm, the feed-forward
block, post-norm encoder and decoder layers (relu and gelu; no mask, causal,
random masks; B, T, S, E, H, ff varied) — output, dx, d memory and every
parameter gradient, by the tape and by the hand-derived chain — the
cross-entropy loss and its gradient, the embedding gradient with repeated
ids, and 20-step trajectories of SGD (with and without momentum) and Adam
(with and without weight decay).
"""

import numpy as np
import pytest
from golden.layer_cases import CASES, LAYERS_FILE, fingerprint, load_cases  # noqa: E402
from golden.run_layers import run_case  # noqa: E402

import microtape as mt

STORED = load_cases()
LAYER_KINDS = ("layernorm", "feedforward", "encoder", "decoder")


def test_fixture_is_small_and_covers_every_case():
    """layers.npz stays small, and holds exactly the cases layer_cases.py defines, in order."""
    assert LAYERS_FILE.stat().st_size < 300_000
    assert list(STORED) == [case["name"] for case in CASES]
    assert [stored["config"] for stored in STORED.values()] == CASES


@pytest.mark.parametrize("name", list(STORED))
def test_inputs_are_the_ones_torch_saw(name):
    """The inputs drawn again from the seed have the fingerprint of those torch was given."""
    stored = STORED[name]
    fresh = fingerprint(stored["inputs"])
    assert sorted(fresh) == sorted(stored["fingerprint"])
    for key, (shape, total, squares) in stored["fingerprint"].items():
        assert fresh[key][0] == shape, key
        np.testing.assert_allclose(fresh[key][1:], [total, squares], rtol=1e-12, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("name", [name for name, case in STORED.items() if case["config"]["kind"] not in LAYER_KINDS])
def test_matches_torch(name):
    run_case(mt, STORED[name])


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("name", [name for name, case in STORED.items() if case["config"]["kind"] in LAYER_KINDS])
def test_layer_matches_torch(name, method):
    run_case(mt, STORED[name], method)
