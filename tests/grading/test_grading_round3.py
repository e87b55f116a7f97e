"""`microtape grade`, round 3 (issue 45): what a value check cannot prove, the teacher sees; honest work keeps marks.

Each case runs the command a teacher or a student runs (``microtape grade``,
``microtape exercises check``) on a file written the way a hostile or an
honest student would.
"""

import base64
import csv
import hashlib
import hmac
import json
import lzma
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from microtape.cli.main import main
from microtape.exercises.checker import _drawn_trial, _trial_key, student_secret
from microtape.exercises.lab.unit import SESSIONS
from microtape.exercises.registry import get
from microtape.grading import box, gradebook, integrity, pace
from microtape.grading.boxed.ipython import strip_magics
from microtape.grading.gradebook import TOTAL
from microtape.grading.remote import read_submission

pytestmark = pytest.mark.skipif(box._bwrap() is None, reason="needs bubblewrap (make sandbox)")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NUMERIC = HERE / "numeric_cheat.py"
LOOPS = HERE / "honest_loops.py"
#: The maps whose Jacobian is diagonal (or a forward-mode product): one complex step gives the exact
#: answer at the cost of one forward, as cheap as the derivation — time cannot tell them apart.
ELEMENTWISE = {"dropout_backward", "mse_backward", "logistic_loss_backward", "logaddexp_vjp", "softmax_jvp",
               "logsumexp_hvp", "scalar_chain_rule"}  # fmt: skip
RIGHT = """
import numpy as np

def softmax_backward(p, grad_p):
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))

def dropout_backward(grad_y, mask, p):
    return grad_y * mask / (1 - p)
"""


def _secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(secrets.token_hex(32) + "\n")
    return path


def _notebook(*cells, outputs=()):
    cells = [{"cell_type": "code", "metadata": {}, "source": textwrap.dedent(c), "outputs": list(outputs),
              "execution_count": None} for c in cells]  # fmt: skip
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _grade(tmp_path, files, *extra, names=("softmax_backward", "dropout_backward"), timeout="2"):
    """Grade ``files`` with the real command: (exit status, run folder, {student: json}, gradebook rows)."""
    folder = tmp_path / "handed_in"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    out = tmp_path / "grades"
    argv = ["grade", str(folder), "--out", str(out), "--timeout", timeout, "--secret", str(_secret(tmp_path)),
            *[arg for name in names for arg in ("--name", name)], *extra]  # fmt: skip
    status = main(argv)
    run = sorted(out.iterdir())[-1]
    results = {}
    for path in run.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        results[data["student"]] = data
    rows = list(csv.DictReader((run / "gradebook.csv").open(encoding="utf-8")))
    return status, run, results, rows


# ---------------------------------------------------------------- 1-2. numeric differentiation, flags


def test_numeric_differentiation_passes_visible_trials_but_earns_little_and_is_flagged(tmp_path, capsys):
    """The forward differentiated by the complex step, colour by colour (rows, input columns) — right to float64 —
    fails every large hidden trial as "too slow for a derivation" (or the call's time limit), except where the
    map is elementwise; honest Python loops over rows keep every mark. The teacher sees the flag, the student not."""
    # Right on the visible trials, on the student's own machine: the values are exact.
    names = ["linear_backward", "affine_relu_backward", "softmax_cross_entropy_backward", "mlp_backward"]
    assert main(["exercises", "check", str(NUMERIC), *[a for n in names for a in ("--name", n)]]) == 0
    capsys.readouterr()
    files = {"numeric.py": NUMERIC.read_text(), "loops.py": LOOPS.read_text()}
    status, run, results, rows = _grade(tmp_path, files, "-j", "2", names=(), timeout="2")
    assert status == 0
    printed = capsys.readouterr().out
    numeric, loops = results["numeric"], results["loops"]
    lab_points = sum(get(name).max_score for _, names in SESSIONS for name in names)
    # measured 15 of 137: all from the elementwise maps (scalar_chain_rule's 7 among them)
    assert numeric["max"] == lab_points and numeric["total"] <= 15, numeric["total"]
    for name, item in numeric["exercises"].items():
        if item["status"] == "not started":
            continue
        if name in ELEMENTWISE:
            continue  # one forward, like the derivation: only the flag tells
        assert item["points"] == 0, (name, item["message"])
        assert "too slow for a derivation" in item["message"] or "did not return within 2 s" in item["message"], (
            name, item["message"])  # fmt: skip
    # With room in the call's own time limit, the reference's time is what stops it.
    _, _, again, _ = _grade(tmp_path, {"numeric.py": NUMERIC.read_text()}, names=("linear_backward", "mlp_backward"),
                            timeout="10")  # fmt: skip
    for item in again["numeric"]["exercises"].values():
        assert item["points"] == 0 and "too slow for a derivation" in item["message"], item["message"]
        assert "over 20× the time of the reference solution" in item["message"]
    # Honest loops over rows: every exercise the file defines earns all its points.
    defined = {n: item for n, item in loops["exercises"].items() if item["status"] != "not started"}
    assert len(defined) == 6 and all(item["status"] == "right" for item in defined.values()), defined
    # Flagged with evidence, in the record, the CSV's total row and the printed summary — not in the feedback.
    kinds = {flag["kind"] for flag in numeric["flags"]}
    assert kinds == {"numeric differentiation"}, numeric["flags"]
    assert any("complex" in flag["evidence"] and "line " in flag["evidence"] for flag in numeric["flags"])
    assert loops["flags"] == []
    total = {row["student"]: row for row in rows if row["exercise"] == TOTAL}
    assert "numeric differentiation: line" in total["numeric"]["flags"] and total["loops"]["flags"] == ""
    assert "flagged — numeric: numeric differentiation" in printed and "flagged — loops" not in printed
    feedback = (run / "numeric.txt").read_text(encoding="utf-8")
    assert "flag" not in feedback and "numeric differentiation:" not in feedback


def test_the_time_limit_is_the_reference_times_a_factor_measured_now(monkeypatch):
    """The numbers themselves: under the floor nothing is measured; over it, FACTOR × the reference's time."""
    timer = pace.Pace([], ["linear_backward"])
    measured = []
    monkeypatch.setattr(timer, "reference_seconds", lambda name, args: measured.append(name) or 0.02)
    assert timer.too_slow("linear_backward", (), pace.FLOOR_SECONDS) is None and measured == []
    assert timer.too_slow("linear_backward", (), 0.02 * pace.FACTOR * 0.99) is None
    assert timer.too_slow("linear_backward", (), 0.02 * pace.FACTOR * 1.01).startswith("it took over 20×")
    # a second chance: a call that is fast when run again is not failed for a moment's load
    assert timer.too_slow("linear_backward", (), 10.0, again=lambda: 0.02) is None
    assert pace.FACTOR == 20.0 and pace.FLOOR_SECONDS == 0.25  # docs/grading.md states these numbers


AUTOGRAD = """
import numpy as np

class Value:
    def __init__(self, data, parents=(), local_vjps=()):
        self.data, self.parents, self.local_vjps, self.grad = data, parents, local_vjps, 0.0
    def __add__(self, other):
        return Value(self.data + other.data, (self, other), (lambda g: g, lambda g: g))
    def __mul__(self, other):
        return Value(self.data * other.data, (self, other), (lambda g: g * other.data, lambda g: g * self.data))
    def backward(self):
        order, seen = [], set()
        def visit(node):
            if id(node) not in seen:
                seen.add(id(node))
                for parent in node.parents:
                    visit(parent)
                order.append(node)
        visit(self)
        self.grad = np.ones_like(self.data)
        for node in reversed(order):
            for parent, vjp in zip(node.parents, node.local_vjps):
                parent.grad = parent.grad + vjp(node.grad)

def dropout_backward(grad_y, mask, p):
    x = Value(np.zeros_like(grad_y))
    y = x * Value(mask / (1 - p)) * Value(grad_y)
    y.backward()
    return x.grad
"""


def test_an_autograd_in_the_file_and_a_carried_compressed_engine_are_flagged(tmp_path):
    """Sixty lines of reverse mode, and the same engine lzma-compressed and base85-encoded (run with exec):
    both flagged — the second by the source (decoding + exec) and by what the box saw after loading."""
    blob = base64.b85encode(lzma.compress(AUTOGRAD.encode())).decode()
    carried = f"import base64, lzma\nexec(lzma.decompress(base64.b85decode({blob!r})))\n"
    libraries = "import numpy as np\nimport torch\nimport microtape as mt\n\ndef dropout_backward(grad_y, mask, p):\n" \
                "    return mt.Tensor(grad_y).numpy()\n"  # fmt: skip
    files = {"own.py": AUTOGRAD, "carried.py": carried, "lib.py": libraries, "honest.py": RIGHT}
    status, _, results, rows = _grade(tmp_path, files, "-j", "2", names=("dropout_backward",))
    own = results["own"]["flags"]
    assert any(f["kind"] == "own autograd" and "class Value" in f["evidence"] for f in own), own
    assert results["own"]["exercises"]["dropout_backward"]["status"] == "right"  # the value check cannot tell
    carried_flags = results["carried"]["flags"]
    assert any(f["kind"] == "encoded code" and "line 2" in f["evidence"] for f in carried_flags), carried_flags
    assert any(f["kind"] == "own autograd" and "in the box" in f["evidence"] for f in carried_flags), carried_flags
    lib = results["lib"]["flags"]
    assert any(f["kind"] == "autograd library" and "torch" in f["evidence"] for f in lib), lib
    assert results["honest"]["flags"] == []
    # A failed import is reported by the package's name and line, in one line, on hidden trials too.
    assert "torch" in results["lib"]["not_run"] and "(line 2)" in results["lib"]["not_run"]


def test_microtape_used_for_an_answer_is_named_in_one_line_on_hidden_trials(tmp_path):
    source = "import numpy as np\nimport microtape as mt\n\ndef dropout_backward(grad_y, mask, p):\n" \
             "    x = mt.Tensor(np.zeros_like(grad_y))\n    return x.numpy()\n"  # fmt: skip
    _, _, results, _ = _grade(tmp_path, {"tape.py": source}, names=("dropout_backward",))
    message = results["tape"]["exercises"]["dropout_backward"]["message"]
    assert message.startswith("✗ dropout_backward: microtape is not available to graded code, line 5 — "), message
    assert "the text of the error is not shown" not in message and "[" in message  # shapes only, no values
    assert len(message.splitlines()) <= 2
    assert any(f["kind"] == "autograd library" for f in results["tape"]["flags"])


@pytest.mark.parametrize(
    "path",
    [*sorted((ROOT / "instructor").glob("solutions*.py")), *sorted((ROOT / "assignment" / "samples").glob("*.py")),
     ROOT / "assignment" / "source" / "microtape_lab.ipynb", LOOPS],
    ids=lambda path: path.name,
)  # fmt: skip
def test_honest_samples_and_the_instructors_solutions_raise_no_flag(path):
    assert integrity.source_flags(read_submission(path)[1]) == []


# ---------------------------------------------------------------- 3. trials of their own


def test_the_trial_key_uses_the_whole_secret_and_the_exercise_name():
    secret = secrets.token_hex(32)
    base = _trial_key(0, True, secret, "ada", exercise="linear_backward")
    # every byte of the secret matters
    for i in range(len(secret)):
        changed = secret[:i] + ("0" if secret[i] != "0" else "1") + secret[i + 1 :]
        assert _trial_key(0, True, changed, "ada", exercise="linear_backward") != base, i
    # all 256 bits of the keyed digest seed the generator (not 32 of them)
    digest = hmac.new(student_secret(secret, "ada"), b"exercise:linear_backward", hashlib.sha256).digest()
    assert base == (0, *(int.from_bytes(digest[i : i + 4], "big") for i in range(0, 32, 4)))
    # two exercises with the same shapes never meet the same hidden inputs (large trial included)
    large = len(get("linear_backward").cases(True)) - 1
    x1 = _drawn_trial("linear_backward", True, base, large)[0][0]
    other = _trial_key(0, True, secret, "ada", exercise="tanh_layer_backward")
    x2 = _drawn_trial("tanh_layer_backward", True, other, large)[0][0]
    assert x1.shape == x2.shape and not np.allclose(x1, x2)


def test_each_upload_draws_its_own_trials_and_a_regrade_the_same(tmp_path):
    first, changed = tmp_path / "a.py", tmp_path / "b" / "a.py"
    changed.parent.mkdir()
    first.write_text(RIGHT)
    changed.write_text(RIGHT + "\n# changed\n")
    assert gradebook.trial_identity("ada", first) == gradebook.trial_identity("ada", first)
    assert gradebook.trial_identity("ada", first) != gradebook.trial_identity("ada", changed)
    assert gradebook.trial_identity("ada", first) != gradebook.trial_identity("bob", first)


LEAKY = """
import builtins, os, threading, time
import numpy as np

def softmax_backward(p, grad_p):
    if not hasattr(builtins, "SEEN"):
        builtins.SEEN = p.shape  # a global for the next exercise
        child = os.fork()
        if child == 0:  # a grandchild in a session of its own, meant to outlive the exercise
            os.setsid()
            time.sleep(60)
            os._exit(0)
        open("/tmp/grandchild", "w").write(str(child))
        try:  # a thread too, where the process limit (3) leaves room
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        except RuntimeError:
            pass
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))

def dropout_backward(grad_y, mask, p):
    right = grad_y * mask / (1 - p)
    alive = False
    if os.path.exists("/tmp/grandchild"):
        try:  # running or sleeping; a zombie (Z) is dead and only waits to be reaped by the box's init
            state = open(f"/proc/{open('/tmp/grandchild').read()}/stat").read().rsplit(")", 1)[1].split()[0]
            alive = state not in ("Z", "X")
        except OSError:
            pass
    left_over = hasattr(builtins, "SEEN") or threading.active_count() > 1 or alive
    return right + 1.0 if left_over else right
"""


def test_nothing_survives_from_one_exercise_to_the_next(tmp_path):
    """A global, a thread, a grandchild in its own session: each exercise runs in a fresh copy of the file."""
    _, _, results, _ = _grade(tmp_path, {"leaky.py": LEAKY}, timeout="5")
    exercises = results["leaky"]["exercises"]
    assert exercises["softmax_backward"]["status"] == "right", exercises["softmax_backward"]["message"]
    assert exercises["dropout_backward"]["status"] == "right", exercises["dropout_backward"]["message"]


def test_on_gradescope_the_student_is_the_metadata_id_and_the_notebook_is_graded(tmp_path, monkeypatch):
    """The upload: the notebook and its .py export, one folder down; the student is the user id, never the stem."""
    metadata = tmp_path / "submission_metadata.json"
    metadata.write_text(json.dumps({"id": 777, "users": [{"id": 4242, "email": "a@b.c", "name": "Ada"}]}))
    seen = []
    real = gradebook.check_file
    monkeypatch.setattr(gradebook, "check_file", lambda p, n, **kw: seen.append((Path(p).name, kw["student"]))
                        or real(p, n, **kw))  # fmt: skip
    files = {"lab/microtape_lab.ipynb": _notebook(RIGHT), "lab/microtape_lab.py": "raise SystemExit(1)\n"}
    results_json = tmp_path / "results.json"
    status, _, results, _ = _grade(tmp_path, files, "--metadata", str(metadata), "--gradescope", str(results_json))
    assert status == 0
    assert [name for name, _ in seen] == ["microtape_lab.ipynb"]  # the export is not graded
    assert seen[0][1].startswith("4242\x00") and "microtape_lab" not in seen[0][1]
    report = json.loads(results_json.read_text())
    assert report["score"] == 2 and "microtape_lab.ipynb" in report["output"]
    assert "flag" not in json.dumps(report)  # the student's feedback never carries flags


# ---------------------------------------------------------------- 5. names


def test_invisible_names_are_shown_escaped_and_no_two_students_share_a_record(tmp_path, capsys):
    from microtape.grading.untrusted import file_stem

    posing = "alice\u200b"
    digest_name = file_stem("x\u202ey")  # the stored name another student's file would get
    files = {f"{posing}.py": RIGHT, "alice.py": RIGHT, "x\u202ey.py": RIGHT, f"{digest_name}.py": RIGHT}
    _, run, results, rows = _grade(tmp_path, files, "-j", "2")
    printed = capsys.readouterr().out
    assert "alice\\u200b" in printed and "alice\u200b" not in printed
    assert len(list(run.glob("*.json"))) == 4 and len(results) == 4  # four students, four records
    students = {row["student"] for row in rows}
    assert "alice\\u200b" in students and "alice" in students


# ---------------------------------------------------------------- 6. the box as an ordinary user, the secret


def test_an_ordinary_user_gets_a_working_bubblewrap_box(tmp_path, monkeypatch):
    """bubblewrap 0.8 refuses --disable-userns without --unshare-user: the grader's command, run as nobody."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    # The box binds this Python's packages read-only: an ordinary user must be able to reach them. A checkout
    # inside a private folder (mkdtemp's 0700) is not, so there the claim cannot be tried.
    reach = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "test", "-r",
                            np.__file__], capture_output=True)  # fmt: skip
    if reach.returncode != 0:
        pytest.skip(f"numpy ({np.__file__}) is not readable by an ordinary user in this checkout's environment")
    command, _ = box._bwrap_command(box._bwrap(), "/usr/bin/python3", box.Limits(), box.fresh_uid(), None)
    assert "--unshare-user" in command
    at = command.index("/usr/bin/python3")
    probe = [*command[:at], "/usr/bin/python3", "-I", "-S", "-c", "import os; print(os.getuid(), os.getppid())"]
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *probe],
                          capture_output=True, text=True, timeout=60, cwd="/")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == str(box.BOX_UID)


def test_the_secret_is_in_neither_the_graders_argv_nor_its_environment(tmp_path):
    """What a box without bubblewrap could read (/proc/PPID/cmdline, environ) holds the secret's path at most."""
    secret = _secret(tmp_path)
    value = secret.read_text().strip()
    folder = tmp_path / "in"
    folder.mkdir()
    probe = ("import os\ndef dropout_backward(grad_y, mask, p):\n    return grad_y * mask / (1 - p)\n"
             "parent = os.getppid()\nfor name in ('cmdline', 'environ'):\n"
             "    try:\n        print(name, open(f'/proc/{parent}/{name}', 'rb').read().hex())\n"
             "    except OSError as error:\n        print(name, 'unreadable', error.errno)\n")  # fmt: skip
    (folder / "probe.py").write_text(probe)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "microtape", "grade", str(folder), "--secret", str(secret), "--name",
               "dropout_backward", "--out", str(tmp_path / "out")]  # fmt: skip
    grader = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    own = Path(f"/proc/{grader.pid}/cmdline").read_bytes() + Path(f"/proc/{grader.pid}/environ").read_bytes()
    output, _ = grader.communicate(timeout=120)
    assert grader.returncode == 0, output
    assert value.encode() not in own and value not in output
    printed = json.loads(next((tmp_path / "out").glob("run-*/probe.json")).read_text())["printed"]
    assert value.encode().hex() not in printed


def test_without_bubblewrap_grade_refuses_unless_no_box(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(box, "_bwrap", lambda: None)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.py").write_text(RIGHT)
    argv = ["grade", str(folder), "--out", str(tmp_path / "out"), "--name", "dropout_backward"]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "apt-get install bubblewrap" in error and "--no-box" in error
    status = main([*argv, "--no-box"])
    out = capsys.readouterr().out
    assert "--no-box: without bubblewrap a student's code" in out and "can read the file system" in out
    if status != 0:  # as root with Python in a private folder the box still refuses (it could rewrite the package)
        assert status == 1 and "refusing to run graded code as root without bubblewrap" in out, out


# ---------------------------------------------------------------- 9. honest notebooks


def test_notebooks_with_magics_plots_and_writefile_keep_their_marks(tmp_path):
    plot = {"output_type": "display_data", "data": {"image/png": "A" * (400 << 10)}, "metadata": {}}
    cells = [
        "import numpy as np\nt = %timeit -o np.zeros(3)\nx = !ls\nnp.einsum?\n",
        "%%writefile answers.py\nraise SystemExit('a %%writefile cell is not run')\n",
        "%%time\n" + RIGHT,
        "import matplotlib.pyplot as plt\n",
    ]
    notebook = _notebook(*cells, outputs=[plot])  # over 256 KB with its plots; its code is a few hundred bytes
    assert len(notebook) > 256 << 10
    drawn = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
             "fig, ax = plt.subplots()\nax.plot([1, 2])\nplt.rcParams['figure.dpi'] = 120\n"
             "plt.savefig('plot.png')\nplt.show()\n" + RIGHT)  # fmt: skip
    _, _, results, _ = _grade(tmp_path, {"plots.ipynb": notebook, "drawn.py": drawn}, "-j", "2")
    assert results["plots"]["total"] == 2, results["plots"]
    assert results["plots"]["flags"] == []
    assert results["drawn"]["total"] == 2, results["drawn"]  # a .py that draws its own plots: discarded in the box


def test_ipython_lines_read_as_a_notebook_would():
    text = strip_magics("t = %timeit -o f()\nx, y = !ls\nnp.einsum?\n?np.sum\nif 1:\n    %time g()\nanswer = 1\n")
    compile(text, "cell", "exec")
    assert "t = None" in text and "x, y = (None, None, )" in text and "answer = 1" in text


# ---------------------------------------------------------------- 7. the self-check without a box


def test_a_self_check_without_bubblewrap_cannot_write_outside_its_scratch_folder(tmp_path, monkeypatch, capsys):
    """Where Landlock exists, the installed package (any folder but the scratch one) is not writable from the check."""
    from microtape.grading.boxed.landlock import restrict_writes

    target_folder = Path(tempfile.mkdtemp(dir=ROOT, prefix=".landlock-probe-"))  # outside /tmp, like site-packages
    try:
        target = target_folder / "diagnose.py"
        target.write_text("# the installed checker\n")
        source = (f"import numpy as np\ntry:\n    open({str(target)!r}, 'w').write('PATCHED')\nexcept OSError:\n"
                  "    pass\n" + RIGHT)  # fmt: skip
        path = tmp_path / "patcher.py"
        path.write_text(source)
        monkeypatch.setattr(box, "_bwrap", lambda: None)
        status = main(["exercises", "check", str(path), "--name", "dropout_backward"])
        capsys.readouterr()
        assert status == 0  # the answer is right and graded as such
        probe = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]);"
                                "from landlock import restrict_writes; print(restrict_writes([]))",
                                str(Path(box.HELPER))], capture_output=True, text=True)  # fmt: skip
        if probe.stdout.strip() == "True":  # this kernel has Landlock: the file is as it was
            assert target.read_text() == "# the installed checker\n"
        assert callable(restrict_writes)
    finally:
        shutil.rmtree(target_folder, ignore_errors=True)
