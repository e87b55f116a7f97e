"""``microtape.exercises`` in the box: the feedback calls of a notebook, doing nothing.

A handed-in notebook calls ``ex.check(...)``, ``ex.prompt(...)`` or
``ex.score(globals())`` for the student's own feedback. Graded, those cells
run here, where there is no checker: each call returns None, so the cell runs
on and the student's functions are graded outside the box.
"""

from typing import Any

__all__ = ["check", "assert_correct", "assert_right", "assert_output", "score", "prompt", "stub_source"]


def _nothing(*args: Any, **kwargs: Any) -> Any:
    """In graded code the checker is not here: nothing to do."""
    return None


check = assert_correct = assert_right = assert_output = score = prompt = stub_source = _nothing


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"microtape.exercises.{name} is not available to graded code: only the notebook's feedback calls are."
    )
