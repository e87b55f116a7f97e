"""ArrayLike names the interface Tensor, ScalarArray and Plain share: each of them has every member.

The forward code written once (the attention chain, ``linear_steps``) is
annotated with :class:`~microtape.values.array_like.ArrayLike`; if one of the
three kinds lost a member that code calls, this test says which.
"""

import numpy as np
import pytest

import microtape as mt
from microtape.nn.attention.chain import attention_chain
from microtape.values.array_like import ArrayLike
from microtape.values.plain import Plain
from microtape.values.scalar_array import ScalarArray

KINDS = {
    "Tensor": lambda a: mt.Tensor(a),
    "Plain": Plain,
    "ScalarArray": ScalarArray.leaves,
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_array_has_the_shared_members(kind):
    value = KINDS[kind](np.ones((2, 3)))
    members = [m for m in dir(ArrayLike) if not m.startswith("_") or m in ("__add__", "__matmul__", "__neg__")]
    missing = [m for m in members if not hasattr(value, m)]
    assert not missing, f"{kind} lacks {missing}"
    assert isinstance(value, ArrayLike)


def test_what_is_not_one_of_them_is_not_array_like():
    # The check discriminates: a bare numpy array has no name=, a Scalar no shape moves.
    assert not isinstance(np.ones(3), ArrayLike)
    assert not isinstance(mt.Scalar(1.0), ArrayLike)


def test_the_chain_is_annotated_with_it():
    hints = attention_chain.__annotations__
    assert hints["query"] == "ArrayLike" and hints["return"] == "ArrayLike"
