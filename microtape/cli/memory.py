"""`microtape memory`: what backward keeps, for the default attention, on the command line.

This module gives the command its options and its body; ``microtape.cli.main``
wires them in::

    microtape memory                 # into memory-output/
    microtape memory --out DIR

It writes the memory timeline (live bytes against the step, forward then
backward), the saved-values graph (what each step's VJP reads), the full
tape / lean tape / tiled op side by side, and peak memory against T with the
slopes (:func:`microtape.viz.demo.render_memory`), and prints the peak.
Exit status: 0 done, 1 Graphviz's ``dot`` missing (the graph saved as
``.dot``, the rest written), 2 a bad option.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

from .args import output_folder

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> Any:
    """Add the options of `microtape memory` to an ``argparse`` parser."""
    parser.add_argument(
        "--out", type=output_folder, default="memory-output", help="folder for the pictures (default: memory-output)"
    )
    return parser


def run(args: argparse.Namespace) -> Any:
    from ..viz.demo import render_memory
    from ..viz.lifetimes import human_bytes
    from ..viz.render import GraphvizNotFound

    Path(args.out).mkdir(parents=True, exist_ok=True)  # a place we cannot write fails now, in one line
    status = 0
    try:
        paths, ledger = render_memory(args.out)
    except GraphvizNotFound as error:
        print(str(error), file=sys.stderr)
        paths, ledger, status = error.paths, None, 1
    if ledger is not None:
        peak = ledger.peak
        print(
            f"The default attention keeps {human_bytes(peak.live_bytes)} at its peak: {peak.phase} step "
            f"{peak.step}, holding {', '.join(peak.alive[:4])}{' …' if len(peak.alive) > 4 else ''}"
        )
    width = max(len(name) for name in paths)
    print(f"Wrote into {Path(args.out).resolve()}:")
    for name, path in paths.items():
        print(f"  {name:<{width}}  {path}")
    return status
