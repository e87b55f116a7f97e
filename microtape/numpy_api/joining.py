"""Joining tensors and cutting them apart: concatenate, stack, split, pad.

``concatenate`` records one ``concatenate`` op per join (two at a time);
``stack`` reshapes each tensor, then concatenates; ``split`` is one
``index`` (a slice) per piece; ``pad`` is a ``take`` per axis for numpy's
index-based modes (``edge``, ``reflect``, ``symmetric``, ``wrap``) and an
``index_add`` into zeros for ``constant``. So every gradient here is that
of a primitive already checked on its own.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .. import ops
from ..engine import record
from ..values.tensor import Tensor
from .functions import Operand

__all__ = ["concatenate", "stack", "split", "pad"]


def concatenate(tensors: Any, axis: Any = 0, name: str | None = None) -> Tensor:
    """Join tensors along an existing ``axis`` (``numpy.concatenate``; None: flattened first), recorded on the tape.

    The primitive joins two at a time, so three tensors are two tape rows:
    ``concatenate(concatenate(a, b), c)``. Arrays among ``tensors`` are constants.
    """
    tensors = _tensor_list(tensors, "concatenate")
    if axis is None:
        # numpy's axis=None: every tensor flattened, then joined end to end (0-d ones too).
        tensors = [tensor.reshape(-1) for tensor in tensors]
        axis = 0
    first = tensors[0]
    if first.ndim == 0:
        raise ValueError("concatenate(tensors): 0-d tensors have no axis to join along; use stack")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -first.ndim <= axis < first.ndim:
        raise ValueError(f"concatenate(axis={axis!r}): expected an integer axis for tensors of rank {first.ndim}")
    axis = int(axis) % first.ndim
    for position, tensor in enumerate(tensors):
        same_rank = tensor.ndim == first.ndim
        if (
            not same_rank
            or tensor.shape[:axis] + tensor.shape[axis + 1 :] != first.shape[:axis] + first.shape[axis + 1 :]
        ):
            raise ValueError(
                f"concatenate(tensors): tensor {position} has shape {tensor.shape} but tensor 0 has "
                f"{first.shape}; all axes but axis {axis} must match"
            )
    if len(tensors) == 1:
        # Still a new node (as numpy's result is a new array), so a name names it, not the input.
        return record(ops.reshape, (first,), {"shape": first.shape}, name=name)
    joined = first
    for tensor in tensors[1:]:
        joined = record(ops.concatenate, (joined, tensor), {"axis": axis})
    joined.name = name
    return joined


def stack(tensors: Any, axis: Any = 0, name: str | None = None) -> Tensor:
    """Join same-shaped tensors along a new ``axis`` (``numpy.stack``): a reshape each, then concatenate."""
    tensors = _tensor_list(tensors, "stack")
    shape = tensors[0].shape
    for position, tensor in enumerate(tensors):
        if tensor.shape != shape:
            raise ValueError(f"stack(tensors): tensor {position} has shape {tensor.shape}, tensor 0 has {shape}")
    rank = len(shape) + 1
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -rank <= axis < rank:
        raise ValueError(f"stack(axis={axis!r}): expected an integer axis for the stacked rank {rank}")
    axis = int(axis) % rank
    expanded = shape[:axis] + (1,) + shape[axis:]
    return concatenate([tensor.reshape(expanded) for tensor in tensors], axis=axis, name=name)


def _tensor_list(tensors: Any, what: str) -> list[Tensor]:
    if isinstance(tensors, (Tensor, np.ndarray)) or not hasattr(tensors, "__iter__"):
        raise TypeError(f"{what}(tensors): expected a list of Tensors, got {type(tensors).__name__}")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{what}(tensors): expected at least one tensor, got an empty list")
    like = next((t for t in tensors if isinstance(t, Tensor)), None)
    if like is None:
        raise TypeError(f"{what}(tensors): give at least one Tensor (the others may be arrays)")
    return [like._lift(t, what) for t in tensors]


def split(tensor: Operand, indices_or_sections: Any, axis: Any = 0) -> list[Tensor]:
    """Cut ``tensor`` along ``axis`` into equal pieces (an int) or at the given indices, as ``numpy.split``.

    Returns a list of Tensors, each an ``index`` (a slice) of the original.
    """
    tensor = _tensor_list([tensor], "split")[0]
    if tensor.ndim == 0:
        raise ValueError("split(tensor): a 0-d tensor has no axis to split")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -tensor.ndim <= axis < tensor.ndim:
        raise ValueError(f"split(axis={axis!r}): expected an integer axis for a tensor of shape {tensor.shape}")
    axis = int(axis) % tensor.ndim
    length = tensor.shape[axis]
    if _whole_number(indices_or_sections):
        sections = int(indices_or_sections)  # 3.0 too, as numpy takes it
        if sections <= 0 or length % sections:
            raise ValueError(
                f"split(indices_or_sections={sections}): an axis of length {length} does not split into "
                f"{sections} equal pieces"
            )
        cuts = [length // sections * i for i in range(1, sections)]
    else:
        try:
            cuts = list(indices_or_sections)
        except TypeError:  # a number with a fraction (2.5), or no number at all
            cuts = [indices_or_sections]
        if not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cuts):
            raise TypeError(f"split(indices_or_sections={indices_or_sections!r:.60}): expected an int or integers")
    bounds = [0, *cuts, length]
    before = (slice(None),) * axis
    return [
        record(ops.index, (tensor,), {"key": (*before, slice(int(start), int(stop)))})
        for start, stop in zip(bounds[:-1], bounds[1:])
    ]


def _whole_number(value: Any) -> bool:
    """An int, or a float with no fraction (numpy's split takes 3.0 as 3 sections); never a bool."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, numbers.Integral) or float(value).is_integer()


_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


def pad(
    tensor: Operand, pad_width: Any, mode: str = "constant", constant_values: float = 0.0, name: str | None = None
) -> Tensor:
    """``numpy.pad`` for Tensors: ``constant`` (a number), ``edge``, ``reflect``, ``symmetric`` or ``wrap``.

    ``pad_width`` is numpy's: an int, ``(before, after)``, or one pair per axis.
    """
    tensor = _tensor_list([tensor], "pad")[0]
    try:
        widths = np.broadcast_to(np.asarray(pad_width), (tensor.ndim, 2))
    except ValueError:
        raise ValueError(
            f"pad(pad_width={pad_width!r:.60}): expected an int, (before, after) or one pair per axis "
            f"of the {tensor.ndim} axes"
        ) from None
    if widths.dtype.kind not in "iu" or np.any(widths < 0):
        raise ValueError(f"pad(pad_width={pad_width!r:.60}): widths must be integers >= 0")
    if mode == "constant":
        if isinstance(constant_values, bool) or not isinstance(constant_values, numbers.Real):
            raise TypeError(f"pad(constant_values={constant_values!r:.40}): expected one number")
        return _pad_constant(tensor, widths, float(constant_values), name)
    if mode not in _INDEX_MODES:
        raise ValueError(f"pad(mode={mode!r}): expected 'constant' or one of {', '.join(_INDEX_MODES)}")
    for axis, (before, after) in enumerate(widths):  # every axis checked before the first take is recorded
        if (before or after) and tensor.shape[axis] == 0:
            raise ValueError(f"pad(mode={mode!r}): axis {axis} is empty; there is nothing to repeat")
    padded = tensor
    for axis, (before, after) in enumerate(widths):
        if before or after:
            indices = np.pad(np.arange(tensor.shape[axis]), (int(before), int(after)), mode=mode)  # type: ignore[call-overload]  # (one of _INDEX_MODES)
            padded = record(ops.take, (padded,), {"indices": indices, "axis": axis})
    if padded is tensor:
        return tensor.reshape(tensor.shape, name=name)
    padded.name = name
    return padded


def _pad_constant(tensor: Tensor, widths: Any, value: Any, name: str | None) -> Tensor:
    shape = tuple(int(n + before + after) for n, (before, after) in zip(tensor.shape, widths))
    key = tuple(slice(int(before), int(before) + n) for n, (before, _) in zip(tensor.shape, widths))
    placed = record(ops.index_add, (tensor,), {"shape": shape, "key": key}, name=None if value else name)
    if not value:
        return placed
    border = np.full(shape, value, dtype=tensor.dtype)
    border[key] = 0.0
    return placed.add_constant(border, name=name)
