"""What an exercise is, and the catalogue of them.

This module lets you look exercises up and read their prompts::

    >>> from microtape.exercises.registry import get
    >>> get("softmax_backward").parameters
    ('p', 'grad_p')

An :class:`Exercise` is plain data, like an op in :mod:`microtape.ops`:

``stub``
    the function the student fills in. Its signature is the contract, its
    docstring the maths prompt, its body ``raise NotImplementedError``.
``make_inputs(rng, trial)``
    one random float64 case: a dict holding the student's arguments (in the
    stub's order) and anything else the tape needs (e.g. the scores ``s``
    behind the weights ``p``).
``tape_gradients(inputs)``
    the right answer, computed by building the forward with microtape
    Tensors and running the tape's backward pass — never by a formula.
``outputs``
    what the student returns, each with the input whose shape it has.
``mistakes``
    known wrong derivations, each a runnable function with the student's
    signature and a hint. The checker diagnoses a wrong answer by *comparing*
    it with these variants, never by guessing.
"""

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KINDS", "Output", "Mistake", "Exercise", "EXERCISES", "register", "get"]

#: The kinds of known mistake, each with the label printed in feedback.
KINDS = {
    "missing_scale": "missing 1/√d",
    "missing_rowsum": "missing rowsum term",
    "transposed": "transposed operand",
    "wrong_axis": "wrong axis",
    "mask_not_applied": "mask not applied",
    "mask_after_softmax": "mask applied after the softmax",
    "dropout_scale_missing": "dropout scale missing",
    "dropout_scale_inverted": "dropout scale upside down",
    "skipped_step": "a step of the chain skipped",
    "missing_mean_terms": "mean and variance treated as constants",
    "missing_variance_term": "variance treated as a constant",
    "missing_eps": "eps left out",
    # Found by the checker's generic comparisons (no exercise lists these):
    "sign_flipped": "sign flipped",
    "swapped_outputs": "outputs in the wrong order",
    "extra_axis": "right values, wrong shape",
    "constant_factor": "off by a constant factor",
    "placeholder": "a placeholder answer",
}


@dataclass(frozen=True)
class Output:
    """One value the student returns: its name and the input whose shape it has."""

    name: str
    like: str


@dataclass(frozen=True)
class Mistake:
    """A known wrong derivation, runnable: same signature as the student's function."""

    name: str  # unique within its exercise, e.g. "grad_v_not_transposed"
    kind: str  # a key of KINDS
    hint: str  # what to tell the student whose answer matches this variant
    fn: Callable

    def __post_init__(self):
        assert self.kind in KINDS, f"mistake {self.name!r}: unknown kind {self.kind!r}"

    @property
    def label(self):
        return KINDS[self.kind]


@dataclass(frozen=True)
class Exercise:
    """One derivative exercise: the stub, random inputs, the tape's answer, known mistakes."""

    name: str
    title: str
    stub: Callable
    make_inputs: Callable
    tape_gradients: Callable
    outputs: tuple
    mistakes: tuple
    stretch: bool = False

    @property
    def parameters(self):
        """The student's function takes these arguments, in this order."""
        return tuple(inspect.signature(self.stub).parameters)

    @property
    def prompt(self):
        """The stub's docstring: the maths the student works from."""
        return inspect.getdoc(self.stub)

    def stub_source(self):
        """The stub as source text, ready to paste into a notebook or a file."""
        return inspect.getsource(self.stub)

    def mistake(self, name):
        for mistake in self.mistakes:
            if mistake.name == name:
                return mistake
        raise KeyError(f"{self.name} has no mistake named {name!r}")


#: Every exercise, by name (``list_exercises()`` gives the order of the lab).
EXERCISES: dict[str, Exercise] = {}


def register(exercise):
    """Add an exercise to :data:`EXERCISES` and return it."""
    if exercise.name in EXERCISES:
        raise ValueError(f"exercise {exercise.name!r} is already registered")
    assert exercise.name == exercise.stub.__name__, "the stub must carry the exercise's name"
    names = [mistake.name for mistake in exercise.mistakes]
    assert len(names) == len(set(names)), f"{exercise.name}: mistake names must be unique"
    EXERCISES[exercise.name] = exercise
    return exercise


def get(name):
    """The exercise called ``name``; a ``ValueError`` naming the choices otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"exercise name: expected a string, got {type(name).__name__}")
    try:
        return EXERCISES[name]
    except KeyError:
        close = difflib.get_close_matches(name, EXERCISES, n=1)
        suggestion = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"no exercise named {name!r}.{suggestion} The exercises are: {', '.join(EXERCISES)}") from None
