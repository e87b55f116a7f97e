"""Cross-check microtape against PyTorch, using committed fixtures (no torch needed).

The fixtures in ``tests/golden/*.npz`` were made by PyTorch with
``tests/golden/make_golden.py``.  Here microtape recomputes every output and
gradient and must agree to 1e-10 (float64):

* the named expressions of ``tests/golden/expressions.py`` (on ``mt.Tensor``
  and ``mt.Scalar``), with and without an explicit ``mt.Tape``;
* ``mt.nn.MultiHeadAttention`` against ``torch.nn.MultiheadAttention`` with
  the same weights: output, per-head attention weights, input gradients and
  parameter gradients, with the backward pass run from the tape and from the
  analytic formulas.

``tests/nn/test_torch_live.py`` repeats these checks with torch computing the
references live (and checks that these fixtures are up to date).
"""

import numpy as np
import pytest
from golden.attention_cases import ATTENTION_CASES, make_case  # noqa: E402
from golden.expressions import EXPRESSIONS, EXPRESSIONS_BY_NAME  # noqa: E402
from golden.load import (  # noqa: E402
    ATTENTION_FILE,
    EXPRESSIONS_FILE,
    attention_case_names,
    load_attention_case,
    load_expression_fixtures,
)
from golden.run_microtape import (  # noqa: E402
    attention_forward,
    build_attention,
    check_attention,
    check_attention_forward,
    check_expression,
    check_tiled_attention,
)

import microtape as mt

EXPRESSION_NAMES = [expression.name for expression in EXPRESSIONS]
ATTENTION_NAMES = attention_case_names()
SELF_ATTENTION_NAMES = [case["name"] for case in ATTENTION_CASES if case["kind"] == "self"]


# --------------------------------------------------------------------------
# The fixtures themselves
# --------------------------------------------------------------------------


def test_fixture_files_are_small():
    """The committed fixtures stay well under 1 MB in total."""
    total = EXPRESSIONS_FILE.stat().st_size + ATTENTION_FILE.stat().st_size
    assert total < 1_000_000


def test_expression_fixtures_match_definitions():
    """Every expression has a fixture, made from the inputs its generator gives now.

    Fails if someone edits ``expressions.py`` without re-running make_golden.py.
    """
    fixtures = load_expression_fixtures()
    assert list(fixtures) == EXPRESSION_NAMES
    for expression in EXPRESSIONS:
        for stored, fresh in zip(fixtures[expression.name]["inputs"], expression.make_inputs(), strict=True):
            np.testing.assert_array_equal(stored, fresh)


def test_attention_fixtures_match_definitions():
    """Every attention case has a fixture, made from the data its seed gives now."""
    assert ATTENTION_NAMES == [case["name"] for case in ATTENTION_CASES]
    for config in ATTENTION_CASES:
        stored = load_attention_case(config["name"])
        fresh = make_case(config)
        assert stored["config"] == config
        for group in ("inputs", "params"):
            for key, array in fresh[group].items():
                np.testing.assert_array_equal(stored[group][key], array)
        np.testing.assert_array_equal(stored["grad_output"], fresh["grad_output"])
        for key in ("mask", "torch_mask"):
            if fresh[key] is None:
                assert stored[key] is None
            else:
                np.testing.assert_array_equal(stored[key], fresh[key])


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


@pytest.mark.parametrize("use_tape", [False, True], ids=["no_tape", "in_tape"])
@pytest.mark.parametrize("name", EXPRESSION_NAMES)
def test_expression_matches_torch(name, use_tape):
    """Output and every input gradient of a named expression equal torch's."""
    reference = load_expression_fixtures()[name]
    check_expression(mt, EXPRESSIONS_BY_NAME[name], reference, use_tape=use_tape)


# --------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_attention_forward_matches_torch(name):
    """Output ``[B, Tq, E]`` and per-head weights ``[B, H, Tq, Tk]`` equal torch's."""
    case = load_attention_case(name)
    attn = build_attention(mt, case)
    output = attention_forward(attn, case)
    check_attention_forward(attn, case, output)


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_attention_backward_matches_torch(name, method):
    """Input and parameter gradients equal torch's, by tape replay and by formula."""
    check_attention(mt, load_attention_case(name), method=method)


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_attention_second_pass_after_zero_grad(name, method):
    """Forward + backward, then a fresh forward, ``zero_grad()`` and backward again:
    the second pass's gradients must equal torch's (nothing left over)."""
    check_attention(mt, load_attention_case(name), method=method, after_tape_pass=True)


@pytest.mark.parametrize("name", SELF_ATTENTION_NAMES)
def test_self_attention_same_object_three_times(name):
    """``attn(x, x, x)`` with one object is self-attention: same results as ``attn(x)``."""
    case = load_attention_case(name)
    attn = build_attention(mt, case)
    output = attention_forward(attn, case, self_call="same_object")
    check_attention_forward(attn, case, output)
    returned_grad = attn.backward(case["grad_output"])
    np.testing.assert_allclose(np.asarray(returned_grad), case["input_grads"]["x"], rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------
# The tiled (flash) path against the same fixtures
# --------------------------------------------------------------------------

# Blocks of 1 (every tile one score), 2 and 3 (not dividing most lengths), 16 (larger than every T).
BLOCK_SIZES = [1, 2, 3, 16]


@pytest.mark.parametrize("method", ["tape", "analytic"])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_tiled_attention_matches_torch(name, block_size, method):
    """The tiled kernel: output, recomputed weights, input and parameter gradients equal torch's (1e-10)."""
    check_tiled_attention(mt, load_attention_case(name), block_size, method)
