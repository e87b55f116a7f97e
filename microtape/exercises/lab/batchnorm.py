"""Exercise (stepped): batch norm's backward pass in train mode, each step of the derivation checked on its own.

Batch norm normalises each feature over the batch (``axis=0``), with the
batch's own mean and variance (train mode). The student returns every
intermediate gradient by name; the chain is :mod:`.norm_chain`'s.
"""

from .. import register
from . import norm_chain

__all__ = ["batchnorm_backward"]

AXIS = 0


def batchnorm_backward(x, gamma, grad_y, eps):
    r"""Backward pass of batch normalisation (train mode), one named step at a time.

    Forward, over the batch (B rows), for each of the C features:
        mean  = x.mean(axis=0, keepdims=True)      per feature, [1, C]
        var   = ((x − mean)²).mean(axis=0, ...)   per feature, [1, C] (divide by B, not B − 1)
        xhat  = (x − mean) / sqrt(var + eps)
        y     = gamma * xhat + beta          gamma, beta: [C]

    Arguments: ``x`` [B, C], ``gamma`` [C], ``grad_y`` = dL/dy [B, C] and
    ``eps`` (a small positive float; it changes from trial to trial).

    Return a dict with every step of the derivation, in this order:
        "grad_xhat"   dL/dxhat                              [B, C]
        "grad_var"    dL/dvar  (from grad_xhat)             [1, C]
        "grad_mean"   dL/dmean (from grad_xhat, grad_var)   [1, C]
        "grad_x"      dL/dx    (from all three)             [B, C]
        "grad_gamma"  dL/dgamma                             [C]
        "grad_beta"   dL/dbeta                              [C]
    Each step is checked link by link: against the tape, and against what the
    tape computes from your own earlier steps. A wrong step is named; a step
    computed right from a wrong one is *carried* and earns its point.

    The links: every x of a column reaches every y of that column, through mean
    and var (the batch's statistics) as well as directly; grad_x adds the
    three paths. Keep the [1, C] statistics with keepdims=True.
    """
    raise NotImplementedError("batchnorm_backward: return {'grad_xhat': ..., ..., 'grad_beta': ...}")


# One dict per trial: (B, C), eps, and the spread of x. The first is not
# square, so a sum over the wrong axis shows as a shape; one has B = 2.
VISIBLE = (
    {"shape": (5, 3), "eps": 1e-5, "spread": 0.5},
    {"shape": (8, 4), "eps": 0.01, "spread": 1.0},
    {"shape": (3, 6), "eps": 0.1, "spread": 0.5},
    {"shape": (6, 2), "eps": 1e-3, "spread": 0.05},
    {"shape": (2, 5), "eps": 0.5, "spread": 2.0},
)
HIDDEN = (
    {"shape": (7, 3), "eps": 0.05, "spread": 0.5},
    {"shape": (4, 5), "eps": 1e-5, "spread": 0.2},
    {"shape": (9, 2), "eps": 0.3, "spread": 1.0},
    {"shape": (4, 4), "eps": 2e-3, "spread": 0.05},
    {"shape": (3, 7), "eps": 1.0, "spread": 2.0},
    {"shape": (6, 1), "eps": 0.02, "spread": 0.3},
    # The large trial, shared by the class: columns of 8 192 rows: too many forwards for numeric differentiation.
    {"shape": (8192, 16), "eps": 1e-5, "spread": 1.0, "shared": True},
)


EXERCISE = norm_chain.stepped_exercise(
    batchnorm_backward,
    AXIS,
    title="Batch norm backward (train mode), step by step: grad_xhat → grad_var → grad_mean → grad_x, …",
    visible=VISIBLE,
    hidden=HIDDEN,
    statistic="the batch statistics mean and var [1, C]",
    over="the batch",
    count_name="B",
)
register(EXERCISE)
