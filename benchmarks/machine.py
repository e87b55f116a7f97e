"""What the benchmarks ran on: CPU, core count, Python, numpy, BLAS and its threads.

Run as a worker (``python -m benchmarks.machine``) so the BLAS report shows
the thread count the other workers get (one).
"""

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version

from ._harness import REPO, emit


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit():
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "microtape"], cwd=REPO, capture_output=True, text=True
        )
        return done.stdout.strip() + (" (microtape/ has uncommitted changes)" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def info():
    import numpy as np

    blas = []
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            blas.append(
                f"{pool.get('internal_api')} {pool.get('version')} ({pool.get('user_api')}, "
                f"{pool.get('architecture', '?')}, {pool.get('num_threads')} thread(s))"
            )
    except ImportError:
        blas.append("unknown (pip install threadpoolctl to see it)")
    try:
        micrograd_version = version("micrograd")
    except PackageNotFoundError:
        micrograd_version = None
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "blas": blas,
        "micrograd": micrograd_version,
        "platform": platform.platform(),
        "commit": _git_commit(),
        "thread_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "load": os.getloadavg(),
    }


def torch_info():
    import torch

    from . import torch_attention  # noqa: F401  (pins torch to one thread, as the workers do)

    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads(), "numpy": _numpy_version()}


def _numpy_version():
    import numpy as np

    return np.__version__


if __name__ == "__main__":
    import json

    spec = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    emit(torch_info() if spec.get("torch") else info())
