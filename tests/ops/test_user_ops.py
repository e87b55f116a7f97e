"""Ops a student can add: mt.ops.define, end to end (tape, listing, graph, gradients, gradcheck).

References are hand algebra (the logistic's derivative s(1-s)) and finite
differences; a wrong VJP must be caught.
"""

import re
import subprocess
import sys

import numpy as np
import pytest

import microtape as mt
from microtape.ops import OPS


def _logistic(define, vjp=None, name="logistic"):
    return define(
        name,
        forward=lambda x: 1 / (1 + np.exp(-x)),
        vjp=vjp or (lambda g, s, x: (g * s * (1 - s),)),
        formula="{g} * s * (1 - s)",
    )


def test_a_defined_op_records_and_differentiates_on_tensors_and_scalars(define):
    logistic = _logistic(define)
    x = mt.Tensor(np.array([-1.0, 0.0, 2.0]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        s = logistic(x, name="s")
        loss = s.sum(name="loss")
    assert isinstance(s, mt.Tensor) and tape[0].op is logistic and tape[0].output is s
    assert re.search(r"\bs +  = logistic\(x\)", str(tape)) or re.search(r"\bs += logistic\(x\)", str(tape))
    expected = 1 / (1 + np.exp(-x.data))
    np.testing.assert_allclose(mt.gradients(loss)[x], expected * (1 - expected), rtol=1e-15)
    a = mt.Scalar(0.5, name="a")
    b = logistic(a)
    assert isinstance(b, mt.Scalar)
    b.backward()
    assert a.grad == pytest.approx(b.data * (1 - b.data), rel=1e-15)


def test_gradcheck_passes_it_and_catches_a_wrong_vjp(define):
    logistic = _logistic(define)
    wrong = _logistic(define, vjp=lambda g, s, x: (g * s,), name="wrong_logistic")  # forgot (1 - s)
    x = np.array([[-1.5, 0.2], [0.7, 3.0]])
    assert mt.check.gradcheck(lambda t: logistic(t).sum(), x).ok
    assert mt.check.gradcheck(lambda t: logistic(t) * t, x).ok
    with pytest.raises(mt.check.GradcheckError, match="gradcheck FAILED"):  # a failure raises, as PyTorch's
        mt.check.gradcheck(lambda t: wrong(t).sum(), x)
    assert not mt.check.gradcheck(lambda a: wrong(a) * 2.0, 0.3, raise_exception=False).ok  # the Scalar route too


def test_the_graph_draws_it_with_its_name_and_formula(define):
    logistic = _logistic(define)
    x = mt.Tensor(np.array([-1.0, 2.0]), requires_grad=True, name="x")
    with mt.Tape() as tape:
        logistic(x, name="s").sum(name="loss")
    forward = mt.viz.graph(tape).source
    backward = mt.viz.graph(tape, backward=True).source
    assert "logistic" in forward and "s" in forward
    assert "s * (1 - s)" in backward  # the formula is on the edge into x


def test_two_inputs_constants_and_a_non_differentiable_input(define):
    """A two-input op with a constant second input (a mask-like operand): numbers lift to constants."""
    gate = define(
        "gate",
        forward=lambda x, m: x * m,
        vjp=lambda g, ans, x, m: (g * m, None),
        formula=["{g} * {m}", None],
        inputs=("x", "m"),
    )
    assert gate.constant_inputs == (1,) and gate.arity == 2
    x = mt.Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    y = gate(x, np.array([1.0, 0.0, 2.0]))  # the array becomes a constant input
    np.testing.assert_allclose(mt.gradients(y.sum())[x], [1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="'m' is not differentiable"):
        gate(x, mt.Tensor(np.ones(3), requires_grad=True))
    assert "m: constant" in gate.formula


def test_refusals_are_clear(define):
    with pytest.raises(ValueError, match="built-in"):
        define("exp", forward=np.exp, vjp=lambda g, ans, x: (g * ans,), formula="{g} * exp({x})")
    with pytest.raises(TypeError, match="vjp"):
        define("bad", forward=np.exp, vjp="no", formula="g")
    with pytest.raises(TypeError, match="formula"):
        define("bad", forward=np.exp, vjp=lambda g, a, x: (g,), formula=3)
    with pytest.raises(ValueError, match="name"):
        define("two words", forward=np.exp, vjp=lambda g, a, x: (g,), formula="g")
    logistic = _logistic(define)
    with pytest.raises(TypeError, match="takes 1 input"):
        logistic(mt.Tensor(np.ones(2)), mt.Tensor(np.ones(2)))
    with pytest.raises(TypeError, match="Scalar or Tensor"):
        logistic(np.ones(2))
    assert OPS["exp"].builtin  # the built-in is untouched


def test_a_vjp_of_the_wrong_shape_or_count_is_named(define):
    flat = define("flat", forward=lambda x: x * 2.0, vjp=lambda g, ans, x: (g.sum(),), formula="2 {g}")
    loose = define("loose", forward=lambda x: x * 2.0, vjp=lambda g, ans, x: g * 2.0, formula="2 {g}")
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError, match="'flat'.*shape"):
        mt.gradients(flat(x).sum())
    with pytest.raises(TypeError, match="'loose'.*tuple"):
        mt.gradients(loose(x).sum())
    assert x.grad is None


def test_redefining_your_own_op_replaces_it(define):
    """A notebook cell run twice: the second definition wins (built-ins stay protected)."""
    first = _logistic(define)
    second = _logistic(define, vjp=lambda g, s, x: (g * s * (1 - s) * 1.0,))
    assert OPS["logistic"] is second and first is not second


# ---------------------------------------------------------------- user-defined ops: checked at the boundary


def _identity_op(define, forward=None, vjp=None, name="ident"):
    return define(
        name,
        forward=forward or (lambda x: x),
        vjp=vjp or (lambda g, y, x: (g,)),
        formula="{g}",
    )


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
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


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize("junk", [None, "abc", 1 + 2j, np.array([1.0, 2.0]), True], ids=str)
def test_a_scalar_user_forward_returning_junk_names_the_op(define, junk):
    op = _identity_op(define, forward=lambda x: junk)
    with mt.Tape() as tape:
        with pytest.raises(TypeError, match=r"op 'ident': its forward returned .*on Scalars .* real number"):
            op(mt.Scalar(1.0))
    assert len(tape) == 0


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_a_user_forward_returning_integers_gives_floats(define):
    op = _identity_op(define, forward=lambda x: np.round(x).astype(np.int64), name="rounded")
    y = op(mt.Tensor(np.array([1.4, 2.6], dtype=np.float32), requires_grad=True))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data, [1.0, 3.0])
    assert op(mt.Scalar(1.6)).data == 2.0


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
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


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
@pytest.mark.parametrize("junk", ["a gradient", 1j, np.ones(2), None], ids=str)
def test_a_scalar_user_vjp_returning_junk_is_refused(define, junk):
    op = _identity_op(define, vjp=lambda g, y, x: (junk,))
    a = mt.Scalar(1.0, name="a")
    with pytest.raises(TypeError, match=r"op 'ident'.* input 'x'"):
        op(a).backward()
    assert a.grad is None


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
def test_a_user_vjp_gradient_takes_its_inputs_dtype(define):
    op = _identity_op(define, vjp=lambda g, y, x: (np.asarray(g, dtype=np.float64) * 2,))
    x = mt.Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    op(x).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [2.0, 2.0]


@pytest.mark.filterwarnings("error")  # a value or a clear exception, never a numpy warning
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
