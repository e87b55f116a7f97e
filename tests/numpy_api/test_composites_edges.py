"""A refused call records nothing (issue #37): every composite validates before its first op.

A composite (``var`` = mean, sub, mul, mean; ``repeat`` = reshape, take;
``outer`` = reshape, reshape, mul; reflect ``pad`` = one take per axis …)
that fails half-way leaves orphan equations on an open tape. The property:
for every composite and every refused argument, the open tape's length is
unchanged and the error names the argument. One table, one test.
"""

import numpy as np
import pytest

import microtape as mt


def _x():
    return mt.Tensor([1.0, 2.0, 3.0], requires_grad=True)


def _m():
    return mt.Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)


# (what, the refused call, a word the message must contain)
REFUSED = [
    ("var", lambda: _x().var(keepdims=1), "keepdims"),
    ("var", lambda: _x().var(ddof=3), "ddof"),
    ("var", lambda: _x().var(axis=5), "axis"),
    ("std", lambda: _x().std(keepdims="no"), "keepdims"),
    ("std", lambda: _x().std(ddof=-1), "ddof"),
    ("std", lambda: _m().std(axis=(0, 0)), "axis"),
    ("repeat", lambda: _x().repeat(-1), "repeats"),
    ("repeat", lambda: _x().repeat(2.0), "repeats"),
    ("repeat", lambda: np.repeat(_x(), [1, 2]), "repeats"),
    ("repeat", lambda: mt.repeat(_m(), [1, 2, 3]), "repeats"),
    ("repeat", lambda: _m().repeat(2, axis=4), "axis"),
    ("tile", lambda: _x().tile(-1), "reps"),
    ("tile", lambda: _x().tile((2, "a")), "reps"),
    ("outer", lambda: mt.outer(_x(), "abc"), "str"),
    ("pad", lambda: mt.pad(mt.Tensor(np.ones((2, 0)), requires_grad=True), 1, mode="reflect"), "empty"),
    ("pad", lambda: mt.pad(_m(), ((1, 1), (1, -1)), mode="edge"), "pad_width"),
    ("pad", lambda: mt.pad(_m(), 1, mode="nearest"), "mode"),
    ("pad", lambda: mt.pad(_m(), 1, constant_values="x"), "constant_values"),
    ("split", lambda: mt.split(_m(), 2, axis=1), "split"),
    ("split", lambda: mt.split(_m(), 2.5, axis=1), "indices_or_sections"),
    ("concatenate", lambda: mt.concatenate([_x(), _m()]), "concatenate"),
    ("stack", lambda: mt.stack([_x(), _m()]), "stack"),
    ("norm", lambda: _m().norm(ord=2), "ord"),
    ("norm", lambda: mt.norm(_x(), ord=1), "ord"),
    ("softmax", lambda: _m().softmax(axis=3), "axis"),
    ("log_softmax", lambda: _m().log_softmax(axis=(0, 0)), "axis"),
    ("logsumexp", lambda: _m().logsumexp(axis=7), "axis"),
    ("einsum", lambda: mt.einsum("ij,jk->ik", _m(), _m()), "einsum"),
    ("einsum", lambda: mt.einsum("ii->i", _m()), "einsum"),
    ("einsum", lambda: mt.einsum("ij->k", _m()), "einsum"),
    ("einsum", lambda: mt.einsum(_m(), [0, 1], _x(), [0]), "einsum"),
    ("einsum", lambda: mt.einsum("b...,...->b", _m(), _x()), "einsum"),
    ("dot", lambda: mt.dot(_m(), _m()), "matmul"),
    ("matmul", lambda: mt.matmul(_x(), _m()), "matmul"),
    ("where", lambda: mt.where([True, False], _x(), _x()), "where"),
    ("clip", lambda: _x().clip(lower="a"), "lower"),
    ("power", lambda: mt.power(mt.Tensor([0.0, 1.0], requires_grad=True), -1.0), "power of 0"),
    ("maximum", lambda: mt.maximum(_x(), mt.Tensor(np.ones((3, 2)))), "maximum"),
]


@pytest.mark.parametrize("what, call, word", REFUSED, ids=[f"{w}-{i}" for i, (w, _, _) in enumerate(REFUSED)])
def test_a_refused_composite_leaves_the_open_tape_unchanged(what, call, word):
    with mt.Tape() as tape:
        kept = _x() * 2.0  # something already on the tape, untouched by the refusal
        before = len(tape)
        with pytest.raises((ValueError, TypeError)) as refused:
            call()
        assert len(tape) == before, f"{what}: {len(tape) - before} orphan equation(s) after {refused.value}"
    assert word.lower() in str(refused.value).lower(), refused.value
    assert kept.data.tolist() == [2.0, 4.0, 6.0]


def test_the_table_covers_every_composite_of_the_surface():
    # A new composite function joins the table: these are the names of mt's surface that record several ops.
    composites = {"var", "std", "repeat", "tile", "outer", "pad", "split", "einsum", "norm"}
    assert composites <= {what for what, _, _ in REFUSED}
    assert composites <= set(mt.__all__)
