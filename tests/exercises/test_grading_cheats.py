"""Grading no submission can fool: each cheat that once got full marks now scores 0.

Every test is a student who wants the points without deriving anything. The
file is checked the way ``microtape exercises check`` and ``microtape grade``
check it: the student's code runs in the boxed child, and this process draws
the trials, computes the tape's answers and compares. Each cheat targets
``softmax_backward`` (or ``logsumexp_vjp``); an honest ``dropout_backward``
beside it must keep its point, so a test cannot pass by breaking everything.
"""

import hashlib
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

import microtape
import microtape.exercises as ex
from microtape.cli import exercises as command
from microtape.grading import box as sandbox

PACKAGE = Path(microtape.__file__).resolve().parent
HONEST = """
def dropout_backward(grad_y, mask, p):
    return grad_y * mask / (1 - p)
"""
NAMES = ["softmax_backward", "dropout_backward"]


def _grade(tmp_path, cheat, names=NAMES, **options):
    path = tmp_path / "answers.py"
    path.write_text("import numpy as np\n" + textwrap.dedent(cheat) + HONEST)
    return command.check_file(path, names, timeout=options.pop("timeout", 5.0), **options)


def _points(report, name):
    result = report.results.get(name)
    return 0 if result is None else result.score


def _assert_cheat_fails(report, target="softmax_backward"):
    assert _points(report, target) == 0, report.results.get(target)
    if "import" not in report.not_checked:
        assert _points(report, "dropout_backward") == 1, report.results["dropout_backward"].message


def test_the_box_is_bubblewrap():
    """The isolation these tests rely on (``make test`` installs bubblewrap)."""
    assert sandbox.isolation().startswith("isolation: bubblewrap"), sandbox.isolation()


# ---------------------------------------------------------------- 1. asking the engine for the answer


@pytest.mark.parametrize(
    "cheat",
    [
        """
        import microtape as mt
        def softmax_backward(p, grad_p):
            s = mt.Tensor(np.log(p), requires_grad=True)
            return mt.gradients(s.softmax(-1), grad_p)[s]
        """,
        """
        def softmax_backward(p, grad_p):
            from microtape.exercises.registry import get
            return get("softmax_backward").tape_gradients({"s": np.log(p), "grad_p": grad_p})[0]
        """,
        f"""
        import sys
        sys.path[:0] = [{str(PACKAGE.parent)!r}, {str(Path(os.__file__).parent / "site-packages")!r}]
        def softmax_backward(p, grad_p):
            import microtape.nn.attention.analytic as analytic
            return analytic.softmax_backward(grad_p, p)
        """,
        """
        def softmax_backward(p, grad_p):
            import torch
            s = torch.tensor(np.log(p), requires_grad=True)
            torch.softmax(s, -1).backward(torch.tensor(grad_p))
            return s.grad.numpy()
        """,
    ],
    ids=["mt.gradients", "registry tape_gradients", "analytic via sys.path", "torch"],
)
def test_asking_the_engine_for_the_answer_scores_0(tmp_path, cheat):
    report = _grade(tmp_path, cheat)
    _assert_cheat_fails(report)
    message = report.results["softmax_backward"].message
    assert "not available to graded code" in message or "No module named" in message, message


def test_a_forbidden_import_is_named(tmp_path):
    # Issue #35: an import of microtape's engine costs only the exercises that use it, said in one line.
    report = _grade(tmp_path, "import microtape.engine.tape\n")
    assert "import" not in report.not_checked
    assert report.notes == [
        "uses microtape.engine, which is not in the box (graded code has only the standard library, numpy and "
        "mt.ops.define): an exercise that calls it fails"
    ], report.notes
    inside = _grade(tmp_path, "def softmax_backward(p, grad_p):\n    import torch\n")
    message = inside.results["softmax_backward"].message
    assert "No module named 'torch': graded code has only the standard library, numpy" in message, message


def test_a_notebooks_feedback_calls_run_and_do_nothing_in_the_box(tmp_path):
    """``import microtape.exercises as ex`` and ``ex.check(...)`` cells must not cost a student anything."""
    cheat = """
    import microtape.exercises as ex
    assert ex.check("softmax_backward", None) is None
    def softmax_backward(p, grad_p):
        return ex.score(globals())
    """
    report = _grade(tmp_path, cheat)
    _assert_cheat_fails(report)
    assert (
        "NoneType" in report.results["softmax_backward"].message or "None" in report.results["softmax_backward"].message
    )


# ---------------------------------------------------------------- 2. reading the grader


def test_walking_the_stack_finds_no_expected_values(tmp_path):
    cheat = """
    import sys, inspect, gc
    def softmax_backward(p, grad_p):
        frame = sys._getframe()
        while frame is not None:
            for key in ("expected", "want", "answer"):
                found = frame.f_locals.get(key)
                if found is not None:
                    return np.asarray(found[0] if isinstance(found, list) else found)
            frame = frame.f_back
        for thing in gc.get_objects():  # anything the tape left lying around
            if type(thing).__name__ in ("CheckResult", "Tensor"):
                return thing
        return np.zeros_like(p)
    """
    _assert_cheat_fails(_grade(tmp_path, cheat))


# ---------------------------------------------------------------- 3. patching the grader


def test_patching_numpy_and_the_checker_changes_nothing_here(tmp_path):
    cheat = """
    import numpy
    numpy.allclose = lambda *a, **k: True
    numpy.abs = lambda x: numpy.zeros_like(x)
    numpy.isfinite = lambda x: numpy.ones_like(x, dtype=bool)
    try:
        import microtape.exercises.diagnose as diagnose
        diagnose._agrees = lambda got, want: numpy.ones(numpy.shape(want), dtype=bool)
    except ImportError:
        pass
    def softmax_backward(p, grad_p):
        return p
    """
    _assert_cheat_fails(_grade(tmp_path, cheat))


# ---------------------------------------------------------------- 4. forging the result channel


def test_forging_the_result_channel_then_exiting_scores_0(tmp_path):
    cheat = """
    import os, json
    def softmax_backward(p, grad_p):
        forged = {"event": "result", "name": "softmax_backward", "ok": True, "status": "right",
                  "score": 1, "max_score": 1, "outputs": {"grad_s": True}, "message": "ok", "mistakes": []}
        for fd in range(1, 12):
            try:
                os.write(fd, (json.dumps(forged) + "\\n").encode())
            except OSError:
                pass
        os._exit(0)
    """
    report = _grade(tmp_path, cheat)
    _assert_cheat_fails(report)
    assert report.results["softmax_backward"].status == "not checked"


# ---------------------------------------------------------------- 6. poisoning later submissions


def _package_digest():
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path).encode() + path.read_bytes())
    return digest.hexdigest()


def test_a_poisoning_submission_changes_no_file_and_no_later_grade(tmp_path):
    before = _package_digest()
    checker_file = PACKAGE / "exercises" / "diagnose.py"  # where the checker compares
    cheat = f"""
    import os
    for target in [{str(checker_file)!r}, "/proc/1/root" + {str(checker_file)!r}]:
        try:
            with open(target, "a") as module:
                module.write("\\n_agrees = lambda got, want: got == got\\n")
        except OSError:
            pass
    def softmax_backward(p, grad_p):
        return p
    """
    _assert_cheat_fails(_grade(tmp_path, cheat))
    honest = _grade(tmp_path, "def softmax_backward(p, grad_p):\n    return p * grad_p\n")
    assert _points(honest, "softmax_backward") == 0  # a wrong answer stays wrong after the poisoner
    right = "def softmax_backward(p, grad_p):\n    return p * (grad_p - (grad_p * p).sum(-1, keepdims=True))\n"
    assert _points(_grade(tmp_path, right), "softmax_backward") == 1
    assert _package_digest() == before


# ---------------------------------------------------------------- 7. knowing the hidden trials


def test_a_lookup_table_of_the_visible_answers_fails_the_hidden_trials(tmp_path):
    from microtape.exercises.checker import _trial, _trial_key

    table = []
    for trial in range(len(ex.get("softmax_backward").visible)):
        args, expected, _ = _trial("softmax_backward", False, _trial_key(0, False, None), trial)
        table.append((args[0].tolist(), expected[0].tolist()))
    cheat = f"""
    TABLE = {table!r}
    def softmax_backward(p, grad_p):
        for seen, answer in TABLE:
            if np.shape(seen) == p.shape and np.allclose(seen, p):
                return np.array(answer)
        return np.zeros_like(p)
    """
    assert _points(_grade(tmp_path, cheat), "softmax_backward") == 1  # it does know the visible trials
    _assert_cheat_fails(_grade(tmp_path, cheat, hidden=True, secret="the instructor's own"))


def test_the_hidden_trials_depend_on_the_secret():
    from microtape.exercises.checker import _trial, _trial_key

    def first(secret):
        return _trial("softmax_backward", True, _trial_key(0, True, secret), 0)[0][0]

    assert not np.array_equal(first("one secret"), first("another"))
    assert np.array_equal(first("one secret"), first("one secret"))


# ---------------------------------------------------------------- 8. stopping the grader


def test_signalling_the_grader_reaches_nothing(tmp_path):
    cheat = f"""
    import os, signal
    def softmax_backward(p, grad_p):
        for pid in ({os.getpid()}, os.getppid(), 1):
            for sig in (signal.SIGSTOP, signal.SIGTERM):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        return p
    """
    _assert_cheat_fails(_grade(tmp_path, cheat))


# ---------------------------------------------------------------- 5. forging otter, or whatever records the score


def test_a_notebook_that_forges_the_results_file_and_the_assert_helpers_scores_0(tmp_path):
    """The recorded score never comes from the student's kernel: the notebook's cells run in the box."""
    import json

    from microtape.cli.main import main

    forged = {"score": 24, "tests": [{"name": "softmax_backward", "score": 1, "max_score": 1}]}
    cells = [
        "import numpy as np\nimport microtape.exercises as ex\n",
        "ex.assert_output = ex.assert_right = ex.check = lambda *a, **k: None\n",
        "import otter\ngrader = otter.Notebook()\n",
        "import json, os\n"
        f"for folder in ('/autograder/results', {str(tmp_path / 'results')!r}, '.'):\n"
        "    try:\n"
        "        os.makedirs(folder, exist_ok=True)\n"
        f"        json.dump({forged!r}, open(os.path.join(folder, 'results.json'), 'w'))\n"
        "    except OSError:\n"
        "        pass\n",
        "def softmax_backward(p, grad_p):\n    return p\n",
    ]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": []} for c in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "lab.ipynb").write_text(json.dumps(notebook))
    results = tmp_path / "results.json"
    argv = ["grade", str(folder), "--secret", str(_secret(tmp_path)), "--gradescope", str(results),
            "--out", str(tmp_path / "grades"), "--name", "softmax_backward", "--timeout", "3"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(results.read_text())
    assert report["score"] == 0 and report["tests"][0]["score"] == 0, report
    assert not (tmp_path / "results" / "results.json").exists()  # the box cannot write outside itself


def _secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("3f6b0c5e9a8d7e21c4b5a6f70819a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3\n")  # 256 random-looking bits
    return path


def test_the_box_has_no_network(tmp_path):
    """A submission that could reach this machine (or anywhere) could fetch answers: it reaches nothing."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        cheat = f"""
        import socket
        def softmax_backward(p, grad_p):
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
            except OSError:
                return np.zeros_like(p)  # no way out: nothing to fetch
            return p * (grad_p - (grad_p * p).sum(-1, keepdims=True))
        """
        _assert_cheat_fails(_grade(tmp_path, cheat))
