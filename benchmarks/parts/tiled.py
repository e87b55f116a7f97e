"""The tiled part: the tiled kernel's memory and time, and a size only it can run (issues 15, 24)."""

import re

from .._harness import WorkerFailed, megabytes, seconds, spread, table
from .._report import run_worker, size_label

#: (B, T, E, H) of issue 15's targets, the size the standard path refuses, the block sizes tried.
TILED_SIZE = (1, 2048, 256, 4)
TILED_BIG = (1, 16384, 256, 4)
TILED_BLOCKS = (64, 128, 256)


def tiled(report, quick, torch_python):
    """Issue 15: the tiled path's memory and time against the numpy reference, and a size only it can run."""
    size, big = ((1, 256, 64, 4), (1, 1024, 64, 4)) if quick else (TILED_SIZE, TILED_BIG)
    blocks = TILED_BLOCKS[:1] if quick else TILED_BLOCKS
    block = blocks[-1]  # the block size of the causal rows and of the big size
    fused = [("torch-fused", None)] if torch_python else []
    report.say("## Tiled (flash) attention: forward + backward, float32")
    report.say()
    report.say(
        "Self-attention as in the attention part, float32. `tiled` is `MultiHeadAttention(..., block_size=b)` "
        "then `.backward(g)` (the core is one `tiled_attention` tape row: online-softmax forward, recomputing "
        "backward); `numpy-tiled` the hand-written numpy reference with microtape's tiled kernel as its core "
        "and no tape (the floor for the tiled path's memory); `torch-fused` the same layer in PyTorch with "
        "`scaled_dot_product_attention` as its core (what `nn.MultiheadAttention` calls; tracemalloc cannot "
        "see torch's allocator: compare its RSS growth). ×numpy and mem ×numpy divide by the numpy reference "
        "with the same causality, measured in this run."
    )
    report.say()
    results, rows = {}, []
    for causal in (False, True):
        impls = [("numpy", None), ("tape", None), ("numpy-tiled", block)]
        impls += [("tiled", b) for b in (blocks if not causal else (block,))] + fused
        for impl, block_size in impls:
            spec = {"impl": impl, "B": size[0], "T": size[1], "E": size[2], "H": size[3], "dtype": "float32"}
            spec.update(causal=causal, block_size=block_size, repeats=10 if quick else 12, budget=1 if quick else 7)
            python = torch_python if impl.startswith("torch") else None
            key = (impl, causal, block_size)
            try:
                results[key] = r = run_worker("attention", spec, python=python)
            except WorkerFailed as error:
                rows.append(["causal" if causal else "full", impl, block_size or "—", f"failed: {error}"])
                continue
            base = results.get(("numpy", causal, None))
            peak, t = r["tracemalloc_peak"], r["time"]
            rows.append(
                [
                    "causal" if causal else "full",
                    impl,
                    block_size or "—",
                    seconds(t["median"]),
                    spread(t),
                    t["n"],
                    f"{t['median'] / base['time']['median']:.2f}" if base else "—",
                    megabytes(peak),
                    f"{peak / base['tracemalloc_peak']:.3f}" if (base and peak) else "—",
                    megabytes(r["rss_growth"]),
                ]
            )
    report.say(f"### {size_label(*size)}")
    report.say()
    headers = ["mask", "impl", "block", "CPU median", "IQR", "n", "×numpy", "peak mem", "mem ×numpy", "RSS growth"]
    report.say(table(headers, rows))
    report.say()

    report.say(
        f"### {size_label(*big)}: "
        + ("a stand-in for the big size (--quick)" if quick else "a size the standard path refuses")
    )
    report.say()
    big_rows = []
    for impl, causal, block_size in [("tape", False, None), ("tiled", False, block), ("tiled", True, block)]:
        spec = {"impl": impl, "B": big[0], "T": big[1], "E": big[2], "H": big[3], "dtype": "float32"}
        spec.update(causal=causal, block_size=block_size, repeats=1, min_repeats=1, warmup=0, budget=0)
        label = ["causal" if causal else "full", impl, block_size or "—"]
        try:
            r = run_worker("attention", spec, timeout=3600)
        except WorkerFailed as error:
            big_rows.append(label + [f"failed: {error}"])
            continue
        results[("big", impl, causal)] = r
        if "refused" in r:
            needed = re.search(r"\(([\d.]+ GiB)\), over the limit of ([\d,]+) bytes", r["refused"])
            why = f"needs ≈ {needed[1]}, limit {int(needed[2].replace(',', '')) / 2**30:g} GiB" if needed else ""
            big_rows.append(label + [f"refused (MemoryError{': ' + why if why else ''})"])
            continue
        big_rows.append(
            label
            + [
                seconds(r["first_step"]),
                seconds(r["time"]["median"]),
                megabytes(r["tracemalloc_peak"]),
                megabytes(r["rss_growth"]),
            ]  # fmt: skip
        )
    report.say(table(["mask", "impl", "block", "first step (traced)", "CPU, one step", "peak mem", "RSS growth"],
                     big_rows))  # fmt: skip
    report.say()
    _tiled_sweep(report, results, big if quick else size, block, quick)
    _tiled_targets(report, results, blocks, block)
    return results


#: The lengths of issue 24's sweep: the tiled path's peak memory must grow linearly in T.
TILED_SWEEP = (2048, 4096, 8192, 16384)


def _tiled_sweep(report, results, size, block, quick):
    """Peak memory of ``tiled`` and ``numpy-tiled`` over T (one step each), in units of one ``T·E`` array."""
    B, _, E, H = size
    lengths = (256, 512, 1024) if quick else TILED_SWEEP
    report.say(f"### Peak memory against T (B={B}, E={E}, H={H}, block {block}, float32, one step each)")
    report.say()
    report.say(
        "Issue 24: the taped tiled path's peak should grow linearly in T (peak / T constant within 10 %) and "
        "stay within 1.2× of the tape-free kernel (`numpy-tiled`). `tiled-lean` is the same layer with "
        "`lean=True` (the tape keeps only what the backward reads). A unit is one float32 array of `T·E` "
        "numbers (`x`, `Q`, a gradient of the output…)."
    )
    report.say()
    rows = []
    for T in lengths:
        row = [T]
        for impl in ("tiled", "tiled-lean", "numpy-tiled"):
            spec = {"impl": impl, "B": B, "T": T, "E": E, "H": H, "dtype": "float32", "block_size": block}
            spec.update(repeats=1, min_repeats=1, warmup=0, budget=0)
            try:
                r = run_worker("attention", spec, timeout=1800)
            except WorkerFailed as error:
                row += [f"failed: {error}", "—"]
                continue
            results[("sweep", impl, T)] = r
            row += [megabytes(r["tracemalloc_peak"]), f"{r['tracemalloc_peak'] / (B * T * E * 4):.2f}"]
        kernel = results.get(("sweep", "numpy-tiled", T))
        for impl in ("tiled", "tiled-lean"):
            taped = results.get(("sweep", impl, T))
            row.append(f"{taped['tracemalloc_peak'] / kernel['tracemalloc_peak']:.2f}" if taped and kernel else "—")
        rows.append(row)
    headers = ["T", "tiled peak", "T·E units", "tiled-lean peak", "T·E units", "numpy-tiled peak", "T·E units"]
    report.say(table(headers + ["tiled ×kernel", "tiled-lean ×kernel"], rows))
    report.say()
    results["sweep_lengths"] = lengths


def _tiled_targets(report, results, blocks, block):
    lines = []
    numpy_full, numpy_causal = results.get(("numpy", False, None)), results.get(("numpy", True, None))
    fused = results.get(("torch-fused", False, None))
    for b in blocks:
        r = results.get(("tiled", False, b))
        if not (r and numpy_full):
            continue
        memory = r["tracemalloc_peak"] / numpy_full["tracemalloc_peak"]
        ratio = r["time"]["median"] / numpy_full["time"]["median"]
        lines.append(
            f"- tiled, block {b}: peak memory ×{memory:.3f} of numpy ({'met' if memory <= 0.10 else 'NOT met'}: "
            f"≤0.10; {megabytes(r['tracemalloc_peak'])})"
            + (f", vs torch-fused RSS growth {megabytes(fused['rss_growth'])}" if fused else "")
            + f"; time ×{ratio:.2f} ({'met' if ratio <= 1.5 else 'NOT met'}: ≤1.5)"
        )
    floor = results.get(("numpy-tiled", False, block))
    if floor and numpy_full:
        lines.append(
            f"- numpy-tiled (the kernel with no tape), block {block}: peak memory "
            f"×{floor['tracemalloc_peak'] / numpy_full['tracemalloc_peak']:.3f} of numpy"
        )
    tape_causal, tiled_causal = results.get(("tape", True, None)), results.get(("tiled", True, block))
    if tape_causal and tiled_causal:
        ratio = tiled_causal["time"]["median"] / tape_causal["time"]["median"]
        line = f"- causal, block {block}: tiled ×{ratio:.2f} the standard causal path's time "
        line += f"({'met' if ratio < 1 else 'NOT met'}: faster)"
        if numpy_causal:
            line += f"; ×{tiled_causal['time']['median'] / numpy_causal['time']['median']:.2f} causal numpy"
        lines.append(line)
    lines += _sweep_targets(results)
    refused, ran = results.get(("big", "tape", False)), results.get(("big", "tiled", False))
    if refused and ran:
        line = f"- the big size: standard path {'refused' if 'refused' in refused else 'NOT refused'}; tiled "
        if "time" in ran:
            line += f"ran in {seconds(ran['time']['median'])} with a {megabytes(ran['tracemalloc_peak'])} peak"
        else:
            line += "did NOT run"
        lines.append(line)
    report.targets("Targets (issues 15 and 24), against the numpy reference of the same run:", lines)


def _sweep_targets(results):
    """Issue 24's two tiled-memory targets, from the sweep over T."""
    lengths = results.get("sweep_lengths", ())
    lines = []
    for impl in ("tiled", "tiled-lean"):
        taped = [(T, results.get(("sweep", impl, T))) for T in lengths]
        per_t = [r["tracemalloc_peak"] / T for T, r in taped if r]
        if len(per_t) > 1:
            spread_of = max(per_t) / min(per_t) - 1
            lines.append(
                f"- {impl} peak / T over T = {', '.join(str(T) for T, r in taped if r)}: varies by {spread_of:.1%} "
                f"({'met' if spread_of <= 0.10 else 'NOT met'}: linear in T, within 10 %)"
            )
    for impl in ("tiled", "tiled-lean"):
        ratios = [
            results[("sweep", impl, T)]["tracemalloc_peak"] / results[("sweep", "numpy-tiled", T)]["tracemalloc_peak"]
            for T in lengths
            if ("sweep", impl, T) in results and ("sweep", "numpy-tiled", T) in results
        ]
        if ratios:
            worst = max(ratios)
            lines.append(
                f"- {impl} peak ×{min(ratios):.2f}–×{worst:.2f} the tape-free kernel's "
                f"({'met' if worst <= 1.2 else 'NOT met'}: ≤1.2)"
            )
    return lines
