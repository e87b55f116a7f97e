"""Argument checks every layer shares: clear errors before anything changes.

This module lets a layer turn what a user passed into a safe numpy array, or
refuse it with a message that names the argument, the value and what was
expected::

    data = input_array(x, "x", "Linear.forward", dtype=np.float64)

The rules (the same for every layer): a ``Tensor`` or a plain numpy array —
not a masked array (its mask would be dropped silently), not ``np.matrix``,
not a torch tensor (convert it with ``.detach().numpy()``); real numbers;
cast to the layer's dtype *first*, then checked to be finite — so a float64
``1e39`` given to a float32 layer is refused, not silently turned into inf.
"""

import numbers
from typing import Any

import numpy as np

from ..engine.lean import NotKept
from ..values.tensor import Tensor

__all__ = [
    "input_array",
    "integer_ids",
    "gradient_array",
    "positive_int",
    "block_size_or_none",
    "float_dtype",
    "probability",
    "check_finite",
    "seed_value",
    "child_seeds",
]


def _describe(value: Any) -> Any:
    module = type(value).__module__.split(".")[0]
    name = type(value).__name__
    return f"{module}.{name}" if module not in ("builtins", "numpy") else name


def input_array(value: Any, argument: str, where: str, dtype: Any, *, finite: bool = True) -> Any:
    """``value`` (a Tensor or numpy array) as a numpy array of ``dtype``; clear errors otherwise."""
    if isinstance(value, Tensor):
        data = value.data
    elif type(value) is np.ndarray:
        data = value
    elif isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{where}: {argument} is a numpy masked array; its mask would be dropped silently. "
            f"Pass {argument}.filled(value) (or a plain array)"
        )
    elif isinstance(value, np.ndarray):
        raise TypeError(
            f"{where}: {argument} is a {_describe(value)} (a numpy subclass); "
            f"pass a plain array: np.asarray({argument})"
        )
    else:
        hint = " (convert it with .detach().cpu().numpy())" if _describe(value).startswith("torch.") else ""
        raise TypeError(f"{where}: {argument} must be a microtape Tensor or numpy array, got {_describe(value)}{hint}")
    if data.dtype.kind not in "fiu":
        raise TypeError(f"{where}: {argument} must hold real numbers, got dtype {data.dtype}")
    with np.errstate(over="ignore"):  # an overflow in the cast is found (and named) just below
        data = data.astype(dtype, copy=False)
    if finite:
        check_finite(data, argument, where, cast_from=value)
    return data


def integer_ids(value: Any, argument: str, where: str, what: str = "integers") -> Any:
    """``value`` (token ids, class ids: a numpy array or nested lists) as an integer array; clear errors otherwise.

    Refused, naming ``argument``: a Tensor (it holds floats), a masked array
    (its mask would be dropped silently), another numpy subclass, ragged
    lists, booleans and non-integer dtypes.
    """
    if isinstance(value, Tensor):
        raise TypeError(f"{where}: {argument} must be an integer numpy array ({what}), not a Tensor of floats")
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{where}: {argument} is a numpy masked array; its mask would be dropped silently. "
            f"Pass {argument}.filled(value) (or a plain array)"
        )
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        raise TypeError(f"{where}: {argument} is a {_describe(value)} (a numpy subclass); pass a plain array")
    try:
        array = np.asarray(value)
    except ValueError:  # ragged nested lists
        raise ValueError(
            f"{where}: {argument} is ragged (rows of different lengths); expected a rectangular array of {what}"
        ) from None
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise TypeError(f"{where}: {argument} must be {what}, got dtype {array.dtype}")
    return array


def check_finite(data: Any, argument: str, where: str, cast_from: Any = None) -> None:
    """Refuse NaN or ±inf in ``data``, naming the first offending index."""
    if data.size and not np.isfinite(data).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(data))[0])
        original = np.asarray(getattr(cast_from, "data", cast_from))[index] if cast_from is not None else None
        became = ""
        if original is not None and np.isfinite(original):
            became = f" ({original!r} overflowed {data.dtype.name})"
        raise ValueError(
            f"{where}: {argument} contains {data[index]} at index {index}{became}; inputs must be finite numbers"
        )


def gradient_array(value: Any, argument: str, where: str, shape: Any, dtype: Any) -> Any:
    """An upstream gradient: real, finite after the cast to ``dtype``, of the output's ``shape``."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool) and shape == ():
        value = np.asarray(value)
    if isinstance(value, Tensor):
        value = value.data
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{where}: {argument} must be a numpy array or Tensor, got {_describe(value)}")
    if isinstance(value, np.ma.MaskedArray) or type(value) is not np.ndarray:
        raise TypeError(f"{where}: {argument} must be a plain numpy array, got {_describe(value)}")
    if value.dtype.kind not in "fiu":
        kind = "complex (the imaginary part would be lost)" if value.dtype.kind == "c" else str(value.dtype)
        raise TypeError(f"{where}: {argument} must hold real numbers, got {kind}")
    if value.shape != tuple(shape):
        raise ValueError(f"{where}: {argument} has shape {value.shape}; expected the output's shape {tuple(shape)}")
    with np.errstate(over="ignore"):
        data = value.astype(dtype, copy=False)
    check_finite(data, argument, where, cast_from=value)
    return data


def positive_int(value: Any, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{what}: expected a positive integer, got {value!r}")
    return int(value)


def block_size_or_none(value: Any, what: str) -> Any:
    """None (the standard chain) or a positive integer (the tiled kernel's block size)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{what} = {value!r}: expected None (the standard chain) or a positive integer block size")
    return int(value)


def float_dtype(dtype: Any, what: str) -> Any:
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"{what}: expected float32 or float64, got {dtype!r}") from None
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"{what}: expected float32 or float64, got {dtype}")
    return dtype


def probability(value: Any, what: str) -> Any:
    """A dropout probability: a real number with ``0 <= p < 1``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:  # type: ignore[operator]  # a Real compares
        raise ValueError(f"{what}: expected a probability with 0 <= p < 1, got {value!r}")
    return float(value)


def seed_value(seed: Any, what: str) -> Any:
    """A seed for numpy's generators: None, a non-negative int, or a ``np.random.SeedSequence``."""
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"{what}: expected None or a non-negative integer, got {seed!r}")
    return int(seed)


def child_seeds(seed: Any, count: int, what: str) -> Any:
    """``count`` independent seed sequences from ``seed`` (None, a non-negative int or a SeedSequence).

    What a layer made of sub-layers gives each of them, so that one seed fixes
    them all and no two share a stream.
    """
    seed = seed_value(seed, what)
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return root.spawn(count)


def gradient_overflow_error(grads: Any, names: Any, where: str, dtype: Any) -> Any:
    """The error for the first of ``names`` whose gradient in ``grads`` is not finite, or None when all are."""
    for name in names:
        grad = grads[name]
        if not np.isfinite(grad).all():
            index = tuple(int(i) for i in np.argwhere(~np.isfinite(grad))[0])
            return FloatingPointError(
                f"{where}: the gradient of {name} overflowed {np.dtype(dtype).name} at index {index} "
                f"(it is {grad[index]}); grad_output or the weights are too large for this dtype. "
                "No gradient was changed."
            )
    return None


def overflow_error(tape: Any, where: str, dtype: Any) -> Any:
    """The error for a forward that produced inf/NaN: it names the first step where that appeared.

    (On a lean tape, only the steps whose values were kept are searched.)
    """
    lean = " (recorded lean: the steps whose values were not kept were not searched)" if tape.lean else ""
    for index, node in enumerate(tape.nodes):
        if node.data.__class__ is NotKept:
            continue
        data = np.asarray(node.data)
        bad = ~np.isfinite(data)
        if node.op.name == "add_constant":
            bad &= ~np.isneginf(data)  # a -inf mask entry gives -inf on purpose
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            name = tape.variable_names()[node]
            row = f" (row {at[-2]})" if data.ndim >= 2 else ""
            return FloatingPointError(
                f"{where}: {name} overflowed {np.dtype(dtype).name} at index {at}{row}, step {index} of the tape "
                f"(it is {data[at]}): the inputs or weights are too large for this dtype{lean}. Nothing was recorded."
            )
    return FloatingPointError(f"{where}: the output is not finite{lean}. Nothing was recorded.")
