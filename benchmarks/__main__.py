"""``python -m benchmarks``: run the benchmarks and print their tables.

    python -m benchmarks                    # everything (about 10-15 minutes on 2 cores)
    python -m benchmarks --quick            # a smoke test: tiny sizes, few repeats
    python -m benchmarks --only scalar      # one part: attention, tiled, scalar, graph or transformer
    python -m benchmarks --markdown out.md  # also write the tables to a file

Every measurement runs in a fresh worker process with one BLAS thread. The
ratios compare medians measured in this same run. PyTorch is measured when
this interpreter can import it, or with ``--torch-python PATH`` (or the
environment variable ``MICROTAPE_TORCH_PYTHON``) naming an interpreter that
can; micrograd when ``micrograd`` is installed (``pip install
micrograd==0.1.0``).
"""

import argparse
import importlib.util
import os
import sys
import time

from microtape.viz.progress import progress

from ._report import DTYPES, Report, count_workers_on
from .parts.attention import attention
from .parts.graph import graph
from .parts.machine import machine
from .parts.scalar import scalar
from .parts.tiled import tiled
from .parts.transformer import transformer


def _torch_python(args):
    if args.torch_python:
        return args.torch_python
    if os.environ.get("MICROTAPE_TORCH_PYTHON"):
        return os.environ["MICROTAPE_TORCH_PYTHON"]
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repeats (a smoke test)")
    parser.add_argument(
        "--only", choices=("attention", "tiled", "scalar", "graph", "transformer"), help="run one part only"
    )
    parser.add_argument("--torch-python", help="an interpreter that has torch (default: this one, if it has)")
    parser.add_argument("--markdown", help="also write the report to this Markdown file")
    parser.add_argument(
        "--size",
        action="append",
        metavar="B,T,E,H",
        help="attention size(s) to run instead of the standard ones",
    )
    parser.add_argument("--dtype", choices=DTYPES, help="attention in this dtype only")
    args = parser.parse_args(argv)

    with progress(desc="benchmark workers", unit="worker", leave=False) as bar:
        count_workers_on(bar)
        return _run(args, bar)


def _run(args, bar):
    started = time.perf_counter()
    torch_python = _torch_python(args)
    report = Report(bar.write)
    report.say("# microtape benchmarks" + (" (--quick)" if args.quick else ""))
    report.say()
    machine(report, torch_python)
    if args.only in (None, "attention"):
        sizes = [tuple(int(n) for n in size.split(",")) for size in args.size] if args.size else None
        attention(report, args.quick, torch_python, sizes, (args.dtype,) if args.dtype else DTYPES)
    if args.only in (None, "tiled"):
        tiled(report, args.quick, torch_python)
    if args.only in (None, "scalar"):
        scalar(report, args.quick)
    if args.only in (None, "graph"):
        graph(report, args.quick)
    if args.only in (None, "transformer"):
        transformer(report, args.quick, torch_python, (args.dtype,) if args.dtype else DTYPES)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    report.say(f"Total time: {time.perf_counter() - started:.0f} s; load average at the end: {load}")
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(report.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
