"""Progress bars for long work, drawn by tqdm when it is installed, quiet otherwise.

This module lets any long loop show how it is doing without caring where it
runs::

    from microtape.progress import progress

    with progress(total=600, desc="training", unit="step") as bar:
        for step in range(600):
            ...
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            bar.update()

    for path in progress(paths, desc="grading", unit="submission"):
        ...  # grading many submissions: wrap the loop, that is all

It is `tqdm <https://tqdm.github.io>`_ (the optional ``progress`` extra,
installed by ``make``): ``tqdm.auto`` draws a redrawn bar on a terminal and a
widget in Jupyter. We do not draw our own bar: tqdm already handles speeds,
time left, terminal widths, redraw rates and notebooks.

A bar is drawn only where someone watches it: on a terminal, or in a Jupyter
kernel. In a log, a pipe, CI or pytest's capture, and without tqdm, the bar is
:class:`Quiet` — the same methods, nothing written — so a log never fills with
redrawn lines (the caller prints its own summary when the work is done).
"""

import sys
from collections.abc import Iterator
from typing import Any, Literal

__all__ = ["progress", "Quiet", "watched"]


def progress(
    iterable: Any = None,
    *,
    total: Any = None,
    desc: Any = None,
    unit: str = "it",
    leave: bool = True,
    at_least: int = 0,
    stream: Any = None,
) -> Any:
    """A progress bar over ``iterable`` (or to be moved by ``update``): tqdm's, or :class:`Quiet`.

    ``total`` is the number of items (taken from ``len(iterable)`` when it has
    one); ``desc`` the words before the bar; ``unit`` what one item is;
    ``leave=False`` removes the bar when it closes; ``at_least`` keeps short
    work quiet (no bar unless ``total >= at_least``: a bar that flashes for a
    blink, or fills a notebook cell's output, tells nobody anything);
    ``stream`` where it is drawn (standard error by default). Use it as a
    context manager, or call ``close()``.
    """
    stream = sys.stderr if stream is None else stream
    quiet = Quiet(iterable, total=total)
    if not watched(stream) or (at_least and (quiet.total is None or quiet.total < at_least)):
        return quiet
    try:
        if _in_jupyter():
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm
    except ImportError:
        return quiet
    return tqdm(iterable, total=quiet.total, desc=desc, unit=unit, leave=leave, file=stream, dynamic_ncols=True)


def watched(stream: Any) -> Any:
    """Whether someone watches ``stream``: a terminal, or a Jupyter kernel's output."""
    return _in_jupyter() or bool(getattr(stream, "isatty", lambda: False)())


def _in_jupyter() -> Any:
    # The test tqdm.autonotebook uses: an IPython shell running inside a kernel
    # (a terminal IPython has no IPKernelApp and gets the terminal bar).
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class Quiet:
    """A bar that draws nothing: tqdm's methods (``update``, ``set_postfix``, ``write``, …) without output.

    It still counts (``n``), so code can read how far it got, and ``write``
    prints its text (tqdm's ``write`` prints above the bar).
    """

    def __init__(self, iterable: Any = None, total: Any = None) -> None:
        self.iterable = iterable
        self.total = len(iterable) if total is None and hasattr(iterable, "__len__") else total
        self.n = 0

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable:
            yield item
            self.n += 1

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        self.close()
        return False

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items done."""
        self.n += n

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **values: Any) -> None:
        """Nothing to show; kept so a caller need not know which bar it has."""

    def write(self, text: str, file: Any = None) -> None:
        """Print ``text`` (to standard output, like ``tqdm.write``)."""
        print(text, file=sys.stdout if file is None else file, flush=True)

    def close(self) -> None:
        """Nothing to clear."""
