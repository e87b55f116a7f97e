"""The reverse pass: gradients() and backward() — the order they follow, the seed, and all-or-nothing accumulation."""

import numpy as np
import pytest

import microtape as mt
from microtape.engine import record as _apply
from microtape.ops import Op

# ---------------------------------------------------------------- gradients() inside a tape that opened midway


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_gradients_inside_a_tape_that_opened_midway_follow_the_whole_graph():
    """y = 2·(3x) + x: dy/dx = 7 even though 3x was computed before the tape began (it used to give 1)."""
    x = mt.Tensor(np.array([1.0, -2.0]), requires_grad=True, name="x")
    a = x * 3.0
    with mt.Tape() as tape:
        y = (a * 2.0 + x).sum()
        grads = mt.gradients(y)
        stepped = mt.gradients(y, steps=True)
    np.testing.assert_array_equal(grads[x], [7.0, 7.0])
    np.testing.assert_array_equal(stepped[x], [7.0, 7.0])
    assert [step.equation.op.name for step in stepped.steps][-1] == "mul"  # the step before the tape is walked too
    assert len(tape) == 3  # the call recorded nothing
    # The same as backward(), which always followed the graph.
    y.backward()
    np.testing.assert_array_equal(x.grad, grads[x])


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_gradients_of_a_scalar_graph_begun_before_the_tape():
    x = mt.Scalar(1.5, name="x")
    a = x * x
    with mt.Tape():
        y = a * x  # x³
        assert mt.gradients(y)[x] == pytest.approx(3 * 1.5**2, rel=1e-15)


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_an_explicit_tape_still_treats_earlier_values_as_leaves():
    """``tape=`` (and Tape.backward) keep their documented meaning: what came before the tape is a leaf."""
    x = mt.Tensor(np.array(1.0), requires_grad=True)
    a = x * 3.0
    with mt.Tape() as tape:
        y = a * 2.0 + x
    g = mt.gradients(y, tape=tape)
    assert g[a] == 2.0 and g[x] == 1.0


# ---------------------------------------------------------------- accumulation is all or nothing


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize(
    "junk", ["a string", np.ones(3), np.array(["a", "b"]), [0.0, 0.0]], ids=["str", "shape", "str-array", "list"]
)
@pytest.mark.parametrize("bad_first", [True, False])
def test_a_grad_that_cannot_take_the_sum_fails_before_any_grad_is_written(junk, bad_first):
    a = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True, name="a")
    b = mt.Tensor(np.array([3.0, 4.0]), requires_grad=True, name="b")
    first, second = (b, a) if bad_first else (a, b)
    y = (first * 2.0 + second * 3.0).sum()
    kept = np.array([10.0, 20.0])
    a.grad, b.grad = kept, junk
    with pytest.raises(TypeError, match=r"backward: .*name='b'.* has \.grad = .*cannot take a gradient"):
        y.backward()
    assert a.grad is kept and kept.tolist() == [10.0, 20.0]
    assert b.grad is junk


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_a_scalar_grad_set_to_a_string_is_named_at_backward():
    a, b = mt.Scalar(1.0, name="a"), mt.Scalar(2.0, name="b")
    a.grad, b.grad = 0.5, "zero"
    with pytest.raises(TypeError, match=r"Scalar\(b=2.*\) has \.grad = a str"):
        (a * b).backward()
    assert a.grad == 0.5


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_accumulating_into_an_existing_grad_keeps_the_dtype():
    x = mt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    x.grad = np.zeros(2)  # float64, set by hand
    (x * np.float64(2.0)).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [2.0, 2.0]


# ---------------------------------------------------------------- seeds


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize("seed", [np.float32(2), np.float64(2), np.int64(2), np.array(2.0), 2], ids=repr)
def test_a_numpy_scalar_seed_is_fair_for_a_scalar(seed):
    a = mt.Scalar(3.0)
    y = a * a
    assert mt.gradients(y, seed)[a] == 12.0
    y.backward(seed)
    assert a.grad == 12.0 and a.grad.__class__ is float


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize("seed", [np.nan, np.inf, -np.inf])
def test_a_non_finite_seed_is_refused_and_writes_nothing(seed):
    a = mt.Scalar(3.0)
    with pytest.raises(ValueError, match=r"gradients\(grad=.*\): the seed gradient must be finite"):
        mt.gradients(a * a, seed)
    with pytest.raises(ValueError, match=r"backward\(grad=.*must be finite"):
        (a * a).backward(seed)
    assert a.grad is None
    x = mt.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match=r"must be finite, got .* at index \(1,\)"):
        (x * 2.0).backward(np.array([1.0, seed, 1.0]))
    assert x.grad is None


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_errors_name_the_entry_point_that_was_called():
    constant = mt.Tensor(np.ones(2)) * 2.0
    with pytest.raises(ValueError, match=r"^gradients\(\): .* does not require a gradient"):
        mt.gradients(constant)
    with pytest.raises(ValueError, match=r"^backward\(\): "):
        constant.backward()
    x = mt.Tensor(np.ones(2), requires_grad=True)
    with mt.Tape() as tape:
        y = x * 2.0
    with pytest.raises(ValueError, match=r"^gradients\(grad=\.\.\.\): grad has shape"):
        mt.gradients(y, np.ones(3))
    with pytest.raises(ValueError, match=r"^Tape\.backward\(grad=\.\.\.\): grad has shape"):
        tape.backward(y, np.ones(3))
    with pytest.raises(TypeError, match=r"^gradients\(output\)"):
        mt.gradients(np.ones(2))


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


def test_a_leaf_used_several_times_is_complete_at_its_last_step_of_the_pass():
    """completed_at (the reports' step column): a leaf used at tape steps 0, 2 and 3 is complete after step 0.

    The pass walks the tape backwards (3, 2, 1, 0), so a leaf's gradient is
    whole only after the last of its uses the pass reaches — the earliest on
    the tape — not at the first contribution it got.
    """
    a = mt.Tensor(np.array([0.5, -1.0]), requires_grad=True, name="a")
    b = mt.Tensor(np.array([2.0, 3.0]), requires_grad=True, name="b")
    with mt.Tape() as tape:
        first = a * b  # step 0: a's first use on the tape
        second = first.tanh()  # step 1
        third = second * a  # step 2
        total = (third + a).sum()  # steps 3 (add: a again) and 4 (sum)
    result = mt.gradients(total, tape=tape, steps=True)
    uses = [i for i, equation in enumerate(tape) if any(x is a for x in equation.inputs)]
    assert uses == [0, 2, 3]
    assert result.completed_at(a) == 0  # the pass's last visit, not its first (3)
    assert result.completed_at(b) == 0
    assert result.completed_at(second) == 1 and result.completed_at(total) == 4
    # Its gradient is complete there: the sum of the three contributions.
    np.testing.assert_allclose(result[a], b.data * (1 - np.tanh(a.data * b.data) ** 2) * a.data
                               + np.tanh(a.data * b.data) + 1.0, rtol=1e-14)  # fmt: skip
