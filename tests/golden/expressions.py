"""Named test expressions shared by PyTorch and microtape.

Each expression is written ONCE as a plain Python function.  It only uses
operations that both a ``torch.Tensor`` and a microtape ``Tensor``/``Scalar``
understand:

* arithmetic ``+ - * /``, powers by a Python number ``x ** 2``, matrix
  products ``a @ b`` and unary minus ``-x``;
* the same operators with a Python float on the left (``2.0 * x``,
  ``1.0 / x``), which exercises the *reflected* operators;
* the methods ``.exp() .log() .tanh() .relu()``,
  ``.sum(axis) .mean(axis) .softmax(axis)``, ``.swapaxes(a, b)`` and
  ``.reshape(shape)``.  Axes are always passed positionally, because PyTorch
  calls the argument ``dim`` while numpy calls it ``axis``.

So the very same function can be called with torch tensors (to make the
reference values, see ``make_golden.py``) and with microtape objects (to test
the engine, see ``tests/nn/test_golden_torch.py``).

How the gradients are defined
-----------------------------
An expression may return an array of any shape.  The harness does not reduce
it to a loss; instead it passes an explicit *upstream gradient* ``g`` of the
output's shape to the backward pass (``out.backward(g)`` in both libraries).
That is the same as differentiating the scalar loss ``(out * g).sum()``.
``g`` is drawn from a seeded normal distribution by :func:`make_upstream`.
Scalar expressions (inputs and output are single floats) use ``g = 1.0``,
micrograd style, because ``Scalar.backward()`` takes no argument.

Inputs are float64 numpy arrays; a scalar input is a 0-d array (shape ``()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# --------------------------------------------------------------------------
# Input generators
# --------------------------------------------------------------------------


def normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard-normal float64 values (any sign)."""
    return np.asarray(rng.normal(size=shape), dtype=np.float64)


def positive(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Float64 values in [0.5, 2.0): safe for ``log``, ``1/x`` and ``x ** 0.5``."""
    return np.asarray(rng.uniform(0.5, 2.0, size=shape), dtype=np.float64)


@dataclass(frozen=True)
class Expression:
    """One named test expression.

    Attributes:
        name: short identifier, used as the fixture key and the pytest id.
        description: one line saying what the expression exercises.
        input_shapes: the shape of each input; ``()`` means a single float.
        input_kinds: for each input, ``"normal"`` (any sign) or
            ``"positive"`` (needed by ``log``, ``1/x``, fractional powers).
        fn: the expression itself, ``fn(*inputs) -> output``.
        seed: seed of the numpy generator for the inputs and the upstream
            gradient.
        fixed_inputs: if given, these exact values are used instead of
            random ones (for the classic micrograd example).
    """

    name: str
    description: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_kinds: tuple[str, ...]
    fn: Callable
    seed: int
    fixed_inputs: tuple[float, ...] | None = None

    @property
    def is_scalar(self) -> bool:
        """True when every input is a single float (a micrograd-style expression)."""
        return all(shape == () for shape in self.input_shapes)

    def make_inputs(self) -> list[np.ndarray]:
        """Return the inputs as float64 numpy arrays (0-d for scalars), seeded."""
        if self.fixed_inputs is not None:
            return [np.array(value, dtype=np.float64) for value in self.fixed_inputs]
        rng = np.random.default_rng(self.seed)
        generators = {"normal": normal, "positive": positive}
        return [generators[kind](rng, shape) for shape, kind in zip(self.input_shapes, self.input_kinds, strict=True)]


def make_upstream(expression: Expression, output_shape: tuple[int, ...]) -> np.ndarray:
    """The upstream gradient passed to ``out.backward(...)`` for an expression.

    Scalar expressions get ``1.0``.  Array expressions get seeded standard
    normal values of the output's shape (seeded separately from the inputs).
    """
    if expression.is_scalar:
        return np.array(1.0, dtype=np.float64)
    rng = np.random.default_rng([expression.seed, 1])
    return normal(rng, tuple(output_shape))


# --------------------------------------------------------------------------
# Array expressions
# --------------------------------------------------------------------------


def broadcast_add_tanh(x, b):
    """[3, 4] + [4]: the bias is broadcast over the rows."""
    return (x + b).tanh() * x - 0.5 * b


def broadcast_mul_exp(a, b):
    """[2, 3, 1] * [3, 4] -> [2, 3, 4], then a sum over the batch axis."""
    return (-(a * b)).exp().sum(0) / (1.0 + b * b)


def batched_matmul(a, b):
    """[2, 3, 4] @ [2, 4, 5], swap the last two axes, subtract a reshaped mean."""
    product = (a @ b).swapaxes(1, 2)  # [2, 5, 3]
    row_means = a.mean(2).reshape((2, 1, 3))  # [2, 3] -> [2, 1, 3]
    return product - row_means


def softmax_last_axis(x, w):
    """[2, 3, 4] @ [4, 5] (a broadcast matmul), then softmax over the last axis."""
    return (x @ w).softmax(-1)


def log_of_positive(x, y):
    """log of a positive expression, 1/y and a square root (y > 0)."""
    return (x * x + y).log() - 1.0 / y + y**0.5


def relu_mlp(x, w1, b1, w2):
    """A two-layer perceptron: tanh(relu(x @ w1 + b1) @ w2)."""
    hidden = (x @ w1 + b1).relu()
    return (hidden @ w2).tanh()


def layer_norm(x):
    """Normalise each row with ``mean(axis)``; no learned scale or shift."""
    centered = x - x.mean(1).reshape((3, 1))
    variance = (centered**2).mean(1).reshape((3, 1))
    return centered / (variance + 1e-5) ** 0.5


# --------------------------------------------------------------------------
# Scalar expressions (micrograd style: every value is a single float)
# --------------------------------------------------------------------------


def scalar_micrograd_classic(a, b):
    """The sanity-check expression from Karpathy's micrograd README.

    With a = -4 and b = 2 the result is 24.7041, dg/da = 138.8338 and
    dg/db = 645.5773.  (Written without ``+=`` so it also runs on torch.)
    """
    c = a + b
    d = a * b + b**3
    c = c + c + 1
    c = c + 1 + c + (-a)
    d = d + d * 2 + (b + a).relu()
    d = d + 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g = g + 10.0 / f
    return g


def scalar_tanh_chain(a, b):
    """A small chain through tanh, a reciprocal and exp (a > 0)."""
    c = a * b + b**3
    d = (c * 2.0 + 1.0 / a).tanh()
    return d * a - (b * 0.5).exp()


def scalar_log_exp(a, b):
    """exp, log (b > 0), a quotient and a reflected subtraction."""
    return (a.exp() + b.log()) / (a * a + 1.0) - (1.0 - b) ** 2


def scalar_neuron(x1, x2, w1, w2):
    """One neuron with two inputs; uses relu on both signs of the sum."""
    n = x1 * w1 + x2 * w2 + 0.5
    return n.relu() * n.tanh() + (-n).relu() - n / 3.0


# --------------------------------------------------------------------------
# The list used by the fixtures and the tests
# --------------------------------------------------------------------------

EXPRESSIONS: list[Expression] = [
    Expression(
        name="broadcast_add_tanh",
        description=broadcast_add_tanh.__doc__,
        input_shapes=((3, 4), (4,)),
        input_kinds=("normal", "normal"),
        fn=broadcast_add_tanh,
        seed=101,
    ),
    Expression(
        name="broadcast_mul_exp",
        description=broadcast_mul_exp.__doc__,
        input_shapes=((2, 3, 1), (3, 4)),
        input_kinds=("normal", "normal"),
        fn=broadcast_mul_exp,
        seed=102,
    ),
    Expression(
        name="batched_matmul",
        description=batched_matmul.__doc__,
        input_shapes=((2, 3, 4), (2, 4, 5)),
        input_kinds=("normal", "normal"),
        fn=batched_matmul,
        seed=103,
    ),
    Expression(
        name="softmax_last_axis",
        description=softmax_last_axis.__doc__,
        input_shapes=((2, 3, 4), (4, 5)),
        input_kinds=("normal", "normal"),
        fn=softmax_last_axis,
        seed=104,
    ),
    Expression(
        name="log_of_positive",
        description=log_of_positive.__doc__,
        input_shapes=((3, 4), (4,)),
        input_kinds=("normal", "positive"),
        fn=log_of_positive,
        seed=105,
    ),
    Expression(
        name="relu_mlp",
        description=relu_mlp.__doc__,
        input_shapes=((4, 3), (3, 5), (5,), (5, 2)),
        input_kinds=("normal", "normal", "normal", "normal"),
        fn=relu_mlp,
        seed=106,
    ),
    Expression(
        name="layer_norm",
        description=layer_norm.__doc__,
        input_shapes=((3, 4),),
        input_kinds=("normal",),
        fn=layer_norm,
        seed=107,
    ),
    Expression(
        name="scalar_micrograd_classic",
        description="micrograd's README example at a = -4, b = 2 (fixed inputs)",
        input_shapes=((), ()),
        input_kinds=("normal", "normal"),
        fn=scalar_micrograd_classic,
        seed=201,
        fixed_inputs=(-4.0, 2.0),
    ),
    Expression(
        name="scalar_tanh_chain",
        description=scalar_tanh_chain.__doc__,
        input_shapes=((), ()),
        input_kinds=("positive", "normal"),
        fn=scalar_tanh_chain,
        seed=202,
    ),
    Expression(
        name="scalar_log_exp",
        description=scalar_log_exp.__doc__,
        input_shapes=((), ()),
        input_kinds=("normal", "positive"),
        fn=scalar_log_exp,
        seed=203,
    ),
    Expression(
        name="scalar_neuron",
        description=scalar_neuron.__doc__,
        input_shapes=((), (), (), ()),
        input_kinds=("normal", "normal", "normal", "normal"),
        fn=scalar_neuron,
        seed=204,
    ),
]

EXPRESSIONS_BY_NAME: dict[str, Expression] = {expr.name: expr for expr in EXPRESSIONS}
