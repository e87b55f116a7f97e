"""What stands in for a value a lean tape does not keep: :class:`NotKept`.

Each op declares which values its VJP reads (:attr:`microtape.ops.Op.reads`:
softmax reads its output, ``scale`` nothing, ``matmul`` both inputs); a value
no VJP reads need not be kept for the backward pass. :class:`NotKept` keeps
its shape and dtype (VJPs that only reshape or sum need no more) and raises,
on any other use, an error saying how to record it fully.
``tests/test_op_reads.py`` runs every op's VJP with its undeclared values
replaced by it.
"""

import numpy as np

__all__ = ["NotKept", "not_kept_error"]


def not_kept_error(name, what="value"):
    """The error for reading a value (or gradient) a lean tape did not keep."""
    return ValueError(
        f"the {what} of {name} was not kept: it was recorded on a lean tape, which keeps only what the "
        "backward pass reads. Record it fully (mt.Tape() / lean=False), or name it in keep=(...) "
        f"when recording lean (keep=({name!r},))"
    )


class NotKept:
    """Stands in for a value a lean tape dropped: its shape and dtype, and an error on any other use.

    ``shape``, ``dtype``, ``ndim`` and ``size`` answer (a VJP that only needs
    shapes still runs); turning it into an array, arithmetic, indexing or
    comparing it raise a ``ValueError`` naming the step and how to keep it.
    """

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype, name):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.name = name

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self):
        return "value not kept"

    def _refuse(self, *args, **kwargs):
        raise not_kept_error(self.name)

    # Any use of the numbers: numpy's conversion, arithmetic, comparisons, indexing, truth.
    __array__ = __array_ufunc__ = _refuse  # (numpy functions that need only the shape — np.size — work)
    __getitem__ = __setitem__ = __iter__ = __len__ = __bool__ = __float__ = __int__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __hash__ = object.__hash__

    def __getattr__(self, attribute):
        # Anything an array has beyond its shape and dtype (``.T``, ``.sum``, ``.astype``…) reads the numbers.
        # (Protocol probes — ``__deepcopy__`` and friends — get the usual AttributeError.)
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise not_kept_error(object.__getattribute__(self, "name"))
