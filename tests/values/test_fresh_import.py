"""A value type works when its own module is the only thing a fresh process imports.

Two slots are filled at import (the engine's reverse pass in ``Tape.backward``,
numpy's functions on a Tensor); these tests run a new interpreter that imports
one module and computes, so a slot left empty (or filled only by a later import)
fails here rather than in a student's notebook.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROGRAMS = {
    "tensor": """
        from microtape.values.tensor import Tensor
        import numpy as np
        x = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        y = (x * x + 2.0 * x - x / 4.0).exp().sum()
        y.backward()
        expected = (2 * x.data + 2.0 - 0.25) * np.exp(x.data**2 + 1.75 * x.data)
        assert np.allclose(x.grad, expected, rtol=1e-12), (x.grad, expected)
        z = np.tanh(x).sum()  # numpy's function on a Tensor: recorded
        assert type(z) is Tensor and z.op.name == "sum", z
        print("ok")
    """,
    "scalar": """
        import math
        from microtape.values.scalar import Scalar
        a, b = Scalar(2.0), Scalar(-3.0)
        y = (a * b + a.tanh() - b / a + (a * a).exp().log()).relu()  # 0.46...: relu passes it
        y.backward()
        assert y.data > 0
        assert abs(a.grad - (b.data + 1 - math.tanh(2.0) ** 2 + b.data / 4 + 4)) < 1e-12, a.grad
        assert abs(b.grad - (a.data - 1 / a.data)) < 1e-12, b.grad
        print("ok")
    """,
    "tape": """
        from microtape.engine.tape import Tape
        from microtape.values.tensor import Tensor
        import numpy as np
        w = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
        with Tape() as tape:
            loss = (w @ w).sum()
        tape.backward(loss)
        ones = np.ones((2, 2))
        assert np.allclose(w.grad, ones @ w.data.T + w.data.T @ ones), w.grad
        print("ok")
    """,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_value_module_imported_alone_computes_and_differentiates(name):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAMS[name])],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
