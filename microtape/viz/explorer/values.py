"""A value or a gradient as the explorer's panel shows it: a number, a summary, a small clickable heatmap.

This module lets the data model describe any array the same way::

    show(array)        # {"text": "mean 0.01 · |max| 1.3", "number": None, "shape": [2, 6, 16], "heat": {...}}
    window(array)      # the corner the heatmap shows: rows × columns of a 2-D slice

A Scalar (or a one-entry array) is its number. A bigger array is a
summary line (:func:`microtape.viz.text.value_lines`) and a heatmap of a
2-D slice — the last two axes at index 0 of the others, at most
:data:`HEAT` rows and columns — whose entries the panel can click. Every
array of one node (its value, its gradient, each use's share) is cut by the
same window, so an entry means the same place in all of them.
"""

from typing import Any

import numpy as np

from ...engine.lean import NotKept
from ..text import fmt, grad_lines, value_lines

__all__ = ["show", "show_grad", "window", "cells", "HEAT"]

HEAT = 12  # rows and columns a heatmap shows at most
# A heatmap's entries keep 7 significant digits: the page prints 4, and an entry's shares still sum to
# its gradient well within what it prints (and a notebook holding a view stays light).
CELL_DIGITS = 7


def window(shape: Any) -> Any:
    """The part of an array of ``shape`` the heatmap shows: ``(prefix, rows, columns)``.

    ``prefix``: the index of the leading axes (zeros); rows and columns the
    first :data:`HEAT` of the last two axes (a 1-D array is one row).
    """
    shape = tuple(shape)
    if len(shape) == 0:
        return (), 1, 1
    if len(shape) == 1:
        return (), 1, min(shape[0], HEAT)
    return (0,) * (len(shape) - 2), min(shape[-2], HEAT), min(shape[-1], HEAT)


def cells(array: Any, shape: Any, noise: float = 0.0) -> Any:
    """``array``'s entries in the window of ``shape`` as rows of floats (None when there is no array).

    Entries at most ``noise`` in size are 0: rounding noise is not coloured as a value.
    """
    if array is None or isinstance(array, NotKept):
        return None
    array = np.asarray(array, dtype=np.float64)
    if noise:
        array = np.where(np.abs(array) <= noise, 0.0, array)
    if array.shape != tuple(shape):
        array = np.broadcast_to(array, shape)
    prefix, rows, columns = window(shape)
    if array.ndim == 0:
        part = array.reshape(1, 1)
    elif array.ndim == 1:
        part = array[:columns].reshape(1, -1)
    else:
        part = array[prefix][:rows, :columns]
    return [[_json_number(v, CELL_DIGITS) for v in row] for row in part]


def _json_number(value: Any, digits: Any = None) -> Any:
    """A float JSON can carry (to ``digits`` significant digits, or every one); inf and nan as text."""
    value = float(value)
    if np.isfinite(value):
        return float(f"{value:.{digits}g}") if digits else value
    return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")


def _heat(array: Any, noise: float = 0.0) -> Any:
    shape = np.shape(array)
    prefix, rows, columns = window(shape)
    where = ", ".join([*map(str, prefix), ":" if len(shape) > 1 else ""]).strip(", ")
    clipped = (len(shape) > 1 and shape[-2] > rows) or shape[-1] > columns
    note = f"[{where}{', :' if len(shape) > 1 else ':'}]" if prefix else ""
    return {"cells": cells(array, shape, noise), "note": note + (f" first {rows}×{columns}" if clipped else "")}


def show(data: Any, constant: bool = False) -> Any:
    """A value for the panel: ``text``, ``number`` (a Scalar's), ``shape`` and ``heat`` (an array's)."""
    if isinstance(data, NotKept):
        return {"text": "value not kept (a lean tape dropped it)", "number": None, "shape": list(data.shape)}
    text = " ".join(value_lines(data, constant=constant))
    if data.__class__ is float or np.size(data) == 1:
        return {"text": text, "number": _json_number(np.reshape(data, -1)[0]), "shape": list(np.shape(data))}
    array = np.asarray(data)
    return {"text": text, "number": None, "shape": list(array.shape), "heat": _heat(array)}


def show_grad(grad: Any, noise: float = 0.0, heat: bool = True) -> Any:
    """A gradient for the panel (None: nothing reached this node); ``heat=False``: its text and number only."""
    if grad is None:
        return None
    entry = {"text": " ".join(grad_lines(grad, noise)), "number": None}
    if np.size(grad) == 1:
        entry["number"] = _json_number(np.reshape(grad, -1)[0])
        entry["text"] = fmt(entry["number"]) if isinstance(entry["number"], float) else entry["number"]
    elif heat:
        entry["heat"] = _heat(np.asarray(grad), noise)
    return entry
