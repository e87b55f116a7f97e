"""What the parts of ``python -m benchmarks`` share: the report they write, the worker call, the dtypes.

The parts (:mod:`benchmarks.parts`) each measure one thing and write their
tables and target lines into one :class:`Report`; :func:`run_worker` starts
a measurement in a fresh process (:func:`benchmarks._harness.run_worker`)
and moves the progress bar ``python -m benchmarks`` shows.
"""

from microtape.viz.progress import Quiet

from . import _harness

__all__ = ["Report", "run_worker", "count_workers_on", "DTYPES", "size_label"]

DTYPES = ("float32", "float64")

_workers = Quiet()  # the bar a finished worker moves (main() puts a real one here)


def count_workers_on(bar):
    """Move ``bar`` once per finished worker from now on."""
    global _workers
    _workers = bar


def run_worker(module, spec, python=None, timeout=900):
    """:func:`benchmarks._harness.run_worker`, counted on the progress bar."""
    try:
        return _harness.run_worker(module, spec, python=python, timeout=timeout)
    finally:
        _workers.update()


def size_label(B, T, E, H):
    """An attention size as the tables print it: ``B=8,T=128,E=256,H=8``."""
    return f"B={B},T={T},E={E},H={H}"


class Report:
    """Collects what is printed, so it can also be written as Markdown."""

    def __init__(self, write=print):
        self.parts = []
        self.write = write  # a progress bar's write(): the text goes above the bar

    def say(self, text=""):
        self.write(text)
        self.parts.append(text)

    def text(self):
        return "\n".join(self.parts) + "\n"

    def targets(self, heading, lines):
        """A part's verdicts: the heading, one line per target (met or not), a blank line. Nothing if none."""
        if not lines:
            return
        self.say(heading)
        self.say()
        for line in lines:
            self.say(line)
        self.say()
