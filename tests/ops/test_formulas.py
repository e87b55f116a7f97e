"""Each op's text formula (``op.grads[i]``) says what its VJP computes: evaluated, it gives the same numbers.

A formula is a template (``"{g} * (1 - tanh({x})**2)"``): the test puts a
random array in for each placeholder — ``{g}`` the incoming gradient, an
operand's name its value, the output's name the op's output, a parameter's
name the op's example parameter — evaluates the text with numpy's functions
(:data:`NAMESPACE`, ``ln`` being the natural log), and compares the result
with ``op.vjp(...)`` on the same inputs, entry by entry.

The rule for which formulas are evaluated, stated once: a formula is Python
when, its placeholders filled in with names, it parses as one Python
expression and every name it uses is a placeholder or in
:data:`NAMESPACE`. The others are prose for people ("sum of {g} over the
broadcast axes", "{g} @ {b}^T", a formula with a helper ``s = ...``) and are
not evaluated. So that the test cannot pass by calling everything prose, it
counts the ops it evaluated (:data:`AT_LEAST_EVALUATED`). A Python formula
that fails to evaluate is a failure, not a skip.

Every op here is elementwise (the namespace has only elementwise
functions), so the formula is evaluated one entry at a time, on numpy
scalars: a chained comparison such as clip's ``{lower} <= {x} <= {upper}``
reads as written. All operands have one shape, so no gradient needs summing
back over broadcast axes.
"""

import ast
import re

import numpy as np
import pytest

from microtape.ops import OPS

# The functions a formula may call, by the name it calls them.
NAMESPACE = {
    "exp": np.exp,
    "log": np.log,
    "ln": np.log,
    "sqrt": np.sqrt,
    "cbrt": np.cbrt,
    "sign": np.sign,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "arcsin": np.arcsin,
    "arccos": np.arccos,
    "arctan": np.arctan,
    "abs": np.abs,
}
# The ops whose formulas are Python today (35): fewer evaluated means a formula became prose, or the rule broke.
AT_LEAST_EVALUATED = 35
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
SHAPE = (2, 3)


def _as_python(template):
    """The formula with its placeholders as plain names, and whether it is Python by the rule above."""
    source = _PLACEHOLDER.sub(lambda m: m.group(1), template)
    placeholders = set(_PLACEHOLDER.findall(template))
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return source, False
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return source, names <= placeholders | set(NAMESPACE)


def _python_formulas(op):
    """``{position: source}`` of the op's formulas that are Python."""
    found = {}
    for position, template in enumerate(op.grads):
        if template is not None:
            source, is_python = _as_python(template)
            if is_python:
                found[position] = source
    return found


def _sample(op, rng):
    """Inputs in the op's domain (the constant ones as the op expects them: dropout's keep is 0 or 1/(1-p))."""
    inputs = []
    for position in range(op.arity):
        if position in op.constant_inputs and op.name == "dropout":
            inputs.append(rng.choice([0.0, 2.0], size=SHAPE))  # p = 0.5, inverted dropout
        elif op.domain == "positive":
            inputs.append(rng.uniform(0.5, 2.0, size=SHAPE))
        elif op.domain == "unit":
            inputs.append(rng.uniform(-0.9, 0.9, size=SHAPE))
        elif op.domain == "above_one":
            inputs.append(rng.uniform(1.5, 3.0, size=SHAPE))
        else:
            inputs.append(rng.standard_normal(SHAPE))
    return inputs


def _evaluate(source, values):
    """The formula at every entry: ``values`` are arrays of one shape, or parameters (the same everywhere)."""
    out = np.empty(SHAPE)
    for index in np.ndindex(SHAPE):
        at = {name: (value[index] if isinstance(value, np.ndarray) else value) for name, value in values.items()}
        out[index] = eval(source, {"__builtins__": {}, **NAMESPACE}, at)  # (our own formula text, no builtins)
    return out


FORMULAS = {name: _python_formulas(op) for name, op in sorted(OPS.items())}
EVALUATED = sorted(name for name, found in FORMULAS.items() if found)


def test_the_rule_tells_python_from_prose():
    assert _as_python("{g} * (1 - tanh({x})**2)") == ("g * (1 - tanh(x)**2)", True)
    assert not _as_python("sum of {g} over the broadcast axes")[1]  # does not parse
    assert not _as_python("broadcast({g}) * softmax({x})")[1]  # names outside the namespace
    assert not _as_python("{g} * s * (1 - s),  s = sigmoid({x})")[1]


def test_enough_formulas_are_evaluated():
    assert len(EVALUATED) >= AT_LEAST_EVALUATED, f"only {len(EVALUATED)} ops have Python formulas: {EVALUATED}"


@pytest.mark.parametrize("name", EVALUATED)
def test_the_formula_computes_the_vjp(name):
    op = OPS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    inputs = _sample(op, rng)
    params = dict(op.example_params)
    ans = np.asarray(op.forward(*inputs, **params))
    g = rng.standard_normal(ans.shape)
    vjp = op.vjp(g, ans, *inputs, **params)
    values = {"g": g, op.output: ans, **dict(zip(op.inputs, inputs)), **params}
    for position, source in FORMULAS[name].items():
        expected = np.broadcast_to(np.asarray(vjp[position], dtype=np.float64), SHAPE)
        got = _evaluate(source, values)
        np.testing.assert_allclose(
            got, expected, rtol=1e-10, atol=1e-12, err_msg=f"{name}: formula {op.grads[position]!r} vs its VJP"
        )
