"""A teacher's own stepped exercise: ``ex.derivation`` checks its arguments, and the exercise works everywhere.

Made from a forward on Tensors, it is listed, stubbed, checked (picture too),
scored and graded like a built-in one — from a notebook, and from the command
line with ``--exercises FILE.py`` (the docs' example file, docs/examples/teacher_mlp.py).
A bad argument is refused at ``ex.derivation`` time, naming it, and nothing is registered.
"""

import argparse
import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
from exercise_helpers import teachers_exercises

import microtape.exercises as ex
from microtape.cli import exercises as command
from microtape.cli.main import main
from microtape.exercises import teacher

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "teacher_mlp.py"
NAME = "mlp_cross_entropy_steps"


def forward(x, w):
    a = x @ w
    h = a.tanh()
    return {"a": a, "h": h, "loss": (h * h).sum()}


def inputs(rng, size):
    n = {"visible": 3, "hidden": 4, "large": 50}[size]
    return {"x": rng.standard_normal((n, 3)), "w": rng.standard_normal((3, 2))}


@pytest.fixture
def clean_registry():
    """Whatever a test registers (a teacher's file included) is gone after it."""
    with teachers_exercises():
        yield
    teacher._LOADED.clear()


# ---------------------------------------------------------------- bad arguments, nothing registered


def _bad_forward_no_dict(x, w):
    return (x @ w).sum()


def _bad_forward_no_loss(x, w):
    return {"a": x @ w}


def _bad_forward_name_taken(x, w):
    a = x @ w
    h = (a * 2.0).tanh(name="a")  # a second node called "a", under the key "h"
    return {"a": a, "h": h * 1.0, "loss": (h * h).sum()}


def _bad_forward_vector_loss(x, w):
    return {"a": x @ w, "loss": (x @ w).sum(axis=0)}


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"forward": _bad_forward_no_dict}, TypeError, "derivation(forward=...): the forward returned a Tensor"),
        ({"forward": _bad_forward_no_loss}, ValueError, 'the forward\'s dict has no "loss"'),
        ({"forward": _bad_forward_vector_loss}, ValueError, '"loss" has shape (2,); expected a scalar'),
        ({"forward": _bad_forward_name_taken}, ValueError, "another value of the forward is also named 'a'"),
        ({"steps": ["h", "b"]}, ValueError, "derivation(steps=...): 'b' is neither a key of the forward's dict"),
        ({"steps": ["a", "h"]}, ValueError, "'h' is computed from 'a', so its gradient comes first"),
        ({"steps": "h"}, TypeError, "derivation(steps='h'): expected a list of names"),
        ({"steps": ["h", "h"]}, ValueError, "a step is named twice"),
        ({"inputs": lambda rng, size: {"x": rng.standard_normal((2, 3))}}, ValueError,
         "returned the keys ['x']; expected the parameters ['x', 'w'] (missing ['w'], extra [])"),
        ({"inputs": lambda rng, size: {"x": np.ones((2, 3), np.float32), "w": np.ones((3, 2))}}, TypeError,
         "inputs(rng, 'large')['x'] is a ndarray of dtype float32; expected a float64 numpy array"),
        ({"inputs": lambda rng, size: {"x": [[1.0, 2.0, 3.0]], "w": np.ones((3, 2))}}, TypeError,
         "['x'] is a list"),
        ({"name": "softmax_backward"}, ValueError, "derivation(name='softmax_backward'): an exercise of that name"),
        ({"name": "not a name"}, ValueError, "derivation(name='not a name'): expected a Python identifier"),
        ({"points": {"q": 2}}, ValueError, "derivation(points=...): 'q' is not a step"),
        ({"points": 0}, ValueError, "derivation(points=0): expected a positive integer"),
        ({"carry_forward": "yes"}, TypeError, "derivation(carry_forward='yes'): expected True or False"),
        ({"mistakes": [ex.Mistake("m", "sign_flipped", "hint", lambda x, w: {}, step="z")]}, ValueError,
         "mistake 'm' names the step 'z'"),
    ],
)  # fmt: skip
def test_a_bad_argument_is_refused_naming_it_and_nothing_is_registered(arguments, error, words):
    before = dict(ex.EXERCISES)
    given = {"name": "derived_once", "forward": forward, "inputs": inputs, "steps": ["h", "a", "w"], **arguments}
    with pytest.raises(error) as raised:
        ex.derivation(given.pop("name"), given.pop("forward"), **given)
    assert words in str(raised.value)
    assert ex.EXERCISES == before


def test_a_custom_mistake_kind_needs_its_label():
    with pytest.raises(ValueError, match="for a kind of your own give kind_label="):
        ex.Mistake("m", "my_own_kind", "hint", lambda x, w: {}, step="h")
    assert ex.Mistake("m", "my_own_kind", "hint", lambda x, w: {}, step="h", kind_label="mine").label == "mine"


# ---------------------------------------------------------------- the exercise it makes


def test_the_exercise_is_stepped_from_the_forward_with_its_links_read_off_the_tape(clean_registry):
    made = ex.derivation("derived_chain", forward, inputs=inputs, steps=["h", "a", "w", "x"], points={"grad_a": 3})
    assert ex.get("derived_chain") is made and ex.list_exercises()[-1] == "derived_chain"
    assert made.parameters == ("x", "w") and made.stepped and made.max_score == 6
    assert [(o.name, o.after, o.node) for o in made.outputs] == [
        ("grad_h", (), "h"), ("grad_a", ("grad_h",), "a"), ("grad_w", ("grad_a",), "w"), ("grad_x", ("grad_a",), "x"),
    ]  # fmt: skip
    assert len(made.visible) == 3 and [case["size"] for case in made.hidden] == ["hidden"] * 3 + ["large"]
    source = made.stub_source()
    assert source.startswith("def derived_chain(x, w):") and "'grad_a'" in source and "a = x @ w" in source
    namespace = {}
    exec(compile(source, "stub", "exec"), namespace)  # the stub is valid Python and still raises
    assert ex.check("derived_chain", namespace["derived_chain"]).status == "not started"

    def derived_chain(x, w):
        h = np.tanh(x @ w)
        grad_a = 2 * h * (1 - h**2)
        return {"grad_h": 2 * h, "grad_a": grad_a, "grad_w": x.T @ grad_a, "grad_x": grad_a @ w.T}

    assert ex.check("derived_chain", derived_chain).ok
    assert ex.check("derived_chain", derived_chain, hidden=True, secret="class secret").ok
    table = ex.score({"derived_chain": derived_chain}, ["derived_chain"])
    assert table.total == 6


def test_a_derivation_with_more_steps_than_sixteen_is_graded_in_the_box(clean_registry, tmp_path):
    def long_forward(x):
        named, value = {}, x
        for i in range(20):
            value = value.tanh() if i % 2 else value * 1.5
            named[f"v{i}"] = value
        named["loss"] = value.sum()
        return named

    steps = [f"v{i}" for i in reversed(range(20))] + ["x"]
    ex.derivation("long_chain", long_forward, inputs=lambda rng, size: {"x": rng.standard_normal(4)}, steps=steps)
    answers = tmp_path / "long.py"
    answers.write_text(
        "import numpy as np\n\ndef long_chain(x):\n    values = [x]\n    for i in range(20):\n"
        "        values.append(np.tanh(values[-1]) if i % 2 else values[-1] * 1.5)\n"
        "    g, out = np.ones_like(x), {}\n    for i in reversed(range(20)):\n        out[f'grad_v{i}'] = g\n"
        "        g = g * (1 - values[i + 1] ** 2) if i % 2 else g * 1.5\n    out['grad_x'] = g\n    return out\n"
    )
    from microtape.grading.submission import check_file

    report = check_file(answers, ["long_chain"], timeout=10, hidden=True, secret="class secret", student="ada")
    result = report.results["long_chain"]
    assert result.ok and result.score == 21, result.message


# ---------------------------------------------------------------- the command line, with the docs' example


def _exercises(*argv):
    parser = argparse.ArgumentParser(prog="microtape")
    command.add_arguments(parser.add_subparsers(dest="command").add_parser("exercises"))
    return command.run(parser.parse_args(["exercises", *argv]))


WRONG_COUNTS = """
import numpy as np

def mlp_cross_entropy_steps(x, w1, b1, w2, targets):
    n = len(x)
    hidden = np.tanh(x @ w1 + b1)
    counts = np.exp(hidden @ w2)
    total = counts.sum(axis=1, keepdims=True)
    probs = counts / total
    grad_logprobs = -targets / n
    grad_probs = grad_logprobs / probs
    grad_counts = grad_probs / total          # the row sum's path forgotten
    grad_logits = grad_counts * counts
    grad_pre = grad_logits @ w2.T * (1 - hidden**2)
    return {"grad_logprobs": grad_logprobs, "grad_probs": grad_probs, "grad_count": grad_counts,
            "grad_logits": grad_logits, "grad_w2": hidden.T @ grad_logits, "grad_hidden": grad_logits @ w2.T,
            "grad_pre": grad_pre, "grad_b1": grad_pre.sum(axis=0), "grad_w1": x.T @ grad_pre * 2}
"""


def test_exercises_list_stub_and_check_take_a_teachers_file(clean_registry, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copy(EXAMPLE, tmp_path / "teacher_mlp.py")
    assert _exercises("list", "--exercises", "teacher_mlp.py") == 0
    out = capsys.readouterr().out
    assert f"{NAME}(x, w1, b1, w2, targets)" in out and "grad_logprobs, grad_probs, grad_counts" in out
    assert _exercises("stub", NAME, "--exercises", "teacher_mlp.py") == 0
    stub = capsys.readouterr().out
    assert f"def {NAME}(x, w1, b1, w2, targets):" in stub and "'grad_counts'" in stub
    (tmp_path / "answers.py").write_text(WRONG_COUNTS)
    status = _exercises("check", "answers.py", "--exercises", "teacher_mlp.py", "--picture", "where.svg")
    out = capsys.readouterr()
    assert status == 1
    # grad_counts misspelled: named, and judged missing (the tape's value stands in for it), so the break
    # shows at the link into grad_logits, computed from the student's own grad_counts; grad_w1 wrong too.
    assert "'grad_count': did you mean grad_counts? (grad_counts is missing: not graded under that name)" in out.out
    assert f"✗ {NAME}: grad_logits is the first wrong step (grad_w1 is wrong too, at its own link)" in out.out
    assert "grad_w2, grad_hidden, grad_pre and grad_b1 are carried" in out.out
    assert (tmp_path / "where.svg").read_text().count("<svg") == 1
    # A file that is not there, or that registers nothing: a usage error naming it.
    assert _exercises("list", "--exercises", "nowhere.py") == 2
    assert "--exercises nowhere.py: no such file" in capsys.readouterr().err
    (tmp_path / "empty.py").write_text("x = 1\n")
    assert _exercises("list", "--exercises", "empty.py") == 2
    assert "it registered no exercise" in capsys.readouterr().err


def test_a_wrong_middle_link_is_named_first_its_later_steps_carried_and_a_second_error_named(clean_registry):
    teacher.load_exercises(EXAMPLE)
    namespace = {}
    exec(compile(WRONG_COUNTS.replace('"grad_count"', '"grad_counts"'), "answers", "exec"), namespace)
    result = ex.check(NAME, namespace[NAME])
    assert result.wrong_links == ("grad_counts", "grad_w1")
    assert result.computed_from_wrong == ("grad_logits", "grad_w2", "grad_hidden", "grad_pre", "grad_b1")
    assert "hint — the normaliser treated as a constant (at grad_counts)" in result.message
    assert result.score == 10 - 2 - 1  # grad_counts is worth 2, grad_w1 1


def test_microtape_grade_takes_a_teachers_file(clean_registry, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copy(EXAMPLE, tmp_path / "teacher_mlp.py")
    (tmp_path / "handed_in").mkdir()
    (tmp_path / "handed_in" / "ada.py").write_text(WRONG_COUNTS)
    (tmp_path / "secret.txt").write_text("b1946ac92492d2347c6235b4d26111845e1b4f25e37a4e1d9c9f27b2e2d3a7c0\n")
    argv = ["grade", "handed_in", "--exercises", "teacher_mlp.py", "--name", NAME, "--secret", "secret.txt",
            "--csv", "grades.csv"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    table = out[out.index("student ") : out.index("submission graded")]
    assert "1 submission graded" in out and all(len(line) <= 120 for line in table.splitlines())
    rows = list(csv.DictReader((tmp_path / "grades.csv").open(encoding="utf-8")))
    assert rows[0]["exercise"] == NAME and rows[0]["points"] == "6"  # 10 less grad_counts (2), logits, w1
    assert rows[0]["grad_counts state"] == "missing" and rows[0]["grad_counts points"] == "0"
    assert rows[0]["grad_logits state"] == "wrong" and rows[0]["grad_w2 state"] == "carried"
    assert rows[0]["grad_w2 points"] == "1" and rows[1]["exercise"] == "(total)" and rows[1]["grad_w2 state"] == ""
    assert main(["grade", "handed_in", "--exercises", "nowhere.py"]) == 2


# ---------------------------------------------------------------- the Gradescope bundle


def _autograde():
    import importlib.util

    spec = importlib.util.spec_from_file_location("autograde", ROOT / "assignment" / "autograde.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("with_teachers_file", [True, False])
def test_the_bundles_entry_script_grades_a_teachers_file_when_the_bundle_has_one(tmp_path, with_teachers_file):
    import subprocess

    place = tmp_path / "autograder"
    (place / "source").mkdir(parents=True)
    (place / "venv" / "bin").mkdir(parents=True)
    fake = place / "venv" / "bin" / "microtape"  # stands in for the bundle's microtape: records its arguments
    fake.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$@" > {tmp_path / "argv.txt"}\n')
    fake.chmod(0o755)
    if with_teachers_file:
        shutil.copy(EXAMPLE, place / "source" / _autograde().TEACHERS_FILE)
    script = ROOT / "assignment" / "bundle" / "run_autograder"
    done = subprocess.run(["bash", str(script)], env={"PATH": "/usr/bin:/bin", "AUTOGRADER": str(place)},
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[:2] == ["grade", str(place / "submission")]
    if with_teachers_file:
        at = argv.index("--exercises")  # among the bundle's other options (--out, --no-box, --metadata…)
        assert argv[at + 1] == str(place / "source" / "teacher_exercises.py")
    else:
        assert "--exercises" not in argv


def test_assign_refuses_a_teachers_file_that_registers_nothing_before_building(clean_registry, tmp_path, capsys):
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert _autograde().main(["assign", "--exercises", str(empty)]) == 2
    assert "it registered no exercise" in capsys.readouterr().err


def test_a_step_reached_by_two_paths_is_computed_from_both(clean_registry):
    def two_paths(x):
        a = x.tanh()
        b = a * 2.0
        c = a + b  # a reaches c directly and through b
        return {"a": a, "b": b, "c": c, "loss": (c * c).sum()}

    made = ex.derivation("two_paths", two_paths, inputs=lambda rng, size: {"x": rng.standard_normal(3)},
                         steps=["c", "b", "a", "x"])  # fmt: skip
    assert {o.name: o.after for o in made.outputs} == {
        "grad_c": (), "grad_b": ("grad_c",), "grad_a": ("grad_c", "grad_b"), "grad_x": ("grad_a",),
    }  # fmt: skip
