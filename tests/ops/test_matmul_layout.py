"""matmul's fast layouts give the textbook numbers.

The forward runs a batch of rows times one matrix (``x @ W``) as one 2-D
product, and the VJP computes the gradient of a transposed matrix (``W.T``)
in the transposed layout, so the transpose after it is free. These
tests pin that the numbers are the textbook ones (to 1e-12 in float64) in
every layout, and that the layouts are the promised ones.
"""

import numpy as np
import pytest

import microtape as mt
from microtape import ops

RNG = np.random.default_rng(7)


def _operand(shape, transposed):
    """An array of ``shape``; ``transposed``: a swapaxes view of a C-ordered array (as ``W.T`` is)."""
    if not transposed:
        return RNG.standard_normal(shape)
    stored = RNG.standard_normal(shape[:-2] + (shape[-1], shape[-2]))
    return stored.swapaxes(-1, -2)


CASES = [
    ((3, 5, 4), (4, 6)),  # x @ W: a batch of rows times one matrix
    ((2, 3, 5, 4), (4, 6)),  # two batch axes
    ((6, 5, 4), (6, 4, 7)),  # batched, as Q Kᵀ and P V
    ((5, 4), (4, 6)),
    ((1, 5, 4), (3, 4, 6)),  # broadcast batch: the gradient of a sums over it
]


@pytest.mark.parametrize("a_shape, b_shape", CASES)
@pytest.mark.parametrize("a_transposed", [False, True])
@pytest.mark.parametrize("b_transposed", [False, True])
def test_matmul_forward_and_vjp_are_the_textbook_ones_in_every_layout(a_shape, b_shape, a_transposed, b_transposed):
    a, b = _operand(a_shape, a_transposed), _operand(b_shape, b_transposed)
    g = RNG.standard_normal(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1]))
    np.testing.assert_allclose(ops.matmul.forward(a, b), np.matmul(a, b), rtol=0, atol=1e-12)
    grad_a, grad_b = ops.matmul.vjp(g, np.matmul(a, b), a, b)
    expected_a = g @ np.swapaxes(b, -1, -2)
    expected_b = np.swapaxes(a, -1, -2) @ g
    # Sum the broadcast batch axes back to each operand's shape.
    expected_a = expected_a.reshape((-1,) + a_shape).sum(axis=0) if expected_a.shape != a_shape else expected_a
    expected_b = expected_b.reshape((-1,) + b_shape).sum(axis=0) if expected_b.shape != b_shape else expected_b
    assert grad_a.shape == a_shape and grad_b.shape == b_shape
    np.testing.assert_allclose(grad_a, expected_a, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad_b, expected_b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("a_shape, b_shape", [case for case in CASES if len(case[1]) == 2])
def test_the_gradient_of_a_transposed_matrix_comes_out_transposed(a_shape, b_shape):
    """``W.T``'s gradient is a transposed view of a C-ordered array (so ``W`` then gets a C-ordered one)."""
    a, b = _operand(a_shape, False), _operand(b_shape, True)
    g = RNG.standard_normal(a_shape[:-1] + (b_shape[-1],))
    _, grad_b = ops.matmul.vjp(g, a @ b, a, b)
    assert not grad_b.flags.c_contiguous and np.swapaxes(grad_b, -1, -2).flags.c_contiguous
    _, grad_plain = ops.matmul.vjp(g, a @ b, a, np.ascontiguousarray(b))
    assert grad_plain.flags.c_contiguous


def test_attention_weights_get_c_ordered_gradients():
    """The projections' ``W.T`` rows hand each weight a C-ordered gradient (a plain sum into ``.grad``)."""
    attn = mt.nn.MultiHeadAttention(8, 2, seed=0)
    x = RNG.standard_normal((2, 5, 8))
    attn(x)
    attn.backward(RNG.standard_normal((2, 5, 8)))
    for name, parameter in attn.named_parameters():
        assert parameter.grad.flags.c_contiguous, name
    # ...because each W.T row's gradient came out in W.T's own, transposed, layout.
    transposes = [node for node in attn.tape.nodes if node.op is not None and node.op.name == "transpose"]
    transposes = [node for node in transposes if node.data.ndim == 2]
    assert len(transposes) == 4 and all(np.swapaxes(node.grad, -1, -2).flags.c_contiguous for node in transposes)
