"""A notebook cell read as IPython would run it: magics, shell escapes and ``?`` help lines are not Python.

Used on both sides of the box: the child runs each cell through
:func:`strip_magics` before compiling it, and the grader's source analysis
(``integrity.py``) reads the same text. Standard library only (the child
imports it from its helper folder)::

    >>> print(strip_magics("t = %timeit -o f()\nnp.einsum?\nanswer = 1"), end="")
    t = None  # (an IPython line)
    pass  # (an IPython line)
    answer = 1

A cell magic decides the whole cell: ``%%time``, ``%%timeit``, ``%%capture``
(and the other magics that run their cell as Python) keep the body;
``%%writefile``, ``%%bash`` and any other cell magic are not Python, and the
cell is not run (:func:`runs_as_python`).
"""

import re
from typing import Any

__all__ = ["statement_starts", "strip_magics", "runs_as_python", "PYTHON_CELL_MAGICS"]

#: Cell magics whose body IPython runs as Python (the rest write files, run shells, render text).
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun", "debug", "memit", "python", "python3")
#: ``name = %magic …`` / ``name = !cmd``: IPython assigns the magic's result; here the name gets None.
_ASSIGNED = re.compile(r"^(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[%!]")
#: ``np.einsum?``, ``?np.einsum``, ``np.einsum??``: IPython's help, not Python.
_HELP = re.compile(r"^\s*(\?{1,2}[\w.]+|[\w.]+\?{1,2})\s*$")
_MARK = "  # (an IPython line)"


def statement_starts(source: Any) -> Any:
    """The numbers of the lines that begin a new statement: not inside brackets, a string or a ``\\`` line.

    The same rule IPython's input transformers apply: only there can ``%`` or
    ``!`` begin a magic or shell line; inside parentheses a line starting with
    ``!=`` or ``%`` (a black-formatted continuation) is Python.
    """
    starts, depth, quote, continued = [], 0, None, False
    for number, line in enumerate(source.splitlines()):
        if depth == 0 and quote is None and not continued:
            starts.append(number)
        continued = False
        i = 0
        while i < len(line):
            char = line[i]
            if quote is not None:
                if char == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = None
                    continue
            elif char == "#":
                break
            elif char in "\"'":
                triple = char * 3
                quote = triple if line.startswith(triple, i) else char
                i += len(quote)
                continue
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                depth = max(0, depth - 1)
            i += 1
        if quote is not None and len(quote) == 1:
            quote = None  # an unclosed one-line string: Python's error, not ours to follow
        continued = line.endswith("\\") and quote is None
    return set(starts)


def _cell_magic(source: Any) -> Any:
    first = source.lstrip("\n").split("\n", 1)[0].strip()
    return first[2:].split()[0] if first.startswith("%%") and len(first) > 2 else None


def runs_as_python(source: Any) -> Any:
    """Does IPython run this cell as Python? Not when it begins with a cell magic like ``%%writefile``."""
    magic = _cell_magic(source)
    return magic is None or magic in PYTHON_CELL_MAGICS


def _ipython_line(line: Any) -> Any:
    """The Python a line stands for when it is an IPython line at a statement's start, else None."""
    indent = line[: len(line) - len(line.lstrip())]
    assigned = _ASSIGNED.match(line)
    if assigned and not line.lstrip().startswith(("%", "!")):
        names = assigned.group(2)
        count = names.count(",") + 1
        value = "None" if count == 1 else "(" + "None, " * count + ")"
        return f"{indent}{names} = {value}{_MARK}"
    if line.lstrip().startswith(("%", "!")) or _HELP.match(line):
        return f"{indent}pass{_MARK}"
    return None


def strip_magics(source: Any) -> Any:
    """A notebook cell as Python: IPython lines replaced, the answer lines kept; a cell magic's first line gone.

    Only a line that begins a statement can be an IPython line (inside brackets a line starting
    with ``%`` or ``!=`` is Python): ``%magic`` and ``!shell`` become ``pass``, ``x = %magic`` and
    ``x = !cmd`` become ``x = None``, ``name?`` help becomes ``pass`` (each keeping its indentation).
    """
    if _cell_magic(source) is not None:
        lines = source.lstrip("\n").split("\n")
        source = "\n".join([f"pass{_MARK}", *lines[1:]])
    lines = source.splitlines()
    starts = statement_starts(source)
    kept: list[str] = []
    for number, line in enumerate(lines):
        replaced = _ipython_line(line) if number in starts else None
        # An IPython line's own continuation lines (`!ls \\` / `  -l`) go with it.
        if replaced is None and number and kept[-1].endswith(_MARK) and lines[number - 1].endswith("\\"):
            replaced = kept[-1][: len(kept[-1]) - len(kept[-1].lstrip())] + f"pass{_MARK}"
        kept.append(line if replaced is None else replaced)
    return "\n".join(kept) + "\n"
