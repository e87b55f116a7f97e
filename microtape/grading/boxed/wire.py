"""The one message format between the grader and the boxed child: a JSON header, then arrays.

A message is ``[4-byte header length][header JSON][for each array: 8-byte
length, then the array as .npy bytes]``; the header says how many arrays
follow (``"arrays": n``). Arrays travel as ``.npy`` with
``allow_pickle=False``, so no object — only numbers and their shape — crosses
the boundary. Every length is checked against a limit *before* anything is
read or allocated — the header's size and JSON nesting depth, each array's
bytes, its *declared* shape × item size against the bytes actually sent, and
the whole message's bytes — so a child cannot make the grader read, recurse
or allocate without bound.

This file imports only the standard library and numpy: the child imports it
from its helper folder, the grader from ``microtape.grading.boxed.wire``.
"""

import io
import json
import re
import struct
from typing import Any

import numpy as np

__all__ = [
    "MAX_HEADER",
    "MAX_ARRAY",
    "MAX_ARRAYS",
    "MAX_MESSAGE",
    "MAX_DEPTH",
    "WireError",
    "encode",
    "read_message",
    "json_depth",
    "loads_limited",
]

#: The largest header, one array's .npy bytes, the most arrays, and all the arrays of one message together.
MAX_HEADER = 1 << 20
MAX_ARRAY = 64 << 20
MAX_ARRAYS = 4096  # (a header names each: MAX_HEADER bounds them too; a derivation has no fixed number of steps)
MAX_MESSAGE = 128 << 20
#: The deepest nesting of ``[`` and ``{`` a header may have (Python's JSON reader recurses on each level).
MAX_DEPTH = 32
#: The .npy header itself (numpy writes ~128 bytes).
_MAX_NPY_HEADER = 4096


class WireError(Exception):
    """A message broke the format or a limit (the other side is not to be believed)."""


def encode(header: Any, arrays: Any = ()) -> Any:
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


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(data: Any) -> Any:
    """How deep ``[`` and ``{`` nest in the JSON bytes ``data`` (strings left out), without recursing."""
    skeleton = np.frombuffer(_STRING.sub(b"", data), dtype=np.uint8)
    if not skeleton.size:
        return 0
    steps = np.isin(skeleton, (ord("["), ord("{"))).astype(np.int64) - np.isin(skeleton, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max(initial=0))


def loads_limited(data: Any, max_depth: Any = MAX_DEPTH) -> Any:
    """``json.loads`` of ``data`` (bytes), refusing nesting deeper than ``max_depth`` *before* parsing.

    Raises ValueError saying why (too deep, not UTF-8, not JSON); never RecursionError.
    """
    depth = json_depth(data)
    if depth > max_depth:
        raise ValueError(f"JSON nested {depth} deep (the limit is {max_depth})")
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:  # cannot happen below max_depth; kept so no input ever escapes as one
        raise ValueError("JSON nested too deep") from None


def _array(data: Any) -> Any:
    """The .npy bytes ``data`` as an array, its declared shape and dtype checked against the bytes first."""
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"unknown .npy version {version}")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(stream, max_header_size=_MAX_NPY_HEADER)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as error:
        raise WireError(f"an array that is not a .npy array ({str(error)[:200]})") from None
    if dtype.hasobject or dtype.kind not in "biufc" or dtype.fields is not None:
        raise WireError(f"an array of dtype {dtype} (only numbers cross the boundary)")
    count = 1
    for size in shape:
        count *= int(size)  # Python integers: a declared (10**14,) is a big number, never an allocation
    body = len(data) - stream.tell()
    if count * dtype.itemsize != body:
        raise WireError(f"an array declaring shape {tuple(shape)} of {dtype} ({count * dtype.itemsize} bytes) "
                        f"with {body} bytes sent")  # fmt: skip
    array = np.frombuffer(data, dtype=dtype, count=count, offset=stream.tell())
    return array.reshape(shape, order="F" if fortran else "C").copy()


def read_message(read_exactly: Any) -> Any:
    """``(header, arrays)`` from ``read_exactly(n) -> n bytes``; :class:`WireError` on anything malformed."""
    (size,) = struct.unpack(">I", read_exactly(4))
    if size > MAX_HEADER:
        raise WireError(f"a header of {size} bytes (the limit is {MAX_HEADER})")
    try:
        header = loads_limited(read_exactly(size))
    except (UnicodeDecodeError, ValueError) as error:
        raise WireError(f"a header that is not JSON ({str(error)[:200]})") from None
    if not isinstance(header, dict):
        raise WireError("a header that is not a JSON object")
    count = header.get("arrays", 0)
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_ARRAYS:
        raise WireError(f"a message announcing {count!r} arrays (at most {MAX_ARRAYS})")
    arrays, total = [], 0
    for _ in range(count):
        (length,) = struct.unpack(">Q", read_exactly(8))
        if length > MAX_ARRAY:
            raise WireError(f"an array of {length} bytes (the limit is {MAX_ARRAY})")
        total += length
        if total > MAX_MESSAGE:
            raise WireError(f"arrays of more than {MAX_MESSAGE >> 20} MB in one message")
        arrays.append(_array(read_exactly(length)))
    return header, arrays
