"""Second derivatives and JVPs of every op, attention and an encoder layer, against PyTorch (fixtures).

``tests/golden/second_order.npz`` holds PyTorch's float64 results (double
backward for ``Σ u ⊙ y + ½ Σ y²``'s Hessian times fixed directions, and
``torch.func.jvp``), made by ``tests/golden/make_golden_second_order.py``.
microtape recomputes them — its reverse pass recorded with
``create_graph=True`` and differentiated again, and its forward mode — and
must agree to 1e-10. ``test_second_order_torch_live.py`` repeats this with
torch live.
"""

import numpy as np
import pytest
from golden.second_order_cases import CASES, OP_CASE_NAMES, load, make_arrays, run_microtape  # noqa: E402

from microtape.ops import OPS

TOLERANCE = {"rtol": 1e-10, "atol": 1e-10}


def assert_results_agree(got, expected, name):
    np.testing.assert_allclose(got["output"], expected["output"], err_msg=f"{name}: output", **TOLERANCE)
    np.testing.assert_allclose(got["jvp"], expected["jvp"], err_msg=f"{name}: J v", **TOLERANCE)
    assert len(got["grads"]) == len(expected["grads"]) and len(got["hvps"]) == len(expected["hvps"]), name
    for i, (g, e) in enumerate(zip(got["grads"], expected["grads"])):
        np.testing.assert_allclose(g, e, err_msg=f"{name}: gradient of input {i}", **TOLERANCE)
    for i, (h, e) in enumerate(zip(got["hvps"], expected["hvps"])):
        np.testing.assert_allclose(h, e, err_msg=f"{name}: Hessian times w, input {i}", **TOLERANCE)


def test_there_is_a_case_for_every_registered_op():
    assert sorted(OP_CASE_NAMES) == sorted(OPS)
    for case in CASES:
        assert case.second == OPS[case.name].higher_order if case.name in OPS else case.second


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_microtape_agrees_with_the_pytorch_fixture(case):
    expected = load(case.name)
    if case.second:
        assert any(np.any(h != 0) for h in expected["hvps"]), "a case whose second derivative is all zero"
    assert_results_agree(run_microtape(case, make_arrays(case)), expected, case.name)
