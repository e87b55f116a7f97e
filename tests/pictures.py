"""Reading pictures in tests: the DOT source of a graph, the SVG that ``dot`` draws, and the computations drawn.

The graph tests read what the picture *says* — boxes, labels, edges,
clusters, styles (DOT source, no ``dot`` needed) — and, where ``dot`` is
installed, where things *are* (positions in the SVG or ``dot -Tjson``).
"""

import contextlib
import html
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import microtape as mt

needs_dot = pytest.mark.skipif(
    not any((Path(p) / "dot").exists() for p in os.environ.get("PATH", "").split(os.pathsep)),
    reason="Graphviz's dot is not installed",
)

NODE = re.compile(r"^\t+(\w+) \[(.*)\]$", re.M)
EDGE = re.compile(r"^\t+(\w+) -> (\w+)(?: \[(.*)\])?$", re.M)


def nodes(source):
    """``{id: attribute text}`` for every box (the invisible layout anchors and the fork points left out)."""
    return {
        m.group(1): m.group(2)
        for m in NODE.finditer(source)
        if m.group(1) not in ("node", "edge", "graph")
        and "style=invis" not in m.group(2)
        and "shape=point" not in m.group(2)
    }


def forks(source):
    """``{fork id: (the box its line comes from, [the boxes its arrows go to])}``: shared parameters' junctions."""
    points = [m.group(1) for m in NODE.finditer(source) if "shape=point" in m.group(2)]
    found = {point: [None, []] for point in points}
    for tail, head, _ in edges(source):
        if head in found:
            found[head][0] = tail
        if tail in found:
            found[tail][1].append(head)
    return {point: (tail, heads) for point, (tail, heads) in found.items()}


def uses(source, box):
    """The boxes ``box`` has an edge to, through its forks (a shared parameter's junction points) as well."""
    through = forks(source)
    heads = []
    for tail, head, _ in edges(source):
        if tail == box:
            heads += through[head][1] if head in through else [head]
    return heads


def edges(source):
    """``[(tail, head, attribute text)]`` in the order they are written (invisible ones left out)."""
    found = [(m.group(1), m.group(2), m.group(3) or "") for m in EDGE.finditer(source)]
    return [e for e in found if "style=invis" not in e[2] and not _in_invisible_block(source, e)]


def _in_invisible_block(source, edge):
    # Rows kept in order are written as `{ rank=same; edge [style=invis]; a -> b }`.
    for block in re.finditer(r"\{\n\t+rank=same\n\t+edge \[style=invis\]\n((?:\t+\w+ -> \w+\n)+)", source):
        if f"{edge[0]} -> {edge[1]}\n" in block.group(1) and not edge[2]:
            return True
    return False


def attr(text, key):
    """The value of ``key="..."`` or ``key=word`` in an attribute list (None if absent; HTML labels skipped)."""
    if "label=<" in text and key != "label":
        start = text.index("label=<")
        depth, end = 0, start + len("label=")
        for end in range(start + len("label="), len(text)):
            depth += {"<": 1, ">": -1}.get(text[end], 0)
            if depth == 0:
                break
        text = text[:start] + text[end + 1 :]
    m = re.search(rf'(?:^| ){key}=(?:"([^"]*)"|([^\s<>"]+))', text)
    if m is None:
        return None
    return m.group(1) if m.group(1) is not None else m.group(2)


def label(text):
    """The plain text of a node's HTML label (tags removed)."""
    start = text.index("label=<") + len("label=")
    depth, end = 0, start
    for end in range(start, len(text)):
        depth += {"<": 1, ">": -1}.get(text[end], 0)
        if depth == 0:
            break
    inner = text[start + 1 : end]
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", inner).split()))


def label_lines(text):
    """The lines of a node's HTML label (tags removed)."""
    start = text.index("label=<") + len("label=<")
    inner = text[start : text.rindex(">")]
    return [html.unescape(re.sub(r"<[^>]+>", "", part)).strip() for part in inner.split("<br/>")]


def find_box(source, name):
    """The id of the box whose label starts with ``name``."""
    matches = [i for i, a in nodes(source).items() if label(a).split(" ")[0] == name]
    assert len(matches) == 1, f"expected one box named {name!r}, found {matches}"
    return matches[0]


def reaches_all(source, target):
    """True if every drawn box has a path to ``target`` along the edges."""
    ids = set(nodes(source))
    incoming = {}
    for tail, head, _ in edges(source):
        incoming.setdefault(head, []).append(tail)
    seen, stack = {target}, [target]
    while stack:
        for tail in incoming.get(stack.pop(), []):
            if tail not in seen:
                seen.add(tail)
                stack.append(tail)
    return seen - set(forks(source)) == ids


def clusters(source):
    """``{cluster label: [node ids directly or indirectly inside]}``."""
    result = {}
    for m in re.finditer(r"subgraph (cluster_\d+) \{", source):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        body = source[m.end() : i]
        name = attr(body.splitlines()[1].strip(), "label")  # the cluster's attribute line
        result[name] = list(nodes(body))
    return result


def edge_labels(source):
    """``{(tail, head): [labels in order]}`` of every edge."""
    found = {}
    for tail, head, attrs in edges(source):
        found.setdefault((tail, head), []).append(attr(attrs, "label"))
    return found


# ---------------------------------------------------------------- where dot puts things


def layout(digraph):
    """``dot -Tjson`` of a graph: ``{"nodes": {id: (x, y)}, "clusters": {label: (x0, y0, x1, y1)}, ...}``.

    ``"boxes"`` lists every cluster as ``(label, (x0, y0, x1, y1))``, also when labels repeat.
    """
    data = json.loads(subprocess.run(["dot", "-Tjson"], input=digraph.source.encode(), capture_output=True).stdout)
    placed = {"nodes": {}, "clusters": {}, "rankdir": data.get("rankdir", "TB"), "bb": data["bb"], "boxes": []}
    for item in data.get("objects", []):
        if str(item.get("name", "")).startswith("cluster") and "bb" in item:
            placed["clusters"][item["label"]] = tuple(float(v) for v in item["bb"].split(","))
            placed["boxes"].append((item["label"], placed["clusters"][item["label"]]))
        elif "pos" in item:
            placed["nodes"][item["name"]] = tuple(float(v) for v in item["pos"].split(","))
    placed["graph_label"] = data.get("lp")
    return placed


def across(placed, names):
    """``names`` (cluster labels) in the order a reader meets them across a rank: left to right (TB) or down (LR)."""

    def where(name):
        x0, y0, x1, y1 = placed["clusters"][name]
        return (x0 + x1) / 2 if placed["rankdir"] == "TB" else -(y0 + y1) / 2

    return sorted(names, key=where)


def left_to_right_inside(placed, outer, prefix):
    """The labels of the clusters starting with ``prefix`` inside cluster ``outer``, left to right."""
    x0, y0, x1, y1 = placed["clusters"][outer]
    inside = [
        (box[0], name)
        for name, box in placed["boxes"]
        if name.startswith(prefix) and x0 <= box[0] and box[2] <= x1 and y0 <= box[1] and box[3] <= y1
    ]
    return [name for _, name in sorted(inside)]


SVG_NODE = re.compile(
    r'<g id="node\d+" class="node">\s*<title>(\w+)</title>\s*<(polygon|path|ellipse)[^>]*?(?:points|d)="([^"]+)"'
)


def svg_positions(svg_text):
    """``{node id: (x, y) of its outline's centre}`` in an SVG drawn by Graphviz."""
    found = {}
    for m in SVG_NODE.finditer(svg_text):
        xs, ys = zip(*[(float(a), float(b)) for a, b in re.findall(r"([\d.-]+),([\d.-]+)", m.group(3))])
        found[m.group(1)] = (round((min(xs) + max(xs)) / 2, 2), round((min(ys) + max(ys)) / 2, 2))
    return found


def median_text_px(svg_text, width):
    """The median height of a Graphviz SVG's texts, in pixels, once shown at most ``width`` pixels wide.

    (``microtape.viz.fit.smallest_text_px`` measures the smallest; the median is what most of the
    picture reads like.) A drawing at another ``dpi`` (a slide) is scaled by its top group's transform.
    """
    import statistics

    natural = float(re.search(r'<svg width="([\d.]+)pt"', svg_text).group(1)) * 4 / 3
    zoom = re.search(r'<g id="graph0" class="graph" transform="scale\(([\d.]+)', svg_text)
    sizes = [float(size) for size in re.findall(r'<text[^>]*font-size="([\d.]+)"', svg_text)]
    return statistics.median(sizes) * (float(zoom.group(1)) if zoom else 1.0) * 4 / 3 * min(1.0, width / natural)


def svg_size(svg_text):
    return re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg_text).groups()


# ---------------------------------------------------------------- computations


def scalar_expression():
    """y = tanh(a*b + a**2), every step named."""
    with mt.Tape() as tape:
        a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
        c = a * b
        c.name = "c"
        d = a**2
        d.name = "d"
        e = c + d
        e.name = "e"
        y = e.tanh()
        y.name = "y"
    return tape, a, b, y


def attention(dropout=0.0, seed=0, embed=16, heads=4, seq=6):
    attn = mt.nn.MultiHeadAttention(embed, heads, dropout=dropout, causal=True, seed=seed)
    x = np.random.default_rng(seed).standard_normal((1, seq, embed))
    y = attn(x)
    return attn, y


def scalar_trace(causal=True):
    attn = mt.nn.MultiHeadAttention(4, 2, causal=causal, seed=0)
    return attn, attn.trace_scalars(np.random.default_rng(0).standard_normal((1, 3, 4)))


def neuron_batch(samples=3, seed=0, total="chain", within=None, weights_within=False):
    """One neuron ``tanh(w·x + b)`` on several samples (scopes ``sample{s}``), squared errors added up.

    ``total``: ``"chain"`` (``e0 + e1 + …``) or ``"sum"`` (Python's ``sum``,
    which starts from a constant 0). ``within``: a module holding every
    sample (``"batch"``); ``weights_within``: ``w`` and ``b`` are made in it
    too (so they belong to it). Returns ``(tape, loss, [w, b])``.
    """
    rng = np.random.default_rng(seed)
    if not weights_within:
        w, b = mt.Scalar(0.5, name="w"), mt.Scalar(-0.2, name="b")
    with mt.Tape() as tape:
        with mt.module_scope(within) if within else contextlib.nullcontext():
            if weights_within:
                w, b = mt.Scalar(0.5, name="w"), mt.Scalar(-0.2, name="b")
            errors = []
            for s in range(samples):
                x, target = (float(v) for v in rng.normal(size=2))
                with mt.module_scope(f"sample{s}"):
                    errors.append(((w * x + b).tanh() - target) ** 2)
        if total == "sum":
            loss = sum(errors)
        else:
            loss = errors[0]
            for error in errors[1:]:
                loss = loss + error
    return tape, loss, [w, b]


def mlp(samples=1, hidden=4, inputs=2, seed=0):
    """A micrograd-sized MLP (2 → 4 tanh neurons → 1) of Scalars, each neuron in a module scope.

    ``samples > 1``: the same (shared) weights on several samples, each in
    its own ``sample{s}`` scope, and the squared errors summed *outside*
    the scopes (as one writes a loss). Returns ``(tape, output, parameters)``.
    Its leaves are named ``w1[j,i]``, ``b1[j]``, ``w2[j]``, ``b`` — nothing
    says "weight" or "bias".
    """
    rng = np.random.default_rng(seed)
    w1 = [[mt.Scalar(rng.normal(), name=f"w1[{j},{i}]") for i in range(inputs)] for j in range(hidden)]
    b1 = [mt.Scalar(0.1 * j, name=f"b1[{j}]") for j in range(hidden)]
    w2 = [mt.Scalar(rng.normal(), name=f"w2[{j}]") for j in range(hidden)]
    b = mt.Scalar(0.0, name="b")
    parameters = [w for row in w1 for w in row] + b1 + w2 + [b]

    def forward(x):
        hidden_out = []
        for j in range(hidden):
            with mt.module_scope(f"neuron{j}"):
                act = b1[j]
                for i in range(inputs):
                    act = act + w1[j][i] * x[i]
                hidden_out.append(act.tanh())
        y = b
        for j in range(hidden):
            y = y + w2[j] * hidden_out[j]
        return y

    with mt.Tape() as tape:
        if samples == 1:
            x = [mt.Scalar(v, name=f"x[{i}]") for i, v in enumerate(rng.normal(size=inputs))]
            return tape, forward(x), parameters
        losses = []
        for s in range(samples):
            x = [float(v) for v in rng.normal(size=inputs)]
            with mt.module_scope(f"sample{s}"):
                y = forward(x)
            losses.append((y - float(rng.normal())) ** 2)
        loss = losses[0]
        for item in losses[1:]:
            loss = loss + item
    return tape, loss, parameters
