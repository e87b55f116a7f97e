"""`microtape grade`, round 2 (issue #35): one submission never stops a class, the box holds, nothing leaks.

Each case is a file a determined student handed in, graded by the command a
teacher runs, next to a right answer that must keep its marks.
"""

import csv
import json
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from microtape.cli.main import main
from microtape.exercises.checker import _trial, _trial_key
from microtape.exercises.registry import get
from microtape.grading import box, gradebook, remote
from microtape.grading.boxed import wire
from microtape.grading.gradebook import TOTAL

pytestmark = pytest.mark.skipif(box._bwrap() is None, reason="needs bubblewrap (make sandbox)")

NAMES = ["softmax_backward", "dropout_backward"]
RIGHT = """
import numpy as np

def softmax_backward(p, grad_p):
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))

def dropout_backward(grad_y, mask, p):
    return grad_y * mask / (1 - p)
"""
# Writes a forged reply on the child's own reply pipe (its number is on the command line).
FORGE = """
import os, struct, sys
def _forge(head, tail=b""):
    fd = int(sys.argv[sys.argv.index("--fds") + 2])
    os.write(fd, struct.pack(">I", len(head)) + head + tail)
    os._exit(0)
"""


def _notebook(*cells):
    cells = [{"cell_type": "code", "metadata": {}, "source": textwrap.dedent(c), "outputs": []} for c in cells]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(secrets.token_hex(32) + "\n")  # what `make assignment` writes
    return path


def _grade_folder(tmp_path, files, *extra, timeout="2"):
    """Grade ``files`` ({name: text or bytes}) with the real command; (exit status, run folder, rows, printed)."""
    folder = tmp_path / "handed_in"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        path = folder / os.fsdecode(name) if isinstance(name, bytes) else folder / name
        (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    out = tmp_path / "grades"
    argv = ["grade", str(folder), "--out", str(out), "--timeout", timeout, "--secret", str(_secret(tmp_path)),
            "--name", "softmax_backward", "--name", "dropout_backward", *extra]  # fmt: skip
    status = main(argv)
    run = sorted(out.iterdir())[-1]
    rows = list(csv.DictReader((run / "gradebook.csv").open(encoding="utf-8")))
    return status, run, [row for row in rows if row["exercise"] != TOTAL]  # the exercise rows, not the totals


def _points(rows):
    """Each student's points, from the gradebook's exercise rows (not its per-student total row)."""
    points = {}
    for row in rows:
        if row["exercise"] != TOTAL:
            points[row["student"]] = points.get(row["student"], 0) + int(row["points"])
    return points


# ---------------------------------------------------------------- one file can no longer stop the class


def test_forged_replies_and_deep_json_cost_only_their_own_submission(tmp_path, capsys):
    files = {
        "ada.py": RIGHT,
        "notes5.py": FORGE + '_forge(b\'{"event": "loaded", "defined": {}, "notes": 5}\')\n',
        "deepreply.py": FORGE + "_forge(b'[' * 100000 + b']' * 100000)\n",
        "deepnb.ipynb": '{"cells": ' + "[" * 50000 + "]" * 50000 + "}",
    }
    status, run, rows = _grade_folder(tmp_path, files)
    assert status == 0
    assert _points(rows) == {"ada": 2, "notes5": 0, "deepreply": 0, "deepnb": 0}
    messages = {row["student"]: row["message"] for row in rows}
    assert "nested" in messages["deepnb"] and "nested" in messages["deepreply"]
    assert sorted(p.name for p in run.glob("*.json")) == ["ada.json", "deepnb.json", "deepreply.json", "notes5.json"]


def test_an_array_declaring_a_huge_shape_is_refused_before_allocation(tmp_path):
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3))
    forged = buffer.getvalue().replace(b"(3,)", b"(100000000000000,)")
    head = json.dumps({"event": "returned", "kind": "single", "items": [{"array": 0}], "arrays": 1}).encode()
    with pytest.raises(wire.WireError, match="declaring shape"):
        wire.read_message(
            io.BytesIO(len(head).to_bytes(4, "big") + head + len(forged).to_bytes(8, "big") + forged).read
        )
    text = (
        RIGHT
        + FORGE
        + f"""
def softmax_backward(p, grad_p):
    _forge({head!r}, {len(forged).to_bytes(8, "big") + forged!r})
"""
    )
    status, _, rows = _grade_folder(tmp_path, {"ada.py": RIGHT, "huge.py": text})
    assert _points(rows) == {"ada": 2, "huge": 1}
    assert "not checked" in next(
        row["message"] for row in rows if row["exercise"] == "softmax_backward" and row["student"] == "huge"
    )


def test_a_reply_of_many_large_arrays_is_bounded_as_a_whole(monkeypatch):
    import io

    monkeypatch.setattr(wire, "MAX_MESSAGE", 1 << 20)  # the same rule, at a size a test can send quickly
    data = wire.encode({"x": 1}, [np.zeros((1 << 20) // 8 - 100)] * 3)
    with pytest.raises(wire.WireError, match="MB in one message"):
        wire.read_message(io.BytesIO(data).read)


def test_lone_surrogates_long_and_non_utf8_names_are_graded_and_written(tmp_path, capsys):
    files = {
        "ada.py": RIGHT,
        "atload.py": 'raise RuntimeError("\\ud800")\n',
        "inexercise.py": RIGHT + '\ndef softmax_backward(p, grad_p):\n    raise RuntimeError("\\ud800")\n',
        "cell.ipynb": _notebook(RIGHT, 'raise RuntimeError("\\ud800")'),
        "x" * 252 + ".py": RIGHT,
        b"mal\xffory.py": RIGHT,
    }
    status, run, rows = _grade_folder(tmp_path, files)
    assert status == 0
    points = _points(rows)
    assert points["ada"] == 2 and points["atload"] == 0 and points["inexercise"] == 1 and points["cell"] == 2
    assert points["x" * 252] == 2 and points["mal\\udcffory"] == 2
    assert len(list(run.glob("*.json"))) == 6
    for path in run.glob("*.json"):
        json.loads(path.read_text(encoding="utf-8"))  # every file is valid UTF-8 JSON


def test_a_failure_of_the_grader_on_one_submission_is_its_not_graded_row(tmp_path, monkeypatch, capsys):
    real = gradebook.check_file

    def flaky(path, *args, **kwargs):
        if Path(path).stem == "bob":
            raise RuntimeError("the grader broke on this one")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(gradebook, "check_file", flaky)
    status, run, rows = _grade_folder(tmp_path, {"ada.py": RIGHT, "bob.py": RIGHT, "cy.py": RIGHT})
    assert status == 1  # some submission was not graded: said, and the exit status says so
    assert _points(rows) == {"ada": 2, "bob": 0, "cy": 2}
    assert all(
        row["message"].startswith("✗") and "not graded" in row["message"] for row in rows if row["student"] == "bob"
    )
    assert "not graded — bob" in capsys.readouterr().out


def test_results_are_written_as_they_come_and_a_rerun_resumes(tmp_path, monkeypatch):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("ada", "bob"):
        (folder / f"{name}.py").write_text(RIGHT)
    out = tmp_path / "out"
    run = gradebook._new_run_folder(out)
    real = gradebook.grade_one

    def crash_on_bob(path, *args, **kwargs):
        if Path(path).stem == "bob":
            raise KeyboardInterrupt  # the grader dies mid-class
        return real(path, *args, **kwargs)

    monkeypatch.setattr(gradebook, "grade_one", crash_on_bob)
    secret = secrets.token_hex(32)
    with pytest.raises(KeyboardInterrupt):
        gradebook.grade_folder(folder, NAMES, secret=secret, timeout=2.0, out=run)
    first = json.loads((run / "ada.json").read_text())  # ada's result was already on disk
    assert first["total"] == 2
    graded_again = []
    monkeypatch.setattr(
        gradebook, "grade_one", lambda path, *a, **k: graded_again.append(path.stem) or real(path, *a, **k)
    )
    earlier = gradebook._earlier_grades(out, NAMES, secret, 2.0)
    run2 = gradebook._new_run_folder(out)
    graded = gradebook.grade_folder(folder, NAMES, secret=secret, timeout=2.0, out=run2, resume=earlier)
    assert graded_again == ["bob"] and [g.total for g in graded] == [2, 2]
    assert json.loads((run2 / "ada.json").read_text())["seconds"] == first["seconds"]
    # Another secret: nothing is reused.
    assert (
        gradebook._earlier_grades(out, NAMES, secrets.token_hex(32), 2.0)
        .keys()
        .isdisjoint({gradebook.fingerprint(folder / "ada.py", NAMES, secret, 2.0)} - set(earlier))
    )
    assert gradebook.fingerprint(folder / "ada.py", NAMES, secrets.token_hex(32), 2.0) not in earlier


# ---------------------------------------------------------------- nothing of the hidden trials leaks


def test_hidden_trials_leak_nothing_through_errors_printing_or_values(tmp_path):
    body = (
        RIGHT
        + """
import base64
def softmax_backward(p, grad_p):
    print("PRINTED", base64.b64encode(p[:2].tobytes()).decode())
    raise ValueError("LEAKED " + base64.b64encode(p[:2].tobytes()).decode())

def dropout_backward(grad_y, mask, p):
    return grad_y + 12345.678901
"""
    )
    gradescope = tmp_path / "results.json"
    status, run, rows = _grade_folder(tmp_path, {"eve.py": body}, "--gradescope", str(gradescope))
    everything = "".join(path.read_text(encoding="utf-8") for path in run.iterdir()) + gradescope.read_text()
    assert "LEAKED" not in everything and "PRINTED" not in everything and "12345" not in everything
    assert "raised ValueError" in everything and "dropout_backward" in everything
    assert "grad_x differs from the tape's answer on a hidden trial" in everything


def test_a_guessable_or_binary_secret_is_refused_naming_secret(tmp_path, capsys):
    (tmp_path / "ada.py").write_text(RIGHT)
    phrase = "kept by the teacher, who alone knows it"
    for text in ("fall2025", "fall2025" * 8, "a" * 64, phrase, b"\xff\xfe\x00binary"):
        path = tmp_path / "weak.txt"
        (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
        assert main(["grade", str(tmp_path), "--secret", str(path), "--out", str(tmp_path / "o")]) == 2
        assert "--secret" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert gradebook.secret_bits(secrets.token_hex(16)) >= 128  # 128 random bits pass
    assert gradebook.secret_bits("xtyxODDKS_zG7bG6xB-Nzw_0RaYHTw") >= 128  # a token_urlsafe(22)


def test_each_students_hidden_trials_are_their_own(tmp_path):
    secret = secrets.token_hex(32)
    keys = [_trial_key(0, True, secret, name) for name in ("ada", "bob")]
    a, b = (_trial("softmax_backward", True, key, 0)[0][0] for key in keys)
    assert a.shape == b.shape and not np.allclose(a, b)
    # and grade_one passes the student's name down (the file's stem)
    seen = []
    real = gradebook.check_file
    monkey = lambda path, names, **kw: seen.append(kw["student"]) or real(path, names, **kw)  # noqa: E731
    gradebook.check_file = monkey
    try:
        gradebook.grade_one(_write(tmp_path, "zoe.py", RIGHT), ["dropout_backward"], secret=secret, timeout=2.0)
    finally:
        gradebook.check_file = real
    assert seen == ["zoe"]


# ---------------------------------------------------------------- the teacher's screen and gradebook


def test_terminal_escapes_are_printed_escaped(tmp_path, capsys):
    fake = "\\x1b[1A\\x1b[2K ada  1  1  26 / 26"
    body = RIGHT + f'\ndef softmax_backward(p, grad_p):\n    raise RuntimeError("{fake}")\n'
    notebook = _notebook(RIGHT, f'raise RuntimeError("{fake}")')
    status, run, rows = _grade_folder(tmp_path, {"mallory.py": body, "nb.ipynb": notebook, "x\x1b[2Ky.py": RIGHT})
    printed = capsys.readouterr()
    assert "\x1b" not in printed.out + printed.err
    assert "\\x1b[2K" in printed.out  # shown, escaped
    for path in run.iterdir():
        assert "\x1b" not in path.read_text(encoding="utf-8")


def test_two_files_for_one_student_are_refused_by_name_and_formulas_neutralised(tmp_path, capsys):
    files = {"bob.py": RIGHT, "bob.ipynb": _notebook(RIGHT), '=HYPERLINK("x.y","a").py': RIGHT, "ada.py": RIGHT}
    status, run, rows = _grade_folder(tmp_path, files)
    bob = [row for row in rows if row["student"] == "bob"]
    assert len(bob) == 2 and all("bob.ipynb and bob.py" in row["message"] for row in bob)
    assert all(row["points"] == "0" for row in bob)
    formula = [row for row in rows if "HYPERLINK" in row["student"]]
    assert formula and all(row["student"].startswith("'=") for row in formula)
    assert "bob.ipynb and bob.py" in capsys.readouterr().out


# ---------------------------------------------------------------- the box holds

PROBE = (
    RIGHT
    + """
import ctypes, errno, os, resource, socket
libc = ctypes.CDLL(None, use_errno=True)

def _errno(result):
    return 0 if result != -1 else ctypes.get_errno()

def probe():
    found = {}
    found["unshare"] = _errno(libc.unshare(0x10000000 | 0x00020000))  # CLONE_NEWUSER | CLONE_NEWNS
    found["unshare_net"] = _errno(libc.unshare(0x10000000 | 0x40000000))
    found["mount"] = _errno(libc.mount(b"none", b"/work", b"tmpfs", 0, None))
    found["ptrace"] = _errno(libc.ptrace(16, 1, None, None))  # PTRACE_ATTACH to the box's first process
    found["keyctl"] = _errno(libc.syscall(250, 0, 0, 0, 0, 0))
    found["bpf"] = _errno(libc.syscall(321, 0, 0, 0))
    for name, args in {"packet": (17, 3, 0), "raw": (2, 3, 1)}.items():
        try:
            socket.socket(*args).close()
            found[name] = 0
        except OSError as error:
            found[name] = error.errno
    pid = os.fork()  # an ordinary fork still works (a numpy function may use one)
    if pid == 0:
        os._exit(7)
    found["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    found["nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    found["uid"] = os.getuid()
    return np.array(list(found.values()), dtype=float), list(found)
"""
)


def _call_probe(tmp_path, text, name="probe"):
    path = tmp_path / "probe.py"
    path.write_text(text)
    with remote.BoxedSubmission.from_file(path, [name], load_seconds=5) as submission:
        assert not submission.load_error, submission.load_error
        returned = submission.call(name, [], 10)
    return returned


def test_inside_the_box_namespaces_mounts_tracing_raw_sockets_keys_and_bpf_are_refused(tmp_path):
    text = PROBE.replace("return np.array(list(found.values()), dtype=float), list(found)",
                         "return np.array(list(found.values()), dtype=float)")  # fmt: skip
    values = _call_probe(tmp_path, text)
    keys = ["unshare", "unshare_net", "mount", "ptrace", "keyctl", "bpf", "packet", "raw", "fork", "nproc", "uid"]
    found = dict(zip(keys, values.tolist(), strict=True))
    for call in keys[:8]:
        assert found[call] != 0, f"{call} succeeded in the box"
    assert found["unshare"] == found["mount"] == found["keyctl"] == found["bpf"] == 1  # EPERM, by the filter
    assert found["fork"] == 7 and found["nproc"] == box.Limits().processes
    assert found["uid"] not in (0, box.NOBODY)
    again = _call_probe(tmp_path, text)
    assert again[-1] != found["uid"]  # each box a user of its own


def test_the_box_shows_only_the_standard_library_and_numpy_even_from_a_system_prefix(tmp_path, monkeypatch):
    """The Gradescope layout: a venv made from /usr's Python, so the prefix is /usr."""
    if (
        not Path("/usr/lib/python3/dist-packages").is_dir()
        or not Path(f"/usr/bin/python3.{sys.version_info.minor}").exists()
    ):
        pytest.skip("no system Python of this version with a dist-packages folder")
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    python = f"/usr/bin/python3.{sys.version_info.minor}"
    command, _ = box._bwrap_command(box._bwrap(), python, box.Limits(), box.fresh_uid(), None)
    command = command[: command.index(python) + 1]
    script = ("import os, sys, json; sys.path.append('/usr/lib/python3/dist-packages'); "
              "where = '/usr/lib/python3/dist-packages'; "
              "print(sorted(os.listdir(where)) if os.path.isdir(where) else []); import yaml")  # fmt: skip
    done = subprocess.run([*command, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    assert "No module named 'yaml'" in done.stderr


def test_a_box_that_cannot_start_is_retried_then_an_error_of_the_grader(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(box, "START_SECONDS", 2.0)
    monkeypatch.setattr(box, "_environment", lambda: {"PYTHONPATH": "/nonexistent", "PATH": "/nothing"})
    real = box._bwrap_command
    monkeypatch.setattr(box, "_bwrap_command", lambda b, p, *a: real(b, "/bin/false", *a))
    status, run, rows = _grade_folder(tmp_path, {"ada.py": RIGHT})
    assert status == 1
    assert all("not graded — could not start the box" in row["message"] for row in rows), rows
    assert "could not start the box" in capsys.readouterr().out


def test_many_slow_cells_share_one_load_budget_and_a_slow_submission_gets_a_took_too_long_row(tmp_path, monkeypatch):
    cells = [RIGHT] + ["import time\ntime.sleep(0.3)"] * 40
    started = __import__("time").monotonic()
    graded = gradebook.grade_one(_write(tmp_path, "slow.ipynb", _notebook(*cells)), NAMES, secret="s" * 64, timeout=1.0)
    assert __import__("time").monotonic() - started < 15
    assert graded.total == 2 and any("not run: the notebook used up its 1 s" in note for note in graded.notes)
    monkeypatch.setattr(gradebook, "SUBMISSION_MARGIN", 0.0)
    slow = RIGHT + (
        "\nimport time\n_r = softmax_backward\n"
        "def softmax_backward(p, grad_p):\n    time.sleep(0.3)\n    return _r(p, grad_p)\n"
    )
    graded = gradebook.grade_one(_write(tmp_path, "slow.py", slow), NAMES, secret="s" * 64, timeout=0.5)
    assert "took too long" in graded.results["softmax_backward"].message, graded.feedback()


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- honest work keeps its marks; smuggling costs


def test_honest_files_keep_their_marks(tmp_path):
    black = _notebook(
        "import numpy as np\n",
        "def softmax_backward(p, grad_p):\n    s = (grad_p * p).sum(\n        axis=-1, keepdims=True\n    )\n"
        "    assert (\n        p.shape\n        != ()\n    )\n    return p * (grad_p - s)\n",
        "def dropout_backward(grad_y, mask, p):\n    label = (\n        '%s'\n        % 'scaled'\n    )\n"
        "    return grad_y * mask / (1 - p)\n",
    )
    vjp_list = """
import numpy as np
import microtape as mt
from microtape.exercises.lab.op_vjp import logsumexp_forward

def logsumexp_vjp(g, ans, x):
    return [np.exp(x - ans[..., None]) * g[..., None]]

mt.ops.define("logsumexp", forward=logsumexp_forward, vjp=logsumexp_vjp)

if __name__ == "__main__":
    mt.check.gradcheck(lambda x: x.exp().sum(), np.ones(3))
"""
    assert gradebook.grade_one(_write(tmp_path, "bom.py", "\ufeff" + RIGHT), NAMES, secret="s" * 64).total == 2
    assert gradebook.grade_one(_write(tmp_path, "black.ipynb", black), NAMES, secret="s" * 64).total == 2
    graded = gradebook.grade_one(_write(tmp_path, "vjp.py", vjp_list), ["logsumexp_vjp"], secret="s" * 64)
    assert graded.total == graded.max_total, graded.feedback()
    uses = "import numpy as np\nfrom microtape.check import gradcheck\n" + RIGHT + (
        "\ndef dropout_backward(grad_y, mask, p):\n    return gradcheck(grad_y)\n")  # fmt: skip
    graded = gradebook.grade_one(_write(tmp_path, "uses.py", uses), NAMES, secret="s" * 64)
    assert graded.results["softmax_backward"].score == 1 and graded.results["dropout_backward"].score == 0
    assert any("microtape.check, which is not in the box" in note for note in graded.notes), graded.notes


def test_a_smuggled_library_is_over_the_source_limit(tmp_path):
    big = RIGHT + "\n_blob = '" + "A" * (300 << 10) + "'\n"
    graded = gradebook.grade_one(_write(tmp_path, "zipped.py", big), NAMES, secret="s" * 64)
    assert graded.total == 0 and "at most 256 KB" in graded.load_error


# ---------------------------------------------------------------- the command line (issue #37)


@pytest.mark.parametrize("timeout", ["inf", "1e12", "nan"])
def test_an_unbounded_timeout_is_a_usage_error(tmp_path, timeout, capsys):
    (tmp_path / "ada.py").write_text(RIGHT)
    assert main(["grade", str(tmp_path), "--timeout", timeout, "--out", str(tmp_path / "o")]) == 2
    assert main(["exercises", "check", str(tmp_path / "ada.py"), "--timeout", timeout]) == 2
    assert capsys.readouterr().err.count("--timeout must be") == 2


def test_output_paths_are_checked_before_any_submission_runs(tmp_path, capsys):
    (tmp_path / "ada.py").write_text(RIGHT)
    secret = _secret(tmp_path)
    for option in ("--csv", "--gradescope"):
        argv = ["grade", str(tmp_path), "--secret", str(secret), "--out", str(tmp_path / "o"),
                option, str(tmp_path / "missing" / "x")]  # fmt: skip
        assert main(argv) == 2 and option in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    (tmp_path / "afile").write_text("")
    assert main(["grade", str(tmp_path), "--secret", str(secret), "--out", str(tmp_path / "afile")]) == 2
    assert "--out" in capsys.readouterr().err


def test_a_closed_pipe_is_a_normal_end():
    """`| head -1`, and `| true` (the reader gone before the first write): exit 0, nothing on stderr."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    for reader in ("head -1", "true"):
        command = f"set -o pipefail; {sys.executable} -m microtape exercises list | {reader}"
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0 and done.stderr == "", (reader, done.stderr)


def test_the_time_limit_is_per_call_so_many_trials_of_a_fast_answer_pass(tmp_path, capsys):
    path = _write(tmp_path, "fast.py", RIGHT)
    assert (
        main(["exercises", "check", str(path), "--name", "dropout_backward", "--trials", "600", "--timeout", "1"]) == 0
    )
    path = _write(tmp_path, "slowone.py", "import time\ndef dropout_backward(grad_y, mask, p):\n    time.sleep(5)\n")
    assert main(["exercises", "check", str(path), "--name", "dropout_backward", "--timeout", "0.5"]) == 3
    assert "did not return within 0.5 s (the time limit of one call)" in capsys.readouterr().out


# ---------------------------------------------------------------- points without a derivation, made expensive

NUMERIC = """
import numpy as np

def _numeric_vjp(forward, arrays, which, grad_out, h=1e-20):
    # the complex step: Im f(a + ih e_j) / h is df/da_j to machine precision, one forward per entry
    arrays = [np.array(a, dtype=complex) for a in arrays]
    x = arrays[which]
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        x[index] += 1j * h
        grad[index] = np.sum(grad_out * forward(*arrays).imag) / h
        x[index] -= 1j * h
    return grad

def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

def softmax_backward(p, grad_p):
    return _numeric_vjp(_softmax, [np.log(p)], 0, grad_p)

def linear_backward(x, weight, grad_y):
    forward = lambda x, w: x @ w.T
    return (_numeric_vjp(forward, [x, weight], 0, grad_y), _numeric_vjp(forward, [x, weight], 1, grad_y),
            grad_y.sum(axis=0))

def attention_backward(q, k, v, grad_c):
    forward = lambda q, k, v: _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])) @ v
    return tuple(_numeric_vjp(forward, [q, k, v], i, grad_c) for i in range(3))

def logsumexp_vjp(g, ans, x):
    forward = lambda x: np.log(np.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1)) + x.max(axis=-1)
    return (_numeric_vjp(forward, [x], 0, g),)
"""
NUMERIC_NAMES = ("softmax_backward", "linear_backward", "attention_backward", "logsumexp_vjp")


def test_numerical_differentiation_passes_the_visible_trials_and_runs_out_of_time_on_the_large_hidden_one(
    tmp_path, capsys
):
    """Issue #35: the forward differentiated by the complex step, entry by entry, earned points; each exercise's
    large hidden trial (tens of thousands of inputs, one forward each) now outlasts the time limit."""
    path = _write(tmp_path, "numeric.py", NUMERIC)
    names = [arg for name in NUMERIC_NAMES for arg in ("--name", name)]
    # Right on the visible trials: the cheat is a correct answer where the inputs are small...
    assert main(["exercises", "check", str(path), *names]) == 0, capsys.readouterr().out
    # ...and worth nothing graded: every small hidden trial passes, the large one does not return in time.
    out = tmp_path / "grades"
    argv = ["grade", str(tmp_path), "--out", str(out), "--timeout", "1", "--secret", str(_secret(tmp_path)), *names]
    assert main(argv) == 0
    run = sorted(out.iterdir())[-1]
    result = json.loads((run / "numeric.json").read_text(encoding="utf-8"))
    rows = [row for row in csv.DictReader((run / "gradebook.csv").open(encoding="utf-8"))
            if row["exercise"] in NUMERIC_NAMES]  # fmt: skip
    assert len(rows) == len(NUMERIC_NAMES) and all(row["points"] == "0" for row in rows), rows
    for name in NUMERIC_NAMES:  # every small hidden trial passed; the large one, the last, ran out of time
        exercise = result["exercises"][name]
        trials = len(get(name).cases(hidden=True))
        assert exercise["status"] == "not checked", exercise
        assert f"within 1 s (the time limit of one call) (hidden trial {trials} of {trials}:" in exercise["message"]
