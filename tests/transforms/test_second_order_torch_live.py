"""Second derivatives and JVPs against PyTorch computed live (needs torch; ``make test-torch``).

The same cases as ``test_second_order_golden.py``; also checks that the
committed fixture is what torch computes now.
"""

import os

import numpy as np
import pytest

if os.environ.get("MICROTAPE_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch")


from golden.second_order_cases import CASES, load, make_arrays, run_microtape, run_torch  # noqa: E402
from test_second_order_golden import assert_results_agree  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_microtape_agrees_with_torch_live_and_the_fixture_is_current(case):
    arrays = make_arrays(case)
    live = run_torch(torch, case, arrays)
    assert_results_agree(run_microtape(case, arrays), live, case.name)
    stored = load(case.name)
    for key in ("output", "jvp"):
        np.testing.assert_allclose(stored[key], live[key], rtol=1e-12, atol=1e-12, err_msg=f"{case.name}/{key}")
    for key in ("grads", "hvps"):
        for s, live_value in zip(stored[key], live[key], strict=True):
            np.testing.assert_allclose(s, live_value, rtol=1e-12, atol=1e-12, err_msg=f"{case.name}/{key}")
