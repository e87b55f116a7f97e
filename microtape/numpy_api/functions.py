"""numpy's names for microtape's operations: ``mt.sin(x)``, ``mt.where(m, a, b)``, ``mt.einsum(...)``.

Each function here takes what numpy's does and calls the method of a
:class:`~microtape.Tensor` or :class:`~microtape.Scalar` (a plain array or
number becomes a constant Tensor, so the result is a Tensor either way).
The same functions answer numpy's own calls on Tensors (``np.sin(t)``,
see :mod:`microtape.numpy_api.protocol`).
"""

from __future__ import annotations

import builtins
import string
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from .. import ops
from ..engine import Node, record
from ..ops.linalg import parse_einsum
from ..values.arguments import check_broadcast
from ..values.scalar import Scalar
from ..values.tensor import Tensor

#: What these functions take: a Scalar or Tensor, or anything numpy reads as an array (a constant).
Operand: TypeAlias = "Tensor | Scalar | npt.ArrayLike"
#: What they return: a value of the input's kind (a Scalar for Scalars, a Tensor otherwise).
Result: TypeAlias = "Tensor | Scalar"

# fmt: off
__all__ = [
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "square", "reciprocal", "abs", "clip",
    "maximum", "minimum", "logaddexp", "logaddexp2", "arctan2", "power", "where", "sum", "mean", "max", "min",
    "prod", "var", "std", "norm", "cumsum", "cumprod", "logsumexp", "softmax", "log_softmax", "matmul", "einsum",
    "dot", "outer", "reshape", "transpose", "squeeze", "expand_dims", "broadcast_to", "flip", "repeat", "tile",
]
# fmt: on


def node(x: Operand) -> Any:  # (a Result; Any: the caller calls the methods of its kind)
    """A Scalar or Tensor as it is; anything else (an array, a list, a number) as a constant Tensor."""
    return x if isinstance(x, Node) else Tensor(x)


# -- entry by entry: one method each


def sin(x: Operand, name: str | None = None) -> Result:
    return node(x).sin(name=name)


def cos(x: Operand, name: str | None = None) -> Result:
    return node(x).cos(name=name)


def tan(x: Operand, name: str | None = None) -> Result:
    return node(x).tan(name=name)


def arcsin(x: Operand, name: str | None = None) -> Result:
    return node(x).arcsin(name=name)


def arccos(x: Operand, name: str | None = None) -> Result:
    return node(x).arccos(name=name)


def arctan(x: Operand, name: str | None = None) -> Result:
    return node(x).arctan(name=name)


def sinh(x: Operand, name: str | None = None) -> Result:
    return node(x).sinh(name=name)


def cosh(x: Operand, name: str | None = None) -> Result:
    return node(x).cosh(name=name)


def tanh(x: Operand, name: str | None = None) -> Result:
    return node(x).tanh(name=name)


def exp(x: Operand, name: str | None = None) -> Result:
    return node(x).exp(name=name)


def exp2(x: Operand, name: str | None = None) -> Result:
    return node(x).exp2(name=name)


def expm1(x: Operand, name: str | None = None) -> Result:
    return node(x).expm1(name=name)


def log(x: Operand, name: str | None = None) -> Result:
    return node(x).log(name=name)


def log2(x: Operand, name: str | None = None) -> Result:
    return node(x).log2(name=name)


def log10(x: Operand, name: str | None = None) -> Result:
    return node(x).log10(name=name)


def log1p(x: Operand, name: str | None = None) -> Result:
    return node(x).log1p(name=name)


def sqrt(x: Operand, name: str | None = None) -> Result:
    return node(x).sqrt(name=name)


def cbrt(x: Operand, name: str | None = None) -> Result:
    return node(x).cbrt(name=name)


def square(x: Operand, name: str | None = None) -> Result:
    return node(x).square(name=name)


def reciprocal(x: Operand, name: str | None = None) -> Result:
    return node(x).reciprocal(name=name)


def abs(x: Operand, name: str | None = None) -> Result:  # noqa: A001  (numpy's name)
    return node(x).abs(name=name)


def clip(x: Operand, lower: float | None = None, upper: float | None = None, name: str | None = None) -> Result:
    return node(x).clip(lower, upper, name=name)


def _pair(a: Operand, b: Operand) -> tuple[Any, Any]:
    """``a`` carries the method and lifts ``b``; a plain ``a`` beside a Scalar or Tensor ``b`` is made its constant."""
    return (a, b) if isinstance(a, Node) or not isinstance(b, Node) else (type(b)._constant(a, b), b)


def _named(result: Result, name: str | None) -> Result:
    if name is not None:
        result.name = name
    return result


def maximum(a: Operand, b: Operand, name: str | None = None) -> Result:
    a, b = _pair(a, b)
    return node(a).maximum(b, name=name)


def minimum(a: Operand, b: Operand, name: str | None = None) -> Result:
    a, b = _pair(a, b)
    return node(a).minimum(b, name=name)


def logaddexp(a: Operand, b: Operand, name: str | None = None) -> Result:
    a, b = _pair(a, b)
    return node(a).logaddexp(b, name=name)


def logaddexp2(a: Operand, b: Operand, name: str | None = None) -> Result:
    a, b = _pair(a, b)
    return node(a).logaddexp2(b, name=name)


def arcsinh(x: Operand, name: str | None = None) -> Result:
    return node(x).arcsinh(name=name)


def arccosh(x: Operand, name: str | None = None) -> Result:
    return node(x).arccosh(name=name)


def arctanh(x: Operand, name: str | None = None) -> Result:
    return node(x).arctanh(name=name)


def arctan2(a: Operand, b: Operand, name: str | None = None) -> Result:
    a, b = _pair(a, b)
    return node(a).arctan2(b, name=name)


def power(a: Operand, b: Operand, name: str | None = None) -> Result:
    """``a ** b`` with either or both a Tensor (a Tensor exponent gets its gradient: d/db = aᵇ ln a)."""
    a, b = _pair(a, b)
    return node(a).pow(b, name=name)


def where(condition: Operand, a: Operand, b: Operand, name: str | None = None) -> Result:
    """``a`` where ``condition`` holds, ``b`` elsewhere (broadcasting all three), as ``numpy.where``.

    The condition is data (a boolean array; a Tensor's values are read): it
    gets no gradient. ``a`` gets the gradient where it was chosen, ``b`` the rest.
    """
    if isinstance(condition, Node):
        condition = condition.data
    condition = np.asarray(condition)
    if condition.dtype.kind not in "biuf":
        raise TypeError(f"where(condition): expected a boolean array, got dtype {condition.dtype}")
    condition = condition != 0
    like: Any = a if isinstance(a, Node) else b if isinstance(b, Node) else Tensor(np.asarray(a, dtype=float))
    a, b = (x if isinstance(x, Node) else like._constant(x, like) for x in (a, b))
    if isinstance(like, Tensor):  # (then a and b are Tensors too)
        check_broadcast(condition.shape, a.shape, "where(condition, a, b)")  # type: ignore[union-attr]
        check_broadcast(np.broadcast_shapes(condition.shape, a.shape), b.shape, "where(condition, a, b)")  # type: ignore[union-attr]
        return ops.where(condition, a, b, name=name)
    if condition.ndim:
        raise ValueError(f"where(condition, a, b): with Scalars the condition is one bool, got shape {condition.shape}")
    return ops.where(float(condition), a, b, name=name)


# -- reductions


def sum(x: Operand, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Result:  # noqa: A001
    return node(x).sum(axis, keepdims=keepdims, name=name)


def mean(x: Operand, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Result:
    return node(x).mean(axis, keepdims=keepdims, name=name)


def max(x: Operand, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Result:  # noqa: A001
    return node(x).max(axis, keepdims=keepdims, name=name)


def min(x: Operand, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Result:  # noqa: A001
    return node(x).min(axis, keepdims=keepdims, name=name)


def prod(x: Operand, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Result:
    return node(x).prod(axis, keepdims=keepdims, name=name)


def var(x: Operand, axis: Any = None, keepdims: bool = False, ddof: int = 0, name: str | None = None) -> Result:
    return node(x).var(axis, keepdims=keepdims, ddof=ddof, name=name)


def std(x: Operand, axis: Any = None, keepdims: bool = False, ddof: int = 0, name: str | None = None) -> Result:
    return node(x).std(axis, keepdims=keepdims, ddof=ddof, name=name)


def norm(x: Operand, ord: Any = None, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Result:  # noqa: A002  (numpy.linalg.norm's order)
    return node(x).norm(axis, keepdims=keepdims, ord=ord, name=name)


def cumsum(x: Operand, axis: Any = None, name: str | None = None) -> Result:
    return node(x).cumsum(axis, name=name)


def cumprod(x: Operand, axis: Any = None, name: str | None = None) -> Result:
    return node(x).cumprod(axis, name=name)


def logsumexp(x: Operand, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Result:
    return node(x).logsumexp(axis, keepdims=keepdims, name=name)


def softmax(x: Operand, axis: Any = -1, name: str | None = None) -> Result:
    return node(x).softmax(axis, name=name)


def log_softmax(x: Operand, axis: Any = -1, name: str | None = None) -> Result:
    return node(x).log_softmax(axis, name=name)


# -- shape


def reshape(x: Operand, shape: Any, name: str | None = None) -> Result:
    return node(x).reshape(shape, name=name)


def transpose(x: Operand, axes: Any = None, name: str | None = None) -> Result:
    return node(x).transpose(*(() if axes is None else (tuple(axes),)), name=name)


def squeeze(x: Operand, axis: Any = None, name: str | None = None) -> Result:
    return node(x).squeeze(axis, name=name)


def expand_dims(x: Operand, axis: Any, name: str | None = None) -> Result:
    return node(x).expand_dims(axis, name=name)


def broadcast_to(x: Operand, shape: Any, name: str | None = None) -> Result:
    return node(x).broadcast_to(shape, name=name)


def flip(x: Operand, axis: Any = None, name: str | None = None) -> Result:
    return node(x).flip(axis, name=name)


def repeat(x: Operand, repeats: Any, axis: Any = None, name: str | None = None) -> Result:
    return node(x).repeat(repeats, axis, name=name)


def tile(x: Operand, reps: Any, name: str | None = None) -> Result:
    return node(x).tile(reps, name=name)


# -- products


def matmul(a: Operand, b: Operand, name: str | None = None) -> Result:
    a, b = _pair(a, b)
    return node(a).matmul(b, name=name)


def einsum(*arguments: Any, optimize: Any = False, name: str | None = None) -> Result:
    """``numpy.einsum`` on Tensors: ``einsum("ij,jk->ik", a, b)``, recorded as two-operand ``einsum`` ops.

    One operand is paired with the constant 1 (``"ij,->ji"``); three or more
    are contracted left to right, keeping the letters still needed. As in
    numpy: a letter repeated in one operand takes its diagonal (``"ii->i"``,
    the trace ``"ii->"``; recorded as an ``index``), ``...`` stands for the
    leading axes (of equal lengths in every operand that has them), the
    sublist form ``einsum(a, [0, 1], b, [1], [0])`` reads integers as letters,
    ``optimize=`` is accepted and ignored (the contraction order changes
    no value), and a letter of length 1 in one operand and n in another is
    broadcast to n, as numpy does (``einsum("i,i", x, [2.0])``; recorded as a
    ``broadcast_to``, so its gradient is summed back).
    """
    subscripts, operands = _einsum_arguments(arguments)
    if not operands:
        raise ValueError("einsum: give at least one operand")
    if not isinstance(optimize, (bool, str, list)):
        raise TypeError(f"einsum(optimize={optimize!r:.40}): expected True, False, 'greedy', 'optimal' or a path")
    tensors = [node(x) for x in operands]
    like = next((t for t in tensors if t.requires_grad), tensors[0])
    tensors = [like._lift(t, "einsum") for t in tensors]
    inputs, output = _checked_subscripts(subscripts, [t.ndim for t in tensors])
    sizes = _check_sizes(inputs, tensors, subscripts)
    # Every check is above: from here on the ops are recorded, and none can fail.
    for position, letters in enumerate(inputs):
        full = tuple(sizes[c] for c in letters)
        if tensors[position].shape != full:  # a length-1 axis against a longer one: numpy broadcasts it
            tensors[position] = record(ops.broadcast_to, (tensors[position],), {"shape": full})
        if len(set(letters)) < len(letters):
            tensors[position], inputs[position] = _diagonal(tensors[position], letters)
    if len(tensors) == 1:
        one = like._constant(1.0, like)
        return record(ops.einsum, (tensors[0], one), {"subscripts": f"{inputs[0]},->{output}"}, name=name)
    result, letters = tensors[0], inputs[0]
    for position in range(1, len(tensors)):
        later = "".join(inputs[position + 1 :]) + output
        seen = letters + inputs[position]
        kept = output if position == len(tensors) - 1 else "".join(dict.fromkeys(c for c in seen if c in later))
        step = f"{letters},{inputs[position]}->{kept}"
        result = record(ops.einsum, (result, tensors[position]), {"subscripts": step})
        letters = kept
    result.name = name
    return result


def _diagonal(tensor: Tensor, letters: str) -> tuple[Tensor, str]:
    """The entries of ``tensor`` whose axes named by the same letter share one index: ``"ii"`` → the diagonal.

    Returns the recorded ``index`` and its letters (each once, in first-seen order).
    """
    unique = "".join(dict.fromkeys(letters))
    sizes = {c: n for c, n in zip(letters, tensor.shape)}
    grid = np.indices(tuple(sizes[c] for c in unique), sparse=True)
    key = tuple(grid[unique.index(c)] for c in letters)
    return record(ops.index, (tensor,), {"key": key}), unique


def _einsum_arguments(arguments: tuple[Any, ...]) -> tuple[str, list[Any]]:
    """``(subscripts, operands)`` from numpy's two forms: ``("ij,j", a, b)`` or ``(a, [0, 1], b, [1], [0])``."""
    if not arguments:
        raise TypeError("einsum(): expected subscripts like 'ij,jk->ik' and the operands")
    if isinstance(arguments[0], str):
        return arguments[0], list(arguments[1:])
    sublist_form = len(arguments) > 1 and isinstance(arguments[1], (list, tuple))
    if isinstance(arguments[0], bytes) or arguments[0] is None or not sublist_form:
        raise TypeError(f"einsum(subscripts): expected a string like 'ij,jk->ik', got {type(arguments[0]).__name__}")
    # The sublist form: operand, its axes, operand, its axes, …, and the output's axes last (optional).
    operands, sublists = list(arguments[0::2]), list(arguments[1::2])
    output = None
    if len(arguments) % 2:
        output = operands.pop()  # an odd count: the last item is the output's sublist
    if len(sublists) != len(operands):
        raise ValueError("einsum(a, [axes], b, [axes], ...): give one list of axes after each operand")
    inputs = ",".join(_sublist_letters(sublist) for sublist in sublists)
    return inputs + ("" if output is None else "->" + _sublist_letters(output)), operands


def _sublist_letters(sublist: Any) -> str:
    """numpy's sublist ``[0, 1, Ellipsis]`` as letters ``"ab..."``: integer k is the k-th of a-z, A-Z."""
    try:
        items = list(sublist)
    except TypeError:
        raise TypeError(f"einsum: expected a list of axis numbers, got {sublist!r:.40}") from None
    letters = []
    for item in items:
        if item is Ellipsis:
            letters.append("...")
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool) and 0 <= item < 52:
            letters.append(string.ascii_letters[int(item)])
        else:
            raise ValueError(f"einsum: axis {item!r} in a sublist; expected integers 0 to 51 or Ellipsis")
    return "".join(letters)


def _checked_subscripts(subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """Parse and check ``subscripts`` for operands of ``ndims`` axes; ``...`` is spelled out in fresh letters."""
    text = subscripts.replace(" ", "")
    allowed = set(string.ascii_letters) | set(",->.")
    if not set(text) <= allowed or text.count("->") > 1:
        raise ValueError(f"einsum({subscripts!r}): expected letters, commas, '...' and one '->' (like 'ij,jk->ik')")
    if "." in text:
        text = _spell_out_ellipsis(text, subscripts, ndims)
    inputs, output = parse_einsum(text)
    if len(inputs) != len(ndims):
        raise ValueError(f"einsum({subscripts!r}): {len(inputs)} operand(s) in the subscripts, {len(ndims)} given")
    repeated = sorted({c for c in output if output.count(c) > 1})
    if repeated:
        raise ValueError(f"einsum({subscripts!r}): output letter {repeated[0]!r} appears twice")
    unknown = set(output) - set("".join(inputs))
    if unknown:
        raise ValueError(f"einsum({subscripts!r}): output letter {sorted(unknown)[0]!r} is in no operand")
    return inputs, output


def _spell_out_ellipsis(text: str, subscripts: str, ndims: Sequence[int]) -> str:
    """``"...i,...i->..."`` with the axes ``...`` stands for named by letters the subscripts do not use."""
    inputs, arrow, output = text.partition("->")
    parts = inputs.split(",")
    if len(parts) != len(ndims):
        raise ValueError(f"einsum({subscripts!r}): {len(parts)} operand(s) in the subscripts, {len(ndims)} given")
    if any(p.count("...") > 1 or p.replace("...", "").count(".") for p in (*parts, output)):
        raise ValueError(f"einsum({subscripts!r}): '...' at most once per operand, and no other dots")
    widths = []
    for part, ndim in zip(parts, ndims):
        width = ndim - len(part.replace("...", "")) if "..." in part else 0
        if width < 0:
            raise ValueError(f"einsum({subscripts!r}): operand {part!r} names more axes than its {ndim}")
        widths.append(width)
    free = [c for c in string.ascii_letters if c not in text]
    width = builtins.max(widths)  # (this module's max is numpy's, on Tensors)
    if width > len(free):
        raise ValueError(f"einsum({subscripts!r}): too many axes under '...'")
    fresh = "".join(free[:width])
    if arrow and width and "..." not in output:
        raise ValueError(
            f"einsum({subscripts!r}): the axes under '...' must appear in the output, as numpy requires "
            f"(write '->...{output}', then sum)"
        )
    # Aligned from the right, as broadcasting aligns them: an operand with fewer axes there takes the last ones.
    parts = [part.replace("...", fresh[width - w :]) for part, w in zip(parts, widths)]
    if arrow:
        output = output.replace("...", fresh)
    else:  # numpy's implicit output: the '...' axes first, then the letters used once, in order
        letters = "".join(parts)
        output = fresh + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fresh))
    return ",".join(parts) + "->" + output


def _check_sizes(inputs: Sequence[str], tensors: Sequence[Tensor], subscripts: str) -> dict[str, int]:
    """Each letter's length; numpy's rule: lengths agree, or one is 1 (broadcast) — within one operand they agree."""
    sizes: dict[str, int] = {}
    for position, (letters, tensor) in enumerate(zip(inputs, tensors)):
        if len(letters) != tensor.ndim:
            raise ValueError(
                f"einsum({subscripts!r}): operand {position} has {tensor.ndim} axes "
                f"but {letters!r} names {len(letters)}"
            )
        own: dict[str, int] = {}
        for c, n in zip(letters, tensor.shape):
            if own.setdefault(c, n) != n:
                raise ValueError(
                    f"einsum({subscripts!r}): letter {c!r} has length {own[c]} and {n} in operand {position}"
                )
            known = sizes.setdefault(c, n)
            if known != n and 1 not in (known, n):
                raise ValueError(f"einsum({subscripts!r}): letter {c!r} has length {known} and {n}")
            sizes[c] = builtins.max(known, n)
    return sizes


def dot(a: Operand, b: Operand, name: str | None = None) -> Result:
    """``numpy.dot``: a product with a number, the inner product of vectors, matmul of matrices; for more
    axes, the sum over ``a``'s last axis and ``b``'s second-to-last (an ``einsum``)."""
    a, b = _pair(a, b)
    a = node(a)
    if not isinstance(a, Tensor):
        return _named(a * b, name)
    b = a._lift(b, "dot")
    if a.ndim == 0 or b.ndim == 0:
        return _named(a * b, name)
    if a.ndim <= 2 and b.ndim <= 2:
        return a.matmul(b, name=name)
    letters = iter(string.ascii_letters)
    left = "".join(next(letters) for _ in range(a.ndim))
    right = [next(letters) for _ in range(b.ndim)]
    right[-2 if b.ndim >= 2 else 0] = left[-1]  # the contracted pair
    output = left[:-1] + "".join(c for c in right if c != left[-1])
    return einsum(f"{left},{''.join(right)}->{output}", a, b, name=name)


def outer(a: Operand, b: Operand, name: str | None = None) -> Result:
    """``numpy.outer``: every entry of ``a`` (flattened) times every entry of ``b``: shape ``[a.size, b.size]``."""
    a, b = _pair(a, b)
    a = node(a)
    if not isinstance(a, Tensor):
        raise TypeError("outer(a, b): expected Tensors or arrays (for two Scalars, a * b)")
    b = a._lift(b, "outer")  # checked (and made a Tensor) before a's reshape is recorded
    return _named(a.reshape(-1, 1) * b.reshape(1, -1), name)
