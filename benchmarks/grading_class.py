"""``python -m benchmarks.grading_class``: a class of 200 submissions graded by `microtape grade`.

Issue 20's target: 200 sample submissions — right, partly right, wrong,
crashing and looping — graded on 2 cores in at most 5 minutes, with the time
per submission printed. The submissions are the five samples of ``assignment/``
(as ``.py`` files, ``import numpy as np`` added), 40 copies each, each copy
with its own comment so no two files are the same. The reference in the same
run is the in-process check of the *correct* answers (no box, no child): the
ratio says what the box costs per submission.

    python -m benchmarks.grading_class            # 200 submissions, -j 2
    python -m benchmarks.grading_class --count 20 --jobs 1
"""

import argparse
import importlib.util
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

import microtape.exercises as ex
from microtape.grading import gradebook

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "assignment" / "samples"


def _sections(path):
    spec = importlib.util.spec_from_file_location("autograde", ROOT / "assignment" / "autograde.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sample_sections(path)


def write_class(folder, count):
    """``count`` submissions in ``folder``, cycling through the five samples; returns how many of each."""
    samples = sorted(SAMPLES.glob("*.py"))
    kinds = {}
    for number in range(count):
        sample = samples[number % len(samples)]
        body = "\n\n".join(_sections(sample).values())
        text = f"# student {number:03d} ({sample.stem})\nimport numpy as np\nimport sys\n\n{body}"
        (Path(folder) / f"student_{number:03d}_{sample.stem}.py").write_text(text)
        kinds[sample.stem] = kinds.get(sample.stem, 0) + 1
    return kinds


def in_process_seconds(names, secret):
    """The reference: the correct sample's functions checked in this process (no box)."""
    namespace = {"np": np}
    exec("\n\n".join(_sections(SAMPLES / "correct.py").values()), namespace)
    started = time.perf_counter()
    for name in names:
        ex.check(name, namespace[name], hidden=True, secret=secret)
    return time.perf_counter() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=gradebook.DEFAULT_TIMEOUT)
    args = parser.parse_args(argv)
    names = ex.list_exercises()
    secret = "benchmark secret"
    with tempfile.TemporaryDirectory() as folder:
        kinds = write_class(folder, args.count)
        started = time.monotonic()
        graded = gradebook.grade_folder(folder, names, secret=secret, jobs=args.jobs, timeout=args.timeout)
        total = time.monotonic() - started
    reference = in_process_seconds(names, secret)
    per = [grade.seconds for grade in graded]
    boxed_right = np.median([g.seconds for g in graded if g.student.endswith("_correct")])
    print(f"{len(graded)} submissions ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
          f"-j {args.jobs}, {os.cpu_count()} cores, timeout {args.timeout:g} s per exercise")  # fmt: skip
    print(f"  total                      {total:7.1f} s   (target: at most 300 s for 200)")
    print(f"  per submission, wall       {total / len(graded):7.2f} s")
    print(f"  per submission, median     {np.median(per):7.2f} s   (max {max(per):.1f} s: a looping one)")
    print(f"  a right one, boxed         {boxed_right:7.2f} s   vs {reference:.2f} s in-process "
          f"(ratio {boxed_right / reference:.1f}x: starting the box, sending the arrays)")  # fmt: skip
    for kind in sorted(kinds):
        seconds = [g.seconds for g in graded if g.student.endswith(f"_{kind}")]
        label = f"{kind} ({len(seconds)})"
        print(f"  {label:26s} {sum(seconds):7.1f} s   ({np.median(seconds):.2f} s each)")
    print(f"  load average               {os.getloadavg()[0]:7.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    print(f"  grader's peak memory       {peak:7.0f} MB")
    return 0 if total <= 300 * len(graded) / 200 else 1


if __name__ == "__main__":
    raise SystemExit(main())
