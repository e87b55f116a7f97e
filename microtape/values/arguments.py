"""What a Tensor's methods accept as an index, an axis, a shape or a pair of shapes — checked.

Each function turns an argument into the plain form numpy takes (a tuple of
ints, slices and fresh integer arrays; a tuple of axes; a tuple of sizes) or
refuses it with an error that names the argument, the value and what was
expected — before anything is recorded. :class:`~microtape.values.tensor.Tensor`
calls them; :mod:`microtape.numpy_api` calls :func:`check_broadcast` too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine import Node

__all__ = [
    "check_broadcast",
    "picks_along_the_first_axis",
    "index_key",
    "integer_indices",
    "axes_in_range",
    "shape_argument",
]


def check_broadcast(left: Any, right: Any, what: str) -> None:
    """Refuse shapes numpy cannot broadcast, with a message naming both."""
    if left == right:
        return
    try:
        np.broadcast_shapes(left, right)
    except ValueError:
        raise ValueError(
            f"{what}: shapes {left} and {right} do not broadcast "
            "(each axis, aligned from the right, must match or be 1)"
        ) from None


def picks_along_the_first_axis(index: Any) -> bool:
    """True for an integer, or integers in a list or array (not booleans): ``t[3]``, ``t[[0, 2, 2]]``."""
    if isinstance(index, (bool, np.bool_)):
        return False
    if isinstance(index, (int, np.integer)):
        return True
    if isinstance(index, (list, np.ndarray)):
        kind = np.asarray(index).dtype.kind
        return kind in "iu" or (kind == "f" and np.size(index) == 0)  # numpy reads [] as floats
    return False


def index_key(index: Any, shape: Any) -> Any:
    """``t[index]``'s key as a tuple of ints, slices, ``...``, ``None`` and fresh index arrays; clear errors."""
    parts = index if isinstance(index, tuple) else (index,)
    key: list[Any] = []
    for part in parts:
        if isinstance(part, Node):
            raise TypeError(
                f"Tensor[{index!r:.80}]: a {type(part).__name__} cannot be an index (use its .data, or numbers)"
            )
        if isinstance(part, (bool, np.bool_)):
            raise TypeError(f"Tensor[{index!r:.80}]: True/False is not an index; use a boolean array as a mask")
        if isinstance(part, (int, np.integer)):
            key.append(int(part))
        elif isinstance(part, slice):
            ends = (part.start, part.stop, part.step)
            if not all(v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool)) for v in ends):
                raise TypeError(f"Tensor[{index!r:.80}]: slice bounds must be integers or None, got {part!r}")
            key.append(slice(*(None if v is None else int(v) for v in ends)))
        elif part is Ellipsis or part is None:
            key.append(part)
        elif isinstance(part, np.ma.MaskedArray):
            raise TypeError(f"Tensor[{index!r:.80}]: a masked array as an index would lose its mask; pass .filled(...)")
        else:
            array = np.asarray(part)
            if array.dtype.kind not in "iub" and array.size:
                raise TypeError(
                    f"Tensor[{index!r:.80}]: expected integers, slices, ..., None, or integer or boolean "
                    f"arrays; got {part!r:.60} (dtype {array.dtype})"
                )
            key.append(np.array(array, dtype=np.bool_ if array.dtype == np.bool_ else np.intp))
    checked = tuple(key)
    try:  # numpy's own check, on a view that costs no memory
        np.broadcast_to(np.zeros((), dtype=np.int8), shape)[checked]
    except IndexError as error:
        raise IndexError(f"Tensor[{index!r:.80}] of a tensor of shape {shape}: {error}") from None
    return checked


def integer_indices(indices: Any, length: int, what: str) -> np.ndarray:
    """``indices`` as a fresh integer array, each in ``[-length, length)``; clear errors otherwise."""
    if isinstance(indices, Node):
        raise TypeError(f"{what}: indices must be integers (a numpy array or list), not a {type(indices).__name__}")
    if isinstance(indices, np.ma.MaskedArray):
        raise TypeError(f"{what}: indices are a masked array; the mask would be dropped silently (pass .filled(...))")
    array = np.asarray(indices)
    if isinstance(indices, list) and array.size == 0:
        array = array.astype(np.intp)  # numpy reads [] as floats; t[[]] picks nothing, as in numpy
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise TypeError(f"{what}: indices must be integers, got dtype {array.dtype} ({indices!r:.60})")
    if array.size and (array.min() < -length or array.max() >= length):
        bad = array[(array < -length) | (array >= length)].ravel()[0]
        raise IndexError(f"{what}: index {bad} is out of range for an axis of length {length}")
    return np.array(array, dtype=np.intp)


def axes_in_range(axis: Any, ndim: int, what: str) -> Any:
    """``axis`` (an int or a tuple of them) as a tuple of distinct axes in ``range(ndim)``; clear errors."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise ValueError(f"Tensor.{what}(axis={axis!r}): expected integer axes in [-{ndim}, {ndim})")
    axes = tuple(int(a) % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"Tensor.{what}(axis={axis!r}): an axis is repeated")
    return axes


def shape_argument(shape: Any, what: str) -> tuple[int, ...]:
    """``shape`` (a size or a tuple of sizes) as a tuple of ints >= 0; clear errors."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"Tensor.{what}(shape={shape!r}): expected a tuple of sizes") from None
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ValueError(f"Tensor.{what}(shape={shape!r}): sizes must be integers >= 0")
    return tuple(int(n) for n in shape)
