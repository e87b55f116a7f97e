"""The scalar part: Scalar chains and an MLP train step against micrograd (issues 7, 24)."""

import importlib.util

from .._harness import WorkerFailed, rate, table
from .._report import run_worker


def scalar(report, quick):
    have_micrograd = importlib.util.find_spec("micrograd") is not None
    engines = [("microtape", True), ("microtape", False)]
    if have_micrograd:
        engines += [("micrograd", True), ("micrograd", False)]
    sizes = [10_000] if quick else [10_000, 100_000, 1_000_000]
    report.say("## Scalar engine vs micrograd")
    report.say()
    if not have_micrograd:
        report.say("micrograd is not installed (`pip install micrograd==0.1.0`): microtape alone.")
        report.say()
    report.say(
        "Chain: `y = y * 0.999 + 0.001` until n ops, then `y.backward()`; throughputs are ops per second "
        "(median over repeats; each repeat builds a fresh chain). GC = Python's cyclic garbage collector "
        "(on is the default). ×micrograd compares the total (build + backward) with micrograd under the "
        "same GC setting, and with micrograd with GC off."
    )
    report.say()
    chains = {}
    for n in sizes:
        for engine, gc_on in engines:
            repeats = 10 if n <= 10_000 else 5 if n <= 100_000 else 2
            if quick:
                repeats = 3
            if engine == "micrograd" and n >= 1_000_000:
                repeats = 1
            spec = {"engine": engine, "workload": "chain", "n": n, "gc": gc_on, "repeats": repeats}
            try:
                chains[(engine, gc_on, n)] = run_worker("scalar", spec, timeout=1200)
            except WorkerFailed as error:
                chains[(engine, gc_on, n)] = {"error": str(error)}
    rows = []
    for n in sizes:
        for engine, gc_on in engines:
            r = chains[(engine, gc_on, n)]
            if "error" in r:
                rows.append([f"{n:,}", engine, "on" if gc_on else "off", r["error"], "", "", "", "", ""])
                continue
            total = r["ops"] / (r["build"]["median"] + r["backward"]["median"])
            ratios = []
            for reference_gc in (gc_on, False):
                ref = chains.get(("micrograd", reference_gc, n))
                if ref and "error" not in ref:
                    ref_total = ref["ops"] / (ref["build"]["median"] + ref["backward"]["median"])
                    ratios.append(f"{total / ref_total:.2f}")
                else:
                    ratios.append("—")
            recursion = "—"
            if engine == "micrograd":
                recursion = (
                    "ok" if r["default_limit_ok"] else f"RecursionError (ran with limit {r['recursion_limit']:,})"
                )
            else:
                recursion = "ok (iterative)"
            rows.append(
                [
                    f"{n:,}",
                    engine,
                    "on" if gc_on else "off",
                    rate(r["ops"] / r["build"]["median"]),
                    rate(r["ops"] / r["backward"]["median"]),
                    rate(total),
                    ratios[0],
                    ratios[1],
                    recursion,
                ]
            )
    headers = ["ops", "engine", "GC", "build", "backward", "build+backward"]
    headers += ["×micrograd same GC", "×micrograd GC off", "backward at default recursion limit"]
    report.say(table(headers, rows))
    report.say()
    if have_micrograd and not quick:
        try:
            limit = run_worker("scalar", {"workload": "recursion_limit"})
            report.say(
                f"micrograd's recursive topological sort raises RecursionError from a chain of "
                f"{limit['fails_at_ops']:,} ops at the default recursion limit ({limit['limit']:,})."
            )
            report.say()
        except WorkerFailed as error:
            report.say(f"(could not measure micrograd's recursion limit: {error})")

    report.say("MLP(3, [16, 16, 1]), one training step per sample (forward, squared error, zero grads, backward, SGD):")
    report.say()
    mlps = {}
    for engine, gc_on in engines:
        spec = {"engine": engine, "workload": "mlp", "gc": gc_on, "blocks": 3 if quick else 10}
        try:
            mlps[(engine, gc_on)] = run_worker("scalar", spec)
        except WorkerFailed as error:
            mlps[(engine, gc_on)] = {"error": str(error)}
    rows = []
    for engine, gc_on in engines:
        r = mlps[(engine, gc_on)]
        if "error" in r:
            rows.append([engine, "on" if gc_on else "off", r["error"], "", "", ""])
            continue
        per_second = r["block"] / r["time"]["median"]
        ratios = []
        for reference_gc in (gc_on, False):
            ref = mlps.get(("micrograd", reference_gc))
            ratios.append(
                f"{per_second / (ref['block'] / ref['time']['median']):.2f}" if ref and "error" not in ref else "—"
            )
        low, high = r["block"] / r["time"]["q3"], r["block"] / r["time"]["q1"]
        rows.append(
            [
                engine,
                "on" if gc_on else "off",
                f"{per_second:.0f}/s",
                f"[{low:.0f} … {high:.0f}]",
                ratios[0],
                ratios[1],
            ]
        )
    report.say(table(["engine", "GC", "samples/s (median)", "IQR", "×micrograd same GC", "×micrograd GC off"], rows))
    report.say()
    _scalar_targets(report, chains, mlps, sizes)
    return chains, mlps


def _scalar_targets(report, chains, mlps, sizes):
    """microtape with default settings (GC on) against micrograd with GC on (≥2×) and off (≥1×)."""

    def chain_rate(key):
        r = chains.get(key)
        return None if not r or "error" in r else r["ops"] / (r["build"]["median"] + r["backward"]["median"])

    def mlp_rate(key):
        r = mlps.get(key)
        return None if not r or "error" in r else r["block"] / r["time"]["median"]

    workloads = [(f"chain of {n:,} ops", chain_rate, lambda gc_on, n=n: ("micrograd", gc_on, n)) for n in sizes]
    workloads.append(("MLP train step", mlp_rate, lambda gc_on: ("micrograd", gc_on)))
    lines = []
    for label, rate_of, key in workloads:
        ours = rate_of(("microtape", True) + key(True)[2:])
        on, off = rate_of(key(True)), rate_of(key(False))
        if ours and on and off:
            lines.append(
                f"- {label}: ×{ours / on:.2f} micrograd ({'met' if ours / on >= 2 else 'NOT met'}: ≥2), "
                f"×{ours / off:.2f} micrograd with GC off ({'met' if ours / off >= 1 else 'NOT met'}: ≥1)"
            )
    report.targets("Targets (issue 7), microtape with default settings (GC on):", lines)
