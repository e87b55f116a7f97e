"""The cross-entropy loss of a classifier or a language model, on the tape.

This module lets you turn logits and integer targets into one number to
minimise::

    >>> import numpy as np, microtape as mt
    >>> logits = mt.Tensor(np.zeros((2, 3, 5)), requires_grad=True)   # [B, T, V]: classes on the last axis
    >>> loss = mt.nn.cross_entropy(logits, np.array([[1, 2, 0], [4, 4, 3]]))
    >>> round(loss.item(), 4)                                           # uniform guesses over 5 classes: log 5
    1.6094

For each position ``n`` with target class ``t_n``::

    log_probs = log_softmax(logits)        (stable: one op, no log of 0)
    loss      = −(1/N) Σ_n log_probs[n, t_n]

— the average surprise at the right answer. Positions whose target is
``ignore_index`` (padding) count neither in the sum nor in ``N``, as in
PyTorch's ``F.cross_entropy``. (PyTorch puts the classes on axis 1; here they
are on the last axis, where a language model's ``[B, T, V]`` has them.) The
gradient of the logits is ``(softmax(logits) − onehot(t)) / N``
(:func:`microtape.nn.analytic_blocks.cross_entropy_backward` by hand).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..values.tensor import Tensor
from .checks import input_array, integer_ids

__all__ = ["cross_entropy"]


def _targets(targets: Any, shape: Any, classes: Any, ignore_index: Any) -> Any:
    where = "cross_entropy"
    array = integer_ids(targets, "targets", where, "integer class ids")
    if array.shape != shape:
        raise ValueError(
            f"{where}(targets): targets have shape {array.shape}; expected the logits' shape without the class "
            f"axis, {shape}"
        )
    counted = np.ones(shape, dtype=bool) if ignore_index is None else array != ignore_index
    bad = counted & ((array < 0) | (array >= classes))
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        extra = "" if ignore_index is None else f" or ignore_index={ignore_index}"
        raise ValueError(f"{where}(targets): target {array[index]} at {index} is not a class 0..{classes - 1}{extra}")
    if not counted.any():
        raise ValueError(f"{where}(targets): every target is ignore_index={ignore_index}; there is nothing to average")
    return array, counted


def cross_entropy(logits: Tensor, targets: Any, ignore_index: int | None = None) -> Tensor:
    """The mean cross-entropy of ``logits`` ``[..., classes]`` against integer ``targets`` ``[...]``.

    Returns a 0-d Tensor (on the tape when ``logits`` is). ``ignore_index``:
    a target value to skip (padding), or None.
    """
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral)):
        raise TypeError(f"cross_entropy(ignore_index={ignore_index!r}): expected None or an integer")
    if isinstance(logits, Tensor):
        data = input_array(logits, "logits", "cross_entropy", logits.dtype)
        node = logits
    else:
        data = input_array(logits, "logits", "cross_entropy", np.float64)
        node = Tensor(data)
    if data.ndim < 1 or data.shape[-1] == 0:
        raise ValueError(f"cross_entropy(logits): expected [..., classes] with at least one class, got {data.shape}")
    targets, counted = _targets(targets, data.shape[:-1], data.shape[-1], ignore_index)
    # One 1 per counted position, at its target class: it picks that log-probability out.
    onehot = np.zeros(data.shape, dtype=data.dtype)
    np.put_along_axis(onehot, np.where(counted, targets, 0)[..., None], 1.0, axis=-1)
    onehot *= counted[..., None]
    log_probs = node.log_softmax(-1, name="log_probs")
    target_log_probs = (log_probs * onehot).sum(-1, name="target_log_probs")
    return target_log_probs.sum().scale(-1.0 / int(counted.sum()), name="loss")
