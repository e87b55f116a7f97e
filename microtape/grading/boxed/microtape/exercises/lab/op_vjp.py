"""``microtape.exercises.lab.op_vjp`` in the box: the forward notebook 07 gives, so a file registering its VJP loads.

Only the forward is here (it is given to every student, and is no answer);
the VJP is the student's own.
"""

from typing import Any

import numpy as np

__all__ = ["logsumexp_forward"]


def logsumexp_forward(x: Any) -> Any:
    """``y = log Σ_j exp(x_j)`` along the last axis, stable (shifted by the row max)."""
    peak = np.max(x, axis=-1, keepdims=True)
    return np.log(np.sum(np.exp(x - peak), axis=-1)) + peak[..., 0]
