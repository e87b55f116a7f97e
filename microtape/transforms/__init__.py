"""Transforms of a function: forward mode (:func:`jvp`) and higher order (:func:`hvp`, :func:`hessian`)."""
