"""Classroom gradient exercises, and a checker that says where a derivative went wrong.

This package lets a student write a backward pass by hand and check it::

    >>> import microtape.exercises as ex
    >>> ex.list_exercises()[:3]
    ['softmax_backward', 'linear_backward', 'attention_backward']
    >>> print(ex.stub_source("softmax_backward"))   # the stub to fill in  # doctest: +SKIP
    >>> def softmax_backward(p, grad_p):
    ...     return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))
    >>> ex.check("softmax_backward", softmax_backward).ok
    True

``check`` runs the function on several seeded float64 inputs and compares it
with the *tape* (the forward built from microtape Tensors, differentiated by
the tape's backward pass). A wrong answer gets the output and the first entry
that differ, and a hint when it equals a known mistaken derivation.
``assert_correct`` raises ``AssertionError`` with the same feedback (for
nbgrader/otter hidden tests). Teachers find reference answers in
:mod:`microtape.exercises.solutions`; ``microtape exercises`` on the command
line lists the exercises and checks a student's ``.py`` file.
"""

# The exercise modules register themselves, in the order of the lab.
from . import attention, dropout, layernorm, linear, masking, softmax  # noqa: F401
from .checker import ATOL, RTOL, CheckResult, assert_correct, check
from .registry import EXERCISES, Exercise, Mistake, get

__all__ = [
    "check",
    "assert_correct",
    "list_exercises",
    "stub_source",
    "prompt",
    "starter_file",
    "get",
    "CheckResult",
    "Exercise",
    "Mistake",
    "EXERCISES",
    "RTOL",
    "ATOL",
]

#: The order of the lab (and of ``list_exercises()``).
ORDER = (
    "softmax_backward",
    "linear_backward",
    "attention_backward",
    "masked_softmax_backward",
    "dropout_backward",
    "layernorm_backward",
)
assert set(ORDER) == set(EXERCISES), "every registered exercise has a place in ORDER"
# The modules registered alphabetically (the order of the imports above);
# re-insert so that EXERCISES, too, runs in the order of the lab.
for _name in ORDER:
    EXERCISES[_name] = EXERCISES.pop(_name)
del _name


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
