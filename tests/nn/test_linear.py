"""Linear: ``y = x Wᵀ + b`` on any leading shape, taped and analytic.

References are plain numpy written here (``einsum``), hand algebra for the
gradients (``dx = g W``, ``dW = Σ gᵀ x``, ``db = Σ g``) and central finite
differences (:func:`microtape.check.gradcheck`).
"""

import numpy as np
import pytest

import microtape as mt

LEADING_SHAPES = [(), (5,), (2, 3), (2, 1, 4)]


def reference_forward(x, weight, bias):
    """``y[..., o] = Σ_i x[..., i] W[o, i] + b[o]`` written index by index."""
    y = np.einsum("...i,oi->...o", x, weight)
    return y if bias is None else y + bias


def reference_backward(g, x, weight):
    """Hand algebra: ``dx = g W``, ``dW = Σ_rows gᵀ x``, ``db = Σ_rows g``."""
    dx = np.einsum("...o,oi->...i", g, weight)
    rows_g, rows_x = g.reshape(-1, g.shape[-1]), x.reshape(-1, x.shape[-1])
    dw = np.einsum("ro,ri->oi", rows_g, rows_x)
    db = rows_g.sum(axis=0)
    return dx, dw, db


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.mark.parametrize("leading", LEADING_SHAPES)
def test_forward_shape_and_values(leading, rng):
    """Any leading shape: output ``[..., out]`` equal to ``x Wᵀ + b``."""
    layer = mt.nn.Linear(3, 4, seed=0)
    x = rng.standard_normal(leading + (3,))
    y = layer(x)
    assert isinstance(y, mt.Tensor)
    assert y.shape == leading + (4,)
    np.testing.assert_allclose(y.data, reference_forward(x, layer.weight.data, layer.bias.data), rtol=1e-14, atol=1e-14)


def test_parameter_shapes_follow_pytorch():
    """weight is ``[out, in]``, bias ``[out]``; named_parameters lists both in order."""
    layer = mt.nn.Linear(5, 2, seed=0)
    assert layer.weight.shape == (2, 5)
    assert layer.bias.shape == (2,)
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
    assert layer.parameters() == [layer.weight, layer.bias]
    assert all(p.requires_grad for p in layer.parameters())


@pytest.mark.parametrize("leading", LEADING_SHAPES)
def test_taped_gradients_match_hand_algebra(leading, rng):
    """``y.backward(g)`` fills x.grad, weight.grad, bias.grad with the hand formulas."""
    layer = mt.nn.Linear(3, 4, seed=1)
    x = mt.Tensor(rng.standard_normal(leading + (3,)), requires_grad=True)
    g = rng.standard_normal(leading + (4,))
    layer(x).backward(g)
    dx, dw, db = reference_backward(g, x.data, layer.weight.data)
    np.testing.assert_allclose(x.grad, dx, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(layer.weight.grad, dw, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(layer.bias.grad, db, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("leading", LEADING_SHAPES)
def test_analytic_backward_matches_taped(leading, rng):
    """``layer.backward(g)`` (analytic) returns dx and adds the same dW, db as the tape."""
    x = rng.standard_normal(leading + (3,))
    g = rng.standard_normal(leading + (4,))
    taped = mt.nn.Linear(3, 4, seed=2)
    x_taped = mt.Tensor(x, requires_grad=True)
    taped(x_taped).backward(g)

    analytic = mt.nn.Linear(3, 4, seed=2)
    analytic(x)
    dx = analytic.backward(g)
    np.testing.assert_allclose(dx, x_taped.grad, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(analytic.weight.grad, taped.weight.grad, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(analytic.bias.grad, taped.bias.grad, rtol=1e-13, atol=1e-13)


def test_gradcheck_input_weight_and_bias(rng):
    """Finite differences agree with the taped gradient for x, W and b."""
    layer = mt.nn.Linear(3, 2, seed=3)

    def fn(x, weight, bias):
        layer.weight, layer.bias = weight, bias  # the perturbed parameters are the layer's
        return layer(x)

    result = mt.check.gradcheck(
        fn, rng.standard_normal((2, 4, 3)), layer.weight.data, layer.bias.data, atol=1e-8, rtol=1e-6
    )
    assert result.ok, str(result)
    assert result.checked == 2 * 4 * 3 + 2 * 3 + 2


def test_analytic_backward_against_finite_differences(rng):
    """The analytic route's dW and db equal central differences of ``Σ g ⊙ y``."""
    layer = mt.nn.Linear(3, 2, seed=4)
    x = rng.standard_normal((4, 3))
    g = rng.standard_normal((4, 2))
    layer(x)
    layer.backward(g)
    eps = 1e-6
    for param in layer.parameters():
        numeric = np.zeros_like(param.data)
        for index in np.ndindex(param.shape):
            saved = param.data[index]
            param.data[index] = saved + eps
            plus = np.sum(g * layer(x).data)
            param.data[index] = saved - eps
            minus = np.sum(g * layer(x).data)
            param.data[index] = saved
            numeric[index] = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(param.grad, numeric, rtol=1e-7, atol=1e-8)


def test_analytic_backward_accumulates_and_zero_grad_clears(rng):
    """Two backward calls add up; ``zero_grad`` sets the grads back to None."""
    layer = mt.nn.Linear(3, 2, seed=5)
    x, g = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    layer(x)
    layer.backward(g)
    once = layer.weight.grad.copy(), layer.bias.grad.copy()
    layer.backward(g)
    np.testing.assert_allclose(layer.weight.grad, 2 * once[0], rtol=1e-14)
    np.testing.assert_allclose(layer.bias.grad, 2 * once[1], rtol=1e-14)
    layer.zero_grad()
    assert layer.weight.grad is None and layer.bias.grad is None


def test_init_is_uniform_within_one_over_sqrt_in():
    """PyTorch's default init: every entry in ``[-1/√in, 1/√in]``, spread over that range."""
    layer = mt.nn.Linear(64, 200, seed=0)
    bound = 1 / np.sqrt(64)
    for tensor in (layer.weight.data, layer.bias.data):
        assert np.all(np.abs(tensor) <= bound)
        assert tensor.max() > 0.9 * bound and tensor.min() < -0.9 * bound
    w = layer.weight.data
    assert abs(w.mean()) < 0.05 * bound
    # The variance of U(-a, a) is a²/3.
    assert w.var() == pytest.approx(bound**2 / 3, rel=0.05)


def test_seed_reproduces_and_differs():
    """The same seed gives the same weights; another seed different ones."""
    a, b, c = mt.nn.Linear(4, 3, seed=7), mt.nn.Linear(4, 3, seed=7), mt.nn.Linear(4, 3, seed=8)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    np.testing.assert_array_equal(a.bias.data, b.bias.data)
    assert not np.array_equal(a.weight.data, c.weight.data)


def test_no_bias(rng):
    """``bias=False``: no bias parameter, ``y = x Wᵀ``, backward fills only weight.grad."""
    layer = mt.nn.Linear(3, 2, bias=False, seed=0)
    assert layer.bias is None
    assert [name for name, _ in layer.named_parameters()] == ["weight"]
    x, g = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    y = layer(x)
    np.testing.assert_allclose(y.data, reference_forward(x, layer.weight.data, None), rtol=1e-14)
    dx = layer.backward(g)
    ref_dx, ref_dw, _ = reference_backward(g, x, layer.weight.data)
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-13)
    np.testing.assert_allclose(layer.weight.grad, ref_dw, rtol=1e-13)


def test_float32_parameters_and_output(rng):
    """A float32 layer keeps float32 weights and output, and casts float64 input."""
    layer = mt.nn.Linear(3, 2, seed=0, dtype=np.float32)
    assert layer.weight.dtype == np.float32 and layer.bias.dtype == np.float32
    x = rng.standard_normal((4, 3))
    y = layer(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.data, reference_forward(x, layer.weight.data, layer.bias.data), rtol=1e-5, atol=1e-6)


def test_float32_taped_gradients_stay_float32(rng):
    """Taped backward in a float32 layer leaves float32 gradients."""
    layer = mt.nn.Linear(3, 2, seed=0, dtype=np.float32)
    layer(rng.standard_normal((4, 3))).backward(rng.standard_normal((4, 2)))
    assert layer.weight.grad.dtype == np.float32
    assert layer.bias.grad.dtype == np.float32


def test_float32_analytic_gradients_stay_float32(rng):
    """Analytic backward in a float32 layer leaves float32 gradients, even for a float64 grad_output.

    (The tape and ``MultiHeadAttention.backward`` both cast the incoming
    gradient to the layer's dtype; ``Linear.backward`` must too.)
    """
    layer = mt.nn.Linear(3, 2, seed=0, dtype=np.float32)
    layer(rng.standard_normal((4, 3)))
    dx = layer.backward(rng.standard_normal((4, 2)))
    assert dx.dtype == np.float32
    assert layer.weight.grad.dtype == np.float32
    assert layer.bias.grad.dtype == np.float32


def test_on_an_enclosing_tape(rng):
    """Inside ``mt.Tape()`` the layer records a matmul and an add."""
    layer = mt.nn.Linear(3, 2, seed=0)
    x = mt.Tensor(rng.standard_normal((4, 3)), requires_grad=True)
    with mt.Tape() as tape:
        y = layer(x)
    assert any(node is y for node in tape.nodes)
    assert {eq.op.name for eq in tape} >= {"matmul", "add"}


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("argument", ["in_features", "out_features"])
@pytest.mark.parametrize("value", [0, -2, 2.5, True])
def test_bad_sizes(argument, value):
    """Non-positive, non-integer or bool sizes: ValueError naming the argument and value."""
    kwargs = {"in_features": 3, "out_features": 2, argument: value}
    with pytest.raises(ValueError, match=argument) as info:
        mt.nn.Linear(**kwargs)
    assert repr(value) in str(info.value)


def test_bad_dtype():
    """Only float32 and float64 parameters."""
    with pytest.raises(ValueError, match="dtype"):
        mt.nn.Linear(3, 2, dtype=np.int64)


def test_wrong_last_axis_names_the_shape():
    """An input whose last axis is not in_features: ValueError with the shape and expectation."""
    layer = mt.nn.Linear(3, 2, seed=0)
    with pytest.raises(ValueError, match=r"\(4, 5\)") as info:
        layer(np.ones((4, 5)))
    assert "in_features=3" in str(info.value)


def test_non_array_input():
    """A list is refused with a TypeError naming its type."""
    with pytest.raises(TypeError, match="list"):
        mt.nn.Linear(3, 2, seed=0)([1.0, 2.0, 3.0])


def test_backward_before_forward():
    """Analytic backward with no forward yet: RuntimeError."""
    with pytest.raises(RuntimeError, match="forward"):
        mt.nn.Linear(3, 2, seed=0).backward(np.ones((1, 2)))


def test_backward_wrong_shape_leaves_grads_alone(rng):
    """A grad_output of the wrong shape: ValueError with both shapes; grads unchanged."""
    layer = mt.nn.Linear(3, 2, seed=0)
    layer(rng.standard_normal((4, 3)))
    layer.backward(np.ones((4, 2)))
    before = layer.weight.grad.copy()
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(4, 2\)"):
        layer.backward(np.ones((4, 3)))
    np.testing.assert_array_equal(layer.weight.grad, before)


def test_tensor_input_of_another_dtype_stays_connected(rng):
    """A float32 ``Tensor(requires_grad=True)`` into a float64 layer still receives its gradient.

    (Or the call is refused with a clear dtype error: a silent cut is the bug.)
    """
    layer = mt.nn.Linear(3, 2, seed=0)
    x = mt.Tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    g = rng.standard_normal((4, 2))
    try:
        y = layer(x)
    except (TypeError, ValueError) as error:
        assert "dtype" in str(error) or "float32" in str(error), str(error)
        return
    y.backward(g)
    assert x.grad is not None, "the float32 input received no gradient: the cast cut it off the graph"
    np.testing.assert_allclose(x.grad, g @ layer.weight.data, rtol=1e-5, atol=1e-6)
