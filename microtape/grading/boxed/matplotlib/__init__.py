"""The stand-in for matplotlib that graded code sees: every call accepted, every plot discarded.

A student's file may draw its own plots (``import matplotlib.pyplot as plt``,
``plt.plot(...)``, ``plt.show()``); in the box there is no screen and nothing
to look at, so drawing is a no-op and the file grades as if it had not
plotted. Nothing here computes a number: a value taken from a plot object is
a :class:`Discarded`, never an answer.
"""

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__all__ = ["Discarded", "use"]


class Discarded:
    """Whatever a plotting call returns: callable, indexable, iterable (as two), a context manager."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Discarded()

    def __getattr__(self, name: Any) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Discarded()

    def __getitem__(self, key: Any) -> Any:
        return Discarded()

    def __setitem__(self, key: Any, value: Any) -> Any:
        pass

    def __iter__(self) -> Any:
        return iter((Discarded(), Discarded()))

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> Any:
        return False

    def __repr__(self) -> Any:
        return "<a plot: discarded in the box>"


def use(*args: Any, **kwargs: Any) -> Any:
    """``matplotlib.use("Agg")``: nothing to choose here."""


def __getattr__(name: Any) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return Discarded()


class _Module(types.ModuleType):
    def __getattr__(self, name: Any) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Discarded()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``matplotlib.pyplot``, ``matplotlib.cm``, … : a module of discarded names each."""

    def find_spec(self, fullname: Any, path: Any = None, target: Any = None) -> Any:
        if fullname.startswith(("matplotlib.", "mpl_toolkits")) and fullname.count(".") <= 4:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: Any) -> Any:
        pass


if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
    sys.meta_path.append(_Finder())
