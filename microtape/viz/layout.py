"""One layout for many pictures: lay a graph out once, then draw every frame at the same places.

This module lets the frames of a backward pass keep still while only the
colours and numbers change::

    layout = Layout.of(to_digraph(widest))      # one run of `dot` (positions as JSON)
    frame = to_digraph(picture, layout)         # every box, edge and cluster pinned
    svg(frame)                                  # drawn by `neato -n2`, which keeps them

``widest`` is the picture with every label at its final size (each box with
its longest text over all frames), so no frame's text outgrows its box. Two
invisible anchors at the corners of the layout's bounding box keep each
frame's canvas exactly the layout's: no frame is shifted or resized.
"""

import json
from dataclasses import replace
from typing import Any

from .render import _pipe

__all__ = ["Layout", "widest"]


class Layout:
    """Node positions and sizes, edge splines and cluster boxes from one ``dot -Tjson`` run."""

    def __init__(self, data: Any) -> None:
        self.bb = data["bb"]
        self.label_position = data.get("lp")
        self.nodes, self.clusters, names = {}, {}, {}
        for item in data.get("objects", []):
            names[item.get("_gvid")] = item.get("name")
            if "bb" in item and str(item.get("name", "")).startswith("cluster"):
                self.clusters[item["name"]] = {"bb": item["bb"], **({"lp": item["lp"]} if "lp" in item else {})}
            elif "pos" in item:
                self.nodes[item["name"]] = (item["pos"], item["width"], item["height"])
        # Edges by their ends (dot numbers them in its own order): the k-th edge from a to b.
        self.edges: dict[Any, Any] = {}
        for edge in sorted(data.get("edges", []), key=lambda e: e.get("_gvid", 0)):
            ends = (names[edge["tail"]], names[edge["head"]])
            self.edges.setdefault(ends, []).append((edge.get("pos"), edge.get("lp")))

    @classmethod
    def of(cls, digraph: Any) -> Any:
        """Lay ``digraph`` out with ``dot`` (raises GraphvizNotFound without it)."""
        return cls(json.loads(_pipe(digraph, "json").decode("utf-8")))

    def pin_graph(self, dot: Any) -> None:
        """Make ``dot`` a pinned graph: drawn by ``neato -n2`` on this layout's canvas."""
        dot.engine = "neato"
        dot.pinned = True
        dot.attr(bb=self.bb, **({"lp": self.label_position} if self.label_position else {}))
        low_x, low_y, high_x, high_y = self.bb.split(",")
        for name, pos in (("pin_low", f"{low_x},{low_y}"), ("pin_high", f"{high_x},{high_y}")):
            dot.node(name, "", pos=pos, style="invis", width="0.01", height="0.01", fixedsize="true")

    def node(self, name: str) -> Any:
        pos, width, height = self.nodes[name]
        return {"pos": pos, "width": width, "height": height, "fixedsize": "true"}

    def edge(self, arrow: Any, k: Any) -> Any:
        """The spline (and label position) of the ``k``-th edge from ``arrow.tail`` to ``arrow.head``."""
        pos, label_position = self.edges[(arrow.tail, arrow.head)][k]
        attrs = {"pos": pos} if pos else {}
        if label_position and arrow.label:
            attrs["lp"] = label_position
        return attrs

    def cluster(self, name: str) -> Any:
        return self.clusters.get(name, {})

    def focus(self, name: str) -> Any:
        """Where box ``name`` sits, as fractions of the canvas from the top-left (for the player)."""
        x, y = (float(v) for v in self.nodes[name][0].split(","))
        low_x, low_y, high_x, high_y = (float(v) for v in self.bb.split(","))
        return round((x - low_x) / max(high_x - low_x, 1.0), 4), round((high_y - y) / max(high_y - low_y, 1.0), 4)


def widest(pictures: Any) -> Any:
    """A picture like ``pictures[0]`` whose every box and edge label is the longest any picture has.

    Lines are compared position by position: box ``b``'s line ``k`` is the
    longest line ``k`` of ``b`` over all pictures (and a box has as many
    lines as its longest version).
    """
    first = pictures[0]
    shapes = {shape.id: shape for shape in first.shapes}
    lines = {shape.id: list(shape.lines) for shape in first.shapes}
    labels = [arrow.label for arrow in first.arrows]
    for picture in pictures[1:]:
        for shape in picture.shapes:
            mine = lines[shape.id]
            for k, line in enumerate(shape.lines):
                if k >= len(mine):
                    mine.append(line)
                elif len(str(line[0])) > len(str(mine[k][0])):
                    mine[k] = line
        for k, arrow in enumerate(picture.arrows):
            if arrow.label and len(arrow.label) > len(labels[k] or ""):
                labels[k] = arrow.label
    return replace(
        first,
        shapes=[replace(shape, lines=lines[shape.id]) for shape in shapes.values()],
        arrows=[replace(arrow, label=label) for arrow, label in zip(first.arrows, labels, strict=True)],
    )
