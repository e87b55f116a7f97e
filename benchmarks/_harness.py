"""What every benchmark shares: isolated worker processes, timing, statistics, tables.

The parent process (``python -m benchmarks``) measures nothing itself and
never imports micrograd or torch (it imports microtape only for its progress
bar). It starts one worker process per measurement::

    python -m benchmarks.<module> '<json spec>'

with one BLAS/OpenMP thread set in the environment *before* the worker
starts (numpy reads it when it is first imported). The worker prints one JSON
object on its last line of output; :func:`run_worker` returns it as a dict.
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Environment variables that pin BLAS/OpenMP libraries to one thread.
ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def child_env():
    """The parent's environment, with one BLAS thread and the repo importable."""
    env = dict(os.environ)
    env.update(ONE_THREAD)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
    env.setdefault("MPLBACKEND", "Agg")
    return env


class WorkerFailed(RuntimeError):
    """A worker process exited with an error (its stderr is in the message)."""


def run_worker(module, spec, python=None, timeout=900):
    """Run ``python -m benchmarks.<module> <spec>`` in a fresh process; return its JSON."""
    command = [python or sys.executable, "-m", f"benchmarks.{module}", json.dumps(spec)]
    try:
        done = subprocess.run(command, cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise WorkerFailed(f"timed out after {timeout} s") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise WorkerFailed(f"exit {done.returncode}: {tail}")
    return json.loads(lines[-1])


def emit(result):
    """Print a worker's result as the last line of its output (read by :func:`run_worker`)."""
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------- timing


def time_calls(fn, repeats, budget, min_repeats=3, warmup=1):
    """Call ``fn()`` up to ``repeats`` times (fewer if ``budget`` seconds run out).

    Returns ``{"cpu": [...], "wall": [...], "user": [...], "faults": [...]}``:
    the CPU time of this process (``time.process_time``), the wall-clock time
    (``time.perf_counter``), the user part of the CPU time and the minor page
    faults of each call. Every worker computes on one thread, so on an idle
    machine CPU and wall time agree; on a shared one the CPU time is the
    steadier measure (it does not count the time other processes held the
    core). The CPU time includes the kernel's time for page faults: a
    program that frees its big arrays every call and allocates them again
    pays it (glibc gives freed blocks back), one that keeps them does not —
    the user time and the fault count show that part apart. At least
    ``min_repeats`` calls are timed, whatever the budget.
    """
    for _ in range(warmup):
        fn()
    cpu, wall, user, faults = [], [], [], []
    started = time.perf_counter()
    while len(cpu) < repeats:
        before = resource.getrusage(resource.RUSAGE_SELF)
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        user.append(after.ru_utime - before.ru_utime)
        faults.append(after.ru_minflt - before.ru_minflt)
        if len(cpu) >= min_repeats and time.perf_counter() - started > budget:
            break
    return {"cpu": cpu, "wall": wall, "user": user, "faults": faults}


def time_alternating(steps, repeats, budget, min_repeats=3, warmup=1):
    """Time several functions in one process, taking turns: ``{name: {"cpu": [...], "wall": [...]}}``.

    ``steps`` maps a name to a function. Each round calls every function
    once and times each call alone; the order rotates from round to round
    (``a b c``, ``b c a``, ``c a b``, …), so each function follows each other
    one equally often. Taking turns puts every function in the same process
    state — the same heap, the same memory the allocator already holds —
    which separate processes do not: there a reference that frees its big
    arrays every step may pay the kernel's page faults or not depending on
    what its process did before timing (issue 24 measured 15 % either way at
    B=8,T=128). The rotation matters as much at large sizes: at
    B=1,T=2048 a step that runs right after another one's 128 MB arrays were
    given back measured up to 25 % slower or faster than in the other place.
    """
    names = list(steps)
    for _ in range(warmup):
        for step in steps.values():
            step()
    times = {name: {"cpu": [], "wall": []} for name in steps}
    started = time.perf_counter()
    for round_number in range(repeats):
        first = round_number % len(names)
        for name in names[first:] + names[:first]:
            w0, c0 = time.perf_counter(), time.process_time()
            steps[name]()
            times[name]["cpu"].append(time.process_time() - c0)
            times[name]["wall"].append(time.perf_counter() - w0)
        if round_number + 1 >= min_repeats and time.perf_counter() - started > budget:
            break
    return times


def summary(times):
    """Median, quartiles, min, max and count of a list of times (quartiles interpolated, as numpy's default)."""
    # statistics.quantiles' "inclusive" method is numpy's linear interpolation; one time is its own quartiles.
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else times * 3
    return {"median": median, "q1": q1, "q3": q3, "min": min(times), "max": max(times), "n": len(times)}


# ---------------------------------------------------------------- formatting


def seconds(value):
    """A duration with a sensible unit: ``812 µs``, ``3.41 ms``, ``1.20 s``."""
    if value is None:
        return "—"
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1.0:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def megabytes(value):
    if value is None:
        return "—"
    return f"{value / 2**20:.1f} MB" if value >= 2**20 / 10 else f"{value / 2**10:.0f} kB"


def rate(value):
    """A throughput: ``153k/s``, ``1.2M/s``."""
    if value is None:
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M/s"
    if value >= 1e3:
        return f"{value / 1e3:.0f}k/s"
    return f"{value:.0f}/s"


def spread(stats):
    """The interquartile range as ``[q1 … q3]``."""
    return f"[{seconds(stats['q1'])} … {seconds(stats['q3'])}]"


def table(headers, rows):
    """A Markdown table (readable as plain text too).

    Ten lines of our own rather than tabulate: one table shape, and `make bench` needs no extra package for it.
    """
    cells = [[str(c) for c in row] + [""] * (len(headers) - len(row)) for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    return "\n".join(lines)
