"""A teacher's file of exercises, loaded into the grader: what ``--exercises FILE.py`` does.

This module lets the command line (``microtape exercises list|stub|check``,
``microtape grade``) and the Gradescope bundle see a teacher's own
exercises::

    >>> from microtape.exercises.teacher import load_exercises
    >>> load_exercises("my_exercises.py")          # doctest: +SKIP
    ['mlp_steps']

The file is the teacher's, so it runs here, in the grader's process, like a
``conftest.py``: its ``ex.derivation(...)`` calls register the exercises, and
this process computes their answers. A student's code never runs here (it
runs in the box, which needs only the exercise names). Loading the same file
twice is harmless: its exercises are registered once.
"""

import hashlib
import runpy
from pathlib import Path
from typing import Any

from .registry import EXERCISES

__all__ = ["load_exercises"]

#: The files already loaded, by resolved path and content digest: ``{key: exercise names}``.
_LOADED: dict = {}


def load_exercises(path: Any) -> Any:
    """Run the teacher's file ``path`` and return the names of the exercises it registered.

    ``ValueError`` naming the file when it is missing, not a ``.py`` file,
    fails while running, or registers no exercise.
    """
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--exercises {path}: no such file")
    if file.suffix != ".py":
        raise ValueError(f"--exercises {path}: expected a Python file (.py) that calls ex.derivation(...)")
    key = (str(file.resolve()), hashlib.sha256(file.read_bytes()).hexdigest())
    if key in _LOADED:
        return list(_LOADED[key])
    before = set(EXERCISES)
    try:
        runpy.run_path(str(file), run_name=f"microtape_exercises_{file.stem}")
    except Exception as error:
        for name in set(EXERCISES) - before:  # a file that failed half-way leaves nothing behind
            del EXERCISES[name]
        raise ValueError(f"--exercises {path}: running it raised {type(error).__name__}: {error}") from error
    added = [name for name in EXERCISES if name not in before]
    if not added:
        raise ValueError(f"--exercises {path}: it registered no exercise (call ex.derivation(...) in it)")
    _LOADED[key] = tuple(added)
    return added
