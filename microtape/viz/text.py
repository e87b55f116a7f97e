"""How numbers, arrays and gradients read in a picture.

This module lets every picture print values the same way::

    fmt(0.070651)                     # '0.07065'  (4 significant digits, never '-0')
    value_lines(np.eye(2))            # ['[1, 0]', '[0, 1]']  small arrays in full
    grad_lines(1e-17, noise=1e-12)    # ['grad ≈0 (noise 1e-17)']
    grad_name("f", scalar=True, loss="L")   # '∂L/∂f'

Arrays of up to :data:`SMALL_ENTRIES` numbers (a 3×3) are printed in full,
bigger ones as a summary (mean and largest magnitude for values, norm and
largest magnitude for gradients). A gradient entry smaller than ``noise``
(the trace's rounding-noise floor) prints as ``0``, and a gradient that is
all noise reads ``≈0 (noise 2e-17)``: it is zero in exact arithmetic.
"""

from typing import Any

import numpy as np

from ..engine.lean import NotKept
from ..nn.masks import SUPPRESSED_BELOW

__all__ = [
    "SMALL_ENTRIES",
    "fmt",
    "number",
    "shape_text",
    "value_lines",
    "grad_lines",
    "norm_text",
    "grad_name",
    "masked_cells",
    "visible",
    "peak",
    "flatten",
    "step_text",
]

SMALL_ENTRIES = 9  # arrays up to 3×3 are printed in full
MASKED_AT = SUPPRESSED_BELOW  # an additive mask value at or below this counts as "masked"


def fmt(value: Any) -> str:
    """A number in 4 significant digits (no ``-0``)."""
    value = float(value)
    if value == 0.0:
        return "0"
    return f"{value:.4g}"


def number(value: Any) -> Any:
    """:func:`fmt`, with negative numbers in parentheses (to sit inside a formula)."""
    text = fmt(value)
    return f"({text})" if text.startswith("-") else text


def peak(array: Any) -> Any:
    """The largest magnitude in ``array`` (0 for an empty one)."""
    return float(np.max(np.abs(array))) if np.size(array) else 0.0


def flatten(arrays: Any) -> Any:
    """Several gradients as one flat float64 array (for one norm)."""
    return np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in arrays])


def shape_text(data: Any) -> Any:
    return "[" + ",".join(str(n) for n in np.shape(data)) + "]"


def _rows(array: Any, noise: float = 0.0) -> Any:
    """A small array as text rows (leading length-1 axes dropped), or None if it is not small."""
    array = np.asarray(array, dtype=np.float64)
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    if array.size > SMALL_ENTRIES or array.ndim > 2 or array.size == 0:
        return None
    shown = np.where(np.abs(array) <= noise, 0.0, array)
    if shown.ndim < 2:
        shown = shown.reshape(1, -1)
    return ["[" + ", ".join(fmt(v) for v in row) + "]" for row in shown]


def masked_cells(array: Any) -> Any:
    """Boolean: where an additive-mask value hides a cell (``<= -1e4`` or not finite)."""
    return ~np.isfinite(array) | (array <= MASKED_AT)


def value_lines(data: Any, constant: bool = False) -> Any:
    """What a box says about a value: ``['0.7071']``, ``['[1, 2]']`` or ``['mean 0.01 · |max| 1.3']``."""
    if data.__class__ is NotKept:  # a lean tape dropped it
        return ["value not kept"]
    if data.__class__ is float or np.size(data) == 1:
        return [fmt(np.reshape(data, -1)[0])]
    array = np.asarray(data)
    hidden = masked_cells(array)
    count = int(hidden.sum())
    if constant:
        if count:
            return [f"masked {count}/{array.size}"]
        distinct = np.unique(array)
        if distinct.size <= 2 and distinct[0] == 0.0:
            kept = int(np.count_nonzero(array))
            scale = f" ×{fmt(distinct[-1])}" if distinct.size == 2 and distinct[-1] != 1.0 else ""
            return [f"kept {kept}/{array.size}{scale}"]
    rows = _rows(array)
    if rows is not None:
        return rows
    rest = array[~hidden]
    if rest.size == 0:
        return [f"all {count} masked"]
    text = f"mean {fmt(rest.mean())} · |max| {fmt(np.abs(rest).max())}"
    return [text + (f" · {count} masked" if count else "")]


def grad_lines(grad: Any, noise: float = 0.0, prefix: str = "grad") -> Any:
    """What a box says about a gradient: ``['grad 0.07']``, rows in full, or ``['‖grad‖ 1.2 · |max| 0.4']``.

    A gradient whose every entry is at most ``noise`` (but not all exactly 0)
    reads ``≈0 (noise 2e-17)``.
    """
    if grad is None:
        return [f"no {prefix}"]
    array = np.asarray(grad, dtype=np.float64)
    largest = peak(array)
    if 0.0 < largest <= noise:
        return [f"{prefix} ≈0 (noise {largest:.0e})"]
    if array.size == 1:
        return [f"{prefix} {fmt(array.reshape(-1)[0])}"]
    rows = _rows(array, noise)
    if rows is not None:
        pad = " " * len(prefix)
        return [f"{prefix if k == 0 else pad} {row}" for k, row in enumerate(rows)]
    return [f"‖{prefix}‖ {fmt(np.linalg.norm(array))} · |max| {fmt(largest)}"]


def norm_text(grad: Any, noise: float = 0.0) -> str:
    """``‖grad‖ 1.2`` (or ``≈0 (noise …)``), for summaries and summary edges."""
    array = np.asarray(grad, dtype=np.float64)
    size = float(np.linalg.norm(array))
    if 0.0 < peak(array) <= noise:
        return f"‖grad‖ ≈0 (noise {size:.0e})"
    return f"‖grad‖ {fmt(size)}"


def grad_name(name: str, scalar: Any, loss: Any) -> Any:
    """How a gradient is called: ``∂L/∂f`` for a scalar, ``dQ_heads`` or ``d(q_proj.xW^T)`` for a tensor."""
    if scalar:
        return f"∂{loss}/∂{name}"
    return f"d{name}" if name.isidentifier() else f"d({name})"


def visible(text: str) -> Any:
    """``text`` with control characters shown as their Unicode pictures (``\x01`` → ``␁``, newline → ``␊``).

    A node named with a newline or a NUL would otherwise end a DOT label
    early and ``dot`` would refuse the whole graph.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else chr(0x2400 + ord(c)) if ord(c) < 0x20 else "␡" for c in text)


def step_text(k: Any, count: int) -> str:
    """``step 2 of steps 0–3``: one numbering for ``graph(step=k)``, ``frames[k]``, the slider and the captions.

    Steps are counted from 0 like the frames of a list; saying the range
    keeps "step 0 of 21" from reading as 21 steps when there are 22.
    """
    return f"step {k} of steps 0–{count - 1}"
