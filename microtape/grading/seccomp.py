"""The box's system-call filter: a seccomp program refusing what a numpy function never needs.

A student's function computes with numpy: it reads memory, allocates, maybe
writes a scratch file. It never needs to make namespaces (``unshare``,
``setns``, a ``clone`` with ``CLONE_NEW*``), mount anything, trace or read
another process, open a raw or packet socket, touch the kernel's keyrings,
load BPF programs or modules. This module writes the classic-BPF program
that makes those calls fail with ``EPERM`` (``clone3`` with ``ENOSYS``, so
the C library falls back to ``clone``, whose flags the filter can read)::

    program = filter_program()          # bytes, or None on an architecture not listed here
    # bubblewrap loads it:  bwrap --seccomp FD ...

It is a tiny assembler for the few instructions needed, so no dependency
(libseccomp) is added. Another architecture than the ones listed gets no
filter, and :func:`filter_program` returns None (the box says so).
"""

import errno
import platform
import struct
from typing import Any

__all__ = ["BLOCKED", "filter_program", "supported"]

# BPF instruction classes and fields (linux/bpf_common.h, linux/filter.h).
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x05 | 0x40 | 0x00  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
_ALU_AND_K = 0x04 | 0x50 | 0x00  # BPF_ALU | BPF_AND | BPF_K

_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_KILL = 0x80000000  # SECCOMP_RET_KILL_PROCESS
_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (low word first here).
_NR, _ARCH = 0, 4


def _arg(index: Any) -> Any:
    return 16 + 8 * index  # the low 32 bits of argument ``index`` (little-endian machines)


_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
_AF_PACKET, _SOCK_RAW, _SOCK_TYPE_MASK = 17, 3, 0xF

#: The refused calls by name; every one exists on the architectures below.
BLOCKED = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "ptrace", "process_vm_readv",
    "process_vm_writev", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
    "name_to_handle_at", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "swapon", "swapoff", "reboot", "acct", "settimeofday", "clock_settime", "adjtimex",
    "quotactl", "syslog", "io_uring_setup", "io_uring_enter", "io_uring_register", "vhangup",
)  # fmt: skip

# (audit architecture, system call numbers) per machine.
_TABLES = {
    "x86_64": (
        0xC000003E,
        {
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "acct": 163,
            "settimeofday": 164,
            "clock_settime": 227,
            "adjtimex": 159,
            "quotactl": 179,
            "syslog": 103,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "vhangup": 153,
            "clone": 56,
            "clone3": 435,
            "socket": 41,
        },  # fmt: skip
    ),
    "aarch64": (
        0xC00000B7,
        {
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "swapon": 224,
            "swapoff": 225,
            "reboot": 142,
            "acct": 89,
            "settimeofday": 170,
            "clock_settime": 112,
            "adjtimex": 171,
            "quotactl": 60,
            "syslog": 116,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "vhangup": 58,
            "clone": 220,
            "clone3": 435,
            "socket": 198,
        },  # fmt: skip
    ),
}


def supported() -> bool:
    """Is there a filter for this machine's architecture?"""
    return platform.machine() in _TABLES


def _instruction(code: Any, k: int = 0, jt: int = 0, jf: int = 0) -> Any:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: Any = None) -> Any:
    """The filter as bytes (``struct sock_filter[]``, what ``bwrap --seccomp FD`` reads), or None."""
    machine = machine or platform.machine()
    if machine not in _TABLES:
        return None
    arch, numbers = _TABLES[machine]
    eperm = _ERRNO | errno.EPERM
    program = [
        _instruction(_LD_W_ABS, _ARCH),
        _instruction(_JEQ_K, arch, jt=1, jf=0),
        _instruction(_RET_K, _KILL),  # another ABI (e.g. 32-bit calls): not allowed at all
        _instruction(_LD_W_ABS, _NR),
    ]
    if machine == "x86_64":  # x32 calls (numbers | 0x40000000) would dodge the table
        program += [_instruction(_JGE_K, 0x40000000, jt=0, jf=1), _instruction(_RET_K, eperm)]
    for name in BLOCKED:
        program += [_instruction(_JEQ_K, numbers[name], jt=0, jf=1), _instruction(_RET_K, eperm)]
    program += [_instruction(_JEQ_K, numbers["clone3"], jt=0, jf=1), _instruction(_RET_K, _ERRNO | errno.ENOSYS)]
    # clone: refused when its flags (argument 0 on both machines) ask for a new namespace.
    program += [
        _instruction(_JEQ_K, numbers["clone"], jt=0, jf=3),
        _instruction(_LD_W_ABS, _arg(0)),
        _instruction(_JSET_K, _CLONE_NEW, jt=0, jf=1),
        _instruction(_RET_K, eperm),
        _instruction(_LD_W_ABS, _NR),
    ]
    # socket(domain, type, protocol): no packet sockets, no raw sockets.
    program += [
        _instruction(_JEQ_K, numbers["socket"], jt=0, jf=6),
        _instruction(_LD_W_ABS, _arg(0)),
        _instruction(_JEQ_K, _AF_PACKET, jt=3, jf=0),
        _instruction(_LD_W_ABS, _arg(1)),
        _instruction(_ALU_AND_K, _SOCK_TYPE_MASK),
        _instruction(_JEQ_K, _SOCK_RAW, jt=0, jf=1),
        _instruction(_RET_K, eperm),
    ]
    program.append(_instruction(_RET_K, _ALLOW))
    return b"".join(program)
