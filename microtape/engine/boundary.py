"""What comes into the engine from outside, checked: user ops' results, seeds, existing ``.grad``.

The reverse pass trusts its own primitives; what a user hands it is checked
here, at the boundary, so a mistake fails where it was made — naming the op
and the input, or the argument — instead of as a numpy error deep inside, or
as a wrong ``.grad`` later:

* a user-defined op's forward must return real numbers (:func:`check_user_forward`);
* its VJP one real gradient per input, of that input's shape (:func:`check_user_vjp`);
* a seed gradient must be finite, of the output's shape (:func:`check_seed`);
* a ``.grad`` must be able to take the sum before any is written (:func:`sum_into_grad`), and
  ``backward()`` adds into every ``.grad`` or into none (:func:`add_into_grads`).

The dtype rule is applied here too: a gradient has the dtype of the value it
belongs to (a float32 leaf gets a float32 gradient, whatever it was mixed with).
"""

from __future__ import annotations

import numbers
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .protocols import NodeLike, Operation, Value

__all__ = [
    "check_user_forward",
    "check_user_vjp",
    "vjp_arity_problem",
    "check_seed",
    "sum_into_grad",
    "add_into_grads",
    "gradient_like",
]


def _as_number(value: Value) -> Any:
    """A 0-d array as the number it holds (a user's op may return either); anything else as it is."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def check_user_forward(op: Operation, inputs: Sequence[NodeLike], data: Value) -> Value:
    """A user-defined forward must return a real number (Scalars) or a real array (Tensors).

    Checked before anything is recorded, so a forward that returns junk
    (``None``, a string, a complex number) fails naming the op, and no tape
    sees it. Integers are taken as floats: on Tensors in the inputs' dtype.
    """
    if inputs[0].data.__class__ is float:
        number = _as_number(data)
        if not _is_real_number(number):
            raise TypeError(
                f"op {op.name!r}: its forward returned {_what_it_is(data)}; on Scalars a forward must "
                "return a real number"
            )
        return float(number)
    if isinstance(data, (np.ndarray, np.generic)) or _is_real_number(data):
        array = np.asarray(data)
        if array.dtype.kind == "f":
            return array
        if array.dtype.kind in "iu":
            return array.astype(np.result_type(*[x.data for x in inputs]))
    raise TypeError(
        f"op {op.name!r}: its forward returned {_what_it_is(data)}; on Tensors a forward must return "
        "a real-valued numpy array"
    )


def vjp_arity_problem(sent: Any, count: int) -> str | None:
    """Why ``sent`` is not what a VJP of ``count`` inputs returns (a tuple of ``count`` gradients), or None.

    The one rule for user-defined VJPs: the tape applies it when it runs one,
    and the exercise checker when it grades one.
    """
    if isinstance(sent, (tuple, list)) and len(sent) == count:
        return None
    return (
        f"its vjp must return a tuple of {count} gradient(s), one per input, got {type(sent).__name__}"
        + (f" of length {len(sent)}" if isinstance(sent, (tuple, list)) else "")
        + ("; for one input write `return (grad_x,)`" if count == 1 else "")
    )


def check_user_vjp(op: Operation, node: NodeLike, sent: Any, recorded: bool = False) -> tuple[Value, ...]:
    """A user-defined VJP must return one real gradient per input, each of that input's shape.

    Returns the gradients as the reverse pass uses them: floats for Scalar
    inputs, arrays in the input's dtype for Tensor inputs (the dtype rule).
    In a recorded pass (``recorded``, ``create_graph=True``) the gradients are
    tape values: their number and shapes are checked, and they pass as they are.
    """
    problem = vjp_arity_problem(sent, len(node.inputs))
    if problem:
        raise TypeError(f"op {op.name!r}: {problem}")
    if recorded:
        for name, x, gx in zip(op.inputs, node.inputs, sent):
            if gx is not None and np.shape(getattr(gx, "data", gx)) != np.shape(x.data):
                raise ValueError(
                    f"op {op.name!r}: its vjp returned a gradient of shape {np.shape(getattr(gx, 'data', gx))} for "
                    f"input {name!r} of shape {np.shape(x.data)}; a gradient has the shape of its input"
                )
        return tuple(sent)
    return tuple(_user_gradient(op, name, x, gx) for name, x, gx in zip(op.inputs, node.inputs, sent))


def _user_gradient(op: Operation, name: str, x: Value, gx: Value) -> Value | None:
    """One gradient from a user-defined VJP, checked (real, the input's shape) and in the input's type."""
    if gx is None:
        return None
    where = f"op {op.name!r}: its vjp returned {_what_it_is(gx)} as the gradient of input {name!r}"
    if x.data.__class__ is float:
        number = _as_number(gx)
        if not _is_real_number(number):
            raise TypeError(f"{where}; for a Scalar input it must be a real number")
        return float(number)
    if not (isinstance(gx, (np.ndarray, np.generic)) or _is_real_number(gx)):
        hint = " (a vjp works on numpy arrays: return its .data)" if _is_node(gx) else ""
        raise TypeError(f"{where}; expected a numpy array of the input's shape {np.shape(x.data)}{hint}")
    if np.asarray(gx).dtype.kind not in "fiu":
        raise TypeError(f"{where}; expected real numbers (a float array)")
    if np.shape(gx) != np.shape(x.data):
        raise ValueError(
            f"op {op.name!r}: its vjp returned a gradient of shape {np.shape(gx)} for input {name!r} of "
            f"shape {np.shape(x.data)}; a gradient has the shape of its input"
        )
    return np.asarray(gx, dtype=x.data.dtype)


def gradient_like(value: Value, grad: Value) -> Value:
    """``grad`` as the gradient of ``value`` is kept: a float for a Scalar, an array of ``value``'s dtype for a Tensor.

    The dtype rule. Values follow numpy's promotion (float32 with float64
    computes in float64, as in PyTorch), but a gradient always takes the
    dtype of the value it belongs to; and a 0-d numpy result (numpy returns
    ``np.float64`` scalars for 0-d arithmetic) becomes an array again.
    """
    if _is_node(grad):
        return grad  # a recorded pass (create_graph=True): gradients are tape values
    if value.__class__ is float:
        return float(grad)
    return np.asarray(grad, dtype=value.dtype)


def _is_real_number(value: Value) -> bool:
    """A Python or numpy real number (not a bool: True is not a gradient)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _what_it_is(value: Value) -> str:
    """A short description of a value for an error message: ``a str ('abc')``, ``an array of dtype complex128``."""
    if isinstance(value, np.ndarray):
        return f"an ndarray of dtype {value.dtype} and shape {value.shape}"
    if _is_node(value):
        return f"a {type(value).__name__} of shape {np.shape(value.data)}"
    return f"a {type(value).__name__} ({value!r:.40})"


def check_seed(root: NodeLike, grad: Value, caller: str = "gradients") -> Value:
    """Check (or make) the gradient that starts the reverse pass; ``caller`` names the entry point."""
    if not root.requires_grad:
        raise ValueError(
            f"{caller}(): {root!r} does not require a gradient — no input of the "
            "computation had requires_grad=True, so there is nothing to differentiate"
        )
    data = root.data
    if data.__class__ is float:
        if grad is None:
            return 1.0
        number = _as_number(grad)
        if not _is_real_number(number):
            raise TypeError(f"{caller}(grad=...): expected a real number for a Scalar output, got {_what_it_is(grad)}")
        if not np.isfinite(number):
            raise ValueError(f"{caller}(grad={grad!r}): the seed gradient must be finite (not NaN or infinity)")
        return float(number)
    if grad is None:
        return np.ones_like(data)
    grad = np.asarray(getattr(grad, "data", grad))
    if grad.shape != data.shape:
        raise ValueError(
            f"{caller}(grad=...): grad has shape {grad.shape} but the output has shape "
            f"{data.shape}; pass a gradient of the output's shape"
        )
    if not np.issubdtype(grad.dtype, np.number) or np.issubdtype(grad.dtype, np.complexfloating):
        raise TypeError(f"{caller}(grad=...): expected a real-valued array, got dtype {grad.dtype}")
    if not np.all(np.isfinite(grad)):
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(grad))[0])
        raise ValueError(f"{caller}(grad=...): the seed gradient must be finite, got {grad[where]} at index {where}")
    # A copy: the caller's array must never become (or alias) some node's .grad.
    return np.array(grad, dtype=data.dtype)


def sum_into_grad(node: NodeLike, g: Value) -> Value:
    """``node.grad + g``, after checking that ``node.grad`` can take it (a number, or an array of the node's shape)."""
    old: Value = node.grad  # a number, an array, a tape value (told apart at run time) or None
    if _is_node(g) or _is_node(old):
        # A recorded pass (create_graph=True): the sum is recorded too, after the
        # same check as below (on the value inside a tape value), so a wrong
        # shape is refused rather than broadcast into a bigger gradient.
        _check_grad_can_take(node, old.data if _is_node(old) else old, old)
        return old + g
    _check_grad_can_take(node, old, old)
    if node.data.__class__ is float:
        return float(old + g)
    return np.asarray(old + g, dtype=node.data.dtype)  # 0-d sums come back as arrays, in the value's dtype


def _check_grad_can_take(node: NodeLike, old: Value, shown: Value) -> None:
    """Refuse a ``.grad`` (``old``: its number or array) that a gradient of ``node`` cannot be added into."""
    if node.data.__class__ is float:
        if not _is_real_number(old):
            raise TypeError(
                f"backward: {node!r:.80} has .grad = {_what_it_is(shown)}, which cannot take a gradient; expected a "
                "real number or None (set .grad = None to start afresh)"
            )
        return
    if not isinstance(old, np.ndarray) or old.dtype.kind not in "fiu" or old.shape != node.data.shape:
        raise TypeError(
            f"backward: {node!r:.80} has .grad = {_what_it_is(shown)}, which cannot take a gradient; expected "
            f"a real array of shape {node.data.shape} or None (set .grad = None to start afresh)"
        )


def add_into_grads(grads: Mapping[Any, Value]) -> None:
    """Add ``grads`` (``{node: gradient}``, a reverse pass's result) into each node's ``.grad``: all or nothing.

    A ``.grad`` that cannot take its sum (a string, the wrong shape) fails the
    call with every ``.grad`` as it was: the sums into existing ``.grad``
    values, the one step that can fail, are computed first and written last,
    and a failure undoes what the loop wrote before it.

    One VJP may hand the same array (or views of it) to several nodes —
    add's ``g`` goes to both operands, reshape's is a view. Leaves (what
    people change in place: zeroing, clipping) each get memory of their
    own; computed nodes that share memory get read-only views. Either way
    no gradient can be changed through another, and only leaves pay for a
    copy.
    """
    shared = Counter(_memory_of(g) for g in grads.values() if g.__class__ is np.ndarray)
    # Sums into an existing .grad, written last: the one step that can fail comes first.
    summed: list[tuple[NodeLike, Value]] = []
    try:
        for node, g in grads.items():
            if node.grad is not None:
                summed.append((node, sum_into_grad(node, g)))
                continue
            kind = g.__class__
            if kind is np.ndarray:
                if shared[_memory_of(g)] > 1:
                    if node.op is None:
                        g = g.copy()
                    else:
                        g = g.view()
                        g.flags.writeable = False
            elif kind is not float:
                g = gradient_like(node.data, g)  # numpy's 0-d arithmetic gives np.float64: an array again
            node.grad = g
    except Exception:
        # Undo: every .grad this loop wrote (before the node that failed) was None.
        failed, kept = node, {id(n) for n, _ in summed}
        for earlier in grads:
            if earlier is failed:
                break
            if id(earlier) not in kept:
                earlier.grad = None
        raise
    for node, total in summed:
        node.grad = total


def _memory_of(array: Value) -> int:
    """Who owns an array's memory (numpy's ``base`` is the owner of any view)."""
    return id(array if array.base is None else array.base)


def _is_node(value: Value) -> bool:
    """A Scalar or Tensor (told by what it has: this module sits below the one that defines them)."""
    return hasattr(value, "requires_grad") and hasattr(value, "inputs")
