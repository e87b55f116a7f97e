"""The drawing core: a picture as plain data, and the one function that turns it into DOT.

This module lets graph and frames share how a picture looks::

    picture = Picture(shapes, arrows, title="...", backward=True)
    digraph = to_digraph(picture)              # a graphviz.Digraph (shows in Jupyter)
    digraph = to_digraph(picture, layout)      # the same, at pinned positions (see layout.py)

A :class:`Shape` is a box (its id, kind, cluster, lines of text, backward
state), an :class:`Arrow` an edge. Nothing here knows about tapes: the
painter (:mod:`microtape.viz.paint`) decides what each box says.

How kinds and states look
-------------------------
The *kind* of a box — operation, shape-only operation, input, parameter,
constant, summary — sets its border and shape: operations are rounded with
a blue border, inputs rounded with a thick green border, parameters square
with a thick gold border, constants dashed grey, summaries 3-D boxes. In
the forward view the kind also sets the fill. In the backward view the fill
says where the pass is — orange: done (its step ran); light orange: its
gradient is arriving (some or all of it, its step still to come); bright
orange and a thick border: the current step; grey: nothing yet; white: not
on the path to the output — and the border still says the kind. A result
has a double border. Rows of ``Picture.orders`` are emitted as invisible
same-rank edges, which keep sibling computations in their recorded order.
A :class:`Fork` is a point where one line from a shared parameter splits
into several arrows (see :class:`microtape.viz.view.Junction`).
"""

import html
from dataclasses import dataclass, field, replace
from typing import Any

from .render import graph_class
from .text import visible

__all__ = [
    "Shape",
    "Arrow",
    "Fork",
    "Picture",
    "spine",
    "to_digraph",
    "KIND",
    "STATE",
    "EDGE",
    "PENDING_TEXT",
    "graph_class",
]

# Colours (fill, border), chosen to stay apart for common colour-blindness.
KIND = {
    "op": ("#e8eef7", "#3b5b92"),
    "shape": ("#ffffff", "#9aa5b1"),
    "input": ("#d4edda", "#2e7d32"),
    "parameter": ("#fff3cd", "#b8860b"),
    "constant": ("#eeeeee", "#777777"),
    "summary": ("#dde4f0", "#3b5b92"),
    # What a step's VJP reads (graph(saved=True)), and what a lean tape dropped.
    "saved": ("#f3e5f5", "#7b1fa2"),
    "dropped": ("#ffffff", "#b0b0b0"),
}
# Steps of a recorded derivative (create_graph=True), by order: the function, first, second (and higher).
ORDER = {0: ("#e8eef7", "#3b5b92"), 1: ("#d9f2ec", "#00796b"), 2: ("#fde0dc", "#bf360c")}
ORDER_TEXT = {0: "the function", 1: "first-derivative step", 2: "second-derivative step"}
SAVED_EDGE = "#7b1fa2"
STATE = {  # fill, text colour of the gradient lines
    "done": ("#fde2c8", "#7a3b10"),
    "partial": ("#fff1e3", "#9a5b30"),
    "current": ("#f5a25d", "#5a1d00"),
    "pending": ("#f7f7f7", "#9e9e9e"),
    "off": ("#ffffff", "#9e9e9e"),
    # Analytic against tape (microtape.viz.verdict): what the step-by-step report says of a gradient.
    "agreed": ("#dcefdc", "#1b5e20"),
    "differs": ("#f8d0d0", "#b71c1c"),
    "first": ("#f28b82", "#8e0000"),
    "depends": ("#ffe0b2", "#a84300"),
    "unchecked": ("#ffffff", "#555555"),
    # A stepped exercise's check, judged link by link (microtape.exercises): each step's state.
    "right": ("#dcefdc", "#1b5e20"),
    "wrong": ("#f28b82", "#8e0000"),
    "carried": ("#ffe0b2", "#a84300"),
}
STATE_EDGE = {"done": "#d35400", "current": "#b03a2e", "partial": "#d35400", "pending": "#c8c8c8", "off": "#dddddd"}
STATE_EDGE.update({"agreed": "#2e7d32", "differs": "#c62828", "first": "#8e0000", "depends": "#ef6c00"})
STATE_EDGE.update({"unchecked": "#9e9e9e", "right": "#2e7d32", "wrong": "#c62828", "carried": "#ef6c00"})
EDGE = "#555555"
PENDING_TEXT = "#9e9e9e"
CONSTANT_EDGE = "#999999"
KIND_TEXT = {
    "op": "operation",
    "shape": "reshape / transpose",
    "input": "input",
    "parameter": "parameter",
    "constant": "constant (no gradient)",
    "summary": "summary of a module",
    "saved": "saved for backward",
    "dropped": "dropped (lean tape)",
}
STATE_TEXT = {
    "done": "done",
    "partial": "gradient arriving",
    "current": "current step",
    "pending": "not yet",
    "off": "not on the path to the output",
    "agreed": "analytic = tape",
    "differs": "differs",
    "first": "first row that differs",
    "depends": "computed from a failure",
    "unchecked": "no row of its own",
    "right": "right",
    "wrong": "wrong link",
    "carried": "carried (right from a wrong step)",
}


@dataclass
class Shape:
    """One drawn box: ``lines`` are ``(text, role)`` with role ``name``, ``info``, ``value`` or ``grad``."""

    id: str
    kind: str
    cluster: str
    lines: list
    state: str | None = None  # backward: done, partial, current, pending, off
    result: bool = False
    small: bool = False  # a per-use copy of a shared leaf
    order: int = 0  # a step of a recorded k-th derivative (create_graph=True): filled by its order


@dataclass
class Arrow:
    """One drawn edge, input → output (drawn reversed in a backward picture)."""

    tail: str
    head: str
    label: str | None = None
    state: str | None = None
    constant: bool = False
    saved: bool = False  # a saved value held by the step (graph(saved=True)): no data flows along it


@dataclass
class Fork:
    """A point in ``cluster``: one line from box ``tail`` to it, then the arrows ``arrows`` (indices) from it."""

    id: str
    cluster: str
    tail: str
    arrows: list
    state: str | None = None  # backward: the state of the line into the parameter


@dataclass
class Picture:
    """Everything a picture shows, in a stable order (same computation, same picture)."""

    shapes: list
    arrows: list
    backward: bool = False
    rankdir: str = "TB"
    title: str | None = None
    note: str | None = None
    legend: list = field(default_factory=list)  # ("kind" or "state", key) in order
    orders: list = field(default_factory=list)  # rows of box ids to keep left to right, on one rank
    forks: list = field(default_factory=list)
    below: list = field(default_factory=list)  # (upper, lower) ids: lower is drawn below upper
    spine: list = field(default_factory=list)  # box ids drawn in one straight line (see spine())


def spine(shapes: Any, arrows: Any) -> Any:
    """The ids of the shortest chain of boxes from an input to the result (parameters and constants aside).

    In a residual block that chain is the residual path (input, sum, norm, sum, norm): drawn
    straight down the page, with each sublayer hanging beside it, instead of the diagonal ``dot``
    drifts into when every sublayer pulls the chain sideways. Empty when there is no such chain,
    or when it skips nothing (no box on it is also reached another way from the box before).
    """
    kinds = {shape.id: shape.kind for shape in shapes}
    after: dict[Any, Any] = {}
    for arrow in arrows:
        if kinds.get(arrow.tail) not in (None, "parameter", "constant") and arrow.head in kinds:
            after.setdefault(arrow.tail, []).append(arrow.head)
    leaves = ("input", "parameter", "constant")
    ends = {shape.id for shape in shapes if shape.result or (shape.kind not in leaves and shape.id not in after)}
    came_from = {shape.id: None for shape in shapes if shape.kind == "input"}
    frontier = list(came_from)
    while frontier:  # breadth first: the first result reached is reached by a shortest chain
        reached = []
        for box in frontier:
            for head in after.get(box, ()):
                if head not in came_from:
                    came_from[head] = box
                    reached.append(head)
        found = [box for box in reached if box in ends]
        if found:
            chain, box = [], found[0]
            while box is not None:
                chain.append(box)
                box = came_from[box]
            chain.reverse()
            # Only a chain that skips something is a residual path (attention's q, k, v have none).
            return chain if any(_also_reached(after, a, b) for a, b in zip(chain, chain[1:])) else []
        frontier = reached
    return []


def _also_reached(after: Any, tail: Any, head: Any) -> bool:
    """Whether ``head`` is reached from ``tail`` other than by their own arrow (a skip connection's sum)."""
    seen, stack = set(), [box for box in after.get(tail, ()) if box != head]
    while stack:
        box = stack.pop()
        if box == head:
            return True
        if box not in seen:
            seen.add(box)
            stack.extend(after.get(box, ()))
    return False


def to_digraph(picture: Any, layout: Any = None) -> Any:
    """The ``graphviz.Digraph`` of ``picture``; with a ``layout``, every box at its pinned place."""
    dot = _new_digraph(picture, layout)
    bodies = _clusters(dot.__class__, picture.shapes, layout)
    fork_of = _add_boxes(dot, bodies, picture, layout)
    if layout is None:
        _add_order_edges(dot, picture)
    for path in sorted(bodies, key=lambda p: (-p.count("."), list(bodies).index(p))):
        parent = path.rpartition(".")[0]
        (bodies[parent] if parent else dot).subgraph(bodies[path])
    _add_arrows(dot, picture, fork_of, layout)
    return dot


def _new_digraph(picture: Any, layout: Any) -> Any:
    """An empty digraph with the picture's direction, fonts, spacing and caption (pinned to ``layout`` if given)."""
    dot = graph_class()(name="microtape")
    dot.attr(
        rankdir=picture.rankdir,
        newrank="true",
        # dot's last crossing pass, over the whole graph at once, may undo the order rows keep inside
        # clusters (v_proj drawn before q_proj in a Transformer block's summary): skip it.
        remincross="false",
        fontname="Helvetica",
        fontsize="11",
        nodesep="0.18",
        ranksep="0.32",
        labelloc="t",
        labeljust="l",
    )
    dot.attr("node", shape="box", style="rounded,filled", fontname="Helvetica", fontsize="10")
    dot.attr("node", margin="0.08,0.03", height="0.3")
    dot.attr("edge", color=EDGE, arrowsize="0.6", fontname="Helvetica", fontsize="8")
    caption = _caption(picture)
    if caption:
        dot.attr(label=caption)
    if layout is not None:
        layout.pin_graph(dot)
    return dot


def _add_boxes(dot: Any, bodies: Any, picture: Any, layout: Any) -> Any:
    """Every shape and fork point, in its cluster's body; returns ``{arrow index: the fork it leaves from}``."""
    for shape in picture.shapes:
        attrs = _shape_attrs(shape, picture.backward)
        if shape.id in picture.spine:
            attrs["group"] = "spine"  # dot keeps the edges between one group's boxes straight
        if layout is not None:
            attrs.update(layout.node(shape.id))
        (bodies[shape.cluster] if shape.cluster else dot).node(shape.id, _label(shape), **attrs)
    fork_of = {}
    for fork in picture.forks:
        fork_of.update(dict.fromkeys(fork.arrows, fork))
        attrs = {"shape": "point", "width": "0.05", "height": "0.05", "label": ""}
        attrs["color"] = STATE_EDGE[fork.state] if picture.backward and fork.state else EDGE
        if layout is not None:
            attrs.update(layout.node(fork.id))
        (bodies[fork.cluster] if fork.cluster else dot).node(fork.id, **attrs)
    return fork_of


def _add_order_edges(dot: Any, picture: Any) -> None:
    """The invisible edges that keep ``dot``'s ranks in recorded order (not needed when a layout pins them)."""
    for row in picture.orders:
        # Invisible edges on one rank keep sibling computations in the order they were recorded.
        keep = dot.__class__()
        keep.attr(rank="same")
        keep.attr("edge", style="invis")
        for tail, head in zip(row, row[1:]):
            keep.edge(tail, head)
        dot.subgraph(keep)
    for upper, lower in picture.below:
        # Weight 0: only the rank is kept, the lower box stays close to where it is used.
        dot.edge(upper, lower, style="invis", weight="0")


def _add_arrows(dot: Any, picture: Any, fork_of: Any, layout: Any) -> None:
    """Every arrow; one that leaves a fork is drawn from the fork (the fork's line in with its first arrow)."""
    seen: dict[Any, Any] = {}

    def draw(arrow: Any, **extra: Any) -> None:
        attrs = {**_arrow_attrs(arrow, picture.backward), **extra}
        if layout is not None:
            k = seen[(arrow.tail, arrow.head)] = seen.get((arrow.tail, arrow.head), -1) + 1
            attrs.update(layout.edge(arrow, k))
        dot.edge(arrow.tail, arrow.head, **attrs)

    for k, arrow in enumerate(picture.arrows):
        fork = fork_of.get(k)
        if fork is None:
            draw(arrow)
            continue
        if k == fork.arrows[0]:  # the parameter's line to the fork, drawn with its first arrow
            draw(Arrow(fork.tail, fork.id, state=fork.state), **({} if picture.backward else {"arrowhead": "none"}))
        # From the fork on, the arrow has no head at the fork's end (backward: the line into the parameter has it).
        draw(replace(arrow, tail=fork.id), **({"dir": "none"} if picture.backward else {}))


def _clusters(cls: Any, shapes: Any, layout: Any) -> Any:
    """One subgraph per module path (parents before children, in order of first appearance)."""
    order: dict[Any, Any] = {}
    for shape in shapes:
        parts = shape.cluster.split(".") if shape.cluster else []
        for k in range(1, len(parts) + 1):
            order.setdefault(".".join(parts[:k]), len(order))
    bodies = {}
    for path, number in order.items():
        body = cls(name=f"cluster_{number}")
        body.attr(
            label=visible(path.rpartition(".")[2]),
            style="rounded,dashed",
            color="#8a94a6",
            fontcolor="#4a5568",
            fontsize="11",
            margin="6",
            labelloc="t",
            labeljust="l",
        )
        if layout is not None:
            body.attr(**layout.cluster(f"cluster_{number}"))
        bodies[path] = body
    return bodies


def _shape_attrs(shape: Any, backward: Any) -> Any:
    fill, line = KIND[shape.kind]
    attrs = {"fillcolor": fill, "color": line}
    style = {"constant": "rounded,filled,dashed", "shape": "rounded,filled,dashed", "parameter": "filled"}
    if shape.kind in style:
        attrs["style"] = style[shape.kind]
    if shape.kind in ("input", "parameter"):
        attrs["penwidth"] = "2"
    if shape.kind == "shape":
        attrs["fontsize"] = "9"
    if shape.kind == "summary":
        attrs.update(shape="box3d", style="filled")
    if shape.small:
        attrs.update(fontsize="8", height="0.2", margin="0.04,0.01")
    if shape.result:
        attrs["peripheries"] = "2"
    if shape.kind in ("saved", "dropped"):
        # Small, but not below the 9 points every other second line uses (they must read at 900 px).
        attrs.update(fontsize="9", height="0.2", margin="0.04,0.01")
    if shape.kind == "dropped":
        attrs.update(style="rounded,dashed", fontcolor=PENDING_TEXT)
    if shape.order:
        fill, line = ORDER[min(shape.order, 2)]
        attrs.update(fillcolor=fill, color=line)
    if backward and shape.state is not None:
        attrs["fillcolor"] = STATE[shape.state][0]
        if shape.state in ("current", "first", "wrong"):
            attrs["penwidth"] = "3"
        elif shape.state in ("pending", "off"):
            attrs["fontcolor"] = PENDING_TEXT
    return attrs


def _arrow_attrs(arrow: Any, backward: Any) -> Any:
    attrs = {}
    if arrow.label:
        attrs["label"] = visible(arrow.label)
    if arrow.saved:
        # Held, not passed: a dotted line, no arrowhead, whichever way the picture runs.
        attrs.update(style="dotted", color=SAVED_EDGE, dir="none", penwidth="1.3")
        return attrs
    if arrow.constant:
        attrs.update(style="dashed", color=CONSTANT_EDGE)
        if backward:
            attrs["dir"] = "none"  # no gradient flows into a constant
        return attrs
    if backward:
        attrs["dir"] = "back"
        if arrow.state is not None:
            attrs["color"] = STATE_EDGE[arrow.state]
            attrs["fontcolor"] = STATE[arrow.state][1] if arrow.state != "current" else STATE_EDGE["current"]
            if arrow.state == "current":
                attrs["penwidth"] = "2"
            elif arrow.state in ("first", "wrong"):
                attrs["penwidth"] = "3.5"
            elif arrow.state in ("depends", "carried"):
                attrs["style"] = "dashed"
    return attrs


def _label(shape: Any) -> Any:
    """An HTML-like graphviz label: the name in bold, then smaller lines."""
    rows = []
    for text, role in shape.lines:
        text = html.escape(visible(text), quote=False)
        if role == "name":
            rows.append(f"<b>{text}</b>")
        elif role == "grad":
            colour = STATE[shape.state or "done"][1]
            rows.append(f'<font point-size="9" color="{colour}">{text}</font>')
        else:
            rows.append(f'<font point-size="9">{text}</font>')
    return "<" + "<br/>".join(rows) + ">"


def _caption(picture: Any) -> Any:
    """The graph's label, on top: the title (and note) in one row, the legend below it."""
    rows = []
    text = []
    if picture.title:
        text.append(f'<font point-size="13"><b>{html.escape(visible(picture.title), quote=False)}</b></font>')
    if picture.note:
        text.append(f'<font point-size="9">{html.escape(visible(picture.note), quote=False)}</font>')
    if text:
        rows.append('<tr><td align="left" balign="left">' + "<br/>".join(text) + "</td></tr>")
    cells = []
    for what, key in picture.legend:
        if what == "state":
            fill, line, text = STATE[key][0], "#999999", STATE_TEXT[key]
        elif what == "order":
            fill, line, text = ORDER[key][0], ORDER[key][1], ORDER_TEXT[key]
        else:
            fill, line, text = ("#ffffff" if picture.backward else KIND[key][0]), KIND[key][1], KIND_TEXT[key]
        cells.append(
            f'<td bgcolor="{fill}" border="1" color="{line}"><font point-size="9">'
            f"{html.escape(text, quote=False)}</font></td>"
        )
    if cells:
        # A table of its own, so its cells keep their size whatever the title's width.
        rows.append(
            '<tr><td align="left"><table border="0" cellspacing="4" cellpadding="2"><tr>'
            + "".join(cells)
            + "</tr></table></td></tr>"
        )
    if not rows:
        return None
    return '<<table border="0" cellspacing="0" cellpadding="0">' + "".join(rows) + "</table>>"
