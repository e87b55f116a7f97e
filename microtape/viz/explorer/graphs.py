"""The explorer's pictures: the graph laid out by Graphviz in Python, each box marked with the node it shows.

This module lets the page draw and re-draw without Graphviz in the browser::

    views = graph_views(program)
    views[0]["svg"]        # the overview: today's graph (collapsed to modules when big), as SVG
    views[0]["boxes"]      # {data-node: [names of the equations and leaves the box stands for]}
    views[k]               # the same graph with one module opened (expanded on click)

Each picture is :func:`microtape.viz.graph`'s own forward picture
(:class:`~microtape.viz.view.View`, :func:`~microtape.viz.paint.paint`,
:func:`~microtape.viz.picture.to_digraph`): the same boxes, names, colours
and collapsing rules. Every box's ``<g>`` gets ``data-node="<name>"`` — an
equation's or a leaf's name (``scores``, ``a``), or for a module summary
its module path — so the page (and a test) finds it by name; every edge's
``<g>`` gets ``data-edge-from`` and ``data-edge-to``, the names of its ends. A big graph's
summaries are each drawn opened once here (at most :data:`MAX_EXPANDED`);
opening one in the page swaps pictures.
"""

import html
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..lifetimes import order_of
from ..paint import paint
from ..picture import ORDER, to_digraph
from ..render import svg
from ..saved import colour_orders
from ..view import View

__all__ = ["graph_views", "MAX_EXPANDED"]

MAX_EXPANDED = 24  # module summaries drawn opened in advance; others list their ops on the panel

_COMMENT = re.compile(r"<!--.*?-->\n?", re.S)
_FONT = re.compile(r' font-family="([^"]*)"')
_HUNDREDTHS = re.compile(r"(\d\.\d)\d\b")


def _compact(text: str) -> Any:
    """Graphviz's SVG, lighter (a notebook holds it twice): no comments, one font, coordinates to 0.1 pt.

    Every text names the same font: it is said once, on the picture, and
    inherited. A tenth of a point is a tenth of a pixel at natural size.
    """
    text = _COMMENT.sub("", text)
    fonts = set(_FONT.findall(text))
    if len(fonts) == 1:
        text = _FONT.sub("", text).replace("<svg ", f'<svg font-family="{fonts.pop()}" ', 1)
    return _HUNDREDTHS.sub(r"\1", text)


_EDGE = re.compile(r'<g id="(edge\d+)" class="edge">\s*<title>([^<]*)</title>')
_NODE = re.compile(r'<g id="(node\d+)" class="node">\s*<title>([^<]*)</title>')


def box_names(view: Any) -> Any:
    """``{box id: (data-node name, kind, [member names])}`` for every box of ``view``."""
    program = view.program
    boxes = {}
    for box in view.boxes:
        members = [program.name(program.equations[i]) for i in box.equations]
        members += [program.name(program.leaves[j]) for j in box.leaves]
        if box.kind == "summary":
            name = box.group
        elif box.leaves:
            name = program.name(program.leaves[box.leaves[0]])
        else:
            name = program.name(program.equations[box.equations[-1]])
        boxes[box.id] = (name, box.kind, members)
    return boxes


def _marked_svg(view: Any, title: str | None, orders: Any) -> Any:
    """The view's picture as SVG, each box's group carrying ``data-node``, ``data-kind`` and ``tabindex``.

    A recorded derivative's steps (``create_graph=True``) are filled by their order, as in every graph,
    and marked ``data-order``: while the pass is stepped, the fill shows the step and the border the order.
    """
    text = svg(to_digraph(colour_orders(paint(view, title=title, legend=False), view)))
    text = _compact(text[text.find("<svg") :])
    boxes = box_names(view)

    def mark(match: Any) -> Any:
        box = boxes.get(html.unescape(match.group(2)))
        if box is None:  # a junction point: nothing to click
            return match.group(0)
        name, kind, _ = box
        attributes = f'data-node="{html.escape(name)}" data-kind="{kind}" tabindex="0" role="button"'
        order = max((orders[i] for i in view.by_id[html.unescape(match.group(2))].equations), default=0)
        if order:
            attributes += f' data-order="{min(order, max(ORDER))}"'
        return match.group(0).replace('class="node">', f'class="node" {attributes}>', 1)

    def mark_edge(match: Any) -> Any:
        tail, _, head = html.unescape(match.group(2)).partition("->")
        if tail not in boxes or head not in boxes:
            return match.group(0)  # (a junction's line)
        names = f'data-edge-from="{html.escape(boxes[tail][0])}" data-edge-to="{html.escape(boxes[head][0])}"'
        return match.group(0).replace('class="edge">', f'class="edge" {names}>', 1)

    return _EDGE.sub(mark_edge, _NODE.sub(mark, text))


def _view_entry(view: Any, key: Any, title: str, drawn: Any) -> Any:
    boxes = box_names(view)
    return {
        "key": key,
        "title": title,
        "svg": drawn,
        "boxes": {name: members for name, _, members in boxes.values()},
        "summaries": sorted({name for name, kind, _ in boxes.values() if kind == "summary"}),
    }


def graph_views(program: Any, max_expanded: Any = MAX_EXPANDED, max_nodes: Any = None) -> Any:
    """The overview and, for each module summary on it (up to ``max_expanded``), the graph with it opened.

    ``max_nodes``: above this many boxes the overview is collapsed (default: the graphs' own limit).
    """
    sizes = {} if max_nodes is None else {"max_nodes": max_nodes}
    overview = View(program, **sizes)
    groups = [box.group for box in overview.boxes if box.kind == "summary" and "#" not in box.group and box.group]
    planned = [(overview, "", "overview")]
    planned += [(View(program, expand=group, **sizes), group, f"{group} opened") for group in groups[:max_expanded]]
    # Graphviz runs as a program of its own: the pictures are drawn side by side.
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        orders = order_of(program)
        drawn = list(pool.map(lambda plan: _marked_svg(plan[0], None, orders), planned))
    views = [_view_entry(view, key, title, svg) for (view, key, title), svg in zip(planned, drawn, strict=True)]
    return views, overview
