"""Where a NaN or an infinity first appeared: the tape's first non-finite value, and its reverse pass's.

References: hand reasoning on small programs whose first bad step is known
(log of a negative number at step 1; sqrt's slope at 0, sent at step 1).
"""

import numpy as np

import microtape as mt
from microtape.engine.nonfinite import first_nonfinite_gradient, first_nonfinite_value


def test_the_first_non_finite_value_names_its_equation_not_the_ones_it_spread_to():
    x = mt.Tensor(np.array([3.0, 1.0]), requires_grad=True)
    with np.errstate(invalid="ignore"), mt.Tape() as tape:
        y = (mt.ops.log(x - 2.0) * 3.0).exp().sum()  # NaN from step 1 on: log of -1
    assert np.isnan(y.data)
    text = first_nonfinite_value(tape)
    assert text.startswith("the value first became non-finite at tape[1] (log, ") and "nan at index (1,)" in text
    assert first_nonfinite_value(mt.Tape()) is None


def test_the_first_non_finite_gradient_names_the_step_that_sent_it():
    x = mt.Tensor(np.array([1.0, 0.0]), requires_grad=True)
    with mt.Tape() as tape:
        y = ((x * x).sqrt() * 2.0).sum()
    text = first_nonfinite_gradient(tape, y)
    assert "tape[1] (sqrt, %1 = sqrt(%0)): inf at index (1,) sent to %0" in text, text
    assert x.grad is None  # a pure pass: nothing written
    with mt.Tape() as fine:
        z = (x * 2.0).sum()
    assert first_nonfinite_gradient(fine, z) is None


def test_gradcheck_says_where_the_nan_first_appeared():
    result = mt.check.gradcheck(
        lambda x: x.cbrt().sum() * 2.0, np.array([0.5, 0.0]), raise_exception=False
    )  # cbrt's slope at 0
    assert not result
    text = "\n".join(result.not_finite)
    assert "the gradient first became non-finite at tape[0] (cbrt" in text, text
    with np.errstate(invalid="ignore"):
        result = mt.check.gradcheck(lambda x: mt.ops.log(x - 2.0).sum(), np.array([3.0, 1.0]), raise_exception=False)
    assert "the value first became non-finite at tape[1] (log" in "\n".join(result.not_finite)
