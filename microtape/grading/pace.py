"""A time limit a derivation meets and numeric differentiation does not: each slow call timed against the reference.

A value check cannot tell a derived gradient from one computed by
differentiating the forward numerically — the complex step is exact to
float64 — but the time can: a derivation costs a few array operations, like
the forward; numeric differentiation costs one forward per input entry, or,
perturbing at once the entries that never meet in one output, one forward
per *colour* (a row's width, a weight's input columns …): tens to thousands
of forwards. So::

    pace = Pace.from_path("instructor/", names)   # the instructor's solutions
    problem = pace.too_slow("linear_backward", args, seconds=1.8)
    # 'over 20× the time of the reference solution on the same inputs …' or None

A call that took longer than :data:`FLOOR_SECONDS` is compared with the
reference solution run on the *same inputs*, in a box like the student's
(same limits, same filter) and at the same moment (right after the student's
call returned, so both met the same load on the machine). Over
:data:`FACTOR` times the reference's time, that trial fails with "too slow for
a derivation". Calls under the floor are never compared: an honest answer
with Python loops over rows, or one that recomputes the forward twice, stays
well inside both numbers (see docs/grading.md). A call over the limit is run
once more, with the reference, before it fails.

The reference box runs the instructor's code only, one per grading thread,
started once and kept for the run.
"""

import threading
import time
from pathlib import Path
from typing import Any

from .remote import BoxedSubmission, read_submission

__all__ = ["Pace", "FACTOR", "FLOOR_SECONDS", "reference_files"]

#: How many times the reference solution's time a call may take (each time measured in a box, round trip).
#: Honest answers written with Python loops over the rows of the large trials take at most ~30× the
#: reference in-process, and under 0.1 s: below the floor, never compared. Numeric differentiation with
#: colouring: 100× and more, and round trips under load shrink the ratio, so the factor stays well below.
FACTOR = 20.0
#: A call faster than this is never compared: timing noise on a loaded machine (the reference takes milliseconds).
FLOOR_SECONDS = 0.25
#: Seconds the reference box has to load the solutions, and for one reference call.
REFERENCE_SECONDS = 60.0


def reference_files(path: Any) -> Any:
    """The reference solution files at ``path`` (a ``.py`` file, a notebook, or a folder of ``.py`` files).

    Raises ValueError naming the path when there are none.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(file for file in path.glob("*.py") if file.name != "__init__.py")
    elif path.is_file() and path.suffix in (".py", ".ipynb"):
        files = [path]
    else:
        files = []
    if not files:
        raise ValueError(f"--reference {path}: expected a .py file, a notebook or a folder of .py files")
    return files


class Pace:
    """Compares a slow call's time with the reference solution's, in a box of its own, at the same moment."""

    def __init__(self, cells: Any, names: Any, *, factor: Any = FACTOR, floor: Any = FLOOR_SECONDS) -> None:
        self.cells = list(cells)
        self.names = list(names)
        self.factor = factor
        self.floor = floor
        self._local = threading.local()
        self._boxes: list[Any] = []
        self._lock = threading.Lock()

    @classmethod
    def from_path(cls, path: Any, names: Any, **options: Any) -> Any:
        """The solutions in ``path`` (see :func:`reference_files`), each file one cell of the reference box."""
        cells = []
        for file in reference_files(path):
            cells += read_submission(file)[1]
        return cls(cells, names, **options)

    def _box(self) -> Any:
        """This thread's reference box, loaded (None when the solutions do not load: no comparison then)."""
        box = getattr(self._local, "box", None)
        if box is None or not box.box.running:
            if box is not None:
                box.close()
            box = BoxedSubmission("cells", self.cells, "reference", self.names, load_seconds=REFERENCE_SECONDS)
            box.load()
            with self._lock:
                self._boxes.append(box)
            self._local.box = box
        return None if box.load_error else box

    def reference_seconds(self, name: Any, args: Any) -> Any:
        """The reference solution's time on ``args`` (round trip, the better of two runs), or None."""
        box = self._box()
        if box is None or name not in box.defined:
            return None
        best = None
        for _ in range(2):
            started = time.monotonic()
            try:
                box.call(name, args, REFERENCE_SECONDS)
            except Exception:  # the reference itself failed: it cannot judge anyone
                return None
            elapsed = time.monotonic() - started
            best = elapsed if best is None else min(best, elapsed)
        return best

    def too_slow(self, name: Any, args: Any, seconds: Any, again: Any = None) -> Any:
        """Why a call of ``seconds`` on ``args`` is too slow for a derivation (one line, no input value), or None.

        ``again()`` (optional) runs the student's call once more and returns its seconds: a call over
        the limit gets that second chance, so a moment's load on the machine does not fail it.
        """
        if seconds <= self.floor:
            return None
        reference = self.reference_seconds(name, args)
        if reference is None or seconds <= max(self.floor, self.factor * reference):
            return None
        if again is not None:
            seconds = min(seconds, again())
            reference = self.reference_seconds(name, args)
            if reference is None or seconds <= max(self.floor, self.factor * reference):
                return None
        return (f"it took over {self.factor:g}× the time of the reference solution on the same inputs, "
                "measured in the same kind of box at the same moment")  # fmt: skip

    def close(self) -> Any:
        with self._lock:
            for box in self._boxes:
                box.close()
            self._boxes.clear()
