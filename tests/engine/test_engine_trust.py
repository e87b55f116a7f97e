"""Trust, round 3 (issue 21), the engine: no silent wrong answer, no half-written state.

Each test is one case an adversarial user found: the pure reverse pass inside
a tape that opened midway, logsumexp's infinite edges, user-defined ops that
return junk, a ``.grad`` that cannot take a sum, seeds, ``t[[]]``, names,
the dtype rule and GELU far out. References are finite differences, hand
algebra and (for the edge values) what PyTorch 2.13 returns.
"""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import microtape as mt


@pytest.fixture(autouse=True)
def no_warnings():
    """Every case here must end in a value or a clear exception, never a numpy warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ---------------------------------------------------------------- gradients() inside a tape that opened midway


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


def test_gradients_of_a_scalar_graph_begun_before_the_tape():
    x = mt.Scalar(1.5, name="x")
    a = x * x
    with mt.Tape():
        y = a * x  # x³
        assert mt.gradients(y)[x] == pytest.approx(3 * 1.5**2, rel=1e-15)


def test_an_explicit_tape_still_treats_earlier_values_as_leaves():
    """``tape=`` (and Tape.backward) keep their documented meaning: what came before the tape is a leaf."""
    x = mt.Tensor(np.array(1.0), requires_grad=True)
    a = x * 3.0
    with mt.Tape() as tape:
        y = a * 2.0 + x
    g = mt.gradients(y, tape=tape)
    assert g[a] == 2.0 and g[x] == 1.0


# ---------------------------------------------------------------- logsumexp at its infinite edges


@pytest.mark.parametrize(
    "row, value",
    [
        # What torch.logsumexp gives (PyTorch 2.13, float64).
        ([-np.inf, -np.inf], -np.inf),
        ([np.inf, 1.0], np.inf),
        ([np.inf, -np.inf], np.inf),
        ([np.inf, np.inf], np.inf),
        ([-np.inf, 1.0], 1.0),
        ([np.nan, 1.0], np.nan),
    ],
)
def test_logsumexp_edge_values_are_pytorchs(row, value):
    x = mt.Tensor(np.array(row), requires_grad=True)
    result = x.logsumexp(axis=-1)
    np.testing.assert_array_equal(result.data, value)


def test_logsumexp_gradient_at_an_infinite_result_goes_to_the_max_entries():
    """Softmax's limit there: the entries equal to the max share g (PyTorch gives NaN; we say what it is)."""
    rows = np.array([[np.inf, 1.0, np.inf], [-np.inf, -np.inf, -np.inf], [0.5, -np.inf, 2.0]])
    x = mt.Tensor(rows, requires_grad=True)
    g = np.array([2.0, 3.0, 1.0])
    grads = mt.gradients(x.logsumexp(axis=1), g)[x]
    np.testing.assert_array_equal(grads[0], [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(grads[1], [1.0, 1.0, 1.0])
    finite = np.exp(rows[2] - np.log(np.exp(0.5) + np.exp(2.0)))  # the ordinary softmax, -inf gets 0
    np.testing.assert_allclose(grads[2], finite, rtol=1e-15)
    assert grads[2][1] == 0.0


def test_logsumexp_recorded_gradient_at_an_infinite_result_is_the_plain_one_and_differentiates():
    """create_graph=True gives the same max-share (not NaN), and a second derivative that is finite everywhere."""
    rows = np.array([[np.inf, 1.0, np.inf], [-np.inf, -np.inf, -np.inf], [0.5, -np.inf, 2.0]])
    x = mt.Tensor(rows, requires_grad=True)
    g = np.array([2.0, 3.0, 1.0])
    plain = mt.gradients(x.logsumexp(axis=1), g)[x]
    with np.errstate(all="raise"):  # not even an intermediate inf - inf on the tape
        recorded = mt.gradients(x.logsumexp(axis=1), g, create_graph=True)[x]
        np.testing.assert_array_equal(recorded.data, plain)
        v = np.array([[1.0, 2.0, 3.0]] * 3)
        second = mt.gradients((recorded * v).sum())[x]
    # The share is a constant of x in the infinite rows; the finite row is g · (diag(p) − p pᵀ) v.
    np.testing.assert_array_equal(second[:2], 0.0)
    p = plain[2] / g[2]
    np.testing.assert_allclose(second[2], g[2] * (p * v[2] - p * (p @ v[2])), rtol=1e-13, atol=1e-15)
    assert second[2][1] == 0.0


def test_logsumexp_edges_in_float32_keep_the_dtype_and_stay_quiet():
    x = mt.Tensor(np.array([[-np.inf, -np.inf], [np.inf, 3.0], [1.0, 2.0]], dtype=np.float32), requires_grad=True)
    y = x.logsumexp(axis=-1, keepdims=True)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data[:2, 0], [-np.inf, np.inf])
    y.backward(np.ones((3, 1)))
    assert x.grad.dtype == np.float32 and np.all(np.isfinite(x.grad))


def test_logsumexp_keepdims_must_be_a_bool():
    x = mt.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"logsumexp\(keepdims='x'\)"):
        x.logsumexp(keepdims="x")


# ---------------------------------------------------------------- user-defined ops: checked at the boundary


def _identity_op(define, forward=None, vjp=None, name="ident"):
    return define(
        name,
        forward=forward or (lambda x: x),
        vjp=vjp or (lambda g, y, x: (g,)),
        formula="{g}",
    )


@pytest.mark.parametrize(
    "junk",
    [
        None,
        "abc",
        np.array([1 + 2j, 3j]),
        np.array(["a", "b"]),
        np.array([object(), object()], dtype=object),
        [1.0, 2.0],
    ],
    ids=["None", "str", "complex", "str-array", "object-array", "list"],
)
def test_a_user_forward_returning_junk_is_refused_naming_the_op_and_not_recorded(define, junk):
    op = _identity_op(define, forward=lambda x: junk)
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    with mt.Tape() as tape:
        with pytest.raises(TypeError, match=r"op 'ident': its forward returned .*real"):
            op(x)
    assert len(tape) == 0


@pytest.mark.parametrize("junk", [None, "abc", 1 + 2j, np.array([1.0, 2.0]), True], ids=str)
def test_a_scalar_user_forward_returning_junk_names_the_op(define, junk):
    op = _identity_op(define, forward=lambda x: junk)
    with mt.Tape() as tape:
        with pytest.raises(TypeError, match=r"op 'ident': its forward returned .*on Scalars .* real number"):
            op(mt.Scalar(1.0))
    assert len(tape) == 0


def test_a_user_forward_returning_integers_gives_floats(define):
    op = _identity_op(define, forward=lambda x: np.round(x).astype(np.int64), name="rounded")
    y = op(mt.Tensor(np.array([1.4, 2.6], dtype=np.float32), requires_grad=True))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data, [1.0, 3.0])
    assert op(mt.Scalar(1.6)).data == 2.0


@pytest.mark.parametrize(
    "junk, error",
    [
        (lambda g: g.astype(complex), TypeError),
        (lambda g: "a gradient", TypeError),
        (lambda g: g.astype(object), TypeError),
        (lambda g: mt.Tensor(g), TypeError),
        (lambda g: list(g), TypeError),
        (lambda g: g[:1], ValueError),
        (lambda g: g > 0, TypeError),
    ],
    ids=["complex", "str", "object", "Tensor", "list", "shape", "bool"],
)
def test_a_user_vjp_returning_junk_is_refused_naming_op_and_input_and_writes_nothing(define, junk, error):
    op = _identity_op(define, vjp=lambda g, y, x: (junk(g),))
    x = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    before = np.array([5.0, 6.0])
    x.grad = before
    y = op(x).sum()
    with pytest.raises(error, match=r"op 'ident': its vjp returned .* input 'x'"):
        y.backward()
    assert x.grad is before and before.tolist() == [5.0, 6.0]


@pytest.mark.parametrize("junk", ["a gradient", 1j, np.ones(2), None], ids=str)
def test_a_scalar_user_vjp_returning_junk_is_refused(define, junk):
    op = _identity_op(define, vjp=lambda g, y, x: (junk,))
    a = mt.Scalar(1.0, name="a")
    with pytest.raises(TypeError, match=r"op 'ident'.* input 'x'"):
        op(a).backward()
    assert a.grad is None


def test_a_user_vjp_gradient_takes_its_inputs_dtype(define):
    op = _identity_op(define, vjp=lambda g, y, x: (np.asarray(g, dtype=np.float64) * 2,))
    x = mt.Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    op(x).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [2.0, 2.0]


def test_builtin_names_are_reserved_before_their_module_is_imported():
    """``tiled_attention`` is a built-in op: right after ``import microtape`` define() refuses its name."""
    script = (
        "import sys, microtape as mt\n"
        "try:\n"
        "    mt.ops.define('tiled_attention', forward=lambda x: x, vjp=lambda g, y, x: (g,), formula='{g}')\n"
        "except ValueError as error:\n"
        "    print('refused:', error)\n"
        "import microtape.nn.attention.tiled\n"
        "print(mt.ops.OPS['tiled_attention'].builtin)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refused: define('tiled_attention')" in done.stdout and "built-in" in done.stdout
    assert done.stdout.strip().endswith("True")


# ---------------------------------------------------------------- accumulation is all or nothing


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


def test_a_scalar_grad_set_to_a_string_is_named_at_backward():
    a, b = mt.Scalar(1.0, name="a"), mt.Scalar(2.0, name="b")
    a.grad, b.grad = 0.5, "zero"
    with pytest.raises(TypeError, match=r"Scalar\(b=2.*\) has \.grad = a str"):
        (a * b).backward()
    assert a.grad == 0.5


def test_accumulating_into_an_existing_grad_keeps_the_dtype():
    x = mt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    x.grad = np.zeros(2)  # float64, set by hand
    (x * np.float64(2.0)).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [2.0, 2.0]


# ---------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", [np.float32(2), np.float64(2), np.int64(2), np.array(2.0), 2], ids=repr)
def test_a_numpy_scalar_seed_is_fair_for_a_scalar(seed):
    a = mt.Scalar(3.0)
    y = a * a
    assert mt.gradients(y, seed)[a] == 12.0
    y.backward(seed)
    assert a.grad == 12.0 and a.grad.__class__ is float


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


# ---------------------------------------------------------------- small but user-visible


def test_indexing_with_an_empty_list_picks_nothing_as_numpy_does():
    data = np.arange(6.0).reshape(3, 2)
    x = mt.Tensor(data, requires_grad=True)
    picked = x[[]]
    assert picked.shape == data[[]].shape == (0, 2)
    picked.sum().backward()
    np.testing.assert_array_equal(x.grad, np.zeros((3, 2)))


def test_masked_index_arrays_are_refused():
    x = mt.Tensor(np.ones((3, 2)), requires_grad=True)
    masked = np.ma.masked_array([0, 1], mask=[False, True])
    with pytest.raises(TypeError, match="masked array"):
        x[masked]
    with pytest.raises(TypeError, match="masked array"):
        x[:, masked]
    with pytest.raises(TypeError, match="masked array"):
        x.take(masked)


def test_concatenate_of_one_tensor_takes_the_name_and_leaves_the_input_alone():
    x = mt.Tensor(np.ones(2), requires_grad=True, name="x")
    joined = mt.concatenate([x], name="joined")
    assert joined.name == "joined" and x.name == "x" and joined is not x
    np.testing.assert_array_equal(mt.gradients((joined * 3.0).sum())[x], [3.0, 3.0])
    assert mt.stack([x], name="stacked").name == "stacked"


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b),
    "matmul": lambda a, b: a @ b,
    "concatenate": lambda a, b: mt.concatenate([a, b]),
}


@pytest.mark.parametrize("name", BINARY)
def test_the_dtype_rule_a_gradient_has_the_dtype_of_its_value(name):
    """float32 with float64 computes in float64 (numpy's and PyTorch's promotion); each gradient keeps its own dtype."""
    rng = np.random.default_rng(0)
    small = mt.Tensor(rng.uniform(1, 2, (2, 2)).astype(np.float32), requires_grad=True)
    big = mt.Tensor(rng.uniform(1, 2, (2, 2)), requires_grad=True)
    result = BINARY[name](small, big)
    assert result.dtype == np.float64
    grads = mt.gradients(result.sum())
    assert grads[small].dtype == np.float32 and grads[big].dtype == np.float64
    # The same numbers as the all-float64 computation, rounded once.
    wide = mt.Tensor(small.data.astype(np.float64), requires_grad=True)
    expected = mt.gradients(BINARY[name](wide, big).sum())[wide]
    np.testing.assert_allclose(grads[small], expected, rtol=1e-7)
    result.sum().backward()
    assert small.grad.dtype == np.float32


def test_a_zero_dimensional_tensor_gets_an_array_gradient():
    x = mt.Tensor(np.array(2.0, dtype=np.float32), requires_grad=True)
    y = x * np.array(3.0) + x
    assert isinstance(mt.gradients(y)[x], np.ndarray)
    y.backward()
    assert isinstance(x.grad, np.ndarray) and x.grad.dtype == np.float32 and x.grad == 4.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_far_out_is_x_or_zero_without_warnings(dtype):
    huge = [1e104, -1e104, 1e200, -1e300, 1.7e308] if dtype == np.float64 else [1e13, -1e13, 3e38, -3e38]
    data = np.array([*huge, 25.0, -25.0], dtype=dtype)
    x = mt.Tensor(data, requires_grad=True)
    y = x.gelu()
    np.testing.assert_array_equal(y.data, np.where(data > 0, data, 0.0))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, (data > 0).astype(dtype))
    big = mt.Scalar(1e200)
    out = big.gelu()
    out.backward()
    assert out.data == 1e200 and big.grad == 1.0 and big.grad.__class__ is float


def test_gelu_inside_the_clip_is_the_formula_unchanged():
    data = np.linspace(-19.5, 19.5, 41)
    x = mt.Tensor(data, requires_grad=True)
    c, k = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(c * (data + k * data**3))
    np.testing.assert_allclose(x.gelu().data, 0.5 * data * (1 + t), rtol=1e-15, atol=1e-300)
    result = mt.check.gradcheck(lambda v: v.gelu().sum(), data[::4] / 4)
    assert result.ok
