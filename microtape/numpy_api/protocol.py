"""numpy's own functions on Tensors: ``np.exp(t)``, ``np.sum(t, axis=1)``, ``np.where(m, a, b)`` record on the tape.

A student's plain numpy code keeps working when its arrays become Tensors:
numpy hands each call on a Tensor to the Tensor (numpy's ``__array_ufunc__``
and ``__array_function__`` protocols, NEP 13 and NEP 18), and this module
answers it with the microtape function of the same name — so the result is
a Tensor on the tape, never a plain array that silently drops the gradient.

Three kinds of answer:

* **recorded**: the functions in :data:`UFUNCS` and :data:`FUNCTIONS` (the
  same list the README shows) run their microtape counterpart;
* **read only**: comparisons (``np.less(t, 0)``, ``np.isfinite(t)``) and
  questions about the values (``np.shape``, ``np.allclose``, ``np.argmax``)
  give plain numpy results, as ``t < 0`` does: they have no gradient (as in
  PyTorch);
* **refused**: anything else raises a ``TypeError`` that names the numpy
  function — use ``t.data`` for a plain array on purpose.

Integer and boolean arrays among the inputs are constants; a Tensor is
always float (an integer array given to ``Tensor`` becomes float64, so it
can take a gradient).
"""

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine import Node
from ..values.tensor import answer_numpy_with
from . import functions, joining

__all__ = ["UFUNCS", "FUNCTIONS", "array_ufunc", "array_function", "numpy_name"]


#: numpy ufunc -> what it does to Tensors (recorded).
UFUNCS = {
    np.add: lambda a, b: _apply2("__add__", "__radd__", a, b),
    np.subtract: lambda a, b: _apply2("__sub__", "__rsub__", a, b),
    np.multiply: lambda a, b: _apply2("__mul__", "__rmul__", a, b),
    np.divide: lambda a, b: _apply2("__truediv__", "__rtruediv__", a, b),
    np.power: functions.power,
    np.matmul: functions.matmul,
    np.negative: lambda x: -functions.node(x),
    np.positive: lambda x: +functions.node(x),
    np.maximum: functions.maximum,
    np.minimum: functions.minimum,
    np.logaddexp: functions.logaddexp,
    np.logaddexp2: functions.logaddexp2,
    np.arctan2: functions.arctan2,
    np.absolute: functions.abs,
    **{
        getattr(np, name): getattr(functions, name)
        for name in (
            "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "square", "reciprocal",
            "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
        )
    },
}  # fmt: skip

# Comparisons and tests of the values: plain boolean arrays, no gradient (as t < 0).
_READ_UFUNCS = {
    np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal, np.isfinite, np.isnan,
    np.isinf, np.signbit, np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
}  # fmt: skip

#: numpy function -> (the microtape function, how numpy's keyword names read in microtape's).
FUNCTIONS: dict[Callable[..., Any], tuple[Callable[..., Any], dict[str, str]]] = {
    np.sum: (functions.sum, {}),
    np.mean: (functions.mean, {}),
    np.max: (functions.max, {}),
    np.amax: (functions.max, {}),
    np.min: (functions.min, {}),
    np.amin: (functions.min, {}),
    np.prod: (functions.prod, {}),
    np.var: (functions.var, {}),
    np.std: (functions.std, {}),
    np.cumsum: (functions.cumsum, {}),
    np.cumprod: (functions.cumprod, {}),
    np.clip: (functions.clip, {"a_min": "lower", "a_max": "upper", "min": "lower", "max": "upper"}),
    np.where: (functions.where, {"x": "a", "y": "b"}),
    np.einsum: (functions.einsum, {}),
    np.dot: (functions.dot, {}),
    np.outer: (functions.outer, {}),
    np.linalg.norm: (functions.norm, {}),
    np.reshape: (functions.reshape, {"newshape": "shape"}),
    np.transpose: (functions.transpose, {}),
    np.squeeze: (functions.squeeze, {}),
    np.expand_dims: (functions.expand_dims, {}),
    np.broadcast_to: (functions.broadcast_to, {}),
    np.flip: (functions.flip, {}),
    np.repeat: (functions.repeat, {}),
    np.tile: (functions.tile, {}),
    np.concatenate: (joining.concatenate, {"arrays": "tensors"}),
    np.stack: (joining.stack, {"arrays": "tensors"}),
    np.split: (joining.split, {"ary": "tensor"}),
    np.pad: (joining.pad, {"array": "tensor"}),
}

# Questions about the values, not new values: answered on the data (plain results).
_READ_FUNCTIONS = {
    np.shape, np.ndim, np.size, np.allclose, np.isclose, np.array_equal, np.array_equiv, np.argmax, np.argmin,
    np.argsort, np.argwhere, np.nonzero, np.count_nonzero, np.any, np.all, np.result_type, np.array2string,
    np.array_repr, np.array_str, np.isrealobj, np.iscomplexobj, np.may_share_memory, np.shares_memory,
}  # fmt: skip

# numpy keywords that change nothing about the values (einsum's contraction order): accepted and left out.
_IGNORED = {np.einsum: {"optimize"}}


def _plain(value: Any) -> Any:
    """Tensors (also inside lists and tuples) as their numpy arrays."""
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value.data if isinstance(value, Node) else value


def numpy_name(func: Callable[..., Any]) -> str:
    """``numpy.sum``, ``numpy.linalg.norm``, ``numpy.fft.fft``: how a student wrote the call."""
    module = getattr(func, "__module__", None) or "numpy"
    if not module.startswith("numpy"):
        module = "numpy"
    # numpy defines many functions in private modules (numpy._core...): name the public one.
    public = ".".join(part for part in module.split(".") if not part.startswith("_"))
    return f"{public}.{func.__name__}"


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Answer ``ufunc(*inputs, **kwargs)`` (numpy's ``__array_ufunc__``) for Tensors."""
    if method == "__call__" and ufunc in _READ_UFUNCS and "out" not in kwargs:
        return getattr(ufunc, method)(*_plain(inputs), **kwargs)
    if method != "__call__" or ufunc not in UFUNCS:
        what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        raise TypeError(
            f"{what} is not supported on microtape Tensors (its result would not be on the tape); "
            f"supported ufuncs: {', '.join(sorted(u.__name__ for u in UFUNCS))} — or use t.data for a plain array"
        )
    if kwargs:
        raise TypeError(
            f"numpy.{ufunc.__name__} on a Tensor: keyword(s) {', '.join(sorted(kwargs))} are not supported "
            "(out= would write past the tape)"
        )
    return UFUNCS[ufunc](*inputs)


def array_function(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Answer ``func(*args, **kwargs)`` (numpy's ``__array_function__``) for Tensors."""
    if func in _READ_FUNCTIONS:
        return func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})
    if func not in FUNCTIONS:
        raise TypeError(
            f"{numpy_name(func)} is not supported on microtape Tensors (it would return a plain array and drop the "
            f"tape); supported: {', '.join(sorted(numpy_name(f) for f in FUNCTIONS))} — or use t.data on purpose"
        )
    ours, renames = FUNCTIONS[func]
    kwargs = {k: v for k, v in kwargs.items() if k not in _IGNORED.get(func, ())}
    if func is np.einsum:
        return ours(*args, **kwargs)
    if func is np.where and len(args) + len(kwargs) == 1:
        raise TypeError(
            "numpy.where(condition) with one argument (the indices where it holds) is not supported on a "
            "Tensor: the indices have no gradient; use np.nonzero(t.data)"
        )
    signature = inspect.signature(func)
    try:
        given = signature.bind(*args, **kwargs).arguments
    except TypeError as error:
        raise TypeError(f"{numpy_name(func)}: {error}") from None
    accepted = inspect.signature(ours).parameters
    parameters = signature.parameters
    first, *rest = given.items()
    # numpy's **kwargs (np.pad's constant_values) arrive as one dict: spread it.
    rest = [
        item
        for key, value in rest
        for item in (value.items() if parameters[key].kind is inspect.Parameter.VAR_KEYWORD else [(key, value)])
    ]
    call = {}
    for key, value in rest:
        key = renames.get(key, key)
        if key not in accepted:
            shown = f"<{type(value).__name__}>" if isinstance(value, (np.ndarray, Node)) else f"{value!r:.40}"
            raise TypeError(
                f"{numpy_name(func)} on a Tensor: the argument {key}={shown} is not supported "
                f"(microtape's {ours.__name__} takes {', '.join(list(accepted)[1:])})"
            )
        call[key] = value
    return ours(first[1], **call)


def _apply2(method: str, reflected: str, a: Any, b: Any) -> Any:
    """``a <op> b`` where numpy gave the operands in order and at least one is a Tensor."""
    if isinstance(a, Node):
        return getattr(a, method)(b)
    return getattr(b, reflected)(a)


answer_numpy_with(array_ufunc, array_function)
