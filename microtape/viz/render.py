"""Write a graph to a file (SVG, PNG, PDF), with a clear message when Graphviz is missing.

This module lets you save what :func:`microtape.viz.graph` draws::

    from microtape.viz import graph, render
    render(graph(tape), "forward.svg")          # the format follows the suffix
    render(graph(tape), "forward.png", dpi=150)

Drawing needs Graphviz's ``dot`` program (the Python package ``graphviz``
only writes the DOT text). Without it, :func:`render` still saves the DOT
source next to the requested file (``forward.dot``), then raises
:class:`GraphvizNotFound` saying how to install Graphviz — never a stack trace
from inside the graphviz package.

Every graph microtape draws is a :func:`graph_class` digraph: in Jupyter it
shows itself as SVG scaled to the cell's width (``.full_size()`` at 100 %).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["render", "svg", "fit_svg", "graph_class", "GraphvizNotFound", "FORMATS", "INSTALL_HINT"]

FORMATS = ("svg", "png", "pdf", "dot", "json")

INSTALL_HINT = (
    "Install Graphviz (the `dot` program):\n"
    "  Debian/Ubuntu:  sudo apt-get install graphviz\n"
    "  Fedora:         sudo dnf install graphviz\n"
    "  macOS:          brew install graphviz\n"
    "  conda:          conda install -c conda-forge graphviz\n"
    "  Windows:        winget install graphviz   (then reopen the terminal)\n"
    "The Python package alone (`pip install graphviz`) is not enough. "
    "Check with `dot -V`."
)


class GraphvizNotFound(RuntimeError):
    """Graphviz's ``dot`` program is not on ``PATH``; ``.dot_path`` is where the source went."""

    paths: dict[str, Path]  # set by the writers of several files (viz.demo): what was written before dot was missed

    def __init__(self, message: str, dot_path: Any = None) -> None:
        super().__init__(message)
        self.dot_path = dot_path


def _format_of(path: Any, format: Any) -> Any:
    if format is None:
        suffix = Path(path).suffix.lower().lstrip(".")
        format = suffix if suffix in FORMATS else "svg"
    if not isinstance(format, str) or format.lower() not in FORMATS:
        raise ValueError(f"render(format=...): expected one of {', '.join(FORMATS)}, got {format!r}")
    return format.lower()


def _pipe(digraph: Any, format: Any, dpi: Any = None) -> Any:
    """Run ``dot`` on the graph and return the bytes; GraphvizNotFound if there is no ``dot``.

    A graph whose positions are pinned (a frame of a backward pass) is drawn
    by ``neato -n2``, which keeps every position it is given.
    """
    import graphviz

    source = digraph
    if dpi is not None and format == "png":
        source = digraph.copy()
        source.attr(dpi=str(dpi))
    pinned = {"engine": "neato", "neato_no_op": 2} if getattr(digraph, "pinned", False) else {}
    try:
        # quiet: what dot says on failure is in the error we raise, not printed beside it
        return source.pipe(format=format, quiet=True, **pinned)
    except graphviz.ExecutableNotFound:
        raise GraphvizNotFound(
            "Graphviz's `dot` program was not found on PATH, so the graph could not be drawn.\n" + INSTALL_HINT
        ) from None
    except graphviz.CalledProcessError as error:
        stderr = (error.stderr or b"").decode(errors="replace").strip()
        if "triangulation failed" in stderr and not pinned:
            # Graphviz 2.43 (Debian's, Ubuntu's) sometimes cannot route curved edges between
            # module boxes ("triangulation failed"); straight edges need no routing.
            straight = source.copy()
            straight.attr(splines="line")
            try:
                return straight.pipe(format=format, quiet=True)
            except graphviz.CalledProcessError:
                pass
        raise RuntimeError(f"Graphviz's `dot` failed to draw this graph: {stderr or error}") from None


def render(digraph: Any, path: str | os.PathLike[str], format: str | None = None, *, dpi: int | None = None) -> Path:
    """Write ``digraph`` to ``path`` and return the path (a ``pathlib.Path``).

    ``format``: ``"svg"``, ``"png"``, ``"pdf"`` or ``"dot"`` (the source only);
    by default it follows the file's suffix (``.svg`` when there is none).
    ``dpi`` sets the resolution of a PNG. The file is written exactly at
    ``path`` (no extra suffix is added). If ``dot`` is missing, the DOT source
    is written to ``path`` with the suffix ``.dot`` and
    :class:`GraphvizNotFound` is raised.
    """
    if not hasattr(digraph, "source") or not hasattr(digraph, "pipe"):
        raise TypeError(f"render(digraph, ...): expected a graphviz.Digraph, got {type(digraph).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"render(..., path): expected a file path, got {type(path).__name__}")
    path = Path(path)
    format = _format_of(path, format)
    path.parent.mkdir(parents=True, exist_ok=True)
    if format == "dot":
        path.write_text(digraph.source, encoding="utf-8")
        return path
    try:
        data = _pipe(digraph, format, dpi)
    except GraphvizNotFound as error:
        dot_path = path.with_suffix(".dot")
        dot_path.write_text(digraph.source, encoding="utf-8")
        program = "neato -n2" if getattr(digraph, "pinned", False) else "dot"
        raise GraphvizNotFound(
            f"{error}\nThe graph's DOT source was saved to {dot_path}; once Graphviz is installed, "
            f"draw it with:  {program} -T{format} {dot_path} -o {path}",
            dot_path=dot_path,
        ) from None
    path.write_bytes(data)
    return path


_DRAWN: dict[Any, Any] = {}  # DOT source -> its SVG, for the last few graphs drawn
_KEEP = 16


def svg(digraph: Any) -> str:
    """The graph drawn as an SVG string (raises GraphvizNotFound without ``dot``).

    The last few drawings are kept by their DOT source: a graph that was
    drawn to measure its width (:mod:`microtape.viz.fit`) is not drawn
    again to be shown. Same source, same drawing: the key is the whole text.
    """
    key = (digraph.source, getattr(digraph, "pinned", False))
    text = _DRAWN.get(key)
    if text is None:
        text = _pipe(digraph, "svg").decode("utf-8")
        if len(_DRAWN) >= _KEEP:
            _DRAWN.pop(next(iter(_DRAWN)))
        _DRAWN[key] = text
    return text


_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')
_FONT_SIZE = re.compile(r'font-size="([\d.]+)"')
_ZOOM = re.compile(r'<g id="graph0" class="graph" transform="scale\(([\d.]+)')
PX_PER_PT = 4 / 3  # an SVG's points at 96 pixels to the inch
SMALLEST_SHOWN_PX = 8  # a fitted picture never shrinks its smallest text below this (CSS pixels: it grows with zoom)


def natural_text_px(svg_text: str) -> float:
    """How tall the smallest text of a Graphviz SVG is at its natural size, in pixels (inf: no text).

    A graph drawn at another ``dpi`` (a slide) is scaled by its top group's
    ``transform``: its text is that much larger than its ``font-size`` says.
    """
    zoom = _ZOOM.search(svg_text)
    sizes = [float(size) for size in _FONT_SIZE.findall(svg_text)]
    return min(sizes) * (float(zoom.group(1)) if zoom else 1.0) * PX_PER_PT if sizes else float("inf")


def fit_svg(text: str, fit: bool = True) -> Any:
    """An SVG for an HTML page (no XML header); ``fit``: as wide as its container, never wider than drawn.

    Wide graphs then fit a Jupyter cell or a browser window; the ``viewBox``
    keeps the proportions. It never shrinks below the width at which its
    smallest text is :data:`SMALLEST_SHOWN_PX` tall (``min-width`` in CSS
    pixels, so the text grows with the browser's zoom): a narrower column
    scrolls sideways instead. ``fit=False`` keeps the natural size.
    """
    start = text.find("<svg")
    text = text[start:] if start >= 0 else text
    if not fit:
        return text
    size = _SIZE.search(text)
    if size is None:
        return text
    natural = float(size.group(1)) * PX_PER_PT
    readable = natural * min(1.0, SMALLEST_SHOWN_PX / natural_text_px(text))
    return _SIZE.sub(
        lambda m: (
            f'<svg width="100%" style="max-width:{m.group(1)}pt;min-width:{math.ceil(readable)}px;height:auto"'
            f' data-width="{m.group(1)}"'
        ),
        text,
        count=1,
    )


_GRAPH_CLASS: list[Any] = []


def graph_class() -> Any:
    """``graphviz.Digraph`` that fits the width of a Jupyter cell (``.full_size()`` shows it at 100 %)."""
    if _GRAPH_CLASS:
        return _GRAPH_CLASS[0]
    try:
        import graphviz
    except ImportError:  # pragma: no cover - graphviz is a dependency
        raise ImportError(
            "microtape.viz needs the 'graphviz' Python package: pip install graphviz "
            "(and Graphviz's `dot` program to render it)"
        ) from None

    class Graph(graphviz.Digraph):
        """A ``graphviz.Digraph`` that shows itself scaled to the cell's width in Jupyter.

        ``pinned`` graphs carry their positions (the frames of a backward pass)
        and are drawn with ``neato -n2``; :func:`microtape.viz.render` knows.
        """

        fit = True
        pinned = False

        def copy(self) -> Any:
            copy = super().copy()
            copy.fit, copy.pinned = self.fit, self.pinned
            return copy

        def full_size(self) -> Any:
            """The same graph, shown at its natural size in Jupyter (scroll to see it all)."""
            copy = self.copy()
            copy.fit = False
            return copy

        def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **_: Any) -> Any:
            try:
                text = svg(self)
            except GraphvizNotFound as error:
                return {"text/plain": str(error)}
            if self.fit:
                return {"text/html": fit_svg(text)}
            # Natural size, scrolling sideways: the SVG says max-width none, so a page's rule that
            # shrinks wide pictures to the column (the site's, Jupyter's) leaves this one whole.
            natural = fit_svg(text, fit=False).replace(' height="', ' style="max-width:none" height="', 1)
            return {"text/html": '<div class="mt-full-size" style="overflow:auto">' + natural + "</div>"}

    _GRAPH_CLASS.append(Graph)
    return Graph
