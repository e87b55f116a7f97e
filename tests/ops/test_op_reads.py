"""Each op's ``reads`` declaration is true: its VJP gives the same gradients with every other value poisoned.

A lean tape (``Tape(lean=True)``) keeps only the values an op declares its
VJP reads (:attr:`microtape.ops.Op.reads`); the others become
:class:`microtape.engine.lean.NotKept`, which keeps the shape and dtype and raises
on any other use. So the proof is to run every registered op's VJP with its
undeclared operands and output replaced by that very placeholder: it must
not touch them, and must give bit-identical gradients.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import OP_CASES

import microtape as mt
from microtape.engine.lean import NotKept
from microtape.ops import OPS

ALL_OPS = sorted(OPS)


def test_every_built_in_op_declares_what_its_vjp_reads():
    assert [name for name in ALL_OPS if OPS[name].builtin and OPS[name].reads is None] == []


def _poisoned(value, name):
    return NotKept(np.shape(value), np.result_type(value), name)


@pytest.mark.parametrize("name", ALL_OPS)
def test_the_vjp_reads_nothing_it_does_not_declare(name):
    op = OPS[name]

    @settings(max_examples=10, deadline=None)
    @given(case=OP_CASES[name], seed=st.integers(0, 2**32 - 1))
    def check(case, seed):
        inputs, params = case
        extra = {}
        if op.forward_saving is not None and params:
            ans, extra["residuals"] = op.forward_saving(*inputs, **params)
        else:
            ans = op.forward(*inputs, **params)
        g = np.asarray(np.random.default_rng(seed).standard_normal(np.shape(ans))).astype(np.result_type(ans))
        expected = op.vjp(g, ans, *inputs, **params, **extra)
        kept = set(op.read_inputs)
        lean_inputs = [x if i in kept else _poisoned(x, op.inputs[i]) for i, x in enumerate(inputs)]
        lean_ans = ans if op.reads_output else _poisoned(ans, op.output)
        got = op.vjp(g, lean_ans, *lean_inputs, **params, **extra)
        assert len(got) == len(expected)
        for position, (want, have) in enumerate(zip(expected, got)):
            if want is None:
                assert have is None
                continue
            have = np.asarray(have)
            assert have.dtype == np.asarray(want).dtype, f"{name}: input {position}"
            np.testing.assert_array_equal(have, want, err_msg=f"{name}: input {position}")

    check()


def test_the_poison_catches_an_undeclared_read():
    """The test above can fail: an op that says it reads nothing but multiplies by its input is caught."""
    liar = mt.ops.define("liar_square", lambda x: x * x, lambda g, ans, x: (2 * g * x,), "2 * {g} * {x}", reads=())
    try:
        with pytest.raises(ValueError, match="the value of x was not kept"):
            liar.vjp(np.ones(3), np.ones(3), _poisoned(np.ones(3), "x"))
    finally:
        OPS.pop("liar_square")


def test_a_user_op_that_declares_nothing_is_kept_whole():
    cube = mt.ops.define("cube_reads", lambda x: x**3, lambda g, ans, x: (3 * g * x * x,), "3 * {g} * {x}**2")
    try:
        assert cube.reads is None and cube.reads_output and cube.read_inputs == (0,)
    finally:
        OPS.pop("cube_reads")


@pytest.mark.parametrize("reads", [("z",), "x", 3])
def test_a_declaration_must_name_the_ops_own_values(reads):
    with pytest.raises((ValueError, TypeError), match="cube_bad.*reads"):
        mt.ops.define("cube_bad", lambda x: x**3, lambda g, ans, x: (3 * g * x * x,), "3 * {g} * {x}**2", reads=reads)
    assert "cube_bad" not in OPS
