"""The machine part: what ran the benchmarks (CPU, Python, numpy, BLAS, load, PyTorch)."""

from .._harness import WorkerFailed
from .._report import run_worker


def machine(report, torch_python):
    info = run_worker("machine", {})
    report.say("## Machine")
    report.say()
    report.say(f"- date: {info['date']}; microtape commit {info['commit']}")
    report.say(f"- CPU: {info['cpu']}, {info['nproc']} logical cores (`nproc`); {info['platform']}")
    report.say(f"- Python {info['python']}, numpy {info['numpy']}, micrograd {info['micrograd'] or 'not installed'}")
    report.say(f"- BLAS: {'; '.join(info['blas'])}")
    load = ", ".join(f"{x:.2f}" for x in info["load"])
    report.say(f"- load average (1, 5, 15 min) at the start: {load} (other processes share the cores)")
    env = ", ".join(f"{k}={v}" for k, v in info["thread_env"].items())
    report.say(f"- threads pinned in every worker: {env}; OPENBLAS_CORETYPE={info['openblas_coretype'] or '(unset)'}")
    if torch_python:
        try:
            tinfo = run_worker("machine", {"torch": True}, python=torch_python)
            report.say(
                f"- PyTorch {tinfo['torch']} (CPU, {tinfo['torch_threads']} thread) via `{torch_python}`, "
                f"numpy {tinfo['numpy']} there"
            )
        except WorkerFailed as error:
            report.say(f"- PyTorch: could not run `{torch_python}` ({error})")
    else:
        report.say("- PyTorch: not installed (pass --torch-python PATH to include it)")
    report.say()
