"""Cross-check microtape against PyTorch computed live (needs torch).

Same checks as ``test_golden_torch.py``, but the references come from torch
on the spot, through the functions of ``tests/golden/make_golden.py`` (so the
torch logic is written once).  Also:

* the committed fixtures must equal what torch computes now;
* a sweep over random attention configurations (a few seeds).

Skipped when torch is not installed, unless ``MICROTAPE_REQUIRE_TORCH=1``,
in which case a missing torch is an error.  Select or deselect the module
with ``pytest -m torch`` / ``pytest -m "not torch"``.
"""

import os

import numpy as np
import pytest

if os.environ.get("MICROTAPE_REQUIRE_TORCH") == "1":
    import torch  # noqa: F401  (fail loudly when torch is required but missing)
else:
    torch = pytest.importorskip("torch")

from golden.attention_cases import ATTENTION_CASES, random_case_config  # noqa: E402
from golden.expressions import EXPRESSIONS  # noqa: E402
from golden.load import load_attention_case, load_expression_fixtures  # noqa: E402
from golden.make_golden import (  # noqa: E402
    torch_attention_reference,
    torch_expression_reference,
)
from golden.run_microtape import check_attention, check_expression, check_tiled_attention  # noqa: E402

import microtape as mt  # noqa: E402

pytestmark = pytest.mark.torch

RANDOM_SEEDS = range(8)

# Torch builds or versions may differ in the last bits; the fixtures must
# still agree far more tightly than the 1e-10 used against microtape.
FIXTURE_TOLERANCE = 1e-12


def assert_same_arrays(live, stored, what):
    np.testing.assert_allclose(stored, live, rtol=FIXTURE_TOLERANCE, atol=FIXTURE_TOLERANCE, err_msg=what)


# --------------------------------------------------------------------------
# The committed fixtures are what torch computes now
# --------------------------------------------------------------------------


@pytest.mark.parametrize("expression", EXPRESSIONS, ids=lambda e: e.name)
def test_expression_fixture_is_current(expression):
    live = torch_expression_reference(expression)
    stored = load_expression_fixtures()[expression.name]
    assert_same_arrays(live["output"], stored["output"], "output")
    assert_same_arrays(live["upstream"], stored["upstream"], "upstream")
    for index, (live_grad, stored_grad) in enumerate(zip(live["grads"], stored["grads"], strict=True)):
        assert_same_arrays(live_grad, stored_grad, f"grad of input {index}")


@pytest.mark.parametrize("config", ATTENTION_CASES, ids=lambda c: c["name"])
def test_attention_fixture_is_current(config):
    live = torch_attention_reference(config)
    stored = load_attention_case(config["name"])
    assert_same_arrays(live["output"], stored["output"], "output")
    assert_same_arrays(live["attention_weights"], stored["attention_weights"], "weights")
    for group in ("input_grads", "param_grads"):
        assert sorted(live[group]) == sorted(stored[group])
        for key in live[group]:
            assert_same_arrays(live[group][key], stored[group][key], f"grad of {key}")


# --------------------------------------------------------------------------
# microtape against live torch
# --------------------------------------------------------------------------


@pytest.mark.parametrize("use_tape", [False, True], ids=["no_tape", "in_tape"])
@pytest.mark.parametrize("expression", EXPRESSIONS, ids=lambda e: e.name)
def test_expression_matches_live_torch(expression, use_tape):
    check_expression(mt, expression, torch_expression_reference(expression), use_tape=use_tape)


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("config", ATTENTION_CASES, ids=lambda c: c["name"])
def test_attention_matches_live_torch(config, method):
    check_attention(mt, torch_attention_reference(config), method=method)


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_attention_matches_live_torch(seed, method):
    """Random sizes, kinds (self / cross / key-and-value-same) and masks."""
    config = random_case_config(seed)
    check_attention(mt, torch_attention_reference(config), method=method)


@pytest.mark.parametrize("block_size", [1, 2, 4])
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_tiled_attention_matches_live_torch(seed, block_size):
    """The tiled path on the random sweep: tiled backward and analytic route, against torch."""
    reference = torch_attention_reference(random_case_config(seed))
    for method in ("tape", "analytic"):
        check_tiled_attention(mt, reference, block_size, method)
