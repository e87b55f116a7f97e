"""Classroom gradient exercises, and a checker that says where a derivative went wrong.

This package lets a student write a backward pass by hand and check it::

    >>> import microtape.exercises as ex
    >>> ex.list_exercises()[:3]
    ['softmax_backward', 'linear_backward', 'tanh_layer_backward']
    >>> print(ex.stub_source("softmax_backward"))   # the stub to fill in  # doctest: +SKIP
    >>> def softmax_backward(p, grad_p):
    ...     return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))
    >>> ex.check("softmax_backward", softmax_backward).ok
    True

``check`` runs the function on several seeded float64 inputs and compares it
with the *tape* (the forward built from microtape Tensors, differentiated by
the tape's backward pass). A wrong answer gets the output and the first entry
that differ, a hint when it equals a known mistaken derivation, and partial
credit for the outputs that are right. ``assert_correct`` raises
``AssertionError`` with the same feedback (for autograder tests);
``score(globals())`` is a notebook's score table.

The package holds no reference solution: teachers find them in the
repository's ``instructor/`` folder, next to the autograder assignment in
``grading/``. ``microtape exercises`` on the command line lists the exercises
and checks a student's ``.py`` file in a child process with a time limit.
"""

import importlib

from .autograder import assert_output, assert_right
from .checker import ATOL, PRECISION_RTOL, RTOL, STATUSES, CheckResult, TimeLimitExceeded, assert_correct, check
from .registry import EXERCISES, Exercise, Mistake, get
from .scores import ScoreTable, score, score_table

__all__ = [
    "check",
    "assert_correct",
    "assert_output",
    "assert_right",
    "score",
    "score_table",
    "list_exercises",
    "stub_source",
    "prompt",
    "starter_file",
    "get",
    "CheckResult",
    "ScoreTable",
    "Exercise",
    "Mistake",
    "TimeLimitExceeded",
    "EXERCISES",
    "LAB",
    "ORDER",
    "STATUSES",
    "RTOL",
    "ATOL",
    "PRECISION_RTOL",
]

#: The lab, in order: the module of each exercise. Importing a module
#: registers its exercise, so this tuple is the one place the order is
#: written — ``EXERCISES``, ``list_exercises()``, the command line, notebook 07
#: and the autograder assignment all follow it.
LAB = (
    "softmax",
    "linear",
    "layer",
    "attention",
    "masking",
    "masked_attention",
    "dropout",
    "attention_dropout",
    "op_vjp",
    "logaddexp_vjp",
    "layernorm",
)
for _module in LAB:
    importlib.import_module(f"{__name__}.{_module}")
del _module

#: The exercise names in the order of the lab.
ORDER = tuple(EXERCISES)


def list_exercises(include_stretch=True):
    """The exercise names in the order of the lab (the stretch ones last)."""
    return [name for name in ORDER if include_stretch or not EXERCISES[name].stretch]


def stub_source(name):
    """The stub of exercise ``name`` as source text: signature, prompt, ``raise NotImplementedError``."""
    return get(name).stub_source()


def prompt(name):
    """The maths prompt of exercise ``name`` (its stub's docstring)."""
    return get(name).prompt


def starter_file(names=None):
    """A ready-to-fill Python file holding the stubs of ``names`` (default: all)."""
    names = list_exercises() if names is None else [get(name).name for name in names]
    parts = [
        '"""My microtape exercises.\n\n'
        "Fill in each function, then check them all with:\n\n"
        "    microtape exercises check THIS_FILE.py\n"
        '"""\n\nimport numpy as np\n'
    ]
    parts += [get(name).stub_source() for name in names]
    return "\n\n".join(parts)
