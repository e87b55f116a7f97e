"""The tape's answer of a stepped exercise: each step's gradient, read off the recorded forward by node name.

A stepped exercise of the lab records its forward with the nodes named as
its steps (``record(inputs) -> (tape, output)``); :func:`step_gradients`
turns that into the exercise's ``tape_gradients``: the reverse pass from the
output, seeded with the given upstream gradient (``inputs[seed]``; a scalar
loss, ``seed=None``, is seeded with 1), read at each step's node, in the order of the steps. A node the output does not
depend on gets zeros of its shape.
"""

import numpy as np

from ...engine import gradients

__all__ = ["step_gradients"]


def step_gradients(record, nodes, seed=None):
    """``tape_gradients(inputs)`` for the steps at ``nodes`` of ``record``'s tape, seeded with ``inputs[seed]``."""

    def tape_gradients(inputs):
        tape, output = record(inputs)
        found = gradients(output, None if seed is None else inputs[seed], tape=tape)
        values = []
        for name in nodes:
            node = tape.variable(name)
            values.append(np.array(found[node], dtype=np.float64) if node in found else np.zeros_like(node.data))
        return tuple(values)

    return tape_gradients
