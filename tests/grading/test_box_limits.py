"""The box's limits tested by their values (issue 45): each probed just under and just over its documented number.

Raising the memory limit from 1 GiB to 4 GiB, the process limit from 3 to 64,
the file limit, or dropping any call from the system-call filter makes one of
these fail. Probes run in a real box (bubblewrap); the filter is also read
instruction by instruction by a small classic-BPF interpreter, for every
refused call and a few that must stay allowed.
"""

import errno
import struct
import textwrap

import numpy as np
import pytest

from microtape.grading import box, seccomp
from microtape.grading.remote import BoxedSubmission

pytestmark = pytest.mark.skipif(box._bwrap() is None, reason="needs bubblewrap (make sandbox)")

#: The documented numbers (docs/grading.md, box.Limits's docstring).
GIB, MIB = 1 << 30, 1 << 20
DOCUMENTED = {"memory_bytes": 1 * GIB, "processes": 3, "file_bytes": 16 * MIB, "open_files": 64, "cpu_seconds": 120}
#: Every call the filter must refuse (docs/grading.md lists them), independent of seccomp.BLOCKED.
MUST_REFUSE = (
    "unshare setns mount umount2 pivot_root chroot ptrace process_vm_readv process_vm_writev keyctl add_key "
    "request_key bpf perf_event_open userfaultfd kexec_load kexec_file_load init_module finit_module delete_module "
    "open_by_handle_at name_to_handle_at open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr swapon "
    "swapoff reboot acct settimeofday clock_settime adjtimex quotactl syslog io_uring_setup io_uring_enter "
    "io_uring_register vhangup"
).split()


def _probe(source, limits=None, seconds=30.0):
    """Run ``source`` (defining ``probe()`` -> numbers) in a box; the numbers it returns, as a list."""
    submission = BoxedSubmission("file", [textwrap.dedent(source)], "probe.py", ["probe"], load_seconds=seconds,
                                 limits=limits)  # fmt: skip
    with submission:
        assert submission.load_error is None, submission.load_error
        return [float(x) for x in np.atleast_1d(submission.call("probe", [], seconds))]


def test_the_documented_numbers_are_the_limits():
    limits = box.Limits()
    assert {key: getattr(limits, key) for key in DOCUMENTED} == DOCUMENTED


def test_memory_just_under_the_limit_is_allocated_and_just_over_is_refused():
    under, over, limit = _probe("""
        import numpy as np, resource
        def probe():
            size = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
            limit = resource.getrlimit(resource.RLIMIT_AS)[0]
            results = []
            for want in (1 << 30) - size - (96 << 20), (1 << 30) + (64 << 20):   # just under / just over 1 GiB
                try:
                    block = np.ones(want // 8)
                    results.append(1.0)
                    del block
                except MemoryError:
                    results.append(0.0)
            return results + [limit]
    """)
    assert (under, over, limit) == (1.0, 0.0, float(DOCUMENTED["memory_bytes"]))


def test_processes_and_threads_stop_at_the_limit():
    started, limit = _probe("""
        import threading, time, resource
        def probe():
            count = 0
            for _ in range(80):
                try:
                    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
                    count += 1
                except RuntimeError:
                    break
            return [count, resource.getrlimit(resource.RLIMIT_NPROC)[0]]
    """)
    limit_here = DOCUMENTED["processes"] if box._is_root() else 64
    assert limit == limit_here
    # The probe's own thread is one of them; as root the box's user is its own, so nothing else counts.
    assert started <= limit_here - 1 and (not box._is_root() or started == limit_here - 1), started


def test_a_file_just_under_16_mb_is_written_and_just_over_is_refused():
    under, over = _probe("""
        import errno, signal
        def probe():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
            results = []
            for size in (16 << 20) - 1, (16 << 20) + 1:
                try:
                    with open("/work/big", "wb") as file:
                        file.write(b"x" * size)
                    results.append(1.0)
                except OSError as error:
                    results.append(0.0 if error.errno == errno.EFBIG else -1.0)
            return results
    """)
    assert (under, over) == (1.0, 0.0)


def test_at_most_64_files_are_open_at_once():
    (most,) = _probe("""
        import os
        def probe():
            kept = []
            try:
                while len(kept) < 200:
                    kept.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                pass
            highest = max(kept)
            return [highest + 1]   # fds are numbered from 0: the highest one + 1 is how many may be open
    """)
    assert most == DOCUMENTED["open_files"]


def test_cpu_time_is_limited_by_its_number():
    (soft,) = _probe("""
        import resource
        def probe():
            return [resource.getrlimit(resource.RLIMIT_CPU)[0]]
    """)
    assert soft == DOCUMENTED["cpu_seconds"]
    # and the limit acts: a box of 1 CPU second ends a busy loop of 3 (the same mechanism at 120)
    source = ("def probe():\n    import time\n    end = time.process_time() + 3\n"
              "    while time.process_time() < end:\n        pass\n    return [1]\n")  # fmt: skip
    submission = BoxedSubmission("file", [source], "probe.py", ["probe"], load_seconds=10,
                                 limits=box.Limits(cpu_seconds=1))  # fmt: skip
    with submission, pytest.raises(Exception, match="SIGXCPU|SIGKILL|ended"):
        submission.call("probe", [], 10)


# ---------------------------------------------------------------- the system-call filter


def _run_filter(program, nr, args=(0,) * 6, arch=None):
    """Classic BPF, as the kernel runs it on ``struct seccomp_data``: the action for call ``nr``."""
    audit = arch if arch is not None else seccomp._TABLES[seccomp.platform.machine()][0]
    data = struct.pack("<iI Q 6Q", nr, audit, 0, *args)
    instructions = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = instructions[pc]
        pc += 1
        if code == seccomp._LD_W_ABS:
            accumulator = struct.unpack("<I", data[k : k + 4])[0]
        elif code == seccomp._ALU_AND_K:
            accumulator &= k
        elif code in (seccomp._JEQ_K, seccomp._JGE_K, seccomp._JSET_K):
            taken = {seccomp._JEQ_K: accumulator == k, seccomp._JGE_K: accumulator >= k,
                     seccomp._JSET_K: bool(accumulator & k)}[code]  # fmt: skip
            pc += jt if taken else jf
        elif code == seccomp._RET_K:
            return k
        else:
            raise AssertionError(f"an instruction this interpreter does not know: {code:#x}")


@pytest.mark.skipif(not seccomp.supported(), reason="no filter on this architecture (the box says so)")
@pytest.mark.parametrize("name", MUST_REFUSE)
def test_every_refused_call_is_refused_by_the_filter(name):
    program = seccomp.filter_program()
    nr = seccomp._TABLES[seccomp.platform.machine()][1][name]
    assert _run_filter(program, nr) == seccomp._ERRNO | errno.EPERM, name


@pytest.mark.skipif(not seccomp.supported(), reason="no filter on this architecture (the box says so)")
def test_what_numpy_needs_stays_allowed_and_another_architecture_is_killed():
    program = seccomp.filter_program()
    allowed = {"x86_64": (0, 1, 9, 3, 56, 57, 231), "aarch64": (63, 64, 222, 57, 220, 94)}[seccomp.platform.machine()]
    for nr in allowed:  # read, write, mmap, close, clone without CLONE_NEW*, fork, exit_group
        assert _run_filter(program, nr) == seccomp._ALLOW, nr
    assert _run_filter(program, 0, arch=0x40000003) == seccomp._KILL  # i386 calls from an x86_64 process
    clone = seccomp._TABLES[seccomp.platform.machine()][1]["clone"]
    assert _run_filter(program, clone, args=(0x10000000, 0, 0, 0, 0, 0)) == seccomp._ERRNO | errno.EPERM  # NEWUSER


def test_io_uring_setup_is_refused_in_a_real_box():
    """One of the refused calls probed in the box itself: io_uring_setup with valid arguments gets EPERM."""
    (code,) = _probe("""
        import ctypes, ctypes.util, platform
        def probe():
            libc = ctypes.CDLL(None, use_errno=True)
            number = {"x86_64": 425, "aarch64": 425}[platform.machine()]
            params = ctypes.create_string_buffer(120)
            result = libc.syscall(number, 8, params)
            return [ctypes.get_errno() if result < 0 else 0]
    """)
    assert code == errno.EPERM
