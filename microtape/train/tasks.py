"""The toy tasks: reverse or sort a short sequence of digits.

This module lets you draw training batches and a held-out test set::

    >>> import numpy as np
    >>> from microtape.train.tasks import TASKS, HeldOut
    >>> TASKS["reverse"](np.array([[3, 1, 4, 1]]))
    array([[1, 4, 1, 3]])
    >>> TASKS["sort"](np.array([[3, 1, 4, 1]]))
    array([[1, 1, 3, 4]])

Input and output have the same length, so an encoder reads the digits and
predicts, at every position, the digit that belongs there. To reverse, the
query at position ``i`` must find the key at position ``T-1-i``: after
training, the attention weights show that anti-diagonal. Sorting needs the
model to compare digits (where each one would land), not only positions.

The held-out sequences are drawn from their own seed and never appear in a
training batch (a training row that happens to equal one is redrawn), so the
held-out accuracy measures generalisation, not memory.
"""

from typing import Any

import numpy as np

__all__ = ["TASKS", "HeldOut", "training_batch"]


def reverse(ids: Any) -> Any:
    """The target of the reverse task: each row backwards."""
    return ids[:, ::-1].copy()


def sort(ids: Any) -> Any:
    """The target of the sort task: each row in increasing order."""
    return np.sort(ids, axis=1)


#: The tasks by name: a function from input ids ``[B, T]`` to target ids ``[B, T]``.
TASKS = {"reverse": reverse, "sort": sort}


class HeldOut:
    """``count`` test sequences of ``length`` digits below ``vocab``, and their targets."""

    def __init__(self, task: Any, count: int, length: int, vocab: int, seed: int) -> None:
        self.ids = np.random.default_rng(seed).integers(0, vocab, (count, length))
        self.targets = TASKS[task](self.ids)
        self._rows = {row.tobytes() for row in self.ids}

    def contains(self, ids: Any) -> Any:
        """One bool per row of ``ids``: is that row a held-out sequence?"""
        return np.array([row.tobytes() in self._rows for row in ids], dtype=bool)


def training_batch(task: Any, rng: np.random.Generator, batch: int, length: int, vocab: int, held_out: Any) -> Any:
    """A batch ``(ids, targets)`` of fresh random sequences, none of them held out."""
    ids = rng.integers(0, vocab, (batch, length))
    clash = held_out.contains(ids)
    while clash.any():
        ids[clash] = rng.integers(0, vocab, (int(clash.sum()), length))
        clash = held_out.contains(ids)
    return ids, TASKS[task](ids)
