"""The catalogue: which exercises are registered, in which order, and the files a student starts from.

Everything here reads :data:`~microtape.exercises.registry.EXERCISES` when it
is called, so an exercise a teacher registers after ``import
microtape.exercises`` is listed, prompted and put in a starter file like the
lab's own (whose order :data:`microtape.exercises.lab.LAB` writes).
"""

from typing import Any

from .registry import EXERCISES, get

__all__ = ["ORDER", "list_exercises", "stub_source", "prompt", "starter_file"]

#: The exercise names, in the order they were registered (the lab's, then a teacher's): a live view
#: of :data:`~microtape.exercises.registry.EXERCISES`'s keys, so an exercise registered after import
#: is in it too. Iterate it, test ``in`` or take ``len``; ``list(ORDER)`` for a list.
ORDER = EXERCISES.keys()


def list_exercises(include_stretch: bool = True) -> Any:
    """The exercise names in the order they were registered (the lab's order, then a teacher's)."""
    return [name for name in ORDER if include_stretch or not EXERCISES[name].stretch]


def stub_source(name: str) -> Any:
    """The stub of exercise ``name`` as source text: signature, prompt, ``raise NotImplementedError``."""
    return get(name).stub_source()


def prompt(name: str) -> Any:
    """The maths prompt of exercise ``name`` (its stub's docstring)."""
    return get(name).prompt


def starter_file(names: Any = None) -> Any:
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
