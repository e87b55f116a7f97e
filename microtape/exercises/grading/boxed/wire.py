"""The one message format between the grader and the boxed child: a JSON header, then arrays.

A message is ``[4-byte header length][header JSON][for each array: 8-byte
length, then the array as .npy bytes]``; the header says how many arrays
follow (``"arrays": n``). Arrays travel as ``.npy`` with
``allow_pickle=False``, so no object — only numbers and their shape — crosses
the boundary. Every length is checked against a limit *before* anything is
read, so a child cannot make the grader read or allocate without bound.

This file imports only the standard library and numpy: the child imports it
from its helper folder, the grader from ``microtape.exercises.boxed.wire``.
"""

import io
import json
import struct

import numpy as np

__all__ = ["MAX_HEADER", "MAX_ARRAY", "MAX_ARRAYS", "WireError", "encode", "read_message"]

#: The largest header, one array's .npy bytes, and the most arrays in one message.
MAX_HEADER = 1 << 20
MAX_ARRAY = 64 << 20
MAX_ARRAYS = 32


class WireError(Exception):
    """A message broke the format or a limit (the other side is not to be believed)."""


def encode(header, arrays=()):
    """The bytes of one message: ``header`` (a JSON-able dict) and ``arrays``."""
    header = dict(header, arrays=len(arrays))
    head = json.dumps(header).encode("utf-8")
    parts = [struct.pack(">I", len(head)), head]
    for array in arrays:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array), allow_pickle=False)
        data = buffer.getvalue()
        parts += [struct.pack(">Q", len(data)), data]
    return b"".join(parts)


def read_message(read_exactly):
    """``(header, arrays)`` from ``read_exactly(n) -> n bytes``; :class:`WireError` on anything malformed."""
    (size,) = struct.unpack(">I", read_exactly(4))
    if size > MAX_HEADER:
        raise WireError(f"a header of {size} bytes (the limit is {MAX_HEADER})")
    try:
        header = json.loads(read_exactly(size).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise WireError(f"a header that is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise WireError("a header that is not a JSON object")
    count = header.get("arrays", 0)
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_ARRAYS:
        raise WireError(f"a message announcing {count!r} arrays (at most {MAX_ARRAYS})")
    arrays = []
    for _ in range(count):
        (length,) = struct.unpack(">Q", read_exactly(8))
        if length > MAX_ARRAY:
            raise WireError(f"an array of {length} bytes (the limit is {MAX_ARRAY})")
        try:
            array = np.load(io.BytesIO(read_exactly(length)), allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise WireError(f"an array that is not a .npy array ({error})") from None
        if not isinstance(array, np.ndarray):
            raise WireError("an .npz archive where one array was expected")
        arrays.append(array)
    return header, arrays
