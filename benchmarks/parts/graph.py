"""The graph part: how long the pictures of a tape take to build and lay out (issues 7, 24)."""

import importlib.util
import shutil

from .._harness import WorkerFailed, seconds, table
from .._report import run_worker


def graph(report, quick):
    report.say("## Graph rendering")
    report.say()
    missing = None
    if importlib.util.find_spec("microtape.viz.graph") is None:
        missing = "microtape.viz.graph does not exist yet, so there is nothing to time"
    elif importlib.util.find_spec("graphviz") is None:
        missing = "the graphviz Python package is not installed (pip install graphviz)"
    elif shutil.which("dot") is None:
        missing = "Graphviz's `dot` program is not on PATH (Debian: apt-get install graphviz)"
    if missing:
        report.say(f"SKIPPED: {missing}.")
        report.say()
        return None
    report.say(
        "`build`: `microtape.viz.graph(...)` in Python; `dot`: Graphviz's `dot -Tsvg` on that source "
        "(timeout 30 s). detail=full draws every equation; detail=auto collapses reshape chains and "
        "summarises graphs above 150 boxes. `mlp` graphs read every weight from every sample (shared leaves). "
        "`frames`: the demo's backward_frames (build includes its one `dot` layout; dot: every frame by "
        "`neato -n2`); its 'boxes drawn' column counts frames."
    )
    report.say()
    cases = [("attention", None, detail) for detail in ("full", "auto")] + [("frames", None, "auto")]
    sizes = [100] if quick else [100, 300, 1000, 3000]
    cases += [(kind, n, detail) for kind in ("chain", "mlp") for n in sizes for detail in ("full", "auto")]
    if not quick:  # issue 24: collapsing comes first, its cost follows what is drawn
        cases += [("chain", 50_000, "auto"), ("modules", 1000, "auto")]
    rows = []
    totals = {}  # (kind, detail) -> slowest build + dot, in seconds (None: timed out)
    for kind, n, detail in cases:
        spec = {"kind": kind, "n": n, "detail": detail, "timeout": 30}
        try:
            r = run_worker("graph", spec, timeout=300)
        except WorkerFailed as error:
            rows.append([kind, n or "", detail, f"failed: {error}", "", ""])
            continue
        if "skipped" in r:
            report.say(f"SKIPPED: {r['skipped']}")
            return None
        for picture in r["pictures"]:
            name = kind + (" (backward)" if picture["backward"] and kind != "frames" else "")
            render = seconds(picture["render"]) if picture["render"] is not None else f"> {picture['timeout']} s"
            rows.append([name, r["equations"], detail, picture["boxes"], seconds(picture["build"]), render])
            total = None if picture["render"] is None else picture["build"] + picture["render"]
            group = (kind if kind in ("attention", "frames", "modules") else "scalar", detail)
            if kind == "chain" and n and n >= 50_000:
                group = ("50k-op tape", detail)
            previous = totals.get(group, 0.0)
            totals[group] = None if (total is None or previous is None) else max(previous, total)
    report.say(table(["graph", "equations", "detail", "boxes drawn", "build", "dot"], rows))
    report.say()
    _explorer(report, quick)
    report.say()
    report.say(
        "Targets (issue 7): pictures in under a second. Issue 24: a 50k-op tape collapsed in under 1 s; "
        "the backward-frames player of a 1,000-module tape (`modules`) in under 5 s."
    )
    report.say()
    for (group, detail), slowest in sorted(totals.items()):
        verdict = "timed out" if slowest is None else f"slowest {seconds(slowest)}"
        limit = 5.0 if group == "modules" else 1.0
        met = slowest is not None and slowest < limit
        report.say(f"- {group} graphs, detail={detail}: {verdict} ({'met' if met else f'not under {limit:g} s'})")
    report.say()
    return rows


def _explorer(report, quick):
    """The explorer (issue 46): its page built in Python, then opened and clicked in headless Chromium."""
    report.say(
        "`mt.viz.explore` (issue 46): `build` is the page made in Python (`dot` included); in headless "
        "Chromium, `open` is the saved page's load event, `click` a node's panel written, `step` one ArrowRight. "
        "Targets: open ≤ 1 s and a click ≤ 100 ms for a 5,000-op tape."
    )
    report.say()
    rows = []
    for spec in [{"kind": "attention"}] + ([] if quick else [{"kind": "chain", "n": 5000}]):
        try:
            r = run_worker("explore", spec, timeout=600)
        except WorkerFailed as error:
            rows.append([spec["kind"], "", f"failed: {error}", "", "", "", ""])
            continue
        seen = r["browser"] or {}
        cells = [seconds(seen[key]) if key in seen else "no browser" for key in ("open", "click", "step")]
        rows.append([spec["kind"], r["equations"], f"{r['bytes'] / 1e6:.2f} MB", seconds(r["build"]), *cells])
    report.say(table(["explorer", "equations", "page", "build", "open", "click", "step"], rows))
    report.say()
