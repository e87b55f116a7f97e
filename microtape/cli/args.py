"""What every `microtape` sub-command shares: option types and the one way a bad option fails.

This module lets a sub-command declare options that check themselves::

    parser.add_argument("--seq", type=positive_int, default=6)
    parser.add_argument("--dropout", type=probability, default=0.0)
    parser.add_argument("--out", type=output_folder, default="demo-output")

A bad option or path ends the command with **one line** on stderr naming the
option and what was expected, and exit status **2** (no traceback; the
global ``--debug`` flag shows one). Inside a command, raise
:class:`UsageError` for a combination of options that makes no sense.
Exit status 1 is kept for "the command ran and found a failure" (a
derivative row that disagrees, a student answer that is wrong).

argparse does all the parsing; these are only its ``type=`` functions, since
its own ``type=int`` takes ``0`` or ``-3`` for a size and says only "invalid
int value" where we say what was expected.
"""

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

__all__ = [
    "UsageError",
    "Parser",
    "positive_int",
    "non_negative_int",
    "probability",
    "positive_float",
    "output_folder",
    "output_file",
    "existing_file",
]


class UsageError(Exception):
    """A bad option, path or combination of options: reported in one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (``microtape check: error: argument --seq: ...``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str, wanted: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (a seed, a step number)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def probability(text: str) -> float:
    """A float with 0 <= p < 1."""
    value = _float(text, "a probability")
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability with 0 <= p < 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite float > 0 (a learning rate, a time limit)."""
    value = _float(text, "a number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def output_folder(text: str) -> Path:
    """A folder to write into: it may not exist yet, but must not be a file, and must be writable."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, expected a folder to write into")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write into {text!r} ({parent} is not writable)")
    return path


def output_file(suffixes: Sequence[str]) -> Callable[[str], Path]:
    """A file type: its suffix must be one of ``suffixes`` and its folder writable."""

    def check(text: str) -> Path:
        path = Path(text)
        if path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a file ending in {', '.join(suffixes)}")
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a folder, expected a file name")
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
        if not os.access(parent, os.W_OK):
            raise argparse.ArgumentTypeError(f"cannot write {text!r} ({parent} is not writable)")
        return path

    check.__name__ = "file"
    return check


def existing_file(text: str) -> Path:
    """A file that exists."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    return path
