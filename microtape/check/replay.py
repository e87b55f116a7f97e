"""Replaying a tape's backward pass without touching any ``.grad``.

This module lets a checker read every gradient the tape would compute, step
by step, and leave the computation exactly as it found it::

    >>> import microtape as mt
    >>> with mt.Tape() as tape:
    ...     a = mt.Scalar(2.0, name="a")
    ...     y = (a * a).tanh()
    >>> replayed = replay(tape, y)
    >>> round(replayed.gradient_of(a), 6), a.grad      # a.grad is still None
    (0.005364, None)

Why a replay is needed: :meth:`Tape.backward_steps` writes the ``.grad``
fields when its iteration finishes, and leaves *accumulate* (``+=``). A
checker that ran it for real would double the parameter gradients of anyone
who had already called backward. So we remember every ``.grad`` the pass
could write — the tape's nodes, its leaves and the output — run the pass,
keep what it yielded, and put the old values back.

What a :class:`Replay` keeps, for every node that got a gradient:

* a recorded node's gradient is the ``grad_output`` of its own step — complete
  when the backward pass reaches it, because all its uses lie behind;
* a leaf's gradient (an input, a parameter) is the *sum* of what each step
  that used it sent back, complete at the last such step.
"""

from dataclasses import dataclass, field

from ..tape import Node, Tape

__all__ = ["Replay", "replay"]


@dataclass
class Replay:
    """What one backward pass over a tape produced, with no ``.grad`` changed.

    ``steps`` are the tape's :class:`~microtape.tape.Step` objects in backward
    order (reverse tape order). Look gradients up with :meth:`gradient_of` and
    :meth:`completed_at`.
    """

    tape: Tape
    output: Node
    seed: object  # the gradient the pass started from (at the output)
    steps: list
    _grads: dict = field(default_factory=dict, repr=False)  # id(node) -> gradient
    _completed: dict = field(default_factory=dict, repr=False)  # id(node) -> tape index

    def gradient_of(self, node):
        """The tape's total gradient of ``node`` (None if the pass never reached it)."""
        return self._grads.get(id(node))

    def completed_at(self, node):
        """The tape index of the step after which ``node``'s gradient is complete.

        For a recorded node that is its own step; for a leaf, the last step that
        sent it a contribution. None if no gradient reached it.
        """
        return self._completed.get(id(node))

    def step_at(self, index):
        """The step of the equation at tape position ``index`` (None if it was skipped)."""
        for step in self.steps:
            if step.index == index:
                return step
        return None


def replay(tape, output, grad=None):
    """Run ``tape``'s backward pass from ``output`` and restore every ``.grad``.

    ``grad`` is the gradient at the output (default: ones, as in
    :meth:`Tape.backward`). Returns a :class:`Replay`. The ``.grad`` fields are
    restored even if the pass fails midway (the error is then raised).
    """
    if not isinstance(tape, Tape):
        raise TypeError(f"expected a microtape Tape, got {type(tape).__name__}")
    touched = [*tape.nodes, *tape.leaves()]
    if isinstance(output, Node):
        touched.append(output)
    saved = [(node, node.grad) for node in touched]
    steps = []
    try:
        for step in tape.backward_steps(output, grad):
            steps.append(step)
    finally:
        for node, old_grad in saved:
            node.grad = old_grad

    grads, completed = {}, {}
    recorded = {id(node) for node in tape.nodes}
    seed = steps[0].grad_output if steps and steps[0].equation.output is output else None
    for step in steps:
        node = step.equation.output
        grads[id(node)] = step.grad_output
        completed[id(node)] = step.index
        for x, grad_x in zip(step.equation.inputs, step.grad_inputs, strict=True):
            if id(x) in recorded or not x.requires_grad or grad_x is None:
                continue
            # A leaf: add this use's share to the shares of the steps before.
            previous = grads.get(id(x))
            grads[id(x)] = grad_x if previous is None else previous + grad_x
            completed[id(x)] = step.index
    return Replay(tape, output, seed, steps, grads, completed)
