"""One kind of matplotlib figure for every picture microtape draws.

This module lets each picture make a figure that shows itself in Jupyter
without pyplot (no global state, no ``plt.show()``), and saves like any
matplotlib figure::

    fig = new_figure(figsize=(6, 3), layout="constrained")
    fig.savefig("picture.png")

matplotlib is imported on the first call, so ``import microtape`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["new_figure"]

_FIGURE_CLASS: list[Any] = []


def _figure_class() -> Any:
    if not _FIGURE_CLASS:
        import io

        from matplotlib.figure import Figure

        class PictureFigure(Figure):
            """A plain ``Figure`` (no pyplot state) that knows how to show itself in Jupyter."""

            def _repr_png_(self) -> Any:
                buffer = io.BytesIO()
                self.savefig(buffer, format="png", dpi=100)
                return buffer.getvalue()

        _FIGURE_CLASS.append(PictureFigure)
    return _FIGURE_CLASS[0]


def new_figure(**kwargs: Any) -> Figure:
    """A matplotlib ``Figure`` (``figsize=``, ``layout=``, …) that Jupyter displays by itself."""
    return _figure_class()(**kwargs)
