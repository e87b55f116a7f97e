"""`microtape exercises check FILE`: student code runs in a child process, every way out is accounted for.

The old command imported the file in its own process: a file that called
``sys.exit(0)`` made it exit 0 ("all correct"). Now the exit status is 0 only
when every checked exercise returned a right answer; code that exits, is
interrupted, loops or kills its process is *not checked* (exit status 3).
"""

import argparse
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import microtape.exercises as ex
from microtape.cli import exercises as command

ROOT = Path(__file__).resolve().parents[2]
NAMES = ex.list_exercises()

RIGHT_SOFTMAX = """
def softmax_backward(p, grad_p):
    return p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True))
"""
RIGHT_DROPOUT = """
def dropout_backward(grad_y, mask, p):
    return grad_y * mask / (1 - p)
"""


def _write(tmp_path, body, name="answers.py"):
    path = tmp_path / name
    path.write_text("import numpy as np\nimport sys\n" + textwrap.dedent(body))
    return path


def _run(*argv):
    parser = argparse.ArgumentParser(prog="microtape")
    sub = parser.add_subparsers(dest="command")
    command.add_arguments(sub.add_parser("exercises"))
    return command.run(parser.parse_args(["exercises", *argv]))


def _cli(*argv, timeout=60):
    """The real command line, as a grading script would call it."""
    return subprocess.run(
        [sys.executable, "-m", "microtape", "exercises", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_command_list(capsys):
    assert _run("list") == 0
    out = capsys.readouterr().out
    positions = [out.index(f"{name}(") for name in NAMES]
    assert positions == sorted(positions)  # the order of the lab
    assert "(stretch)" in out
    assert _run() == 0  # list is the default


def test_help_documents_the_exit_codes():
    done = _cli("check", "--help")
    assert done.returncode == 0
    for code, meaning in command.EXIT_CODES.items():
        assert f"{code}  {meaning}" in done.stdout
    assert "--timeout SECONDS" in done.stdout
    for code in command.EXIT_CODES:
        assert f"* {code} —" in command.__doc__


def test_a_right_file_exits_0(tmp_path, capsys):
    path = _write(tmp_path, RIGHT_SOFTMAX + RIGHT_DROPOUT)
    assert _run("check", str(path)) == 0
    out = capsys.readouterr().out
    assert "✓ softmax_backward" in out and "✓ dropout_backward" in out
    assert "2 of 2 exercises correct" in out
    assert "total" in out and "2 / 2" in out  # the score table


def test_a_wrong_or_partly_right_file_exits_1_with_hints_and_partial_credit(tmp_path, capsys):
    path = _write(
        tmp_path,
        RIGHT_SOFTMAX
        + textwrap.dedent(
            """
            def dropout_backward(grad_y, mask, p):
                return grad_y * mask          # forgot the scale

            def linear_backward(x, weight, grad_y):
                return grad_y @ weight, grad_y.T @ x, grad_y   # bias not summed

            def helper():                     # not an exercise: ignored
                return 1
            """
        ),
    )
    assert _run("check", str(path)) == 1
    out = capsys.readouterr().out
    assert "✓ softmax_backward" in out and "✗ dropout_backward" in out
    assert "dropout scale missing" in out and "1 of 3 exercises correct" in out
    (row,) = [line for line in out.splitlines() if line.startswith("linear_backward ")]
    assert "partly right" in row and "2 / 3" in row and "not yet: grad_bias" in row

    assert _run("check", str(path), "--name", "softmax_backward") == 0
    assert "1 of 1 exercise correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    "body",
    [
        "sys.exit(0)\n" + RIGHT_SOFTMAX,
        "exit()\n" + RIGHT_SOFTMAX,
        RIGHT_SOFTMAX + "raise SystemExit\n",
        RIGHT_SOFTMAX + "raise KeyboardInterrupt\n",
    ],
    ids=["sys.exit(0)", "exit()", "SystemExit", "KeyboardInterrupt"],
)
def test_a_file_that_leaves_at_import_is_not_checked(tmp_path, capsys, body):
    assert _run("check", str(_write(tmp_path, body))) == 3
    out = capsys.readouterr().out
    assert "not checked" in out and "correct" not in out.replace("exercises correct", "")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("sys.exit(0)", "called exit() or sys.exit(0)"),
        ("exit()", "called exit() or sys.exit("),
        ("raise KeyboardInterrupt", "raised KeyboardInterrupt"),
        ("import os; os._exit(0)", "the process ended"),
    ],
    ids=["sys.exit(0)", "exit()", "KeyboardInterrupt", "os._exit(0)"],
)
def test_a_function_that_leaves_without_returning_is_not_checked(tmp_path, capsys, body, words):
    path = _write(tmp_path, f"def dropout_backward(grad_y, mask, p):\n    {body}\n" + RIGHT_SOFTMAX)
    assert _run("check", str(path)) == 3
    out = capsys.readouterr().out
    assert words in out
    (row,) = [line for line in out.splitlines() if line.startswith("dropout_backward ")]
    assert "not checked" in row and "0 / 1" in row
    if "os._exit" not in body:  # the other exercises are still checked
        assert "✓ softmax_backward" in out


def test_the_real_command_line_exits_non_zero_on_sys_exit_0(tmp_path):
    at_import = _write(tmp_path, "sys.exit(0)\n" + RIGHT_SOFTMAX, "at_import.py")
    in_function = _write(tmp_path, "def softmax_backward(p, grad_p):\n    sys.exit(0)\n", "in_function.py")
    for path in (at_import, in_function):
        done = _cli("check", str(path))
        assert done.returncode == 3, done.stdout + done.stderr
        assert "not checked" in done.stdout


def test_a_function_that_never_returns_is_stopped_by_the_time_limit(tmp_path, capsys):
    path = _write(tmp_path, "def softmax_backward(p, grad_p):\n    while True:\n        pass\n" + RIGHT_DROPOUT)
    # 3 s, not 1: the budget also covers the dropout trials after the restart, which on a
    # loaded 2-core machine can take more than a second in all (a flaky failure, seen once).
    started = time.monotonic()
    assert _run("check", str(path), "--timeout", "3") == 3
    assert time.monotonic() - started < 20
    out = capsys.readouterr().out
    assert "did not return within 3 s" in out
    assert "✓ dropout_backward" in out  # checked after the loop was stopped


def test_a_file_that_loops_at_import_is_stopped(tmp_path, capsys):
    path = _write(tmp_path, "while True:\n    pass\n" + RIGHT_SOFTMAX)
    assert _run("check", str(path), "--timeout", "1") == 3
    assert "longer than 1 s" in capsys.readouterr().out


def test_a_loop_that_swallows_the_alarm_is_killed_by_the_parent(tmp_path):
    path = _write(
        tmp_path,
        """
        def softmax_backward(p, grad_p):
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass
        """,
    )
    started = time.monotonic()
    report = command.check_file(path, ["softmax_backward"], timeout=0.5)
    assert time.monotonic() - started < 10
    result = report.results["softmax_backward"]
    assert result.status == "not checked"
    assert "did not return within 0.5 s" in result.message


def test_print_and_return_nothing_is_wrong_not_right(tmp_path, capsys):
    path = _write(
        tmp_path,
        """
        print("✓ softmax_backward: correct — 1 of 1 exercise correct.")

        def softmax_backward(p, grad_p):
            print("the answer is", p.sum())
        """,
    )
    assert _run("check", str(path)) == 1
    captured = capsys.readouterr()
    assert "returned None — is the `return` missing?" in captured.out
    assert "0 of 1 exercise correct" in captured.out
    # What the student printed is shown apart, never mixed into the verdicts.
    assert "what your code printed" in captured.err and "| the answer is" in captured.err
    assert "the answer is" not in captured.out


def test_usage_errors_exit_2_and_missing_functions_exit_1(tmp_path, capsys):
    assert _run("check", str(tmp_path / "missing.py")) == 2
    assert "no such file" in capsys.readouterr().err
    empty = _write(tmp_path, "x = 1\n", "empty.py")
    assert _run("check", str(empty), "--name", "nope") == 2
    assert "no exercise named 'nope'" in capsys.readouterr().err
    assert _run("check", str(empty), "--timeout", "0") == 2
    assert "--timeout must be a positive number" in capsys.readouterr().err
    assert _run("check", str(empty)) == 1
    assert "defines none of the exercise functions" in capsys.readouterr().err
    assert _run("check", str(empty), "--name", "softmax_backward") == 1
    assert "does not define softmax_backward" in capsys.readouterr().err


def test_a_syntax_error_is_not_checked(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def softmax_backward(p, grad_p)\n    return p\n")
    assert _run("check", str(broken)) == 3
    assert "SyntaxError (line 1)" in capsys.readouterr().out


def test_command_stub_round_trip(tmp_path, capsys):
    assert _run("stub") == 0
    starter = tmp_path / "starter.py"
    starter.write_text(capsys.readouterr().out)
    # Fresh stubs all fail as "not written yet"; the exit status says so.
    assert _run("check", str(starter)) == 1
    out = capsys.readouterr().out
    assert out.count("not written yet") == len(NAMES)
    assert out.count("not started") >= len(NAMES)


def test_no_student_facing_flag_reaches_the_hidden_trials(tmp_path, capsys):
    path = _write(tmp_path, RIGHT_SOFTMAX)
    with pytest.raises(SystemExit) as stopped:
        _run("check", str(path), "--hidden")
    assert stopped.value.code == 2
    assert "--hidden" in capsys.readouterr().err
    with pytest.raises(ValueError, match="teacher's secret"):
        ex.check("softmax_backward", lambda p, grad_p: p, hidden=True)


def test_every_reference_solution_is_right_in_the_box(capsys):
    """The instructor's solutions file, checked as a student's file: numbers cross the box as they are.

    (A numpy scalar argument — ``ans`` of a 1-d logsumexp — once arrived as a
    Python float, and a right answer failed.)
    """
    right = 0
    for solutions in sorted((ROOT / "instructor").glob("solutions*.py")):  # each file on its own, as a student's
        assert _run("check", str(solutions)) == 0, solutions.name
        right += capsys.readouterr().out.count("✓")
    assert right == len(NAMES)


def test_without_bubblewrap_the_command_says_so(tmp_path, capsys, monkeypatch):
    """Only the limits, no namespaces: said on stderr, and the student's own file is still checked."""
    from microtape.grading import box as sandbox

    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    path = _write(tmp_path, RIGHT_SOFTMAX)
    status = _run("check", str(path))
    captured = capsys.readouterr()
    assert "isolation: resource limits and an own session only" in captured.err
    assert status == 0


# Right only when the child runs under the box's CPU-time limit (120 s): the limits are really set.
RIGHT_WHEN_LIMITED = """
import resource
LIMITED = resource.getrlimit(resource.RLIMIT_CPU)[0] == 120

def softmax_backward(p, grad_p):
    return p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True)) if LIMITED else p
"""


def test_without_bubblewrap_and_prlimit_the_self_check_runs_with_python_s_limits(tmp_path, capsys, monkeypatch):
    """A Mac or a bare container: no bwrap, no prlimit; the resource module sets the limits, said once."""
    from microtape.grading import box as sandbox

    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    monkeypatch.setattr(sandbox, "_prlimit", lambda: None)
    path = _write(tmp_path, RIGHT_WHEN_LIMITED)
    status = _run("check", str(path), "--name", "softmax_backward")
    captured = capsys.readouterr()
    assert status == 0, captured.out
    assert captured.err.count("self-check: your file runs in a child process with the limits of Python's resource") == 1
    # The same file where the limits are not set (prlimit would set them): the check sees it.
    monkeypatch.setattr(sandbox.Sandbox, "_resource_limited", lambda self: None)
    assert _run("check", str(path), "--name", "softmax_backward") == 1


def test_without_prlimit_or_the_resource_module_the_self_check_runs_unlimited_and_says_so(
    tmp_path, capsys, monkeypatch
):
    """Windows has no resource module: the file still runs (the time limit stays), and the line says so."""
    from microtape.grading import box as sandbox

    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    monkeypatch.setattr(sandbox, "_prlimit", lambda: None)
    monkeypatch.setattr(sandbox, "_resource_module", lambda: None)
    path = _write(tmp_path, RIGHT_SOFTMAX)
    status = _run("check", str(path), "--name", "softmax_backward")
    captured = capsys.readouterr()
    assert status == 0, captured.out
    assert captured.err.count("with no limits but the time limit") == 1


def _as_on_windows(monkeypatch):
    """What Windows lacks, taken away here: bwrap, prlimit, the resource module, and pipes passed by number
    (so the child talks over its stdin and stdout, watched by threads instead of ``select``)."""
    from microtape.grading import box as sandbox

    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    monkeypatch.setattr(sandbox, "_prlimit", lambda: None)
    monkeypatch.setattr(sandbox, "_resource_module", lambda: None)
    monkeypatch.setattr(sandbox, "_posix_pipes", lambda: False)
    started = []
    real = sandbox.Sandbox._popen_stdio
    monkeypatch.setattr(sandbox.Sandbox, "_popen_stdio", lambda self, *a: started.append(a) or real(self, *a))
    return started


def test_the_self_check_runs_over_stdin_and_stdout_where_pipes_cannot_be_passed(tmp_path, capsys, monkeypatch):
    """Windows: the child's own stdin and stdout are the pipes; what the student prints does not reach them."""
    started = _as_on_windows(monkeypatch)
    chatty = """
    print("loading, " * 5000)
    sys.stdout.write("x" * 100000)
    def softmax_backward(p, grad_p):
        print("a call", p.shape)
        return p * (grad_p - np.sum(grad_p * p, axis=-1, keepdims=True))
    """
    path = _write(tmp_path, textwrap.dedent(chatty) + RIGHT_DROPOUT)
    status = _run("check", str(path), "--name", "softmax_backward", "--name", "dropout_backward", "--trials", "40")
    captured = capsys.readouterr()
    assert status == 0, captured.out
    assert started and "with no limits but the time limit" in captured.err
    assert "2 of 2 exercises correct" in captured.out


def test_over_stdin_and_stdout_a_slow_or_vanishing_function_costs_only_its_exercise(tmp_path, capsys, monkeypatch):
    started = _as_on_windows(monkeypatch)
    body = """
    import os, time
    def softmax_backward(p, grad_p):
        time.sleep(30)
    def dropout_backward(grad_y, mask, p):
        os._exit(3)
    def tanh_layer_backward(x, weight, bias, grad_h):
        raise ValueError("not this way")
    """
    path = _write(tmp_path, textwrap.dedent(body))
    names = ["--name", "softmax_backward", "--name", "dropout_backward", "--name", "tanh_layer_backward"]
    assert _run("check", str(path), *names, "--timeout", "1") == 3  # not every exercise could be checked
    out = capsys.readouterr().out
    assert "did not return within 1 s" in out
    assert "exit status 3" in out
    assert "ValueError" in out and "not this way" in out
    assert len(started) >= 2  # a box restarted after each one that was killed or ended


def test_graded_runs_refuse_without_prlimit(tmp_path, monkeypatch):
    """Hidden trials are a grade: without the limits' tool the code is not run at all."""
    from microtape.grading import box as sandbox
    from microtape.grading.submission import check_file

    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    monkeypatch.setattr(sandbox, "_prlimit", lambda: None)
    path = _write(tmp_path, RIGHT_SOFTMAX)
    report = check_file(path, ["softmax_backward"], hidden=True, secret="s" * 32)
    assert "refusing to run graded code without prlimit" in report.not_checked["import"]
    assert not report.results
