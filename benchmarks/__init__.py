"""Side-by-side benchmarks of microtape (run by hand, never as timed tests).

Run them with ``make bench`` or ``python -m benchmarks`` (``--quick`` for a
smoke test, ``--only attention|scalar|graph|transformer`` for one part). Each
implementation is timed in a process of its own, with one BLAS thread, and
every table shows medians, the spread, and ratios against a reference
measured in the same run. The results of a full run are recorded in
``benchmarks/RESULTS.md``.

What is compared:

``attention``
    multi-head attention forward + backward: microtape's tape route and its
    analytic route against a hand-written numpy implementation of the same
    math (:mod:`benchmarks.numpy_attention`, independent of microtape) and,
    when PyTorch is installed, PyTorch eager on the same math.
``scalar``
    microtape's ``Scalar`` engine against micrograd (``pip install
    micrograd==0.1.0``): long chains of operations, and the per-sample
    training step of an ``MLP(3, [16, 16, 1])``.
``graph``
    how long ``microtape.viz.graph`` and Graphviz's ``dot`` take to draw an
    attention tape and scalar graphs of 100 to 3,000 nodes.
``transformer``
    a post-norm encoder layer's forward + backward (tape and analytic routes)
    against a hand-written numpy layer (:mod:`benchmarks.numpy_encoder`) and
    PyTorch's own layer; one training step of ``microtape train``'s model
    against the same model in PyTorch eager.

This package imports nothing heavy at import time: the worker processes (one
per implementation) import numpy, microtape, micrograd or torch themselves.
"""
