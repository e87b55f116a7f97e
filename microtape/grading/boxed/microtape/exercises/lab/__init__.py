"""``microtape.exercises.lab`` in the box: only the forwards notebook 07 gives (see :mod:`.op_vjp`)."""
