"""Optimizers: what turns a parameter's ``.grad`` into a step (``mt.optim.SGD``, ``mt.optim.Adam``)."""

from .optimizers import SGD, Adam, Optimizer

__all__ = ["Optimizer", "SGD", "Adam"]
