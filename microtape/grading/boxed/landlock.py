"""Writes only where the check may write: Linux Landlock, for a self-check that runs without bubblewrap.

Without bubblewrap a student's self-check runs as the student: their file could
rewrite the installed microtape (say, the checker's ``diagnose.py``) so every
later check says "right". Landlock (Linux 5.13 and later, no privilege needed)
lets this process give up, for itself and every process it starts, the right
to create, change or remove files anywhere but below the folders named —
here the child's scratch folder and ``/dev`` (``/dev/null``). Reading stays
allowed. Elsewhere (an older kernel, macOS, Windows) :func:`restrict_writes`
does nothing and says so by returning False. Standard library only (the
child imports it from its helper folder).
"""

import ctypes
import os
import struct
import sys
from typing import Any

__all__ = ["restrict_writes"]

# linux/landlock.h: the rights that change the file system (ABI 1), and the system calls
# (the same numbers on every architecture that has them).
_WRITES = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38


def restrict_writes(writable: Any) -> Any:
    """Allow writing only below the folders ``writable``; True when Landlock now holds, False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    attr = struct.pack("=Q", _WRITES)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        return False  # no Landlock here (an older kernel, or turned off)
    try:
        for folder in writable:
            try:
                fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = struct.pack("=Qi", _WRITES, fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_char_p(rule), 0) < 0:
                    return False
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return libc.syscall(_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)
