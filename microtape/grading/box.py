"""The box a student's code runs in: a child process that can compute, and do nothing else.

This module lets the grader start a boxed child and talk to it::

    box = Sandbox()                      # not started yet
    reply, arrays = box.request({"op": "load", ...}, timeout=10)
    box.close()

The child (``boxed/child.py``) runs under ``python -I -S -B`` with a
scrubbed environment, in its own session, with limits on CPU time, memory
(address space), file size, processes and open files, its stdin empty and
its output going to a capped file. On Linux, when bubblewrap (``bwrap``) is
installed, it also runs inside new user, pid, network, IPC and mount
namespaces as a user id of its own (no account has it, no other box shares
it), under a system-call filter (:mod:`.seccomp`): its file system holds only
the Python standard library, numpy and the helper folder — not microtape,
not the grader, not the other submissions — plus an empty, size-limited
working directory; it has no network and cannot see (so cannot signal) any
process outside its box. Without bubblewrap only the limits and the session
apply, and :func:`isolation` says so (``microtape grade`` prints it).

The limits are set by ``prlimit`` (util-linux). A student's *self-check*
(``microtape exercises check``, visible trials, their own code on their own
machine) also runs where ``prlimit`` is missing — macOS, a bare container —
with the limits Python's :mod:`resource` module sets in the child, or none
where that module does not exist (Windows); :func:`isolation` says which.
Graded runs (``Sandbox(self_check=False)``, ``microtape grade``) refuse to
run without ``prlimit``.

Everything it sends is read through :mod:`~microtape.grading.boxed.wire`
with a deadline and size limits; a child that overstays is killed with its
whole box.
"""

import functools
import itertools
import os
import queue
import secrets
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import seccomp
from .boxed import wire

__all__ = ["Limits", "Sandbox", "ChildGone", "BoxTimeout", "BoxStartError", "isolation", "box_available",
           "use_bubblewrap", "HELPER", "fresh_uid"]  # fmt: skip

#: The folder the child runs from (on its sys.path): child.py, wire.py, the stand-in microtape.
HELPER = Path(__file__).resolve().parent / "boxed"
NOBODY = 65534
#: The uid and gid graded code has inside the box's user namespace when the grader is an ordinary user.
BOX_UID = 4242
#: Seconds a new box has to start Python and numpy and say it is ready (several may start at once).
START_SECONDS = 30.0
#: How many times a box that does not start is tried before the grader gives up (its error, not the student's).
START_ATTEMPTS = 3

# Each box runs as a user of its own: a uid no account has, drawn from a range far above any real
# one, from a random start per grader process (two graders on one machine do not meet) plus a counter.
_UID_BASE = 1_000_000_000 + secrets.randbelow(500_000_000)
_uid_counter = itertools.count()


def fresh_uid() -> Any:
    """A uid no other box and no account uses: the kernel's process limit then counts this box alone."""
    return _UID_BASE + next(_uid_counter) % 500_000_000


@dataclass(frozen=True)
class Limits:
    """What one box may use: CPU seconds, memory, bytes per written file, processes, open files.

    ``memory_bytes`` is per process, and a box may hold at most ``processes``
    processes and threads (its user is its own: nothing else counts), so the
    whole box holds at most ``processes × memory_bytes`` plus its two small
    scratch folders (``2 × workdir_bytes``). A numpy function needs one process.
    """

    cpu_seconds: int = 120
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 3
    open_files: int = 64
    workdir_bytes: int = 32 << 20


class ChildGone(Exception):
    """The child ended, closed its pipe or broke the message format; ``str`` says how (one line)."""


class BoxStartError(Exception):
    """No box could be started (after retries): the grader's problem, never the student's."""


class BoxTimeout(Exception):
    """The child did not reply before the deadline (it was killed)."""


#: ``microtape grade --no-box`` turns bubblewrap off (a container where it cannot run).
_USE_BUBBLEWRAP = [True]


def use_bubblewrap(wanted: bool) -> None:
    """Use bubblewrap when it is installed (``True``, the default), or never (``--no-box``)."""
    _USE_BUBBLEWRAP[0] = bool(wanted)


def _bwrap() -> Any:
    if not _USE_BUBBLEWRAP[0]:
        return None
    path = shutil.which("bwrap")
    if path is None or not sys.platform.startswith("linux"):
        return None
    return path


@functools.lru_cache(maxsize=8)
def _bwrap_has(option: Any) -> bool:
    """Does the installed bubblewrap know ``option`` (its --help lists it)?"""
    try:
        done = subprocess.run([_bwrap(), "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in done.stdout + done.stderr


def box_available() -> bool:
    """Is bubblewrap here to box graded code (Linux)? Without it ``microtape grade`` needs ``--no-box``."""
    return _bwrap() is not None


def _prlimit() -> Any:
    return shutil.which("prlimit")


def _posix_pipes() -> bool:
    """Can the child be handed two extra pipe ends and be watched with ``select`` (not on Windows)?"""
    return os.name == "posix"


def _is_root() -> bool:
    return getattr(os, "geteuid", lambda: -1)() == 0  # Windows has no user ids


def _resource_module() -> Any:
    try:
        import resource
    except ImportError:  # Windows
        return None
    return resource


def isolation(self_check: bool = False) -> str:
    """One line saying how the child is isolated here (printed by the grading commands).

    ``self_check``: the line for a student's local check, which also runs
    without ``prlimit`` (see :class:`Sandbox`).
    """
    if self_check and not _prlimit() and not _bwrap():
        if _resource_module() is None:
            how = "with no limits but the time limit (this system has neither prlimit nor Python's resource module)"
        else:
            how = "with the limits of Python's resource module (prlimit is not installed)"
        return f"self-check: your file runs in a child process {how}, not in a sandbox — fine for your own code"
    if _bwrap():
        calls = "a system-call filter" if seccomp.supported() else "no system-call filter on this architecture"
        return (
            "isolation: bubblewrap (a user of its own, own pid, network and mount namespaces, "
            f"{calls}; numpy and the stdlib only)"
        )
    return (
        "isolation: resource limits and an own session only — bubblewrap (bwrap) is not installed, so "
        "graded code can read the file system and see other processes; install it "
        "(Debian: apt-get install bubblewrap)"
    )


def _numpy_dirs() -> Any:
    """numpy's package folder, and its bundled libraries' folder when the wheel has one."""
    package = Path(np.__file__).resolve().parent
    dirs = [package]
    libs = package.parent / "numpy.libs"
    if libs.is_dir():
        dirs.append(libs)
    return dirs


def _environment() -> Any:
    """The child's whole environment: nothing of the grader's (no tokens, no paths)."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/nonexistent",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        # Windows: Python does not start without SYSTEMROOT
        **({"SYSTEMROOT": os.environ.get("SYSTEMROOT", r"C:\Windows")} if os.name == "nt" else {}),
    }


def _bind_root_links(command: Any) -> None:
    """The host's /bin, /lib, /lib64 … as they are: symlinks into /usr (merged /usr), or folders bound."""
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            command += ["--ro-bind", str(path), str(path)]


def _package_folders(prefix: Any) -> Any:
    """Every folder of installed Python packages on this machine that the box must not show."""
    minor = f"python3.{sys.version_info.minor}"
    folders = {Path("/usr/lib/python3"), Path("/usr/local/lib/python3"), Path("/usr/local/lib") / minor}
    for root in {Path("/usr"), Path("/usr/local"), prefix}:
        for name in ("site-packages", "dist-packages"):
            folders.add(root / "lib" / minor / name)
    for key in ("purelib", "platlib"):
        for scheme_vars in ({}, {"base": str(prefix), "platbase": str(prefix)}):
            folders.add(Path(sysconfig.get_paths(vars=scheme_vars)[key]))
    return sorted(folder for folder in folders if folder.is_dir())


def _bwrap_command(bwrap: Any, python: Any, limits: Any, uid: Any, filter_fd: Any) -> Any:
    prefix = Path(sys.base_prefix).resolve()
    command = [bwrap, "--die-with-parent", "--new-session", "--clearenv"]
    if os.geteuid() == 0:
        # As root bwrap makes the namespaces itself, and setpriv then becomes a user of the box's
        # own (no account has it): a user namespace would map the box's user back to root, whom the
        # kernel exempts from the process limit, and a shared user (nobody) shares that limit with
        # every other box and service running as it. Nested user namespaces are refused by the
        # system-call filter (bwrap's --disable-userns needs a user namespace of its own).
        command += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        become = [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                  "--clear-groups", "--inh-caps=-all", "--"]  # fmt: skip
    else:
        # An ordinary user: bwrap makes a user namespace (--unshare-user, which --disable-userns needs
        # named explicitly since bubblewrap 0.8), in which the box is a uid of its own with no rights
        # outside it. No nested user namespace: --disable-userns (0.8+), else the filter refuses unshare.
        command += ["--unshare-all", "--unshare-user", "--uid", str(BOX_UID), "--gid", str(BOX_UID)]
        if _bwrap_has("--disable-userns"):
            command += ["--disable-userns"]
        become = []
    if filter_fd is not None:
        command += ["--seccomp", str(filter_fd)]
    command += ["--ro-bind", "/usr", "/usr"]
    _bind_root_links(command)
    for parent in reversed(prefix.parents[:-1]):  # e.g. /root: made readable, or the box's user cannot reach Python
        command += ["--perms", "0755", "--dir", str(parent)]
    if not prefix.is_relative_to("/usr"):
        command += ["--ro-bind", str(prefix), str(prefix)]
    # Every folder of installed packages, the system's and the grader's, emptied *after* the binds
    # above (a later bind of the prefix would show them again): the standard library stays.
    for folder in _package_folders(prefix):
        command += ["--tmpfs", str(folder)]
    lib = "/box/lib"
    command += ["--perms", "0755", "--dir", "/box", "--perms", "0755", "--dir", lib]
    for folder in _numpy_dirs():
        command += ["--ro-bind", str(folder), f"{lib}/{folder.name}"]
    command += ["--ro-bind", str(HELPER), "/box/helper"]
    command += ["--proc", "/proc", "--dev", "/dev"]
    for scratch in ("/work", "/tmp"):  # writable by the box's user, and small: a 10 GB write fails with ENOSPC
        command += ["--perms", "1777", "--size", str(limits.workdir_bytes), "--tmpfs", scratch]
    command += ["--chdir", "/work"]
    for key, value in _environment().items():
        command += ["--setenv", key, value]
    # --end-all: the box is its own pid namespace, so "every process I can signal" is the box's alone.
    command += [*become, python, "-I", "-S", "-B", "/box/helper/child.py", lib, "--end-all"]
    return command, None


def _plain_command(python: Any) -> Any:
    """No bubblewrap: numpy reached through a folder of links (so nothing else of site-packages is on the path)."""
    lib = tempfile.mkdtemp(prefix="microtape-lib-")
    for folder in _numpy_dirs():
        try:
            os.symlink(folder, Path(lib) / folder.name)
        except OSError:  # Windows without the right to make symlinks: a junction needs none
            if os.name != "nt":
                raise
            import _winapi

            _winapi.CreateJunction(str(folder), str(Path(lib) / folder.name))  # type: ignore[attr-defined]  # Windows only
    os.chmod(lib, 0o755)
    return [python, "-I", "-S", "-B", str(HELPER / "child.py"), lib], lib


def _readable_by_all(path: Any) -> bool:
    path = Path(path).resolve()
    for part in [path, *path.parents]:
        mode = part.stat().st_mode
        if not mode & 0o005:
            return False
    return True


class Sandbox:
    """One boxed child, started on the first request; ``request`` sends a message and waits for the reply."""

    def __init__(self, limits: Any = None, *, self_check: bool = False) -> None:
        self.limits = limits or Limits()
        # A student's local check of their own file: it may run without prlimit (with the
        # resource module's limits, or none), and as root (the code is the student's own).
        self.self_check = self_check
        self.process: subprocess.Popen[bytes] | None = None
        self.output: Any = None  # the child's stdout and stderr (a capped temporary file)
        self._lib: str | None = None
        self._scratch: str | None = None  # without bubblewrap: the child's own folder, all it may write
        self._requests: Any = None
        self._replies: Any = None
        self._stdio: Any = None  # the pipes on Windows (see _popen_stdio)

    # ---------------------------------------------------------------- starting and stopping

    def _limited(self, command: Any) -> Any:
        """``command`` under prlimit: the limits are set before it runs, without a preexec_fn.

        (A preexec_fn is not safe when the grader runs several boxes from
        threads, as ``microtape grade -j N`` does.)
        """
        limits = self.limits
        # The process limit counts every process of the box's user. As root each box has a user of
        # its own, so it counts the box alone; as an ordinary user the box's processes are the
        # grader's user's, and a small limit would stop bubblewrap itself: keep the earlier 64.
        processes = self._process_limit()
        return [
            _prlimit(),
            f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
            f"--as={limits.memory_bytes}",
            f"--fsize={limits.file_bytes}",
            f"--nofile={limits.open_files}",
            f"--nproc={processes}",
            "--core=0",
            "--",
            *command,
        ]

    def _process_limit(self) -> int:
        """The box's process limit. It counts every process of the box's user: as root each box has a
        user of its own, so it counts the box alone; as an ordinary user the box's processes are the
        user's own, and a small limit would stop bubblewrap itself: then 64 (a fork bomb still stops)."""
        return self.limits.processes if _is_root() else max(self.limits.processes, 64)

    def _resource_limited(self) -> Any:
        """No prlimit: a function the child runs before its program, setting what :mod:`resource` can.

        Only for a self-check (one child at a time, no threads, so a preexec_fn is safe).
        None where the module does not exist. A limit the system refuses (macOS and the
        address space) is left as it is.
        """
        resource = _resource_module()
        if resource is None:
            return None
        limits = self.limits
        wanted = [("RLIMIT_CPU", (limits.cpu_seconds, limits.cpu_seconds + 1)),
                  ("RLIMIT_AS", (limits.memory_bytes,) * 2), ("RLIMIT_FSIZE", (limits.file_bytes,) * 2),
                  ("RLIMIT_NOFILE", (limits.open_files,) * 2), ("RLIMIT_CORE", (0, 0)),
                  ("RLIMIT_NPROC", (self._process_limit(),) * 2)]  # fmt: skip

        def apply() -> None:
            for name, value in wanted:
                if hasattr(resource, name):
                    try:
                        resource.setrlimit(getattr(resource, name), value)
                    except (ValueError, OSError):
                        pass

        return apply

    def start(self) -> None:
        """Start a box and wait for it to say it is ready; retried, then :class:`BoxStartError`."""
        reason = "it did not start"
        for attempt in range(START_ATTEMPTS):
            try:
                self._start_once()
                header, _ = wire.read_message(lambda n: self._read_exactly(n, time.monotonic() + START_SECONDS))
                if header.get("event") == "ready":
                    return
                reason = "it sent something else than its ready message"
            except (ChildGone, BoxTimeout, wire.WireError, OSError) as error:
                reason = str(error) or type(error).__name__
                if isinstance(error, BoxTimeout):
                    reason = f"it was not ready within {START_SECONDS:g} s"
            printed = self.printed(300).strip()
            self.close()
            if printed:
                reason += f" ({printed.splitlines()[-1][:200]})"
            time.sleep(0.2 * (attempt + 1))
        raise BoxStartError(f"could not start the box: {reason}")

    def _start_once(self) -> None:
        python = str(Path(sys.executable).resolve())
        bwrap = _bwrap()
        user = None
        filter_file = None
        if not _prlimit() and not self.self_check:
            raise BoxStartError(
                "could not start the box: refusing to run graded code without prlimit (util-linux), which sets "
                "its limits: install it (Debian: apt-get install util-linux)"
            )
        if bwrap:
            program = seccomp.filter_program()
            if program is not None:
                filter_file = tempfile.TemporaryFile()
                filter_file.write(program)
                filter_file.flush()
                filter_file.seek(0)
            filter_fd = None if filter_file is None else filter_file.fileno()
            command, self._lib = _bwrap_command(bwrap, python, self.limits, fresh_uid(), filter_fd)
            env = {}  # bwrap clears it and sets the box's own
        else:
            if _is_root():
                if _readable_by_all(python) and _readable_by_all(HELPER):
                    user = fresh_uid()  # a user of its own: nothing else can use up its process limit
                elif not self.self_check:  # a self-check runs the student's own code as they would
                    # Root that cannot become nobody (Python lies in a private folder) would run
                    # students' code able to rewrite the installed package: refuse instead.
                    raise BoxStartError(
                        "could not start the box: refusing to run graded code as root without bubblewrap "
                        "(it could rewrite the installed package): install bubblewrap, or grade as an ordinary user"
                    )
            command, self._lib = _plain_command(python)
            if user is not None:  # a uid of its own: "every process I can signal" is this box's alone
                command.append("--end-all")
            command.append("--writable")  # writes only in its scratch folder, where Landlock exists
            env = _environment()
        self.output = tempfile.TemporaryFile()
        if not _posix_pipes():
            self._popen_stdio(command, env)
            return
        requests_read, self._requests = os.pipe()
        self._replies, replies_write = os.pipe()
        # The child is told its two pipe ends by number (they are inherited through bwrap).
        command += ["--fds", str(requests_read), str(replies_write)]
        inherited = (requests_read, replies_write) + (() if filter_file is None else (filter_file.fileno(),))
        try:
            self._popen(command, env, bwrap, inherited, user)
        finally:
            os.close(requests_read)
            os.close(replies_write)
            if filter_file is not None:
                filter_file.close()

    def _popen(self, command: Any, env: Any, bwrap: Any, inherited: Any, user: Any) -> None:
        preexec = None
        if _prlimit():
            command = self._limited(command)
        else:
            preexec = self._resource_limited()  # a self-check only (refused otherwise in _start_once)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self.output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd="/" if bwrap else self._scratch_folder(user),
            start_new_session=True,
            pass_fds=inherited,
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
            preexec_fn=preexec,
        )

    def _popen_stdio(self, command: Any, env: Any) -> None:
        """Windows (no inherited pipe ends, no ``select`` on pipes): the child's stdin and stdout are the pipes.

        Only a self-check gets here: graded runs need prlimit, which Windows does not have.
        """
        preexec = None
        if _prlimit():
            command = self._limited(command)
        else:
            preexec = self._resource_limited()  # None on Windows
        self.process = subprocess.Popen(
            [*command, "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.output,
            bufsize=0,
            env=env,
            cwd=self._scratch_folder(None),
            start_new_session=os.name == "posix",
            preexec_fn=preexec,
        )
        self._stdio = _StdioPipes(self.process.stdin, self.process.stdout)

    def _scratch_folder(self, user: Any) -> str:
        """A fresh folder of the child's own: without bubblewrap it is where the child runs, and (Landlock) the
        only folder it may write — not the whole temporary directory, which may hold the installed package."""
        if self._scratch:  # a restarted child starts with an empty folder
            shutil.rmtree(self._scratch, ignore_errors=True)
        self._scratch = tempfile.mkdtemp(prefix="microtape-scratch-")
        if user is not None:
            os.chown(self._scratch, user, user)
        return self._scratch

    def close(self) -> None:
        """Kill the child (and its whole box) and forget it; safe to call twice."""
        if self.process is not None:
            if hasattr(os, "killpg"):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self.process.kill()
            self.process.wait()
            self.process = None
        if self._stdio is not None:
            self._stdio.close()
            self._stdio = None
        for fd in (self._requests, self._replies):
            if fd is not None:
                os.close(fd)
        self._requests = self._replies = None
        if self._lib:
            shutil.rmtree(self._lib, ignore_errors=True)
            self._lib = None
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    @property
    def running(self) -> bool:
        return self.process is not None

    def printed(self, limit: int = 4000) -> Any:
        """The end of what the child printed (text, at most ``limit`` characters)."""
        if self.output is None:
            return ""
        self.output.seek(0, os.SEEK_END)
        size = self.output.tell()
        self.output.seek(max(0, size - limit))
        return self.output.read().decode("utf-8", errors="replace")

    # ---------------------------------------------------------------- talking

    def request(self, header: Any, arrays: Any = (), *, timeout: Any) -> Any:
        """Send one message and return the reply ``(header, arrays)``.

        Raises :class:`BoxTimeout` (the child is killed) when no whole reply
        came within ``timeout`` seconds, :class:`ChildGone` when it ended or
        broke the format.
        """
        if self.process is None:
            self.start()
        deadline = time.monotonic() + timeout
        try:
            self._send(wire.encode(header, arrays), deadline)
            return wire.read_message(lambda n: self._read_exactly(n, deadline))
        except BoxTimeout:
            self.close()
            raise
        except wire.WireError as error:
            self.close()
            raise ChildGone(f"the process sent a malformed reply: {error}") from None
        except BaseException:  # ChildGone, or an interruption mid-message: this child cannot be trusted on
            self.close()
            raise

    def _send(self, data: Any, deadline: Any) -> Any:
        if self._stdio is not None:
            try:
                return self._stdio.write(data, deadline)
            except OSError:
                raise ChildGone(self._ended()) from None
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BoxTimeout()
            _, ready, _ = select.select([], [self._requests], [], remaining)
            if ready:
                try:
                    written = os.write(self._requests, view[: 1 << 16])
                except BrokenPipeError:
                    raise ChildGone(self._ended()) from None
                view = view[written:]

    def _read_exactly(self, n: Any, deadline: Any) -> Any:
        if self._stdio is not None:
            try:
                return self._stdio.read_exactly(n, deadline)
            except EOFError:
                raise ChildGone(self._ended()) from None
        chunks, missing = [], n
        while missing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BoxTimeout()
            ready, _, _ = select.select([self._replies], [], [], remaining)
            if ready:
                chunk = os.read(self._replies, min(missing, 1 << 20))
                if not chunk:
                    raise ChildGone(self._ended())
                chunks.append(chunk)
                missing -= len(chunk)
        return b"".join(chunks)

    def _ended(self) -> str:
        try:
            code = self.process.wait(timeout=2)  # type: ignore[union-attr]  # only once a child has started
        except subprocess.TimeoutExpired:
            return "the process closed its reply pipe"
        if code < 0:
            name = signal.Signals(-code).name
            why = {
                "SIGXCPU": " (it used up its CPU time)",
                "SIGXFSZ": f" (it wrote a file or output larger than {self.limits.file_bytes >> 20} MB)",
                "SIGKILL": " (killed: out of memory or time)",
                "SIGSEGV": " (a crash: memory limit?)",
            }.get(name, "")
            return f"the process was ended by {name}{why}"
        return f"the process ended (exit status {code}) without replying"


class _StdioPipes:
    """The child's stdin and stdout, with deadlines but without ``select`` (Windows cannot select on pipes).

    A thread reads whatever the child sends into a queue, and each write runs in
    a thread that is given up at the deadline (the box is then killed, which
    ends the write).
    """

    def __init__(self, to_child: Any, from_child: Any) -> None:
        self._to_child = to_child
        self._from_child = from_child
        self._chunks: queue.Queue[Any] = queue.Queue()
        self._pending = bytearray()
        self._reader = threading.Thread(target=self._read_all, daemon=True)
        self._reader.start()

    def _read_all(self) -> None:
        try:
            while chunk := self._from_child.read(1 << 20):
                self._chunks.put(chunk)
        except (OSError, ValueError):  # closed under it
            pass
        self._chunks.put(b"")  # the end, for whoever waits

    def read_exactly(self, n: Any, deadline: Any) -> Any:
        """``n`` bytes, :class:`BoxTimeout` at the deadline, ``EOFError`` when the child has gone."""
        while len(self._pending) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BoxTimeout()
            try:
                chunk = self._chunks.get(timeout=remaining)
            except queue.Empty:
                raise BoxTimeout() from None
            if not chunk:
                self._chunks.put(b"")  # it stays ended
                raise EOFError("the child closed its stdout")
            self._pending += chunk
        data = bytes(self._pending[:n])
        del self._pending[:n]
        return data

    def write(self, data: Any, deadline: Any) -> None:
        failed = []

        def write_all() -> None:
            view = memoryview(data)
            try:
                while view:
                    view = view[self._to_child.write(view[: 1 << 16]) :]
            except (OSError, ValueError) as error:
                failed.append(error)

        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        writer.join(max(0.0, deadline - time.monotonic()))
        if writer.is_alive():
            raise BoxTimeout()
        if failed:
            raise BrokenPipeError(str(failed[0]))

    def close(self) -> None:
        for pipe in (self._to_child, self._from_child):
            try:
                pipe.close()
            except OSError:
                pass
        self._reader.join(timeout=2)
