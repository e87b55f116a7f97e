"""Exercise (stepped): layer norm's backward pass, each step of the derivation checked on its own.

The stepped sibling of ``layernorm_backward`` (whose name and return stay as
they were): the student returns every intermediate gradient by name, and the
checker names the first wrong step. The chain is :mod:`.norm_chain`'s, along
the features (``axis=-1``).
"""

from .. import register
from . import norm_chain

__all__ = ["layernorm_backward_steps"]

AXIS = -1


def layernorm_backward_steps(x, gamma, grad_y, eps):
    r"""Backward pass of layer normalisation, one named step at a time.

    Forward, over the last axis of each row (F features):
        mean  = x.mean(axis=-1, keepdims=True)      per row, [N, 1]
        var   = ((x − mean)²).mean(axis=-1, ...)   per row, [N, 1] (divide by F, not F − 1)
        xhat  = (x − mean) / sqrt(var + eps)
        y     = gamma * xhat + beta          gamma, beta: [F], shared by all rows

    Arguments: ``x`` [N, F], ``gamma`` [F], ``grad_y`` = dL/dy [N, F] and
    ``eps`` (a small positive float; it changes from trial to trial).

    Return a dict with every step of the derivation, in this order:
        "grad_xhat"   dL/dxhat                          [N, F]
        "grad_var"    dL/dvar  (from grad_xhat)         [N, 1]
        "grad_mean"   dL/dmean (from grad_xhat, grad_var)   [N, 1]
        "grad_x"      dL/dx    (from all three)         [N, F]
        "grad_gamma"  dL/dgamma                         [F]
        "grad_beta"   dL/dbeta                          [F]
    Each step is checked link by link: against the tape, and against what the
    tape computes from your own earlier steps. A wrong step is named; a step
    computed right from a wrong one is *carried* and earns its point.

    The links: xhat depends on var through (var + eps)^(-1/2), on mean directly
    and on x directly; var depends on mean and x; mean on x. x reaches y along
    three paths — directly, through mean and through var — and grad_x adds them.
    """
    raise NotImplementedError("layernorm_backward_steps: return {'grad_xhat': ..., ..., 'grad_beta': ...}")


# The same trials as layernorm_backward (norm_chain.LAYER_NORM_VISIBLE, ..._HIDDEN).
VISIBLE, HIDDEN = norm_chain.LAYER_NORM_VISIBLE, norm_chain.LAYER_NORM_HIDDEN


EXERCISE = norm_chain.stepped_exercise(
    layernorm_backward_steps,
    AXIS,
    title="Layer norm backward, step by step: grad_xhat → grad_var → grad_mean → grad_x, grad_gamma, grad_beta",
    visible=VISIBLE,
    hidden=HIDDEN,
    statistic="the row statistics mean and var [N, 1]",
    over="each row's features",
    count_name="F",
)
register(EXERCISE)
