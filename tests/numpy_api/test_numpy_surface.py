"""The numpy surface a course uses, end to end: ``mt.<name>`` and the Tensor methods against numpy.

Each function is called as a student would (``mt.sin(x)``, ``mt.pad(x, 1,
mode="reflect")``): its value must equal numpy's own function on the same
array (the reference for the forward), and its taped gradient must equal
central finite differences (``mt.check.gradcheck``, float64). The ops
beneath are held one by one in test_ops.py; this holds the wiring — the
keywords, the functions built from several ops (``pad``, ``tile``, ``var``,
``dot``, ``einsum`` of three operands) and the refusals.
"""

import numpy as np
import pytest

import microtape as mt
from microtape.check import gradcheck

RNG = np.random.default_rng(28)


def _draw(shape, domain="real"):
    if domain == "positive":
        return RNG.uniform(0.5, 2.0, shape)
    if domain == "unit":
        return RNG.uniform(-0.9, 0.9, shape)
    return RNG.standard_normal(shape)


# (mt function, numpy function, input shapes, domain): the same call on both sides.
CASES = {
    **{
        name: (getattr(mt, name), getattr(np, name), [(2, 3)], domain)
        for name, domain in [
            ("sin", "real"), ("cos", "real"), ("tan", "unit"), ("arcsin", "unit"), ("arccos", "unit"),
            ("arctan", "real"), ("sinh", "real"), ("cosh", "real"), ("log1p", "positive"), ("expm1", "real"),
            ("log2", "positive"), ("log10", "positive"), ("exp2", "real"), ("cbrt", "real"), ("square", "real"),
            ("reciprocal", "positive"), ("exp", "real"), ("log", "positive"), ("sqrt", "positive"), ("tanh", "real"),
            ("abs", "real"),
        ]
    },
    "clip": (lambda x: mt.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), [(3, 4)], "real"),
    "logaddexp": (mt.logaddexp, np.logaddexp, [(2, 3), (3,)], "real"),
    "arctan2": (mt.arctan2, np.arctan2, [(2, 3), (2, 1)], "real"),
    "power": (mt.power, np.power, [(2, 3), (3,)], "positive"),
    "power_operator": (lambda a, b: a**b, lambda a, b: a**b, [(3,), (2, 3)], "positive"),
    "rpow": (lambda x: 2.0**x, lambda x: 2.0**x, [(3,)], "real"),
    "maximum": (mt.maximum, np.maximum, [(2, 3), (3,)], "real"),
    "where": (
        lambda a, b: mt.where(np.array([True, False, True]), a, b),
        lambda a, b: np.where(np.array([True, False, True]), a, b),
        [(2, 3), (2, 1)],
        "real",
    ),
    "sum_tuple": (lambda x: mt.sum(x, axis=(0, 2)), lambda x: np.sum(x, axis=(0, 2)), [(2, 3, 2)], "real"),
    "min": (lambda x: mt.min(x, axis=1), lambda x: np.min(x, axis=1), [(3, 4)], "real"),
    "max_keepdims": (lambda x: x.max(axis=0, keepdims=True), lambda x: x.max(axis=0, keepdims=True), [(3, 4)], "real"),
    "prod": (lambda x: mt.prod(x, axis=(0, 2)), lambda x: np.prod(x, axis=(0, 2)), [(2, 3, 2)], "real"),
    "prod_all": (mt.prod, np.prod, [(2, 3)], "real"),
    "var_ddof": (lambda x: mt.var(x, axis=1, ddof=1), lambda x: np.var(x, axis=1, ddof=1), [(3, 4)], "real"),
    "std_ddof": (lambda x: x.std(ddof=1), lambda x: np.std(x, ddof=1), [(3, 4)], "real"),
    "std_axis": (lambda x: mt.std(x, axis=0), lambda x: np.std(x, axis=0), [(3, 4)], "real"),
    "norm": (lambda x: mt.norm(x, axis=-1), lambda x: np.linalg.norm(x, axis=-1), [(3, 4)], "real"),
    "norm_all": (mt.norm, np.linalg.norm, [(3, 4)], "real"),
    "cumsum": (lambda x: mt.cumsum(x, axis=0), lambda x: np.cumsum(x, axis=0), [(3, 4)], "real"),
    "cumsum_flat": (mt.cumsum, np.cumsum, [(2, 3)], "real"),
    "cumprod": (lambda x: mt.cumprod(x, axis=1), lambda x: np.cumprod(x, axis=1), [(3, 4)], "real"),
    "logsumexp_all": (
        lambda x: mt.logsumexp(x, axis=None),
        lambda x: np.log(np.sum(np.exp(x))),
        [(2, 3)],
        "real",
    ),
    "squeeze": (lambda x: mt.squeeze(x, axis=1), lambda x: np.squeeze(x, axis=1), [(3, 1, 2)], "real"),
    "squeeze_all": (mt.squeeze, np.squeeze, [(1, 3, 1)], "real"),
    "expand_dims": (lambda x: mt.expand_dims(x, (0, 3)), lambda x: np.expand_dims(x, (0, 3)), [(2, 3)], "real"),
    "broadcast_to": (
        lambda x: mt.broadcast_to(x, (2, 3, 4)),
        lambda x: np.broadcast_to(x, (2, 3, 4)),
        [(3, 1)],
        "real",
    ),
    "flip": (lambda x: mt.flip(x, axis=1), lambda x: np.flip(x, axis=1), [(2, 3)], "real"),
    "flip_all": (mt.flip, np.flip, [(2, 3)], "real"),
    "repeat": (lambda x: mt.repeat(x, 2, axis=1), lambda x: np.repeat(x, 2, axis=1), [(2, 3)], "real"),
    "repeat_counts": (lambda x: x.repeat([1, 0, 3]), lambda x: np.repeat(x, [1, 0, 3]), [(3,)], "real"),
    "tile": (lambda x: mt.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)), [(2, 3)], "real"),
    "transpose": (lambda x: mt.transpose(x, (2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)), [(2, 3, 4)], "real"),
    "pad_constant": (
        lambda x: mt.pad(x, ((1, 0), (2, 1)), constant_values=0.5),
        lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=0.5),
        [(2, 3)],
        "real",
    ),
    **{
        f"pad_{mode}": (
            lambda x, mode=mode: mt.pad(x, (2, 1), mode=mode),
            lambda x, mode=mode: np.pad(x, (2, 1), mode=mode),
            [(3, 4)],
            "real",
        )
        for mode in ("edge", "reflect", "symmetric", "wrap")
    },
    "split": (
        lambda x: mt.concatenate([p * (i + 1) for i, p in enumerate(mt.split(x, [1, 3], axis=1))], axis=1),
        lambda x: np.concatenate([p * (i + 1) for i, p in enumerate(np.split(x, [1, 3], axis=1))], axis=1),
        [(2, 4)],
        "real",
    ),
    "stack": (lambda a, b: mt.stack([a, b], axis=2), lambda a, b: np.stack([a, b], axis=2), [(2, 3)] * 2, "real"),
    "concatenate_axis1": (
        lambda a, b: mt.concatenate([a, b], axis=1),
        lambda a, b: np.concatenate([a, b], axis=1),
        [(2, 3), (2, 2)],
        "real",
    ),
    "einsum_one": (lambda x: mt.einsum("ij->ji", x), lambda x: np.einsum("ij->ji", x), [(2, 3)], "real"),
    "einsum_sum": (lambda x: mt.einsum("ijk->j", x), lambda x: np.einsum("ijk->j", x), [(2, 3, 2)], "real"),
    "einsum_two": (
        lambda a, b: mt.einsum("bij,bjk->bik", a, b),
        lambda a, b: np.einsum("bij,bjk->bik", a, b),
        [(2, 3, 4), (2, 4, 2)],
        "real",
    ),
    "einsum_implicit": (
        lambda a, b: mt.einsum("ij,jk", a, b), lambda a, b: np.einsum("ij,jk", a, b), [(2, 3), (3, 2)], "real"
    ),
    "einsum_three": (
        lambda a, b, c: mt.einsum("ij,jk,kl->il", a, b, c),
        lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c),
        [(2, 3), (3, 4), (4, 2)],
        "real",
    ),
    "einsum_three_shared": (
        lambda a, b, c: mt.einsum("i,ij,j->", a, b, c),
        lambda a, b, c: np.einsum("i,ij,j->", a, b, c),
        [(3,), (3, 2), (2,)],
        "real",
    ),
    "dot_vectors": (mt.dot, np.dot, [(3,), (3,)], "real"),
    "dot_matrices": (mt.dot, np.dot, [(2, 3), (3, 4)], "real"),
    "dot_nd": (mt.dot, np.dot, [(2, 2, 3), (4, 3, 2)], "real"),
    "dot_nd_vector": (mt.dot, np.dot, [(2, 2, 3), (3,)], "real"),
    "dot_number": (mt.dot, np.dot, [(), (2, 3)], "real"),
    "outer": (mt.outer, np.outer, [(2, 2), (3,)], "real"),
    "matmul": (mt.matmul, np.matmul, [(2, 3), (3,)], "real"),
    "softmax_tuple": (
        lambda x: mt.softmax(x, axis=(0, 1)),
        lambda x: np.exp(x) / np.exp(x).sum(axis=(0, 1), keepdims=True),
        [(2, 3, 2)],
        "real",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_equals_numpy_and_gradient_equals_finite_differences(name):
    mt_fn, np_fn, shapes, domain = CASES[name]
    arrays = [_draw(shape, domain) for shape in shapes]
    tensors = [mt.Tensor(a.copy(), requires_grad=True) for a in arrays]
    out = mt_fn(*tensors)
    assert isinstance(out, mt.Tensor) and out.requires_grad, name
    np.testing.assert_allclose(out.data, np_fn(*arrays), rtol=1e-12, atol=1e-13, err_msg=name)
    result = gradcheck(mt_fn, *arrays, atol=1e-7, rtol=1e-6)
    assert result, f"{name}: {result}"


def test_unary_plus_is_the_tensor_itself():
    x = mt.Tensor(np.array([1.0, -2.0]), requires_grad=True)
    assert +x is x
    (+x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_a_tensor_exponent_gets_x_to_the_y_times_ln_x():
    """d/dy x**y = x**y ln x (hand algebra); at x = 0 PyTorch's 0; a negative base is refused by name."""
    x = mt.Tensor(np.array([2.0, 0.0, 3.0]), requires_grad=True)
    y = mt.Tensor(np.array([1.5, 2.0, 0.0]), requires_grad=True)
    (x**y).sum().backward()
    np.testing.assert_allclose(y.grad, [2.0**1.5 * np.log(2.0), 0.0, np.log(3.0)], rtol=1e-14)
    np.testing.assert_allclose(x.grad, [1.5 * 2.0**0.5, 0.0, 0.0], rtol=1e-14)
    exponent = mt.Tensor(np.array([1.5, 2.0]), requires_grad=True)
    with mt.Tape() as tape, pytest.raises(ValueError, match=r"base is -1\.0 at index \(1,\).*ln"):
        mt.Tensor(np.array([1.0, -1.0])) ** exponent
    assert len(tape) == 0
    with pytest.raises(ValueError, match="negative power of 0"):
        mt.Tensor(np.array([0.0])) ** mt.Tensor(np.array([-1.0]))
    # A constant exponent array with a negative base is fine where the powers are integers (no ln needed).
    z = mt.Tensor(np.array([-2.0, 3.0]), requires_grad=True)
    np.testing.assert_array_equal((z ** np.array([2.0, 3.0])).data, [4.0, 27.0])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mt.arcsin(mt.Tensor([0.5, 1.5])), r"arcsin of 1\.5 at index \(1,\).*\[-1, 1\]"),
        (lambda: mt.arccos(mt.Tensor([-2.0])), r"arccos of -2\.0"),
        (lambda: mt.log1p(mt.Tensor([-1.0])), r"log1p of -1\.0.*> -1"),
        (lambda: mt.log2(mt.Tensor([0.0])), r"log2 of 0\.0"),
        (lambda: mt.log10(mt.Tensor([-3.0])), r"log10 of -3\.0"),
        (lambda: mt.reciprocal(mt.Tensor([2.0, 0.0])), r"reciprocal of 0\.0 at index \(1,\)"),
        (lambda: mt.var(mt.Tensor([1.0, 2.0]), ddof=2), r"n - ddof = 0"),
        (lambda: mt.var(mt.Tensor([1.0, 2.0]), ddof=-1), r"ddof=-1"),
        (lambda: mt.clip(mt.Tensor([1.0])), r"lower, upper or both"),
        (lambda: mt.clip(mt.Tensor([1.0]), 2.0, 1.0), r"lower must not exceed upper"),
        (lambda: mt.norm(mt.Tensor([1.0]), ord=1), r"ord=1.*2-norm"),
        (lambda: mt.cumsum(mt.Tensor(np.ones((2, 2))), axis=(0, 1)), r"one integer axis"),
        (lambda: mt.squeeze(mt.Tensor(np.ones((2, 3))), axis=0), r"axis 0 has length 2"),
        (lambda: mt.broadcast_to(mt.Tensor(np.ones(3)), (2, 4)), r"does not broadcast"),
        (lambda: mt.repeat(mt.Tensor(np.ones(3)), [1, 2]), r"2 counts for an axis of length 3"),
        (lambda: mt.tile(mt.Tensor(np.ones(3)), -1), r"reps"),
        (lambda: mt.split(mt.Tensor(np.ones(5)), 2), r"length 5 does not split into 2"),
        (lambda: mt.pad(mt.Tensor(np.ones(3)), 1, mode="mean"), r"mode='mean'"),
        (lambda: mt.pad(mt.Tensor(np.ones(3)), -1), r"widths must be integers >= 0"),
        (lambda: mt.einsum("i.j", mt.Tensor(np.ones((2, 3)))), r"no other dots"),
        (lambda: mt.einsum("ii->i", mt.Tensor(np.ones((2, 3)))), r"letter 'i' has length 2 and 3"),
        (lambda: mt.einsum("ij,jk", mt.Tensor(np.ones((2, 3))), mt.Tensor(np.ones((2, 2)))), r"'j' has length 3 and 2"),
        (lambda: mt.einsum("ij,jk", mt.Tensor(np.ones((2, 3)))), r"2 operand\(s\) in the subscripts, 1 given"),
        (lambda: mt.einsum("ij->k", mt.Tensor(np.ones((2, 3)))), r"output letter 'k'"),
        (lambda: mt.where(np.array(["a"]), mt.Tensor([1.0]), 0.0), r"boolean array"),
        (lambda: mt.where(np.ones(4, bool), mt.Tensor(np.ones(3)), 0.0), r"do not broadcast"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_by_name_and_records_nothing(call, match):
    with mt.Tape() as tape, pytest.raises((ValueError, TypeError), match=match):
        call()
    assert len(tape) == 0


def test_domain_edges_match_numpy_forward_and_pytorch_backward():
    """At arcsin's ends the value is finite (±π/2) and the slope infinite; cbrt's slope at 0 is infinite;
    norm's gradient at 0 is 0 (PyTorch's subgradient); prod's gradient at a single 0 is the others' product."""
    x = mt.Tensor(np.array([1.0, -1.0, 0.0]), requires_grad=True)
    y = mt.arcsin(x)
    np.testing.assert_array_equal(y.data, np.arcsin(x.data))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [np.inf, np.inf, 1.0])
    c = mt.Tensor(np.array([0.0, 8.0]), requires_grad=True)
    mt.cbrt(c).sum().backward()
    assert c.grad[0] == np.inf and c.grad[1] == pytest.approx(1 / 12, rel=1e-15)
    z = mt.Tensor(np.zeros(3), requires_grad=True)
    mt.norm(z).backward()
    np.testing.assert_array_equal(z.grad, [0.0, 0.0, 0.0])
    p = mt.Tensor(np.array([2.0, 0.0, 3.0]), requires_grad=True)
    mt.prod(p).backward()
    np.testing.assert_array_equal(p.grad, [0.0, 6.0, 0.0])
    q = mt.Tensor(np.array([2.0, 0.0, 3.0, 0.0]), requires_grad=True)
    mt.cumprod(q).sum().backward()
    # y = [2, 0, 0, 0]: dy/dq0 = 1, dy/dq1 = 2 + 2*3 (through y1, y2), the rest 0.
    np.testing.assert_array_equal(q.grad, [1.0, 8.0, 0.0, 0.0])


def test_functions_accept_scalars_and_plain_values():
    """mt.<name> on a Scalar gives a Scalar; on a plain array, a constant Tensor; a number beside a Tensor lifts."""
    s = mt.Scalar(0.5)
    assert isinstance(mt.sin(s), mt.Scalar) and mt.sin(s).data == pytest.approx(np.sin(0.5), rel=1e-15)
    assert isinstance(mt.exp(np.ones(2)), mt.Tensor)
    t = mt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    out = mt.maximum(1.5, t)
    np.testing.assert_array_equal(out.data, [1.5, 2.0])
    out.sum().backward()
    np.testing.assert_array_equal(t.grad, [0.0, 1.0])


SCALAR_UNARY = {
    "sin": 0.7, "cos": 0.7, "tan": 0.7, "arcsin": 0.3, "arccos": -0.3, "arctan": 1.7, "sinh": -0.8, "cosh": 0.8,
    "log1p": 0.4, "expm1": -0.6, "log2": 3.0, "log10": 0.2, "exp2": 1.3, "cbrt": -2.5, "square": -1.1,
    "reciprocal": 0.4,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCALAR_UNARY))
def test_scalar_methods_agree_with_numpy_and_the_tensor_gradient(name):
    """Scalar.<name>: value as numpy's; gradient as the Tensor path's and finite differences."""
    x = SCALAR_UNARY[name]
    s = mt.Scalar(x)
    y = getattr(s, name)()
    assert isinstance(y, mt.Scalar) and y.data == pytest.approx(float(getattr(np, name)(x)), rel=1e-15)
    y.backward()
    t = mt.Tensor(np.array(x), requires_grad=True)
    getattr(t, name)().backward()
    assert s.grad == pytest.approx(float(t.grad), rel=1e-14)
    f = getattr(np, name)
    assert s.grad == pytest.approx((f(x + 1e-6) - f(x - 1e-6)) / 2e-6, rel=1e-7)


def test_scalar_powers_either_way_round_and_two_input_functions():
    """2 ** a, a ** b, a.logaddexp(b), a.arctan2(b), a.clip(...) and +a on Scalars, by hand algebra."""
    a, b = mt.Scalar(0.5), mt.Scalar(1.5)
    (2**a).backward()
    assert a.grad == pytest.approx(2**0.5 * np.log(2), rel=1e-15)
    a.grad = None
    (a**b).backward()
    assert a.grad == pytest.approx(1.5 * 0.5**0.5, rel=1e-15) and b.grad == pytest.approx(0.5**1.5 * np.log(0.5))
    a.grad = b.grad = None
    a.logaddexp(b).backward()
    assert a.grad == pytest.approx(1 / (1 + np.exp(1.0)), rel=1e-14) and a.grad + b.grad == pytest.approx(1.0)
    a.grad = b.grad = None
    a.arctan2(b).backward()
    assert a.grad == pytest.approx(1.5 / 2.5, rel=1e-15) and b.grad == pytest.approx(-0.5 / 2.5, rel=1e-15)
    assert +a is a
    c = mt.Scalar(3.0)
    c.clip(upper=1.0).backward()
    assert c.clip(upper=1.0).data == 1.0 and c.grad == 0.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mt.Scalar(1.5).arcsin(), r"arcsin of 1\.5"),
        (lambda: mt.Scalar(-1.0).log1p(), r"log1p of -1\.0"),
        (lambda: mt.Scalar(0.0).reciprocal(), r"reciprocal of 0\.0"),
        (lambda: mt.Scalar(800.0).cosh(), r"overflows"),
        (lambda: mt.Scalar(2000.0).exp2(), r"overflows"),
        (lambda: mt.Scalar(-2.0) ** mt.Scalar(2.0), r"base is -2\.0.*ln"),
        (lambda: mt.Scalar(0.0) ** mt.Scalar(-1.0), r"division by zero"),
        (lambda: (-8.0) ** mt.Scalar(1.0), r"base is -8\.0"),
        (lambda: mt.Scalar(1.0).clip(), r"lower, upper or both"),
    ],
)
def test_scalar_refusals_name_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_where_on_scalars_takes_one_bool():
    a, b = mt.Scalar(2.0), mt.Scalar(-1.0)
    y = mt.where(a.data > 0, a * 3.0, b)
    assert isinstance(y, mt.Scalar) and y.data == 6.0
    y.backward()
    assert a.grad == 3.0 and b.grad == 0.0
    with pytest.raises(ValueError, match="one bool"):
        mt.where(np.array([True, False]), a, b)
