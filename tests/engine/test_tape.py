"""The tape: recording, listing, nesting, threads, and the backward pass over it.

References are hand-derived derivatives and numpy, never microtape's own
earlier output.
"""

import math
import threading
import time

import numpy as np
import pytest

import microtape as mt
from microtape.engine import Equation, Step, current_tapes
from microtape.ops import OPS


def _small_network(seed=0):
    """Leaves x [3, 4], W [4, 2], b [2] and loss = mean(tanh(x @ W + b)^2) + 0.1 * sum(x)."""
    rng = np.random.default_rng(seed)
    x = mt.Tensor(rng.standard_normal((3, 4)), requires_grad=True, name="x")
    w = mt.Tensor(rng.standard_normal((4, 2)), requires_grad=True, name="W")
    b = mt.Tensor(rng.standard_normal(2), requires_grad=True, name="b")
    with mt.Tape() as tape:
        h = (x @ w + b).tanh(name="h")
        loss = (h * h).mean() + x.sum().scale(0.1)
    return tape, (x, w, b), loss


def _hand_gradients(x, w, b):
    """The gradients of _small_network's loss, derived by hand with numpy."""
    z = x @ w + b
    h = np.tanh(z)
    grad_h = 2 * h / h.size
    grad_z = grad_h * (1 - h**2)
    return grad_z @ w.T + 0.1, x.T @ grad_z, grad_z.sum(axis=0)


# ---------------------------------------------------------------- recording


def test_tape_records_equations_in_order():
    """Iterating a tape yields one Equation per op, in execution order, with operands in order."""
    a = mt.Scalar(2.0, name="a")
    b = mt.Scalar(5.0, name="b")
    with mt.Tape() as tape:
        d = a - b
        e = d * a
        f = e.tanh()
    equations = list(tape)
    assert len(tape) == len(equations) == 3
    assert all(isinstance(eq, Equation) for eq in equations)
    assert [eq.index for eq in equations] == [0, 1, 2]
    assert [eq.op.name for eq in equations] == ["sub", "mul", "tanh"]
    assert [eq.output for eq in equations] == [d, e, f]
    # Operand order is kept (a - b is not b - a).
    assert equations[0].inputs[0] is a and equations[0].inputs[1] is b
    assert equations[1].inputs[0] is d and equations[1].inputs[1] is a
    assert equations[2].op is OPS["tanh"]
    assert tape[-1].output is f and tape[-1].index == 2
    assert tape.nodes == [d, e, f]
    assert tape.index_of(e) == 1


def test_ops_on_constants_only_are_not_recorded():
    """An op whose inputs all have requires_grad=False makes a constant and stays off the tape."""
    c = mt.Tensor(np.ones(3))
    x = mt.Tensor(np.ones(3), requires_grad=True)
    with mt.Tape() as tape:
        k = (c * 2.0).exp()
        y = x * k
    assert not k.requires_grad and k.is_leaf
    assert [eq.op.name for eq in tape] == ["mul"]
    assert tape[0].output is y


def test_listing_is_readable():
    """str(tape) lists the inputs with shapes, then a line per equation: names, op, operands, shape."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True, name="x")
    w = mt.Tensor(np.ones((3, 4)), requires_grad=True, name="W")
    with mt.Tape() as tape:
        with mt.module_scope("layer"):
            z = x @ w
            z.tanh(name="hidden").sum(name="loss")
    lines = str(tape).splitlines()
    assert len(lines) == 1 + len(tape)
    inputs = lines[0]
    assert "x" in inputs and "W" in inputs and "[2, 3]" in inputs and "[3, 4]" in inputs
    matmul_line, tanh_line, sum_line = lines[1:]
    assert "matmul(x, W)" in matmul_line and "[2, 4]" in matmul_line and "layer" in matmul_line
    assert "hidden" in tanh_line and "tanh(" in tanh_line and "[2, 4]" in tanh_line
    assert "loss" in sum_line and "sum(hidden" in sum_line and "axis=None" in sum_line
    # The unnamed product gets a positional name, used where it is an operand.
    unnamed = matmul_line.split("=")[0].split()[-1]
    assert unnamed.startswith("%") and f"tanh({unnamed})" in tanh_line
    assert "3 equations" in repr(tape)


def test_listing_of_a_long_tape_is_shortened():
    """A tape longer than the limit prints its head, an ellipsis line and its last equation."""
    x = mt.Scalar(1.0, name="x")
    with mt.Tape() as tape:
        y = x
        for _ in range(200):
            y = y * 1.0
    lines = tape.listing(limit=20).splitlines()
    assert len(lines) < 30
    assert any("more equations" in line for line in lines)
    assert lines[-1].lstrip().startswith("199")


def test_scalar_listing_shows_values():
    """A Scalar tape lists values instead of shapes."""
    a = mt.Scalar(2.0, name="a")
    with mt.Tape() as tape:
        a * a + 1.0
    text = str(tape)
    assert "mul(a, a)" in text and "= 4" in text and "add" in text


def test_find_by_name_never_guesses():
    """tape.find(name) finds a unique name; a shared name is refused with the names that tell them apart."""
    x = mt.Tensor(np.arange(3.0), requires_grad=True, name="x")
    with mt.Tape() as tape:
        s = x.exp(name="e")
        t = s.sum(name="total")
        s2 = t.exp(name="e")
    assert tape.find("total").output is t
    with pytest.raises(KeyError, match="e#1, e#2"):
        tape.find("e")
    assert tape.find("e#1").output is s and tape.find("e#2").output is s2
    assert tape.variable("x") is x  # a leaf is a variable, not an equation
    with pytest.raises(KeyError, match="leaf"):
        tape.find("x")


def test_listing_names_are_distinct_and_qualified_by_module():
    """Two variables with one name are qualified by module (q_proj.xW^T), then numbered."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True, name="x")
    with mt.Tape() as tape:
        with mt.module_scope("q_proj"):
            q = x.exp(name="xW^T")
        with mt.module_scope("k_proj"):
            k = x.tanh(name="xW^T")
        (q * k).sum(name="loss")
    names = tape.variable_names()
    assert names[q] == "q_proj.xW^T" and names[k] == "k_proj.xW^T" and names[x] == "x"
    assert len(set(names.values())) == len(names)
    assert tape.find("k_proj.xW^T").output is k
    assert "q_proj.xW^T = exp(x)" in str(tape)


def test_find_missing_name_lists_the_names():
    """tape.find on an unknown name raises KeyError naming it and listing the names on the tape."""
    x = mt.Tensor(np.arange(3.0), requires_grad=True, name="x")
    with mt.Tape() as tape:
        x.exp(name="scores").sum(name="loss")
    with pytest.raises(KeyError) as info:
        tape.find("weights")
    message = str(info.value)
    assert "weights" in message and "scores" in message and "loss" in message


# ---------------------------------------------------------------- activation, nesting, threads


def test_nested_tapes():
    """Ops inside an inner tape land on both tapes; ops after the inner one exits only on the outer."""
    x = mt.Scalar(1.5, name="x")
    with mt.Tape() as outer:
        a = x * 2.0
        with mt.Tape() as inner:
            assert current_tapes() == (outer, inner)
            b = a.exp()
            c = b + x
        d = c.tanh()
        assert current_tapes() == (outer,)
    assert current_tapes() == ()
    assert outer.nodes == [a, b, c, d]
    assert inner.nodes == [b, c]
    # The inner tape treats `a` (computed before it began) as an input.
    assert a in inner.leaves() and x in inner.leaves()


def test_ops_outside_any_tape_are_not_recorded():
    """Ops before entering and after leaving a tape are not on it."""
    x = mt.Scalar(1.0)
    before = x * 2.0
    with mt.Tape() as tape:
        inside = before + 1.0
    after = inside * 3.0
    assert tape.nodes == [inside]
    assert after.op is OPS["mul"]  # still differentiable without a tape


def test_tape_reentry_is_an_error():
    """Entering a tape that is already active raises RuntimeError, and leaves the tape working."""
    x = mt.Scalar(1.0)
    with mt.Tape() as tape:
        with pytest.raises(RuntimeError, match="already active"):
            with tape:
                pass
        y = x * 2.0
    assert tape.nodes == [y]
    assert current_tapes() == ()


def test_tape_deactivates_on_exception():
    """An exception inside `with Tape()` still deactivates the tape (try/finally)."""
    x = mt.Scalar(1.0)
    with pytest.raises(ZeroDivisionError):
        with mt.Tape() as tape:
            y = x * 2.0
            raise ZeroDivisionError("inside the tape")
    assert current_tapes() == ()
    z = y * 3.0
    assert tape.nodes == [y]
    assert z.op is not None


def test_module_scope_nests_and_restores():
    """module_scope tags ops with a dotted path and restores the outer path, even after an error."""
    x = mt.Scalar(1.0)
    with mt.Tape() as tape:
        with mt.module_scope("attn"):
            a = x * 2.0
            with mt.module_scope("q_proj"):
                b = a + 1.0
            with pytest.raises(ValueError):
                with mt.module_scope("broken"):
                    raise ValueError("boom")
            c = b.exp()
        d = c.tanh()
    assert [eq.module for eq in tape] == ["attn", "attn.q_proj", "attn", ""]
    assert (a.module, b.module, c.module, d.module) == ("attn", "attn.q_proj", "attn", "")


def test_a_tape_per_thread():
    """Two threads, each with its own active Tape at the same time, record only their own ops.

    The main thread has a tape open meanwhile; it records none of the threads' ops.
    """
    barrier = threading.Barrier(2)
    tapes, leaves, errors = {}, {}, []

    def worker(k):
        try:
            x = mt.Scalar(float(k), name=f"x{k}")
            leaves[k] = x
            with mt.Tape() as tape:
                barrier.wait()  # both tapes are now active at once
                y = x
                for i in range(200):
                    y = y * 1.0 + float(k)
                    if i % 50 == 0:
                        time.sleep(0.001)  # let the other thread run in between
                barrier.wait()
            tapes[k] = (tape, y)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    m = mt.Scalar(3.0, name="m")
    with mt.Tape() as main_tape:
        threads = [threading.Thread(target=worker, args=(k,)) for k in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        main_out = m * m
    assert not errors, errors
    assert main_tape.nodes == [main_out]
    for k in (1, 2):
        tape, y = tapes[k]
        assert len(tape) == 400
        # The only input that is not itself on the tape is this thread's x (plus constants).
        inputs = [leaf for leaf in tape.leaves() if leaf.requires_grad]
        assert inputs == [leaves[k]]
        tape.backward(y)
        assert leaves[k].grad == pytest.approx(1.0)
        assert y.data == pytest.approx(k + 200 * k)


# ---------------------------------------------------------------- backward


def test_tape_backward_matches_hand_derivation():
    """tape.backward on a small network gives the hand-derived gradients."""
    tape, (x, w, b), loss = _small_network()
    tape.backward(loss)
    grad_x, grad_w, grad_b = _hand_gradients(x.data, w.data, b.data)
    np.testing.assert_allclose(x.grad, grad_x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w.grad, grad_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.grad, grad_b, rtol=1e-12, atol=1e-14)


def test_value_backward_without_tape_equals_tape_backward():
    """y.backward() (graph search, no tape) and tape.backward(y) give the same gradients."""
    _, (x1, w1, b1), loss1 = _small_network(seed=3)
    tape2, (x2, w2, b2), loss2 = _small_network(seed=3)
    assert current_tapes() == ()
    loss1.backward()
    tape2.backward(loss2)
    for one, two in ((x1, x2), (w1, w2), (b1, b2)):
        np.testing.assert_allclose(one.grad, two.grad, rtol=1e-14, atol=0)


def test_tape_is_kept_after_backward():
    """Backward does not consume the tape: it can be listed and run again (leaves accumulate)."""
    tape, (x, w, b), loss = _small_network()
    length, listing = len(tape), str(tape)
    tape.backward(loss)
    first = x.grad.copy()
    assert len(tape) == length and str(tape) == listing
    tape.backward(loss)
    np.testing.assert_allclose(x.grad, 2 * first, rtol=1e-14)


def test_backward_stops_at_values_made_before_the_tape():
    """tape.backward treats a value computed before the tape began as an input (a leaf)."""
    x = mt.Scalar(0.5, name="x")
    z = x * 4.0  # before the tape
    with mt.Tape() as tape:
        y = z * z
    tape.backward(y)
    assert z.grad == pytest.approx(2 * z.data)
    assert x.grad is None
    # The graph route goes all the way: dy/dx = 2 z * 4.
    x2 = mt.Scalar(0.5)
    z2 = x2 * 4.0
    (z2 * z2).backward()
    assert x2.grad == pytest.approx(2 * 2.0 * 4.0)


def test_tape_backward_rejects_an_output_not_on_the_tape():
    """tape.backward(y) with y recorded elsewhere is a ValueError; a non-value a TypeError."""
    x = mt.Scalar(1.0)
    with mt.Tape() as tape:
        x * 2.0
    elsewhere = x * 3.0
    with pytest.raises(ValueError, match="not recorded on this tape"):
        tape.backward(elsewhere)
    with pytest.raises(TypeError, match="float"):
        tape.backward(1.0)
    assert x.grad is None


def test_million_op_scalar_chain():
    """A chain of 1,000,000 Scalar ops backpropagates without RecursionError, both ways.

    y = x * c * c * ... (a million times), so dy/dx = c ** 1e6 (about e for
    c = 1 + 1e-6); a skipped step would be off by a factor c.
    The chain is recorded on a tape; y.backward() is called after the tape has
    closed (the graph route, no tape involved) and tape.backward(y) walks the tape.
    """
    n, c = 1_000_000, 1.0 + 1e-6
    x = mt.Scalar(1.0, name="x")
    with mt.Tape() as tape:
        y = x
        for _ in range(n):
            y = y * c
    assert len(tape) == n
    expected = c**n
    assert y.data == pytest.approx(expected, rel=1e-9)

    y.backward()
    assert x.grad == pytest.approx(expected, rel=1e-9)

    x.zero_grad()
    tape.backward(y)
    assert x.grad == pytest.approx(expected, rel=1e-9)
    del tape, y


def test_value_used_many_times_accumulates():
    """Gradients of a value used several times add up: d(x*x*x)/dx = 3x², d(x+...+x)/dx = 100."""
    x = mt.Scalar(1.7)
    (x * x * x).backward()
    assert x.grad == pytest.approx(3 * 1.7**2, rel=1e-14)

    x = mt.Scalar(-0.4)
    total = x
    for _ in range(99):
        total = total + x
    total.backward()
    assert x.grad == 100.0

    # Mixed uses: y = x * exp(x) + x ** 2  ->  dy/dx = exp(x)(1 + x) + 2x.
    x = mt.Scalar(0.3)
    with mt.Tape() as tape:
        y = x * x.exp() + x**2
    tape.backward(y)
    assert x.grad == pytest.approx(math.exp(0.3) * 1.3 + 0.6, rel=1e-14)


def test_tensor_used_many_times_accumulates():
    """A Tensor used in several places (incl. broadcast) gets the sum of the gradients of each use."""
    data = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    x = mt.Tensor(data, requires_grad=True)
    row = mt.Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    # y = sum(x * x * x) + sum(x * row) + sum(x)
    y = (x * x * x).sum() + (x * row).sum() + x.sum()
    y.backward()
    np.testing.assert_allclose(x.grad, 3 * data**2 + np.array([1.0, 2.0, 3.0]) + 1.0, rtol=1e-14)
    np.testing.assert_allclose(row.grad, data.sum(axis=0), rtol=1e-14)

    z = mt.Tensor(data, requires_grad=True)
    total = z
    for _ in range(99):
        total = total + z
    total.sum().backward()
    np.testing.assert_array_equal(z.grad, np.full(data.shape, 100.0))


def test_leaf_gradients_are_separate_arrays():
    """Changing one leaf's .grad in place changes no other gradient, nor the caller's grad array.

    (a + b): both VJP outputs are the same incoming array g; the engine must not
    hand the same array object to two leaves, or to the caller's seed array.
    """
    a = mt.Tensor(np.ones(3), requires_grad=True)
    b = mt.Tensor(np.ones(3), requires_grad=True)
    seed = np.array([1.0, 2.0, 3.0])
    y = a + b
    y.backward(seed)
    a.grad *= 0.0  # e.g. clipping or zeroing one parameter's gradient in place
    np.testing.assert_array_equal(b.grad, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(seed, [1.0, 2.0, 3.0])
    b.grad[0] = 100.0
    np.testing.assert_array_equal(seed, [1.0, 2.0, 3.0])

    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    g = np.ones(6)
    x.reshape(-1).backward(g)
    g[:] = 7.0  # the caller reuses its buffer
    np.testing.assert_array_equal(x.grad, np.ones((2, 3)))


def test_computed_nodes_sharing_gradient_memory_get_read_only_views():
    """add passes g to both operands and reshape's VJP is a view: such shared gradients of computed
    nodes are read-only (no copy), so nobody can change one gradient through another."""
    x = mt.Tensor(np.ones((2, 3)), requires_grad=True)
    a = x * 2.0
    b = x * 3.0
    y = (a + b).reshape(-1)
    y.backward(np.arange(6.0))
    assert not a.grad.flags.writeable and not b.grad.flags.writeable
    assert np.shares_memory(a.grad, b.grad)  # a view, not a copy
    with pytest.raises(ValueError, match="read-only"):
        a.grad[0, 0] = 1.0
    np.testing.assert_array_equal(x.grad, 5.0 * np.arange(6.0).reshape(2, 3))
    assert x.grad.flags.writeable  # leaves keep writable memory of their own


# ---------------------------------------------------------------- backward_steps


def _named_network(seed=0):
    """Like _small_network, with an unrelated equation on the tape that is off the path to loss."""
    rng = np.random.default_rng(seed)
    x = mt.Tensor(rng.standard_normal((3, 4)), requires_grad=True, name="x")
    w = mt.Tensor(rng.standard_normal((4, 2)), requires_grad=True, name="W")
    b = mt.Tensor(rng.standard_normal(2), requires_grad=True, name="b")
    with mt.Tape() as tape:
        z = x @ w
        unrelated = w.exp()  # recorded, but loss does not depend on it
        h = (z + b).tanh()
        loss = (h * h).mean() + x.sum().scale(0.1)
    return tape, (x, w, b), loss, unrelated


def test_backward_steps_order_and_shapes():
    """Steps come in reverse tape order; grad_inputs match input shapes; equations match the tape."""
    tape, _, loss, unrelated = _named_network()
    steps = list(tape.backward_steps(loss))
    assert all(isinstance(step, Step) for step in steps)
    indices = [step.index for step in steps]
    assert indices == sorted(indices, reverse=True) and len(set(indices)) == len(indices)
    assert indices[0] == tape.index_of(loss)
    assert tape.index_of(unrelated) not in indices  # off the path: no step
    assert len(steps) == len(tape) - 1
    for step in steps:
        assert step.equation.index == step.index
        assert step.equation.output is tape.nodes[step.index]
        assert np.shape(step.grad_output) == step.equation.output.shape
        assert len(step.grad_inputs) == len(step.equation.inputs)
        for x, gx in zip(step.equation.inputs, step.grad_inputs, strict=True):
            if x.requires_grad:
                assert np.shape(gx) == x.shape, f"step {step.index} ({step.equation.op.name})"


def test_backward_steps_agree_with_backward():
    """backward_steps writes nothing; what its steps send adds up to what backward writes,
    and each step's incoming gradient is the sum of what later steps sent to that value."""
    tape, leaves, loss, _ = _named_network(seed=5)
    steps = list(tape.backward_steps(loss))
    assert all(leaf.grad is None for leaf in leaves)
    tape.backward(loss)

    # Replay the bookkeeping by hand: what arrives at a node is the sum of what was sent to it.
    sent = {}
    for step in steps:
        output = step.equation.output
        expected = np.ones(()) if output is loss else sent[output]
        np.testing.assert_allclose(step.grad_output, expected, rtol=1e-14, atol=0)
        for x, gx in zip(step.equation.inputs, step.grad_inputs, strict=True):
            if x.requires_grad:
                sent[x] = gx if x not in sent else sent[x] + gx
    for leaf in leaves:
        np.testing.assert_allclose(sent[leaf], leaf.grad, rtol=1e-14, atol=0)


def test_backward_steps_and_gradients_write_nothing():
    """Stepping through (partly or wholly) and mt.gradients write no .grad; backward then accumulates."""
    tape, (x, w, b), loss, _ = _named_network()
    before = np.full(w.shape, 7.0)
    w.grad = before.copy()
    steps = tape.backward_steps(loss)
    next(steps)
    next(steps)
    list(tape.backward_steps(loss))
    g = mt.gradients(loss, tape=tape)
    again = mt.gradients(loss, tape=tape)
    assert x.grad is None and b.grad is None and loss.grad is None
    np.testing.assert_array_equal(w.grad, before)
    assert len(tape) == len(g.tape)  # nothing recorded
    for node in g:
        np.testing.assert_array_equal(g[node], again[node])  # twice, the same answer
    grad_x, grad_w, grad_b = _hand_gradients(x.data, w.data, b.data)
    np.testing.assert_allclose(g[w], grad_w, rtol=1e-12)
    np.testing.assert_allclose(g[x], grad_x, rtol=1e-12)
    assert not g[w].flags.writeable  # read-only: one array may serve several nodes
    tape.backward(loss)
    np.testing.assert_allclose(w.grad, before + grad_w, rtol=1e-12)


def test_backward_steps_with_explicit_grad():
    """backward_steps(y, grad) seeds the first step with that gradient."""
    x = mt.Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    with mt.Tape() as tape:
        y = x * x
    g = np.array([1.0, -1.0, 0.5])
    (step,) = tape.backward_steps(y, g)
    np.testing.assert_array_equal(step.grad_output, g)
    np.testing.assert_allclose(step.grad_inputs[0] + step.grad_inputs[1], 2 * x.data * g)
    assert x.grad is None
