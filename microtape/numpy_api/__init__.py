"""numpy's names on microtape values: ``mt.sin(t)``, ``mt.einsum(...)``, ``mt.pad(...)``, and ``np.exp(t)``.

:mod:`.functions` and :mod:`.joining` are the functions; :mod:`.protocol`
fills the table that :class:`~microtape.values.tensor.Tensor`'s
``__array_ufunc__`` / ``__array_function__`` read, so ``np.<name>(tensor)``
reaches them.
"""
