r"""What an exercise is, and the catalogue of them.

This module lets you look exercises up and read their prompts::

    >>> from microtape.exercises.registry import get
    >>> get("softmax_backward").parameters
    ('p', 'grad_p')

An :class:`Exercise` is plain data, like an op in :mod:`microtape.ops`:

``stub``
    the function the student fills in. Its signature is the contract, its
    docstring the maths prompt, its body ``raise NotImplementedError``.
``visible`` and ``hidden``
    the trials: one dict per trial saying what to draw (shapes, ``eps``,
    ``p``, whether the scores are large, …). The visible trials are the ones
    a student sees in the notebook; the hidden ones, used by the autograder,
    differ from them in seeds, shapes and constants.
``make_inputs(rng, case)``
    one random float64 trial for ``case`` (one of those dicts): a dict holding
    the student's arguments (in the stub's order) and anything else the tape
    needs (e.g. the scores ``s`` behind the weights ``p``).
``tape_gradients(inputs)``
    the right answer, computed by building the forward with microtape
    Tensors and running the tape's backward pass — never by a formula.
``outputs``
    what the student returns, each with the input whose shape it has and the
    points it is worth.
``mistakes``
    known wrong derivations, each a runnable function with the student's
    signature and a hint. The checker diagnoses a wrong answer by *comparing*
    it with these variants, never by guessing. None of them is the right
    answer: the package holds no reference solution (teachers find those in
    the repository's ``instructor/`` folder).

A *stepped* exercise's outputs are :class:`Step`\ s: the derivation's named
intermediate gradients (``grad_scaled_scores``, ``grad_var``, …, each
``grad_`` + its tape node's name), each with the steps it is computed from;
the tape's answer reads each off the recorded forward (``record``), each
mistake names the step it breaks, and the checker judges every step link by
link (:mod:`.links`: against the tape, and against the tape run from the
student's own earlier steps, found on ``record``'s tape by ``Step.node``),
naming every wrong link and crediting the steps carried from a wrong one
(``carry_forward``). :func:`~microtape.exercises.derivation.derivation` makes
such an exercise from a forward alone.
"""

import difflib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "KINDS", "Output", "Step", "Mistake", "Exercise", "EXERCISES", "register", "get", "MakeInputs", "TapeGradients",
]  # fmt: skip

#: The kinds of known mistake, each with the label printed in feedback.
KINDS = {
    "missing_scale": "missing 1/√d",
    "missing_rowsum": "missing rowsum term",
    "transposed": "transposed operand",
    "wrong_axis": "wrong axis",
    "mask_not_applied": "mask not applied",
    "mask_after_softmax": "mask applied after the softmax",
    "mask_as_zero": "masked scores set to 0",
    "dropout_scale_missing": "dropout scale missing",
    "dropout_scale_inverted": "dropout scale upside down",
    "dropout_misplaced": "dropout in the wrong place",
    "skipped_step": "a step of the chain skipped",
    "wrong_derivative": "wrong derivative",
    "missing_mean_terms": "mean and variance treated as constants",
    "missing_variance_term": "variance treated as a constant",
    "missing_eps": "eps left out",
    "ignored_argument": "an argument ignored",
    "unstable_exp": "exp overflows (softmax not stabilised)",
    "global_max": "the global maximum subtracted, not each row's",
    "broadcast_not_summed": "a broadcast input's gradient not summed back",
    "missing_keepdims": "keepdims missing",
    "wrong_scale": "1/d instead of 1/√d",
    "missing_mean": "the mean's 1/N wrong or left out",
    "repeats_dropped": "repeated indices' gradients not added up",
    "missing_path": "a path through the graph left out",
    "wrong_source": "a step computed from the wrong gradient",
    "wrong_count": "divided by the wrong count",
    "wrong_divisor": "divided by the wrong count",
    "padding_kept": "padding not cropped",
    # Found by the checker's generic comparisons (no exercise lists these):
    "precision": "a precision problem, not the maths",
    "sign_flipped": "sign flipped",
    "swapped_outputs": "outputs in the wrong order",
    "extra_axis": "right values, wrong shape",
    "constant_factor": "off by a constant factor",
    "placeholder": "a placeholder answer",
}


@dataclass(frozen=True)
class Output:
    """One value the student returns: its name, the input whose shape it has, its points.

    ``aliases`` are the other names a hint may use for it (``dQ`` for
    ``grad_q``); a test checks that a hint names only the outputs its
    mistake gets wrong. An output named after a tape node (``x``) is not
    looked for by its bare name, which a hint also uses for the value itself:
    ``name_in_hints=False``, and its aliases say how hints name its gradient.
    """

    name: str
    like: str
    points: int = 1
    aliases: tuple = ()
    name_in_hints: bool = True

    @property
    def hint_words(self) -> Any:
        """The words by which a hint names this output."""
        return ((self.name,) if self.name_in_hints else ()) + tuple(self.aliases)


@dataclass(frozen=True)
class Step(Output):
    """One named step of a derivation the student returns: ``grad_`` + the step's name, e.g. ``grad_scores``.

    A *stepped* exercise asks for the intermediate gradients as well as the
    final ones, each an :class:`Output` with two more things: ``after``, the
    steps it is computed from (its dependencies, earlier in the list), and
    ``node``, the name of the tape node whose gradient it is (the exercise's
    ``record`` names its nodes so; the picture colours that node). The
    exercise's ``tape_gradients`` returns every step's value, in the order of
    the steps, read off the recorded forward by node name.
    """

    after: tuple = ()
    node: str | None = None


@dataclass(frozen=True)
class Mistake:
    """A known wrong derivation, runnable: same signature as the student's function."""

    name: str  # unique within its exercise, e.g. "grad_v_not_transposed"
    kind: str  # a key of KINDS
    # What to tell the student whose answer matches this variant: a text, or a function returning
    # it when the hint quotes a formula of the attention derivation table (read when it is shown).
    hint_text: str | Callable
    fn: Callable
    # In a stepped exercise: the step this mistake breaks (its first wrong step, computed from right ones).
    step: str | None = None
    # A teacher's own kind (not a key of KINDS) says here what feedback calls it.
    kind_label: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS and not self.kind_label:
            raise ValueError(f"Mistake({self.name!r}, kind={self.kind!r}): not a known kind; for a kind of your own "
                             "give kind_label='what feedback calls it'")  # fmt: skip

    @property
    def hint(self) -> Any:
        """The hint, with any formula it quotes read off the derivation table now."""
        return self.hint_text() if callable(self.hint_text) else self.hint_text

    @property
    def label(self) -> Any:
        return self.kind_label or KINDS[self.kind]


class MakeInputs(Protocol):
    """An exercise's ``make_inputs(rng, case)``: one trial, ``{name: value}`` (the stub's arguments first).

    Every exercise of the course declares one, and so does a teacher's; the checker calls it
    with a seeded generator and one of the ``visible``/``hidden`` case dicts.
    """

    def __call__(self, rng: "np.random.Generator", case: dict[str, Any], /) -> dict[str, Any]: ...


class TapeGradients(Protocol):
    """An exercise's ``tape_gradients(inputs)``: the right outputs of one trial, by the tape's backward pass."""

    def __call__(self, inputs: dict[str, Any], /) -> Any: ...


@dataclass(frozen=True)
class Exercise:
    """One derivative exercise: the stub, its trials, the tape's answer, known mistakes."""

    name: str
    title: str
    stub: Callable[..., Any]
    make_inputs: MakeInputs
    tape_gradients: TapeGradients
    outputs: tuple
    mistakes: tuple
    visible: tuple
    hidden: tuple
    stretch: bool = False
    is_vjp: bool = False  # the student writes an op's VJP: graded by the rule mt.ops applies (a tuple)
    # A stepped exercise's forward on a new tape, nodes named as its steps' ``node``: ``record(inputs)
    # -> (tape, output)`` (what the picture of a check draws; None for other exercises).
    record: Callable | None = None
    # A stepped exercise: a step computed correctly from a wrong earlier step ("carried") earns its points.
    carry_forward: bool = True
    # The stub's source text when the stub was made, not written (a teacher's derivation; see derivation.py).
    source: str | None = None

    @property
    def parameters(self) -> Any:
        """The student's function takes these arguments, in this order."""
        return tuple(inspect.signature(self.stub).parameters)

    @property
    def prompt(self) -> Any:
        """The stub's docstring: the maths the student works from, as it reads when printed.

        The docstring marks code the reST way (````p````); printed, one backquote reads better
        (```p```), as in the notebooks' Markdown.
        """
        return re.sub(r"``(.+?)``", r"`\1`", inspect.getdoc(self.stub), flags=re.S)  # type: ignore[arg-type]  # (a stub has a docstring; a literal may span lines)

    @property
    def max_score(self) -> Any:
        """The points of all the outputs together."""
        return sum(output.points for output in self.outputs)

    @property
    def stepped(self) -> Any:
        """True when the student returns the derivation's named steps (see :class:`Step`)."""
        return any(isinstance(output, Step) for output in self.outputs)

    def depends_on(self, name: str) -> Any:
        """Every step the step ``name`` is computed from, directly or not (empty for a non-stepped output)."""
        found, todo = [], list(getattr(self.output(name), "after", ()))
        while todo:
            step = todo.pop()
            if step not in found:
                found.append(step)
                todo += list(getattr(self.output(step), "after", ()))
        return tuple(step for step in (o.name for o in self.outputs) if step in found)

    def output(self, name: str) -> Any:
        for output in self.outputs:
            if output.name == name:
                return output
        names = ", ".join(output.name for output in self.outputs)
        raise ValueError(f"{self.name} has no output named {name!r}; its outputs are {names}")

    def cases(self, hidden: bool = False) -> Any:
        """The trial descriptions: the visible ones, or the hidden ones."""
        return self.hidden if hidden else self.visible

    def stub_source(self) -> Any:
        """The stub as source text, ready to paste into a notebook or a file."""
        return self.source if self.source is not None else inspect.getsource(self.stub)

    def mistake(self, name: str) -> Any:
        for mistake in self.mistakes:
            if mistake.name == name:
                return mistake
        raise KeyError(f"{self.name} has no mistake named {name!r}")


#: Every exercise, by name, in the order it was registered: the lab's first (``microtape.exercises``
#: imports the modules of :data:`~microtape.exercises.lab.LAB` in order), then any a teacher registers.
EXERCISES: dict[str, Exercise] = {}


def register(exercise: Any) -> Any:
    """Add ``exercise`` to :data:`EXERCISES` and return it: from then on it is listed, checked and scored.

    This is how every exercise of the lab is declared, and how a teacher adds one::

        import microtape.exercises as ex

        ex.register(ex.Exercise(name="my_backward", stub=my_backward, title=..., visible=..., hidden=...,
                                make_inputs=..., tape_gradients=..., outputs=..., mistakes=...))

    Raises ``ValueError`` when an exercise of that name is already registered.
    """
    if exercise.name in EXERCISES:
        raise ValueError(f"exercise {exercise.name!r} is already registered")
    assert exercise.name == exercise.stub.__name__, "the stub must carry the exercise's name"
    names = [mistake.name for mistake in exercise.mistakes]
    assert len(names) == len(set(names)), f"{exercise.name}: mistake names must be unique"
    assert exercise.visible and exercise.hidden, f"{exercise.name}: needs visible and hidden trials"
    outputs = [output.name for output in exercise.outputs]
    assert len(outputs) == len(set(outputs)), f"{exercise.name}: output names must be unique"
    if exercise.stepped:
        _check_steps(exercise)
    EXERCISES[exercise.name] = exercise
    return exercise


def _check_steps(exercise: Any) -> None:
    """A stepped exercise's steps come after what they are computed from; its mistakes name a step each."""
    seen = []
    for output in exercise.outputs:
        assert isinstance(output, Step), f"{exercise.name}: a stepped exercise's outputs are all Steps"
        for before in output.after:
            assert before in seen, f"{exercise.name}: step {output.name} is computed from {before!r}, not before it"
        seen.append(output.name)
    assert exercise.record is not None, f"{exercise.name}: a stepped exercise records its forward (record=...)"
    for mistake in exercise.mistakes:
        assert mistake.step in seen, f"{exercise.name}.{mistake.name}: names no step it breaks ({mistake.step!r})"


def get(name: str) -> Any:
    """The exercise called ``name``; a ``ValueError`` naming the choices otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"exercise name: expected a string, got {type(name).__name__}")
    try:
        return EXERCISES[name]
    except KeyError:
        close = difflib.get_close_matches(name, EXERCISES, n=1)
        suggestion = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"no exercise named {name!r}.{suggestion} The exercises are: {', '.join(EXERCISES)}") from None
