"""The transformer part: an encoder layer against hand-written numpy, a training step against PyTorch (issue 14)."""

from .._harness import WorkerFailed, megabytes, seconds, spread, table
from .._report import DTYPES, run_worker

#: (B, T, E, H, ff) of the encoder-layer target (issue 14), and the quick smoke size.
ENCODER_SIZE = (8, 128, 256, 8, 1024)
QUICK_ENCODER_SIZE = (2, 16, 32, 4, 64)


def transformer(report, quick, torch_python, dtypes=DTYPES):
    """Encoder layer fwd+bwd against a hand-written numpy layer; one toy training step against PyTorch."""
    B, T, E, H, ff = QUICK_ENCODER_SIZE if quick else ENCODER_SIZE
    impls = ["numpy", "tape", "analytic"] + (["torch"] if torch_python else [])
    report.say("## Transformer: encoder layer and a training step")
    report.say()
    report.say(
        f"Encoder layer: post-norm `TransformerEncoderLayer` (relu, no mask, no dropout) at B={B}, T={T}, E={E}, "
        f"H={H}, ff={ff}; one step = forward + backward producing dx and all 16 parameter gradients. `numpy` is "
        "the hand-written reference (benchmarks/numpy_encoder.py: benchmarks/numpy_attention.py plus two "
        "layer norms, the feed-forward block and the residuals), `tape` is `layer(x); layer.backward(g)`, "
        '`analytic` the same forward then `layer.backward(g, method="analytic")`, `torch` PyTorch\'s own '
        "`nn.TransformerEncoderLayer` from `layer.to_torch()` (eager, its fused attention kernel included). "
        "CPU time of the worker, median [IQR]; ×numpy: ratio of CPU medians; memory: tracemalloc peak of one step."
    )
    report.say()
    results, rows = {}, []
    repeats, budget = (10, 0.5) if quick else (30, 6.0)
    for dtype in dtypes:
        for impl in impls:
            spec = {"part": "encoder", "impl": impl, "B": B, "T": T, "E": E, "H": H, "ff": ff}
            spec.update(dtype=dtype, repeats=repeats, budget=budget)
            try:
                r = run_worker("transformer", spec, python=torch_python if impl == "torch" else None)
            except WorkerFailed as error:
                rows.append([dtype, impl, f"failed: {error}", "", "", "", "", "", ""])
                continue
            results[(dtype, impl)] = r
            base = results.get((dtype, "numpy"))
            ratio = r["time"]["median"] / base["time"]["median"] if base else None
            peak = r["tracemalloc_peak"]
            rows.append(
                [
                    dtype,
                    impl,
                    seconds(r["time"]["median"]),
                    spread(r["time"]),
                    seconds(r["wall"]["median"]),
                    r["time"]["n"],
                    "—" if ratio is None else f"{ratio:.2f}",
                    megabytes(peak),
                    "—" if not (base and peak) else f"{peak / base['tracemalloc_peak']:.2f}",
                ]
            )
    headers = ["dtype", "impl", "CPU median", "IQR", "wall median", "n", "×numpy", "peak mem", "mem ×numpy"]
    report.say(table(headers, rows))
    report.say()
    lines = []
    for dtype in dtypes:
        tape, base = results.get((dtype, "tape")), results.get((dtype, "numpy"))
        if tape and base:
            ratio = tape["time"]["median"] / base["time"]["median"]
            verdict = "quick sizes, not the target's" if quick else "met" if ratio <= 1.15 else "NOT met"
            analytic = results.get((dtype, "analytic"))
            also = f"; analytic ×{analytic['time']['median'] / base['time']['median']:.3f}" if analytic else ""
            lines.append(
                f"- encoder layer fwd+bwd at B={B},T={T},E={E},H={H},ff={ff}, tape, {dtype}: ×{ratio:.3f} "
                f"({verdict}: ≤1.15{also})"
            )

    report.say(
        "Training step of `microtape train`'s model (embed 32, 2 heads, ff 64, 1 layer, 64 × 8 digits, float32):"
    )
    report.say()
    steps, rows = {}, []
    engines = ["microtape"] + (["torch"] if torch_python else [])
    for impl in engines:
        spec = {"part": "train_step", "impl": impl, "repeats": 20 if quick else 400, "budget": 0.5 if quick else 8.0}
        try:
            steps[impl] = run_worker("transformer", spec, python=torch_python if impl == "torch" else None)
        except WorkerFailed as error:
            rows.append([impl, f"failed: {error}", "", "", "", ""])
    for impl, r in steps.items():
        ratio = r["time"]["median"] / steps["torch"]["time"]["median"] if "torch" in steps else None
        rows.append(
            [impl, seconds(r["time"]["median"]), spread(r["time"]), f"{1 / r['time']['median']:.0f}/s",
             f"{r['first_loss']:.7f}", "—" if ratio is None else f"{ratio:.2f}"]
        )  # fmt: skip
    report.say(table(["impl", "CPU median", "IQR", "steps/s", "first-step loss", "×torch"], rows))
    report.say()
    if not torch_python:
        report.say("PyTorch is not installed here: the torch rows are skipped (pass --torch-python PATH).")
        report.say()
    elif "microtape" in steps and "torch" in steps:
        ratio = steps["microtape"]["time"]["median"] / steps["torch"]["time"]["median"]
        same = abs(steps["microtape"]["first_loss"] - steps["torch"]["first_loss"])
        lines.append(
            f"- training step, microtape ÷ PyTorch eager: ×{ratio:.2f} ({'met' if ratio <= 1.5 else 'NOT met'}: "
            f"aim ≤1.5); both start from the same weights and batch (first-step losses differ by {same:.1e})"
        )
    report.targets("Targets (issue 14), against references measured in this run:", lines)
    return results, steps
