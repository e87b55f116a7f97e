"""Classroom gradient exercises, and a checker that says where a derivative went wrong.

This package lets a student write a backward pass by hand and check it::

    >>> import microtape.exercises as ex
    >>> ex.list_exercises()[:3]
    ['scalar_chain_rule', 'mlp_backward', 'affine_relu_backward']
    >>> print(ex.stub_source("softmax_backward"))   # the stub to fill in  # doctest: +SKIP
    >>> def softmax_backward(p, grad_p):
    ...     return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))
    >>> ex.check("softmax_backward", softmax_backward).ok
    True

``check`` runs the function on several seeded float64 inputs and compares it
with the *tape* (the forward built from microtape Tensors, differentiated by
the tape's backward pass). A wrong answer gets the output and the first entry
that differ, a hint when it equals a known mistaken derivation, and partial
credit for the outputs that are right. A *stepped* exercise asks for the
derivation's intermediate gradients too, by name, each judged link by link
(:mod:`.links`): every wrong link is named, and a step computed right from a
wrong one is *carried* and earns its points (see :class:`~microtape.exercises.registry.Step`).
``assert_correct`` raises
``AssertionError`` with the same feedback (for autograder tests);
``score(globals())`` is a notebook's score table.

What is where: this folder is the framework a teacher uses — :class:`Exercise`,
:class:`Output`, :class:`Step`, :class:`Mistake` and :func:`register` to declare
an exercise, :func:`derivation` to make a stepped one from a forward on
Tensors (:mod:`.derivation`), :mod:`.trials` to draw its inputs, :func:`check`
and :func:`score` to grade one; :mod:`microtape.exercises.lab` is the course, 31 exercises
declared with those same names (importing this package imports it, in the
order of :data:`LAB`); :mod:`microtape.grading` is the grader, which runs a
student's file in a box.

The package holds no reference solution: teachers find them in the
repository's ``instructor/`` folder, next to the autograder assignment in
``assignment/``. ``microtape exercises`` on the command line lists the exercises
and checks a student's ``.py`` file in a child process with a time limit.
"""

from . import trials
from .asserts import assert_output, assert_right
from .catalogue import ORDER, list_exercises, prompt, starter_file, stub_source
from .checker import ATOL, PRECISION_RTOL, RTOL, STATUSES, CheckResult, TimeLimitExceeded, assert_correct, check
from .derivation import derivation
from .registry import EXERCISES, KINDS, Exercise, Mistake, Output, Step, get, register
from .scores import ScoreTable, score, score_table

__all__ = [
    "derivation",
    "register",
    "KINDS",
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
    "trials",
    "CheckResult",
    "ScoreTable",
    "Exercise",
    "Output",
    "Mistake",
    "Step",
    "TimeLimitExceeded",
    "EXERCISES",
    "LAB",
    "ORDER",
    "STATUSES",
    "RTOL",
    "ATOL",
    "PRECISION_RTOL",
]

# The course comes last: its modules declare their exercises with the names bound above.
from .lab import LAB  # noqa: E402  (after the framework, which the course's modules import)
