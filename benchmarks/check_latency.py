"""``python -m benchmarks.check_latency``: how long a student waits for a check, link by link included.

Issue 44's targets, on a quiet machine: ``microtape exercises check`` on a file
answering the whole lab in at most 1 s, and ``ex.check`` in a notebook at most
50 ms for an exercise's visible trials. Three figures:

* **the command**: ``microtape exercises check FILE`` on the correct sample
  (every exercise of the lab, boxed child included), wall time, the median of
  ``--repeats`` runs — beside the reference measured in the same run, the
  interpreter importing ``microtape.exercises`` and exiting (what any command
  pays before it checks anything);
* **ex.check, right answers**: each exercise's visible trials in this
  process, the first call (trials drawn, the tape's answers computed) and
  again (the trials kept), beside the student's own function on the same
  trials (the reference: what no checker can save);
* **ex.check, a wrong link**: each stepped exercise with its first known
  mistake — the case where the tape's reverse pass runs again from the
  student's own steps (:mod:`microtape.exercises.links`).

    python -m benchmarks.check_latency
    python -m benchmarks.check_latency --repeats 5
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import microtape.exercises as ex
from microtape.exercises import checker

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "assignment" / "samples"


def _sections(path):
    spec = importlib.util.spec_from_file_location("autograde", ROOT / "assignment" / "autograde.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sample_sections(path)


def _wall(command, repeats):
    """The median wall time of ``command`` (a list) over ``repeats`` runs, and its last exit status.

    Bytecode is written and used, as after an install (a run once first writes it): without it every
    command would compile microtape's modules again (~1 s on a busy machine), which no student pays twice.
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, capture_output=True, cwd=ROOT, env=env)
    times, status = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        status = subprocess.run(command, capture_output=True, cwd=ROOT, env=env).returncode
        times.append(time.perf_counter() - started)
    return statistics.median(times), status


def command_figures(repeats):
    """``(seconds for the command, seconds for the reference, exit status)``."""
    body = "\n\n".join(_sections(SAMPLES / "correct.py").values())
    with tempfile.TemporaryDirectory() as folder:
        answers = Path(folder) / "answers.py"
        answers.write_text(f"import numpy as np\n\n{body}")
        check, status = _wall([sys.executable, "-m", "microtape", "exercises", "check", str(answers)], repeats)
    reference, _ = _wall([sys.executable, "-c", "import microtape.exercises"], repeats)
    return check, reference, status


def _own_seconds(name, fn):
    """The student's function alone on the visible trials (the trials already drawn)."""
    exercise = ex.get(name)
    started = time.perf_counter()
    for trial in range(len(exercise.visible)):
        args, _, _ = checker._trial(name, False, (0,), trial)
        fn(*[arg.copy() if isinstance(arg, np.ndarray) else arg for arg in args])
    return time.perf_counter() - started


def notebook_figures():
    """``[(exercise, first ms, again ms, own ms, status)]`` for every exercise the correct sample answers."""
    namespace = {"np": np}
    exec("\n\n".join(_sections(SAMPLES / "correct.py").values()), namespace)
    rows = []
    for name in ex.list_exercises():
        if name not in namespace:
            continue
        checker._trial.cache_clear()
        started = time.perf_counter()
        result = ex.check(name, namespace[name])
        first = time.perf_counter() - started
        started = time.perf_counter()
        ex.check(name, namespace[name])
        again = time.perf_counter() - started
        rows.append((name, first * 1e3, again * 1e3, _own_seconds(name, namespace[name]) * 1e3, result.status))
    return rows


def wrong_link_figures():
    """``[(exercise, mistake, ms, score)]``: each stepped exercise with a known mistake, trials kept."""
    sys.path.insert(0, str(ROOT / "tests"))
    from exercise_helpers import making_mistake  # the reference solution with one known mistake

    rows = []
    for name in ex.list_exercises():
        exercise = ex.get(name)
        if not exercise.stepped or not exercise.mistakes:
            continue
        mistake = exercise.mistakes[0].name
        student = making_mistake(name, mistake)
        ex.check(name, student)  # trials drawn once, as a notebook's second check finds them
        started = time.perf_counter()
        result = ex.check(name, student)
        rows.append((name, mistake, (time.perf_counter() - started) * 1e3, f"{result.score}/{result.max_score}"))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of the command (the median is shown)")
    args = parser.parse_args(argv)
    check, reference, status = command_figures(args.repeats)
    print(f"microtape exercises check (the whole lab, correct): {check:.2f} s, exit {status}   (target: ≤ 1 s)")
    print(f"  reference, python -c 'import microtape.exercises':  {reference:.2f} s   (ratio ×{check / reference:.1f})")
    rows = notebook_figures()
    print("\nex.check on the visible trials, right answers (ms; target: ≤ 50 ms)")
    print(f"  {'exercise':<34}{'first':>8}{'again':>8}{'own fn':>8}  status")
    for name, first, again, own, result in rows:
        print(f"  {name:<34}{first:8.1f}{again:8.1f}{own:8.1f}  {result}")
    firsts, agains = [row[1] for row in rows], [row[2] for row in rows]
    print(f"  {'median / max':<34}{statistics.median(firsts):8.1f}{statistics.median(agains):8.1f}")
    print(f"  {'':<34}{max(firsts):8.1f}{max(agains):8.1f}")
    print("\nex.check with a wrong link (a stepped exercise's first known mistake, trials kept; ms)")
    for name, mistake, ms, score in wrong_link_figures():
        print(f"  {name:<34}{ms:8.1f}  {mistake} ({score})")


if __name__ == "__main__":
    main()
