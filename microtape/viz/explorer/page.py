"""The explorer as HTML: one file with the graph, the data as JSON and the script inside — no network.

This module lets the saved page and the notebook's static fallback be the
same thing::

    fragment(data, uid="mt1")      # a <div> with the style, the data and the script (a notebook output)
    page(data, title)              # a whole page around it (what ``.save(path)`` writes)

The script and the style are package data (``assets/explore.js``,
``assets/explore.css``), read once; the page runs them on the JSON that
:mod:`.model` built. In a page the arrow keys step the pass wherever the
focus is; in a notebook only while the explorer has the focus.
"""

import html
import json
from functools import cache
from importlib.resources import files
from typing import Any

__all__ = ["fragment", "page", "asset", "data_json"]


@cache
def asset(name: str) -> Any:
    """The text of ``assets/<name>`` (the explorer's script or style)."""
    return files(__package__).joinpath("assets", name).read_text(encoding="utf-8")  # type: ignore[call-arg]  # a path: several parts


def data_json(data: Any) -> Any:
    """``data`` as JSON that can sit inside a ``<script>`` element: no ``</`` or ``<!--`` to end it early.

    Both can only occur inside JSON strings (the SVG), where ``\\/`` and ``\\u0021`` are the same characters.
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def fragment(data: Any, *, uid: Any, page_keys: bool = False, beside_widget: bool = False) -> str:
    """The explorer's HTML: a ``<div>``, its style and the script that fills it from ``data``.

    ``beside_widget``: the static copy a notebook keeps above the live widget (see
    :mod:`.widget`): it hides the widget's output when no live view comes.
    """
    options = json.dumps({"pageKeys": page_keys})
    fallback = f"mtStaticFallback(document.getElementById({json.dumps(uid)}));\n" if beside_widget else ""
    return (
        f'<div id="{uid}" class="mt-explore-root"></div>\n'
        f"<style>{asset('explore.css')}</style>\n"
        f'<script type="application/json" id="{uid}-data">{data_json(data)}</script>\n'
        f"<script>{asset('explore.js')}\n"
        f"mtExplore(document.getElementById({json.dumps(uid)}), "
        f"JSON.parse(document.getElementById({json.dumps(uid + '-data')}).textContent), {options});\n"
        f"{fallback}</script>"
    )


def page(data: Any, title: str) -> str:
    """A whole HTML page: the explorer, its keys working anywhere on the page."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        "<style>body { margin: 0.8rem; }</style>\n</head>\n<body>\n"
        f"{fragment(data, uid='microtape-explore', page_keys=True)}\n</body>\n</html>\n"
    )
