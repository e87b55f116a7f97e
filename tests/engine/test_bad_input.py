"""Bad input: a clear TypeError/ValueError naming what was wrong, and nothing half-done.

Each test asserts the exception *type* and that the message names the
offending thing (a type, a shape, an axis, an argument). A failed call must
leave the values and the tape as they were.
"""

import numpy as np
import pytest

import microtape as mt
from microtape.engine import record as _apply
from microtape.ops import Op

# ---------------------------------------------------------------- unsupported types


@pytest.mark.parametrize(
    "data, named",
    [
        (["a", "b"], "<U1"),
        ([object(), object()], "object"),
        (None, "object"),
        (np.array([1 + 2j]), "complex"),
    ],
    ids=["strings", "objects", "None", "complex"],
)
def test_tensor_of_non_numbers(data, named):
    """Tensor(strings / objects / None / complex) is a TypeError naming the dtype it got."""
    with pytest.raises(TypeError, match="Tensor") as info:
        mt.Tensor(data)
    assert named in str(info.value)


def test_tensor_bad_arguments():
    """requires_grad must be a bool; a Scalar is not array data."""
    with pytest.raises(TypeError, match="requires_grad"):
        mt.Tensor([1.0], requires_grad="yes")
    with pytest.raises(TypeError, match="Scalar"):
        mt.Tensor(mt.Scalar(1.0))


@pytest.mark.parametrize("value, named", [("a", "str"), (True, "bool"), ([1.0], "list"), (None, "NoneType")])
def test_scalar_of_non_numbers(value, named):
    """Scalar(non-number) is a TypeError naming the type."""
    with pytest.raises(TypeError, match="Scalar") as info:
        mt.Scalar(value)
    assert named in str(info.value)


def test_tensor_arithmetic_with_unsupported_types():
    """Tensor + "x", "x" + Tensor, Tensor * None, Tensor + Scalar: TypeError naming the other type."""
    t = mt.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match="str"):
        t + "x"
    with pytest.raises(TypeError, match="str"):
        "x" + t
    with pytest.raises(TypeError, match="NoneType"):
        t * None
    with pytest.raises(TypeError, match="Scalar"):
        t + mt.Scalar(1.0)
    with pytest.raises(TypeError, match="str"):
        t ** "2"  # (a Tensor exponent is an op of its own: power)
    with pytest.raises(TypeError, match="str"):
        t.scale("2")
    with pytest.raises(TypeError, match="dtype"):
        t + ["a", "b", "c"]


def test_scalar_arithmetic_with_unsupported_types():
    """Scalar + "x", Scalar + Tensor, Scalar ** "2": TypeError naming what was wrong."""
    a = mt.Scalar(1.0)
    with pytest.raises(TypeError, match="str"):
        a + "x"
    with pytest.raises(TypeError, match="str"):
        "x" * a
    with pytest.raises(TypeError, match="Tensor"):
        a + mt.Tensor(np.ones(2))
    with pytest.raises(TypeError, match="exponent"):
        a ** "2"  # (a Scalar exponent is the power op: tests/numpy_api/test_numpy_surface.py)


# ---------------------------------------------------------------- shapes


def test_shape_mismatch_in_add():
    """(2, 3) + (4,) is a ValueError naming both shapes, either way round."""
    a = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    b = mt.Tensor(np.ones(4), requires_grad=True)
    for fn in (lambda: a + b, lambda: b + a, lambda: a * np.ones(4), lambda: np.ones(4) - a):
        with pytest.raises(ValueError) as info:
            fn()
        message = str(info.value)
        assert "(2, 3)" in message and "(4,)" in message


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((2, 3), (2, 3)), ((2, 3, 4), (3, 5)), ((4,), (3,)), ((2, 3, 4), (3, 4, 5)), ((), (3,))],
    ids=str,
)
def test_shape_mismatch_in_matmul(shape_a, shape_b):
    """a @ b with incompatible shapes is a ValueError naming both shapes."""
    a = mt.Tensor(np.ones(shape_a), requires_grad=True)
    b = mt.Tensor(np.ones(shape_b), requires_grad=True)
    with pytest.raises(ValueError) as info:
        a @ b
    message = str(info.value)
    assert str(shape_a) in message and str(shape_b) in message


def test_constant_shape_mismatch():
    """add_constant and dropout with a constant of the wrong shape: ValueError naming both shapes."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as info:
        x.add_constant(np.zeros((4, 4)))
    assert "(4, 4)" in str(info.value) and "(2, 3)" in str(info.value)
    with pytest.raises(ValueError) as info:
        x.dropout(np.ones(3))
    assert "(3,)" in str(info.value) and "(2, 3)" in str(info.value)


def test_add_constant_mask_must_not_require_grad():
    """The mask of add_constant must be a constant: ValueError up front."""
    x = mt.Tensor(np.ones(3), requires_grad=True)
    mask = mt.Tensor(np.zeros(3), requires_grad=True)
    with pytest.raises(ValueError, match="constant"):
        x.add_constant(mask)


def test_dropout_keep_mask_must_not_require_grad():
    """The keep mask of dropout must be a constant: ValueError up front, as for add_constant.

    (Otherwise the call succeeds and the error only surfaces later, inside backward.)
    """
    x = mt.Tensor(np.ones(3), requires_grad=True)
    keep = mt.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match="keep"):
        x.dropout(keep)


@pytest.mark.parametrize("shape", [(4, -1), (5,), (-1, -1), (2, -2), (7, 1)], ids=str)
def test_reshape_to_an_impossible_shape(shape):
    """reshape to a shape that cannot hold the values is a ValueError naming both shapes."""
    t = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as info:
        t.reshape(shape)
    message = str(info.value)
    assert "(2, 3)" in message and str(shape[0]) in message


def test_reshape_with_a_non_integer_size():
    """reshape(2.5, 2) is a TypeError naming the bad size (not silently rounded to (2, 2))."""
    t = mt.Tensor(np.ones(4), requires_grad=True)
    with pytest.raises(TypeError, match="2.5"):
        t.reshape(2.5, 2)


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda t: t.sum(axis=2), "axis=2"),
        (lambda t: t.mean(axis=-3), "axis=-3"),
        (lambda t: t.max(axis=(0, 5)), "(0, 5)"),
        (lambda t: t.softmax(axis=2), "axis=2"),
        (lambda t: t.swapaxes(0, 2), "2"),
        (lambda t: t.transpose(0, 2), "(0, 2)"),
        (lambda t: t.transpose(0, 3), "(0, 3)"),
        (lambda t: t.transpose(0, -3), "(0, -3)"),
        (lambda t: t.transpose(1, 1), "(1, 1)"),
        (lambda t: t.transpose(0), "(0,)"),
    ],
    ids=[
        "sum",
        "mean",
        "max",
        "softmax",
        "swapaxes",
        "transpose-2",
        "transpose-3",
        "transpose-neg3",
        "transpose-dup",
        "transpose-short",
    ],
)
def test_bad_axis(call, named):
    """An axis out of range (or not a permutation) is a ValueError naming the axis and the shape."""
    t = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as info:
        call(t)
    message = str(info.value)
    assert named in message and "(2, 3)" in message


# ---------------------------------------------------------------- values outside the domain


def test_scalar_values_outside_the_domain():
    """Scalar.log(0) and (-1) ** 0.5 are ValueErrors naming the value, not NaN."""
    with pytest.raises(ValueError, match="0.0"):
        mt.Scalar(0.0).log()
    with pytest.raises(ValueError, match="-1.0"):
        mt.Scalar(-1.0) ** 0.5


def test_tensor_log_of_non_positive_values():
    """Tensor.log of an array with a non-positive entry is a ValueError, not NaNs passed on silently."""
    t = mt.Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    with pytest.raises(ValueError, match="log"):
        t.log()


def test_tensor_fractional_power_of_negative_values():
    """Tensor ** 0.5 of an array with a negative entry is a ValueError, like Scalar's."""
    t = mt.Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    with pytest.raises(ValueError, match="0.5"):
        t**0.5


# ---------------------------------------------------------------- backward


def test_backward_with_a_gradient_of_the_wrong_shape():
    """backward(grad) with the wrong shape is a ValueError naming both shapes."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    y = x.exp()
    with pytest.raises(ValueError) as info:
        y.backward(np.ones(3))
    assert "(3,)" in str(info.value) and "(2, 3)" in str(info.value)
    with pytest.raises(ValueError) as info:
        y.backward(np.ones((3, 2)))
    assert "(3, 2)" in str(info.value) and "(2, 3)" in str(info.value)


def test_backward_with_a_gradient_of_the_wrong_type():
    """A non-numeric grad for a Tensor, an array grad for a Scalar: TypeError naming the type."""
    y = mt.Tensor(np.ones(2), requires_grad=True).exp()
    with pytest.raises(TypeError, match="dtype"):
        y.backward(np.array(["a", "b"]))
    s = mt.Scalar(1.0).exp()
    with pytest.raises(TypeError, match="ndarray"):
        s.backward(np.ones(3))


def test_backward_on_something_not_requiring_grad():
    """backward on a result of constants only is a ValueError saying nothing requires a gradient."""
    c = mt.Tensor(np.ones(3))
    with pytest.raises(ValueError, match="requires_grad"):
        c.exp().sum().backward()
    with pytest.raises(ValueError, match="requires_grad"):
        c.backward()
    with mt.Tape() as tape:
        y = c * 2.0
    with pytest.raises(ValueError, match="requires_grad"):
        tape.backward(y)


def _raising_op():
    def vjp(g, ans, x):
        raise ArithmeticError("this VJP always fails")

    return Op("explode", lambda x: x * 1.0, vjp, ("x",), ("(fails)",), (r"\bar x = ?",))


def test_failed_backward_leaves_grads_untouched():
    """A backward that fails midway (after some VJPs ran) changes no .grad anywhere.

    y = explode(x * 2) + x * 3: the add and the `x * 3` steps run before the
    failing VJP, so a naive engine would already have added to x.grad.
    """
    explode = _raising_op()
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    x.grad = np.array([10.0, 20.0])
    for use_tape in (False, True):
        with mt.Tape() as tape:
            hidden = x * 2.0
            y = _apply(explode, (hidden,)) + x * 3.0
        length = len(tape)
        with pytest.raises(ArithmeticError):
            tape.backward(y) if use_tape else y.backward()
        np.testing.assert_array_equal(x.grad, [10.0, 20.0])
        assert hidden.grad is None and y.grad is None
        assert all(eq.output.grad is None for eq in tape)
        assert len(tape) == length


def test_failed_backward_from_a_bad_seed_leaves_grads_untouched():
    """A wrong-shape seed raises before anything is written."""
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    x.grad = np.array([1.0, 1.0])
    y = (x * x).sum(keepdims=True)
    with pytest.raises(ValueError):
        y.backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])
    assert y.grad is None


def test_failed_forward_leaves_the_tape_unchanged():
    """Ops that raise for bad input record nothing on the active tape."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with mt.Tape() as tape:
        y = x.exp()
        for bad in (
            lambda: x + "a",
            lambda: x @ np.ones((2, 3)),
            lambda: x + np.ones(4),
            lambda: x.reshape(5),
            lambda: x.sum(axis=3),
        ):
            with pytest.raises((TypeError, ValueError)):
                bad()
    assert tape.nodes == [y]
