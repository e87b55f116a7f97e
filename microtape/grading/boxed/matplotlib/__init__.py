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

__all__ = ["Discarded", "use"]


class Discarded:
    """Whatever a plotting call returns: callable, indexable, iterable (as two), a context manager."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return Discarded()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Discarded()

    def __getitem__(self, key):
        return Discarded()

    def __setitem__(self, key, value):  # plt.rcParams["figure.dpi"] = 120
        pass

    def __iter__(self):  # fig, ax = plt.subplots()
        return iter((Discarded(), Discarded()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return "<a plot: discarded in the box>"


def use(*args, **kwargs):
    """``matplotlib.use("Agg")``: nothing to choose here."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Discarded()


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Discarded()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``matplotlib.pyplot``, ``matplotlib.cm``, … : a module of discarded names each."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(("matplotlib.", "mpl_toolkits")) and fullname.count(".") <= 4:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
    sys.meta_path.append(_Finder())
