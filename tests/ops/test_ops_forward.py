"""Every registered op's forward against numpy, written independently here (looped over the registry).

Each op's reference is the textbook formula in plain numpy — ``softmax`` as
``exp(x) / sum(exp(x))``, ``logaddexp`` as ``log(exp(a) + exp(b))``,
``prod``'s and ``norm``'s and ``einsum``'s by numpy's own functions — never
the op's forward itself. ``test_every_op_has_a_numpy_reference`` fails for an
op registered without one. The inputs are the hypothesis cases of
``tests/strategies.py`` (broadcasting, 0-d, and empty arrays for the
elementwise ops); on Python floats (the Scalar path) an elementwise op must
give a float equal to the reference.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import OP_CASES

from microtape.ops import GELU_C, GELU_K, OPS


def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _at(shape, key, values):
    out = np.zeros(shape)
    np.add.at(out, key, values)
    return out


def _window_slices(position, stride, kernel):
    return (slice(None), slice(None), *(slice(i * s, i * s + k) for i, s, k in zip(position, stride, kernel)))


def _padded(x, padding):
    return np.pad(x, ((0, 0), (0, 0), *((p, p) for p in padding)))


def _conv_loop(x, weight, stride, padding):
    """y[b, o, i] = Σ_c Σ_k x_pad[b, c, i·s + k] w[o, c, k], one output position at a time."""
    xp, kernel = _padded(x, padding), weight.shape[2:]
    out = [(n - k) // s + 1 for n, k, s in zip(xp.shape[2:], kernel, stride)]
    y = np.zeros((x.shape[0], weight.shape[0], *out))
    for position in np.ndindex(*out):
        window = xp[_window_slices(position, stride, kernel)]  # [B, C, *k]
        for o in range(weight.shape[0]):
            y[(slice(None), o, *position)] = (window * weight[o]).reshape(x.shape[0], -1).sum(axis=1)
    return y


def _conv_transpose_loop(z, weight, input_shape, stride, padding):
    """Each output position sends z[b, o, i] · w[o, c, k] back to the input it read (col2im)."""
    grad = _padded(np.zeros(input_shape), padding)
    for position in np.ndindex(*z.shape[2:]):
        contribution = np.einsum("bo,oc...->bc...", z[(slice(None), slice(None), *position)], weight)
        grad[_window_slices(position, stride, weight.shape[2:])] += contribution
    return grad[(slice(None), slice(None), *(slice(p, p + n) for p, n in zip(padding, input_shape[2:])))]


def _conv_weight_grad_loop(x, z, kernel_size, stride, padding):
    xp = _padded(x, padding)
    grad = np.zeros((z.shape[1], x.shape[1], *kernel_size))
    for position in np.ndindex(*z.shape[2:]):
        window = xp[_window_slices(position, stride, kernel_size)]
        grad += np.einsum("bo,bc...->oc...", z[(slice(None), slice(None), *position)], window)
    return grad


def _pool_loop(reduce):
    def pool(x, kernel, stride):
        out = [(n - k) // s + 1 for n, k, s in zip(x.shape[2:], kernel, stride)]
        y = np.zeros((*x.shape[:2], *out))
        for position in np.ndindex(*out):
            y[(slice(None), slice(None), *position)] = reduce(x[_window_slices(position, stride, kernel)], (2, 3))
        return y

    return pool


REFERENCE = {
    "conv": _conv_loop, "conv_transpose": _conv_transpose_loop, "conv_weight_grad": _conv_weight_grad_loop,
    "max_pool2d": _pool_loop(np.max), "avg_pool2d": _pool_loop(np.mean),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
    "scale": lambda x, factor: x * factor, "add_constant": np.add, "dropout": np.multiply,
    "maximum": np.maximum, "minimum": np.minimum, "pow": lambda x, exponent: np.power(x, exponent),
    "exp": np.exp, "log": np.log, "tanh": lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1),
    "relu": lambda x: x * (x > 0), "sqrt": lambda x: x**0.5, "abs": np.abs,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(GELU_C * (x + GELU_K * x**3))),
    "sin": np.sin, "cos": np.cos, "tan": lambda x: np.sin(x) / np.cos(x), "arcsin": np.arcsin,
    "arccos": np.arccos, "arctan": np.arctan, "sinh": lambda x: (np.exp(x) - np.exp(-x)) / 2,
    "cosh": lambda x: (np.exp(x) + np.exp(-x)) / 2, "log1p": lambda x: np.log(1 + x),
    "expm1": lambda x: np.exp(x) - 1, "log2": lambda x: np.log(x) / np.log(2),
    "log10": lambda x: np.log(x) / np.log(10),
    "exp2": lambda x: 2.0**x, "cbrt": lambda x: np.sign(x) * np.abs(x) ** (1 / 3), "square": lambda x: x * x,
    "reciprocal": lambda x: 1 / x, "logaddexp": lambda a, b: np.log(np.exp(a) + np.exp(b)),
    "arctan2": np.arctan2, "power": np.power, "logaddexp2": lambda a, b: np.log2(2.0**a + 2.0**b),
    "arcsinh": lambda x: np.log(x + np.sqrt(x * x + 1)), "arccosh": lambda x: np.log(x + np.sqrt(x * x - 1)),
    "arctanh": lambda x: 0.5 * np.log((1 + x) / (1 - x)),
    "clip": lambda x, lower, upper: np.clip(x, -np.inf if lower is None else lower, np.inf if upper is None else upper),
    "where": lambda c, a, b: c * a + (1 - c) * b,
    "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
    "logsumexp": lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
    "cumsum": np.cumsum, "cumprod": np.cumprod,
    "norm": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)),
    "softmax": lambda x, axis: _softmax(x, axis), "log_softmax": lambda x, axis: np.log(_softmax(x, axis)),
    "matmul": np.matmul, "einsum": lambda a, b, subscripts: np.einsum(subscripts, a, b),
    "reshape": np.reshape, "transpose": np.transpose, "cast": lambda x, dtype: x.astype(dtype),
    "broadcast_to": np.broadcast_to, "take": lambda x, indices, axis: np.take(x, indices, axis=axis),
    "scatter_add": lambda x, shape, indices, axis: _at(shape, (slice(None),) * (axis % len(shape)) + (indices,), x),
    "index": lambda x, key: x[key], "index_add": lambda x, shape, key: _at(shape, key, x),
    "concatenate": lambda a, b, axis: np.concatenate([a, b], axis=axis),
}  # fmt: skip

# The ops a Scalar runs on Python floats (the math module's path): their families' modules.
FLOAT_PATH = {
    name for name, op in OPS.items()
    if op.vjp.__module__.rsplit(".", 1)[-1] in {"arithmetic", "elementwise", "trig", "exp_log", "binary", "piecewise"}
}  # fmt: skip

# Checked against a reference elsewhere, with why.
ELSEWHERE = {"tiled_attention": "tests/nn/test_tiled.py: against plain attention, block by block and end to end"}


def test_every_op_has_a_numpy_reference():
    missing = sorted(set(OPS) - set(REFERENCE) - set(ELSEWHERE))
    assert not missing, f"ops without a numpy reference in tests/ops/test_ops_forward.py: {missing}"


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_forward_equals_the_numpy_reference(name):
    op, reference = OPS[name], REFERENCE[name]

    @settings(max_examples=15, deadline=None)
    @given(case=OP_CASES[name])
    def check(case):
        inputs, params = case
        got = op.forward(*inputs, **params)
        with np.errstate(all="ignore"):
            expected = reference(*inputs, **params)
        assert np.shape(got) == np.shape(expected), f"{name} {params}"
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13, err_msg=f"{name} {params}")
        if name in FLOAT_PATH and all(np.size(x) for x in inputs):  # the Scalar path: the first entries as floats
            floats = [float(np.ravel(x)[0]) for x in inputs]
            got = op.forward(*floats, **params)
            with np.errstate(all="ignore"):
                expected = reference(*[np.array(f) for f in floats], **params)
            assert isinstance(got, float) and got == pytest.approx(float(expected), rel=1e-14, abs=1e-15), name

    check()
