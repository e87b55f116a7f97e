"""What graded code gets for a part of microtape that is not in the box: a stand-in that says so when used.

``from microtape.exercises.lab.op_vjp import logsumexp_forward`` or ``import
microtape.check`` must not stop a whole file (notebook 07 shows both): the
import succeeds, the names it brings are placeholders, and only an exercise
that *calls* one fails — with one clear line. Each such import is recorded in
:data:`USED`, and the grader notes it once.
"""

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__all__ = ["Absent", "USED", "install"]

#: The absent modules graded code imported, in order (the child notes each once).
USED: list[Any] = []

_WHY = "is not available to graded code (not in the box): only the standard library, numpy and mt.ops.define are"


class Absent:
    """A name of microtape that is not here: any call, attribute or operation says so."""

    def __init__(self, name: str) -> None:
        self.__name__ = name.rpartition(".")[2]
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self._name} {_WHY}")

    def __getattr__(self, attribute: Any) -> "Absent":
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return Absent(f"{self._name}.{attribute}")

    def __repr__(self) -> str:
        return f"<{self._name}: not in the box>"


class _AbsentModule(types.ModuleType):
    def __getattr__(self, attribute: Any) -> "Absent":
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return Absent(f"{self.__name__}.{attribute}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds any ``microtape.…`` module the stand-in package lacks, as an absent module."""

    def find_spec(self, fullname: Any, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("microtape.") or fullname.count(".") > 8:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = getattr(finder, "find_spec", lambda *a: None)(fullname, path, target)
            if spec is not None:
                return None  # the stand-in has it (microtape.ops, microtape.exercises)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> Any:
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: Any) -> None:
        if module.__name__ not in USED:
            USED.append(module.__name__)


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (after the real finders, so the stand-ins win)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
