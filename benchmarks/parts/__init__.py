"""The parts of ``python -m benchmarks``, one file each: ``part(report, quick, ...)`` measures and writes its tables.

``machine`` first, then ``attention`` (with the lean tape and the seed path),
``tiled``, ``scalar``, ``graph`` and ``transformer``; :mod:`benchmarks.__main__`
runs them in that order (``--only`` picks one).
"""
