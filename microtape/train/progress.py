"""A progress line for training: a bar that redraws itself on a terminal, plain lines elsewhere.

This module lets a long loop say how it is doing on stderr::

    progress = Progress(total=600)
    for step in range(1, 601):
        ...
        progress.update(step, loss=0.12, accuracy=0.97)
    progress.close()

On a terminal (``stream.isatty()``) one line is redrawn in place, at most ten
times a second::

    [##########..........]  300/600  loss 0.0247  acc 99.6%  241 steps/s

Anywhere else — a file, a pipe, a CI log, pytest's capture — it writes a
plain line every ``every`` steps (and at the last), which reads well in a log.
"""

import sys
import time

__all__ = ["Progress"]


class Progress:
    """Report a loop's step, loss, accuracy and speed (see the module doc)."""

    def __init__(self, total, stream=None, every=None, width=20):
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every or max(1, total // 10)
        self.width = width
        self.started = time.perf_counter()
        self._drawn_at = 0.0
        self._open = False  # a redrawn line waiting for its newline

    def line(self, step, loss, accuracy):
        """The text of one report."""
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        filled = self.width * step // max(self.total, 1)
        bar = f"[{'#' * filled}{'.' * (self.width - filled)}]  " if self.tty else ""
        digits = len(str(self.total))
        return (
            f"{bar}step {step:>{digits}}/{self.total}  loss {loss:.4f}  acc {100 * accuracy:5.1f}%  "
            f"{step / elapsed:.0f} steps/s"
        )

    def update(self, step, loss, accuracy):
        """Report step ``step`` (1-based)."""
        last = step == self.total
        if self.tty:
            now = time.perf_counter()
            if last or now - self._drawn_at >= 0.1:
                self._drawn_at = now
                self.stream.write("\r" + self.line(step, loss, accuracy) + ("\n" if last else ""))
                self.stream.flush()
                self._open = not last
        elif last or step % self.every == 0:
            self.stream.write(self.line(step, loss, accuracy) + "\n")
            self.stream.flush()

    def close(self):
        """End the line (on a terminal) if the loop stopped before its last step."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
