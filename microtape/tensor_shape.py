"""The shape methods of a Tensor: reading entries, matmul, reshaping, transposing, repeating.

``t[...]`` and ``take`` read entries (their gradient puts each one back
where it was read); ``reshape``, ``transpose``, ``squeeze``,
``expand_dims``, ``broadcast_to``, ``flip``, ``repeat`` and ``tile`` move
numbers without changing them, each recorded as the primitive it amounts to
(``squeeze`` is a ``reshape``, ``flip`` an ``index`` with step -1,
``repeat`` a ``take``), so the tape stays small and every gradient is one
already checked.
"""

import numpy as np

from . import ops
from .tape import Node, record
from .tensor_elementwise import check_broadcast

__all__ = ["ShapeMethods"]


class ShapeMethods:
    """Tensor methods that read or rearrange entries (mixed into :class:`~microtape.tensor.Tensor`)."""

    __slots__ = ()

    def take(self, indices, axis=0, name=None):
        """The entries at integer ``indices`` along ``axis`` (``numpy.take``): the embedding lookup.

        The result has shape ``shape[:axis] + indices.shape + shape[axis+1:]``.
        Its gradient is a scatter-add: an index used twice receives both
        gradients. ``indices`` are copied (changing your array later changes
        nothing on the tape).
        """
        if self.ndim == 0:
            raise ValueError("Tensor.take(): a 0-d tensor has no axis to take from")
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -self.ndim <= axis < self.ndim:
            raise ValueError(f"Tensor.take(axis={axis!r}): expected an integer axis of a tensor of shape {self.shape}")
        axis = int(axis) % self.ndim
        indices = _integer_indices(indices, self.shape[axis], f"Tensor.take(indices) along axis {axis}")
        return record(ops.take, (self,), {"indices": indices, "axis": axis}, name=name)

    def __getitem__(self, index):
        """Read entries as numpy does, recorded: ``t[3]``, ``t[[0, 2]]``, ``t[:, 0]``, ``t[1:, ..., -1]``, ``t[mask]``.

        An integer or an integer array alone picks along the first axis
        (that is :meth:`take`, the embedding lookup); anything else (slices,
        several axes, ``...``, ``None``, a boolean mask) is the ``index``
        op. Either way the gradient goes back to the entries read, 0
        elsewhere, and an entry read twice gets both gradients. Index arrays
        are copied (changing yours later changes nothing on the tape).
        """
        if _picks_along_the_first_axis(index):
            return self.take(index, axis=0)
        key = _index_key(index, self.shape)
        return record(ops.index, (self,), {"key": key})

    # -- linear algebra

    def matmul(self, other, name=None):
        other = self._lift(other, "@")
        return _matmul(self, other, name)

    def __matmul__(self, other):
        return _matmul(self, self._lift(other, "@"), None)

    def __rmatmul__(self, other):
        return _matmul(self._lift(other, "@"), self, None)

    # -- shape

    def reshape(self, *shape, name=None):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        for n in shape:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
                raise TypeError(f"Tensor.reshape{tuple(shape)}: sizes must be integers, got {n!r}")
        shape = tuple(int(n) for n in shape)
        known = int(np.prod([n for n in shape if n != -1]))
        free = shape.count(-1)
        fits = (free == 0 and known == self.size) or (free == 1 and known > 0 and self.size % known == 0)
        if free > 1 or not fits or any(n < -1 for n in shape):
            raise ValueError(
                f"Tensor.reshape{shape}: cannot reshape a tensor of shape {self.shape} ({self.size} values)"
            )
        return record(ops.reshape, (self,), {"shape": shape}, name=name)

    def transpose(self, *axes, name=None):
        """Permute axes like ``numpy.transpose`` (no axes: reverse them)."""
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        if not axes:
            axes = tuple(range(self.ndim - 1, -1, -1))
        valid = all(isinstance(a, (int, np.integer)) and -self.ndim <= a < self.ndim for a in axes)
        if not valid or sorted(a % self.ndim for a in axes) != list(range(self.ndim)):
            raise ValueError(
                f"Tensor.transpose{tuple(axes)}: not a permutation of the {self.ndim} axes of {self.shape}"
            )
        return record(ops.transpose, (self,), {"axes": tuple(a % self.ndim for a in axes)}, name=name)

    def swapaxes(self, axis1, axis2, name=None):
        axes = list(range(self.ndim))
        try:
            axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
        except (IndexError, TypeError):
            raise ValueError(f"Tensor.swapaxes({axis1}, {axis2}): axes out of range for shape {self.shape}") from None
        return self.transpose(tuple(axes), name=name)

    @property
    def T(self):
        """The transpose (all axes reversed, as in numpy)."""
        return self.transpose()

    def squeeze(self, axis=None, name=None):
        """Drop axes of length 1 (all of them, or the given ones): a ``reshape`` on the tape."""
        if axis is None:
            axes = tuple(i for i, n in enumerate(self.shape) if n == 1)
        else:
            axes = _axes_in_range(axis, self.ndim, "squeeze")
            for a in axes:
                if self.shape[a] != 1:
                    raise ValueError(
                        f"Tensor.squeeze(axis={axis!r}): axis {a} has length {self.shape[a]}, only length 1 can go"
                    )
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes), name=name)

    def expand_dims(self, axis, name=None):
        """Insert axes of length 1 at ``axis`` (an int or a tuple, positions in the result): a ``reshape``."""
        rank = self.ndim + (len(axis) if isinstance(axis, tuple) else 1)
        axes = _axes_in_range(axis, rank, "expand_dims")
        sizes = iter(self.shape)
        return self.reshape(tuple(1 if i in axes else next(sizes) for i in range(rank)), name=name)

    def broadcast_to(self, shape, name=None):
        """The tensor repeated along new or length-1 axes to ``shape`` (gradient: summed back)."""
        shape = _shape_argument(shape, "broadcast_to")
        try:
            np.broadcast_shapes(self.shape, shape)
            fits = len(shape) >= self.ndim and np.broadcast_shapes(self.shape, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"Tensor.broadcast_to({shape}): a tensor of shape {self.shape} does not broadcast to it")
        return record(ops.broadcast_to, (self,), {"shape": shape}, name=name)

    def flip(self, axis=None, name=None):
        """The entries in reverse order along ``axis`` (None: every axis): an ``index`` with step -1."""
        axes = range(self.ndim) if axis is None else _axes_in_range(axis, self.ndim, "flip")
        key = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(self.ndim))
        return record(ops.index, (self,), {"key": key}, name=name)

    def repeat(self, repeats, axis=None, name=None):
        """Each entry repeated ``repeats`` times along ``axis`` (None: the flattened tensor), as numpy.

        A ``take`` with each index repeated, so an entry's gradient is the sum over its copies.
        """
        if axis is not None and (isinstance(axis, tuple) or self.ndim == 0):
            raise ValueError(f"Tensor.repeat(axis={axis!r}): give one integer axis (or None: the flattened tensor)")
        source = self.reshape(-1) if axis is None else self
        axis = 0 if axis is None else _axes_in_range(axis, self.ndim, "repeat")[0]
        length = source.shape[axis]
        counts = np.asarray(repeats)
        if counts.dtype.kind not in "iu" or counts.ndim > 1 or np.any(counts < 0):
            raise ValueError(f"Tensor.repeat(repeats={repeats!r:.40}): expected a count >= 0 or one per entry")
        if counts.ndim == 1 and counts.size != length:
            raise ValueError(f"Tensor.repeat(repeats=...): {counts.size} counts for an axis of length {length}")
        indices = np.repeat(np.arange(length), counts)
        return record(ops.take, (source,), {"indices": indices, "axis": axis}, name=name)

    def tile(self, reps, name=None):
        """The whole tensor repeated ``reps`` times along each axis (numpy.tile): reshape, broadcast, reshape."""
        reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
        if not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) and r >= 0 for r in reps):
            raise ValueError(f"Tensor.tile(reps={reps!r}): expected counts >= 0")
        rank = max(len(reps), self.ndim)
        reps = (1,) * (rank - len(reps)) + tuple(int(r) for r in reps)
        shape = (1,) * (rank - self.ndim) + self.shape
        # Each axis n becomes (1, n), broadcast to (r, n), then read as one axis of r·n: the tiles in order.
        paired = self.reshape(tuple(size for n in shape for size in (1, n)))
        stretched = paired.broadcast_to(tuple(size for r, n in zip(reps, shape) for size in (r, n)))
        return stretched.reshape(tuple(r * n for r, n in zip(reps, shape)), name=name)


def _picks_along_the_first_axis(index):
    """True for an integer, or integers in a list or array (not booleans): ``t[3]``, ``t[[0, 2, 2]]``."""
    if isinstance(index, (bool, np.bool_)):
        return False
    if isinstance(index, (int, np.integer)):
        return True
    if isinstance(index, (list, np.ndarray)):
        kind = np.asarray(index).dtype.kind
        return kind in "iu" or (kind == "f" and np.size(index) == 0)  # numpy reads [] as floats
    return False


def _index_key(index, shape):
    """``t[index]``'s key as a tuple of ints, slices, ``...``, ``None`` and fresh index arrays; clear errors."""
    parts = index if isinstance(index, tuple) else (index,)
    key = []
    for part in parts:
        if isinstance(part, Node):
            raise TypeError(
                f"Tensor[{index!r:.80}]: a {type(part).__name__} cannot be an index (use its .data, or numbers)"
            )
        if isinstance(part, (bool, np.bool_)):
            raise TypeError(f"Tensor[{index!r:.80}]: True/False is not an index; use a boolean array as a mask")
        if isinstance(part, (int, np.integer)):
            key.append(int(part))
        elif isinstance(part, slice):
            ends = (part.start, part.stop, part.step)
            if not all(v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool)) for v in ends):
                raise TypeError(f"Tensor[{index!r:.80}]: slice bounds must be integers or None, got {part!r}")
            key.append(slice(*(None if v is None else int(v) for v in ends)))
        elif part is Ellipsis or part is None:
            key.append(part)
        elif isinstance(part, np.ma.MaskedArray):
            raise TypeError(f"Tensor[{index!r:.80}]: a masked array as an index would lose its mask; pass .filled(...)")
        else:
            array = np.asarray(part)
            if array.dtype.kind not in "iub" and array.size:
                raise TypeError(
                    f"Tensor[{index!r:.80}]: expected integers, slices, ..., None, or integer or boolean "
                    f"arrays; got {part!r:.60} (dtype {array.dtype})"
                )
            key.append(np.array(array, dtype=np.bool_ if array.dtype == np.bool_ else np.intp))
    key = tuple(key)
    try:  # numpy's own check, on a view that costs no memory
        np.broadcast_to(np.zeros((), dtype=np.int8), shape)[key]
    except IndexError as error:
        raise IndexError(f"Tensor[{index!r:.80}] of a tensor of shape {shape}: {error}") from None
    return key


def _integer_indices(indices, length, what):
    """``indices`` as a fresh integer array, each in ``[-length, length)``; clear errors otherwise."""
    if isinstance(indices, Node):
        raise TypeError(f"{what}: indices must be integers (a numpy array or list), not a {type(indices).__name__}")
    if isinstance(indices, np.ma.MaskedArray):
        raise TypeError(f"{what}: indices are a masked array; the mask would be dropped silently (pass .filled(...))")
    array = np.asarray(indices)
    if isinstance(indices, list) and array.size == 0:
        array = array.astype(np.intp)  # numpy reads [] as floats; t[[]] picks nothing, as in numpy
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise TypeError(f"{what}: indices must be integers, got dtype {array.dtype} ({indices!r:.60})")
    if array.size and (array.min() < -length or array.max() >= length):
        bad = array[(array < -length) | (array >= length)].ravel()[0]
        raise IndexError(f"{what}: index {bad} is out of range for an axis of length {length}")
    return np.array(array, dtype=np.intp)


def _axes_in_range(axis, ndim, what):
    """``axis`` (an int or a tuple of them) as a tuple of distinct axes in ``range(ndim)``; clear errors."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise ValueError(f"Tensor.{what}(axis={axis!r}): expected integer axes in [-{ndim}, {ndim})")
    axes = tuple(int(a) % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"Tensor.{what}(axis={axis!r}): an axis is repeated")
    return axes


def _shape_argument(shape, what):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"Tensor.{what}(shape={shape!r}): expected a tuple of sizes") from None
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ValueError(f"Tensor.{what}(shape={shape!r}): sizes must be integers >= 0")
    return tuple(int(n) for n in shape)


def _matmul(a, b, name):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"Tensor @: matmul needs arrays of rank >= 1, got shapes {a.shape} and {b.shape}")
    inner_a = a.shape[-1]
    inner_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if inner_a != inner_b:
        raise ValueError(
            f"Tensor @: shapes {a.shape} and {b.shape} do not match for matmul: "
            f"a's last axis ({inner_a}) must equal b's second-to-last ({inner_b})"
        )
    check_broadcast(a.shape[:-2], b.shape[:-2], f"Tensor @ (batch axes of {a.shape} and {b.shape})")
    return record(ops.matmul, (a, b), name=name)
