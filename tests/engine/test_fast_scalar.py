"""The Scalar fast path (microtape/engine/fast_scalar.py) gives the reference path's gradients, bit for bit.

``y.backward()`` on a Scalar runs :func:`microtape.engine.fast_scalar.backward`; the
reference is :func:`microtape.engine.reverse.backward_pass` (``gradients()`` in
``Tape.of``'s order, then ``accumulate()``). Random graphs of every Scalar op
(a user-defined one and ``pow``'s parameter included), with shared
subexpressions, constants, chains deeper than the fast walk's recursion and
``.grad`` fields already set, must leave every node's ``.grad`` identical —
same value, same type — and a pass that fails must change nothing.
"""

import dataclasses
import math
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import microtape as mt
from microtape import ops
from microtape.engine import backward_pass, module_scope, record, reverse
from microtape.engine import fast_scalar as scalar_pass
from microtape.engine.fast_scalar import record_floats
from microtape.ops import Op

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A user-defined op (not registered: the registry is global, and other tests count it).
cube = Op(
    "scalar_pass_cube",
    lambda x: x**3,
    lambda g, ans, x: (3.0 * g * x * x,),
    ("x",),
    ("{g} * 3 * {x}**2",),
    (r"\bar x = 3 \bar y x^2",),
    builtin=False,
)

# Every Scalar operation, as (inputs, function). Values stay in (-3, 3)-ish: the
# ops that need a domain (log, pow, div) get one by construction.
STEPS = [
    (2, lambda a, b: a + b),
    (2, lambda a, b: a - b),
    (2, lambda a, b: a * b),
    (2, lambda a, b: a / (b.sigmoid() + 0.5)),
    (2, lambda a, b: a.maximum(b)),
    (2, lambda a, b: a.minimum(b)),
    (1, lambda a: -a),
    (1, lambda a: a * 0.5 + 1.0),
    (1, lambda a: 2.0 - a),
    (1, lambda a: 1.0 / (a.abs() + 1.0)),
    (1, lambda a: a.tanh()),
    (1, lambda a: a.relu()),
    (1, lambda a: a.sigmoid()),
    (1, lambda a: a.gelu()),
    (1, lambda a: abs(a)),
    (1, lambda a: (a.tanh() * 0.5).exp()),
    (1, lambda a: (a.abs() + 0.5).log()),
    (1, lambda a: (a.abs() + 0.5) ** 1.5),
    (1, lambda a: (a.abs() + 0.5).sqrt()),
    (1, lambda a: a**2),
    (1, lambda a: cube(a.tanh())),
    (1, lambda a: a.sin() + a.arctan()),
    (1, lambda a: a.clip(-1.0, 0.5)),  # an op with parameters
    (2, lambda a, b: (a.abs() + 0.5).power(b.tanh())),
    (2, lambda a, b: a.arctan2(b.abs() + 0.5)),
    (2, lambda a, b: a.logaddexp(b)),
]


@st.composite
def graphs(draw):
    """Leaves (some constants), then steps on any earlier nodes, returning every node and the output."""
    count = draw(st.integers(1, 4))
    values = draw(st.lists(st.floats(-2.5, 2.5), min_size=count, max_size=count))
    nodes = [mt.Scalar(v, name=f"x{i}") for i, v in enumerate(values)]
    nodes += [mt.Scalar._constant(draw(st.floats(-2, 2)))]  # a constant takes part too
    for _ in range(draw(st.integers(1, 25))):
        arity, step = draw(st.sampled_from(STEPS))
        operands = [draw(st.sampled_from(nodes)) for _ in range(arity)]
        nodes.append(step(*operands))
    if draw(st.booleans()):  # a chain deeper than the fast walk recurses, with a branch beside it
        chain = nodes[-1]
        for i in range(scalar_pass._RECURSION_DEPTH * 2 + draw(st.integers(0, 5))):
            chain = chain * 0.999 + (nodes[i % len(nodes)] if i % 7 == 0 else 0.0)
        nodes.append(chain)
    output = sum(nodes[-3:], nodes[0] * 0.0)  # the last few nodes, so several branches end in it
    everything = set(nodes) | set(mt.Tape.of(output).nodes) | {x for n in mt.Tape.of(output).nodes for x in n.inputs}
    return list(everything), output


def _grads(nodes):
    return [(n.grad, type(n.grad)) for n in nodes]


def _both_ways(nodes, output, before, grad=None):
    """``.grad`` of every node after the reference backward and after the fast one, from the same start."""
    for node, g in zip(nodes, before):
        node.grad = g
    backward_pass(output, grad)  # the reference: gradients() + accumulate()
    reference = _grads(nodes)
    for node, g in zip(nodes, before):
        node.grad = g
    output.backward(grad)
    return reference, _grads(nodes)


@SETTINGS
@given(graphs(), st.data())
def test_fast_backward_gives_the_reference_gradients_bit_for_bit(graph, data):
    nodes, output = graph
    if not output.requires_grad:
        return
    # Half the time some nodes (leaves or computed) already hold a gradient: backward adds to it.
    before = [data.draw(st.sampled_from([None, None, 0.25, -1.5])) if n.requires_grad else None for n in nodes]
    seed = data.draw(st.sampled_from([None, 2.0, -0.5]))
    reference, fast = _both_ways(nodes, output, before, seed)
    assert fast == reference  # the same floats (== on floats: bit for bit, NaN aside) and the same types
    assert all(type(g) in (float, type(None)) for g, _ in fast)


@SETTINGS
@given(graphs())
def test_the_fast_walk_has_the_reference_order(graph):
    """The bounded recursion finds Tape.of's depth-first order, so both add each gradient's terms in one order."""
    _, output = graph
    held = []
    assert scalar_pass._order_holding(output, held) == mt.Tape.of(output).nodes
    for node, old in held:
        node.grad = old


def test_backward_uses_the_fast_path_and_gradients_the_reference():
    """``y.backward()`` never runs the dict pass; ``mt.gradients`` and ``create_graph`` do."""
    calls = {"reference": 0}
    original = reverse._reverse

    def counted(*args, **kwargs):
        calls["reference"] += 1
        return original(*args, **kwargs)

    a, b = mt.Scalar(0.3), mt.Scalar(-1.2)
    y = (a * b + a).tanh()
    try:
        reverse._reverse = counted
        y.backward()
        assert calls["reference"] == 0 and a.grad is not None
        mt.gradients(y)
        assert calls["reference"] == 1
        a.zero_grad()
        y.backward(create_graph=True)
        assert calls["reference"] == 2 and isinstance(a.grad, mt.Scalar)
    finally:
        reverse._reverse = original


def test_a_failing_vjp_leaves_every_grad_as_it_was(define):
    """All or nothing: a VJP that raises midway (after other gradients were added) changes no .grad."""

    def vjp(g, ans, x):
        raise ArithmeticError("this vjp fails")

    failing = define("scalar_pass_fails", forward=lambda x: x, vjp=vjp, formula="{g}")
    x, w = mt.Scalar(0.5), mt.Scalar(2.0)
    x.grad = 7.0
    hidden = x * w
    hidden.grad = -1.0
    y = failing(hidden.tanh()) * w + hidden  # the pass reaches the failing op after touching w and hidden
    with pytest.raises(ArithmeticError, match="this vjp fails"):
        y.backward()
    assert (x.grad, w.grad, hidden.grad, y.grad) == (7.0, None, -1.0, None)


def test_a_junk_grad_is_refused_and_nothing_changes():
    """A .grad that cannot take the sum is refused as the reference refuses it, before any .grad changes."""
    a, b = mt.Scalar(1.5), mt.Scalar(-2.0)
    y = a * b + b
    b.grad = 0.5
    a.grad = "junk"
    with pytest.raises(TypeError, match="cannot take a gradient"):
        y.backward()
    assert (a.grad, b.grad, y.grad) == ("junk", 0.5, None)


def test_a_vjp_that_sends_none_to_a_gradient_input_is_refused_as_the_reference_does(define):
    half = define("scalar_pass_half", forward=lambda x: 0.5 * x, vjp=lambda g, ans, x: (None,), formula="{g}")
    x = mt.Scalar(1.0)
    with pytest.raises(TypeError) as fast:
        half(x).backward()
    with pytest.raises(TypeError) as reference:
        backward_pass(half(x))
    assert str(fast.value) == str(reference.value) and "gives no gradient" in str(fast.value)
    assert x.grad is None


def test_float_vjp_follows_the_vjp():
    """An op's float VJP is made from its VJP: broadcasting ops drop the summing, others are the VJP itself."""
    assert ops.mul.float_vjp is ops.mul.vjp.for_floats and ops.mul.vjp is not ops.mul.float_vjp
    assert ops.tanh.float_vjp is ops.tanh.vjp
    # dataclasses.replace(op, vjp=...) (how tests make a wrong op) replaces the float path's VJP too.
    wrong = dataclasses.replace(ops.mul, vjp=lambda g, ans, a, b: (g * b, g * b))
    a, b = mt.Scalar(2.0), mt.Scalar(5.0)
    record_floats(wrong, a, b).backward()
    assert (a.grad, b.grad) == (5.0, 5.0)


def test_backward_near_the_recursion_limit_falls_back_to_the_iterative_walk():
    """Called from deep inside a caller's own recursion, the fast walk cannot recurse: same gradients anyway."""
    x = mt.Scalar(0.7)
    y = x
    for _ in range(scalar_pass._RECURSION_DEPTH * 3):
        y = y * 1.001 + x * 0.001
    backward_pass(y)
    expected = x.grad
    x.zero_grad()

    def deep(depth):
        if depth:
            return deep(depth - 1)
        y.backward()

    headroom = 20  # frames left below the limit when backward starts
    depth = sys.getrecursionlimit() - len(_frames()) - headroom
    deep(depth)
    assert x.grad == expected and math.isfinite(expected)


def _frames():
    frame, frames = sys._getframe(), []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def test_recording_asks_the_context_only_while_a_tape_or_a_module_is_open():
    """The counts that let recording skip its context lookup go back down however a block ends."""
    from microtape.engine import node

    def counts():
        return node._tapes_in_force, node._modules_in_force

    start = counts()
    with mt.Tape() as tape, mt.module_scope("outer"):
        assert counts() == (start[0] + 1, start[1] + 1)
        with mt.engine.paused():
            assert counts()[0] == start[0] + 2
        y = mt.Scalar(1.0) * 2.0 + mt.Scalar(3.0)
    assert counts() == start
    assert [e.module for e in tape] == ["outer", "outer"] and y.module == "outer"
    with pytest.raises(ZeroDivisionError):
        with mt.Tape(), mt.module_scope("m"), mt.Tape.atomic():
            raise ZeroDivisionError("a block that fails")
    assert counts() == start
    assert (mt.Scalar(1.0) * 2.0).module == ""


def test_record_floats_makes_the_node_record_makes():
    """The Scalar operators' recording gives the same node, on the same tapes, as the reference ``record``."""
    from microtape.engine import record
    from microtape.engine.fast_scalar import record_floats

    a, b, c = mt.Scalar(0.5, name="a"), mt.Scalar(-2.0, name="b"), mt.Scalar._constant(3.0)
    for op, operands in [(ops.mul, (a, b)), (ops.tanh, (a,)), (ops.add, (c, c)), (ops.sub, (c, b))]:
        with mt.Tape() as outer, mt.module_scope("m"), mt.Tape() as inner:
            fast = record_floats(op, *operands, name="y")
            slow = record(op, operands, None, "y")
        fields = ("data", "grad", "name", "module", "requires_grad", "op", "inputs", "params")
        assert [getattr(fast, f) for f in fields] == [getattr(slow, f) for f in fields]
        assert type(fast.data) is float and type(fast) is mt.Scalar
        recorded = [fast, slow] if fast.requires_grad else []
        assert outer.nodes == recorded and inner.nodes == recorded


# ---------------------------------------------------------------- recording: the fast recorders make record's nodes

RECORDED_FIELDS = ("data", "grad", "name", "requires_grad", "op", "inputs", "params", "module")


def _fields(node):
    return {field: getattr(node, field) for field in RECORDED_FIELDS}


@pytest.mark.parametrize(
    "op, fast",
    [
        (ops.add, lambda a, b: a + b),
        (ops.sub, lambda a, b: a - b),
        (ops.mul, lambda a, b: a * b),
        (ops.div, lambda a, b: a / b),
        (ops.logaddexp, lambda a, b: a.logaddexp(b)),
        (ops.arctan2, lambda a, b: a.arctan2(b)),
        (ops.sin, lambda a, b: a.sin()),
        (ops.log1p, lambda a, b: a.log1p()),
    ],
)
@pytest.mark.parametrize("second", ["scalar", "constant", "number"])
def test_a_scalar_method_records_the_node_record_makes(op, fast, second):
    """``a * b`` and ``a.sin()`` (float_operator, record_floats) give the generic ``record``'s node, on the tape."""
    a = mt.Scalar(0.75, name="a")
    b = {"scalar": mt.Scalar(-0.5), "constant": mt.Scalar._constant(-0.5), "number": -0.5}[second]
    operands = (a, mt.Scalar._constant(b)) if op.inputs[1:] else (a,)
    with mt.Tape() as tape, module_scope("layer"):
        made = fast(a, b)
        expected = record(op, operands)
    fields = _fields(made)
    assert fields["inputs"][1:2] == () or fields["inputs"][1].data == -0.5
    fields["inputs"] = tuple(x if x is a or x is b else "lifted" for x in fields["inputs"])
    wanted = _fields(expected)
    wanted["inputs"] = tuple(x if x is a or x is b else "lifted" for x in wanted["inputs"])
    assert fields == wanted and type(made.data) is float
    assert tape.nodes == [made, expected]


def test_an_operator_on_constants_records_nothing():
    """Two constants make a constant, on no tape (as ``record`` does), and a leaf's name stays its own."""
    c = mt.Scalar._constant(2.0)
    with mt.Tape() as tape:
        made = c * 3.0
    assert (made.requires_grad, made.op, made.inputs, tape.nodes) == (False, None, (), [])
    assert made.data == 6.0 and mt.Scalar.__mul__.__name__ == "mul_operator"
