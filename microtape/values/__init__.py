"""The values a program computes with: :class:`Scalar` (one number) and :class:`Tensor` (a numpy array).

Both are nodes of the engine (:mod:`microtape.engine.node`) and record the
same ops. Read :mod:`.scalar` first (micrograd-sized), then :mod:`.tensor`
(:mod:`.arguments` checks what its methods accept: indexes, axes, shapes).
:mod:`.scalar_array` and :mod:`.plain` are array-like siblings (a numpy array
of Scalars; a plain array that only computes) so one forward runs on all of
them. Scalar's arithmetic and ``backward()`` take the engine's float fast path
(:mod:`microtape.engine.fast_scalar`), tested bit for bit against the plain path.
"""
