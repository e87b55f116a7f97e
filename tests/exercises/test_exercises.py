"""The classroom exercises: solutions pass, known mistakes get their own hint, bad answers get clear words.

The checker's reference is the tape (each exercise builds its forward from
microtape Tensors); the reference solutions in ``instructor/solutions.py``
(outside the package) are plain numpy. So "every solution passes" is also an
independent check of the engine, and "every mistaken variant is diagnosed as
itself" checks that the hints come from comparisons that tell the mistakes
apart.
"""

import importlib
import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest
from exercise_helpers import making_mistake, replacing

import microtape.exercises as ex
from instructor.solutions import SOLUTIONS

NAMES = ex.list_exercises()
MISTAKES = [(name, mistake.name) for name in NAMES for mistake in ex.get(name).mistakes]
ROOT = Path(__file__).resolve().parents[2]


def test_the_lab_order_is_written_once():
    # EXERCISES, list_exercises() and ORDER all come from the LAB tuple of modules.
    modules = [importlib.import_module(f"microtape.exercises.lab.{module}") for module in ex.LAB]
    from_modules = [name for module in modules for name in module.__all__ if name in ex.EXERCISES]
    assert NAMES == list(ex.EXERCISES) == list(ex.ORDER) == from_modules
    assert NAMES[:3] == ["scalar_chain_rule", "mlp_backward", "affine_relu_backward"]
    assert NAMES[-1] == "layernorm_backward" and ex.get(NAMES[-1]).stretch  # the stretch exercise last
    assert NAMES.index("logaddexp_vjp") == NAMES.index("logsumexp_vjp") + 1
    assert not ex.get("logsumexp_vjp").stretch and not ex.get("logaddexp_vjp").stretch
    assert "layernorm_backward" not in ex.list_exercises(include_stretch=False)
    assert set(SOLUTIONS) == set(NAMES)


def test_new_exercises_are_in_the_lab():
    for name in (
        "attention_dropout_backward",
        "masked_attention",
        "tanh_layer_backward",
        "logsumexp_vjp",
        "logaddexp_vjp",
    ):
        assert name in NAMES
        exercise = ex.get(name)
        assert len(exercise.mistakes) >= 4 and exercise.visible and exercise.hidden


@pytest.mark.parametrize("name", NAMES)
def test_stub_is_a_prompt_and_reports_not_started(name):
    exercise = ex.get(name)
    assert exercise.prompt and "Return" in exercise.prompt
    assert "``" not in exercise.prompt  # printed in notebook 7: one backquote, not reST's two
    source = ex.stub_source(name)
    assert source.startswith(f"def {name}(") and "raise NotImplementedError" in source
    result = ex.check(name, exercise.stub)
    assert not result.ok and result.status == "not started" and result.score == 0
    assert "not written yet" in result.message
    assert isinstance(result.exception, NotImplementedError)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_reference_solution_passes(name, hidden):
    result = ex.check(name, SOLUTIONS[name], hidden=hidden, secret="test secret")
    assert result.ok, result.message
    assert result.status == "right" and result.score == result.max_score == ex.get(name).max_score
    assert result.trials_run == len(ex.get(name).cases(hidden))
    assert result.max_abs_error < 1e-11
    assert result.message.startswith(f"✓ {name}")
    assert ex.assert_correct(name, SOLUTIONS[name], hidden=hidden, secret="test secret").ok


@pytest.mark.parametrize("name", NAMES)
def test_more_trials_and_other_seeds_pass(name):
    assert ex.check(name, SOLUTIONS[name], trials=12, seed=7).ok
    assert ex.check(name, SOLUTIONS[name], trials=12, seed=3, hidden=True, secret="test secret").ok


@pytest.mark.parametrize(("name", "mistake_name"), MISTAKES)
def test_each_known_mistake_is_diagnosed_as_itself(name, mistake_name):
    mistake = ex.get(name).mistake(mistake_name)
    student = making_mistake(name, mistake_name)
    result = ex.check(name, student)
    assert not result.ok and result.status in ("wrong", "partly right")
    assert mistake_name in result.mistakes, result.message
    assert mistake.hint in result.message
    assert f"hint — {mistake.label}" in result.message
    assert result.problems and all(problem.index is not None or problem.what == "shape" for problem in result.problems)
    assert result.score < result.max_score
    with pytest.raises(AssertionError, match="hint"):
        ex.assert_correct(name, student)
    # The hidden trials catch it too.
    assert not ex.check(name, student, hidden=True, secret="test secret").ok


def _outputs_changed(name, mistake):
    """The outputs a mistake changes on at least one visible trial."""
    exercise = ex.get(name)
    changed = set()
    for trial, case in enumerate(exercise.visible):
        inputs = exercise.make_inputs(np.random.default_rng([0, trial, 0]), case)
        args = [inputs[p] for p in exercise.parameters]
        truth = dict(zip([o.name for o in exercise.outputs], exercise.tape_gradients(inputs), strict=True))
        try:
            with np.errstate(all="ignore"):
                values = mistake.fn(*args)
        except Exception:
            continue
        for output, value in values.items():
            value = np.asarray(value, dtype=float)
            if value.shape != np.shape(truth[output]) or not np.allclose(value, truth[output], equal_nan=False):
                changed.add(output)
    return changed


@pytest.mark.parametrize(("name", "mistake_name"), MISTAKES)
def test_each_hint_names_only_the_outputs_its_mistake_gets_wrong(name, mistake_name):
    exercise = ex.get(name)
    mistake = exercise.mistake(mistake_name)
    changed = _outputs_changed(name, mistake)
    assert changed, f"{mistake_name} changes nothing on the visible trials"
    for output in exercise.outputs:
        if output.name in changed:
            continue
        for word in output.hint_words:
            assert not re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", mistake.hint), (
                f"{name}.{mistake_name}: the hint names {word!r}, which this mistake gets right"
            )


def test_attention_scale_hints_describe_the_mistake_actually_made():
    exercise = ex.get("attention_backward")
    forward_only = exercise.mistake("no_forward_scale").hint
    backward_only = exercise.mistake("no_backward_scale").hint
    both = exercise.mistake("no_scale_anywhere").hint
    # Forward only: the backward already divides dQ, dK by √d — the hint must not ask for it.
    assert "divide" not in forward_only and "dQ = dS K / √d" not in forward_only
    assert "softmax(Q Kᵀ / √d)" in forward_only
    # Backward only: the forward is right; the hint is about dQ and dK only.
    assert "softmax" not in backward_only and "dV" not in backward_only
    assert "dQ = dS K / √d" in backward_only
    # Both: both fixes.
    assert "forward" in both and "divide dQ and dK by √d" in both

    # And each student gets the hint of their own mistake, not a neighbour's.
    for mistake_name in ("no_forward_scale", "no_backward_scale", "no_scale_anywhere"):
        result = ex.check("attention_backward", making_mistake("attention_backward", mistake_name))
        assert result.mistakes == (mistake_name,), result.message


def test_a_mistake_is_named_only_when_the_answer_holds_all_of_it():
    # dV computed without the scale in the forward, dQ and dK right: the
    # no_forward_scale variant changes all three, so it must not be named.
    def student(q, k, v, grad_c):
        grad_q, grad_k, _ = SOLUTIONS["attention_backward"](q, k, v, grad_c)
        wrong = ex.get("attention_backward").mistake("no_forward_scale").fn(q, k, v, grad_c)
        return grad_q, grad_k, wrong["grad_v"]

    result = ex.check("attention_backward", student)
    assert not result.ok and result.wrong_outputs == ("grad_v",)
    assert "no_forward_scale" not in result.mistakes and "no_scale_anywhere" not in result.mistakes


def test_two_independent_mistakes_are_both_named():
    def student(x, weight, grad_y):
        values = dict(zip(("grad_x", "grad_weight", "grad_bias"), SOLUTIONS["linear_backward"](x, weight, grad_y)))
        for mistake in ("weight_grad_one_row", "bias_summed_over_wrong_axis"):
            values.update(ex.get("linear_backward").mistake(mistake).fn(x, weight, grad_y))
        return values["grad_x"], values["grad_weight"], values["grad_bias"]

    result = ex.check("linear_backward", student)
    assert set(result.mistakes) == {"weight_grad_one_row", "bias_summed_over_wrong_axis"}
    assert result.status == "partly right" and result.right_outputs == ("grad_x",)


def test_required_kinds_of_mistake_are_covered():
    kinds = {(name, ex.get(name).mistake(m).kind) for name, m in MISTAKES}
    for pair in [
        ("attention_backward", "missing_scale"),
        ("attention_backward", "missing_rowsum"),
        ("attention_backward", "transposed"),
        ("attention_backward", "wrong_axis"),
        ("attention_backward", "unstable_exp"),
        ("softmax_backward", "missing_rowsum"),
        ("softmax_backward", "wrong_axis"),
        ("linear_backward", "transposed"),
        ("linear_backward", "wrong_axis"),
        ("masked_softmax_backward", "mask_not_applied"),
        ("masked_softmax_backward", "unstable_exp"),
        ("masked_attention", "mask_not_applied"),
        ("masked_attention", "mask_after_softmax"),
        ("dropout_backward", "dropout_scale_missing"),
        ("dropout_backward", "mask_not_applied"),
        ("attention_dropout_backward", "dropout_misplaced"),
        ("attention_dropout_backward", "dropout_scale_missing"),
        ("tanh_layer_backward", "wrong_derivative"),
        ("layernorm_backward", "ignored_argument"),
    ]:
        assert pair in kinds, pair


# ---------------------------------------------------------------- the package holds no answer


def _package_functions():
    """Every function defined in a module of microtape.exercises (the course included) or the grader."""
    found = []
    for module_name in [
        "exercises.checker",
        "exercises.registry",
        "exercises.catalogue",
        "exercises.scores",
        "exercises.trials",
        "grading.submission",
        "grading.remote",
        "grading.box",
        *(f"exercises.lab.{module}" for module in ex.LAB),
    ]:
        module = importlib.import_module(f"microtape.{module_name}")
        for attribute, value in vars(module).items():
            if inspect.isfunction(value) and value.__module__ == module.__name__:
                found.append((f"{module_name}.{attribute}", value))
    for name in NAMES:
        for mistake in ex.get(name).mistakes:
            found.append((f"{name}.mistakes.{mistake.name}", mistake.fn))
    return found


def _callable_with(fn, parameters):
    try:
        inspect.signature(fn).bind(*parameters)
    except (TypeError, ValueError):
        return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_nothing_in_the_package_is_accepted_as_an_answer(name):
    parameters = ex.get(name).parameters
    tried = 0
    for label, fn in _package_functions():
        if not _callable_with(fn, parameters):
            continue
        tried += 1
        with np.errstate(all="ignore"):
            result = ex.check(name, fn)
        assert not result.ok, f"{label} is accepted as an answer to {name}"
        if ex.get(name).stepped:
            # A mistake is the chain with one link wrong: the steps it computes after that link are
            # carried (right from its wrong step), never right; it returns no step it does not change.
            assert all(step.state != "right" for step in result.steps), f"{label} gets a step of {name} right"
            assert result.score == sum(s.points for s in result.steps if s.state == "carried"), result.message
        else:
            assert result.score == 0, f"{label} earns points on {name}: {result.message}"
    assert tried >= len(ex.get(name).mistakes)


@pytest.mark.parametrize("module_name", ["attention", "layernorm", "layer", "masked_attention", "attention_dropout"])
def test_no_mistake_switch_gives_the_right_answer(module_name):
    module = importlib.import_module(f"microtape.exercises.lab.{module_name}")
    (name,) = [n for n in module.__all__ if n in ex.EXERCISES]
    for mistake in module._CHANGES:
        with np.errstate(all="ignore"):
            assert not ex.check(name, lambda *args, m=mistake: module._with_mistake(m, *args)).ok
    with pytest.raises(ValueError, match="expected one of"):
        module._with_mistake("right", *[None] * len(ex.get(name).parameters))


def test_the_solutions_module_is_not_in_the_package():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("microtape.exercises.solutions")
    assert not hasattr(ex, "solutions")


# ---------------------------------------------------------------- feedback


def test_feedback_names_the_output_and_the_first_wrong_entry():
    def student(q, k, v, grad_c):
        grad_q, grad_k, grad_v = SOLUTIONS["attention_backward"](q, k, v, grad_c)
        grad_v = grad_v.copy()
        grad_v[..., 1, 1] += 0.5  # one wrong entry
        return grad_q, grad_k, grad_v

    result = ex.check("attention_backward", student)
    assert not result.ok
    assert [problem.output for problem in result.problems] == ["grad_v"]
    problem = result.problems[0]
    assert problem.index == (1, 1)
    assert problem.got == pytest.approx(problem.expected + 0.5)
    assert "grad_v[1, 1]" in result.message and "1 of 16 differ" in result.message
    assert "grad_q and grad_k are right" in result.message
    assert "no known mistake matches" in result.message
    assert "score 2 of 3: grad_q and grad_k right on all 5 trials; grad_v not yet." in result.message


def test_generic_diagnoses():
    negated = replacing("softmax_backward", grad_s=lambda p, g: -SOLUTIONS["softmax_backward"](p, g))

    def swapped(q, k, v, grad_c):
        grad_q, grad_k, grad_v = SOLUTIONS["attention_backward"](q, k, v, grad_c)
        return grad_k, grad_q, grad_v

    def doubled(grad_y, mask, p):
        return 2 * SOLUTIONS["dropout_backward"](grad_y, mask, p)

    kept_axis = replacing("linear_backward", grad_bias=lambda x, w, g: g.sum(axis=0, keepdims=True))
    transposed = replacing("linear_backward", grad_weight=lambda x, w, g: (g.T @ x).T)

    assert ex.check("softmax_backward", negated).mistakes == ("sign_flipped",)
    assert ex.check("attention_backward", swapped).mistakes == ("swapped_outputs",)
    result = ex.check("dropout_backward", doubled)
    assert result.mistakes == ("constant_factor",) and "2 × the right answer" in result.message
    result = ex.check("linear_backward", kept_axis)
    assert result.mistakes == ("extra_axis",) and "shape [1, 3], expected [3]" in result.message
    assert ex.check("linear_backward", transposed).kinds == ("transposed",)
    assert ex.check("softmax_backward", lambda p, grad_p: np.zeros_like(p)).mistakes == ("placeholder",)


def test_shape_error_gives_a_shape_message_not_a_traceback():
    def wrong_shape(x, weight, grad_y):
        return grad_y @ weight, np.zeros((2, 2)), grad_y.sum(axis=0)

    result = ex.check("linear_backward", wrong_shape)
    assert not result.ok and result.exception is None
    assert "grad_weight has shape [2, 2], expected [3, 3] — the shape of weight" in result.message
    assert "Traceback" not in result.message


@pytest.mark.parametrize(
    ("returned", "words"),
    [
        (None, "returned None — is the `return` missing?"),
        ((np.zeros(3), np.zeros(3)), "returned 2 values; expected 3: (grad_x, grad_weight, grad_bias)"),
        (np.zeros(3), "returned one ndarray; expected a tuple of 3"),
        (("a", "b", "c"), "grad_x is a str"),
        ({"grad_x": 1}, "grad_weight is missing from the returned dict (0 points for it)"),
        ({"dx": 1}, "the returned dict has none of the keys (grad_x, grad_weight, grad_bias) ('dx')"),
    ],
)
def test_malformed_returns_are_explained(returned, words):
    result = ex.check("linear_backward", lambda x, weight, grad_y: returned)
    assert not result.ok and result.status == "wrong" and result.score == 0
    assert words in result.message


def test_a_dict_by_node_name_is_an_answer():
    solution = SOLUTIONS["tanh_layer_backward"]
    assert ex.check("tanh_layer_backward", solution).ok  # returns a dict
    as_tuple = ex.check("tanh_layer_backward", lambda *args: tuple(solution(*args).values()))
    assert as_tuple.ok


def test_exception_inside_the_student_function_is_reported_with_the_exercise_name():
    def softmax_backward(p, grad_p):
        rowsum = np.sum(grad_p * p, axis=-1)
        return p * (grad_p - rowsum[:, :, None])  # fails on 2-D input

    result = ex.check("softmax_backward", softmax_backward)
    assert not result.ok
    assert isinstance(result.exception, IndexError)
    assert result.message.startswith("✗ softmax_backward raised IndexError (trial 1 of 5: p [4, 4], grad_p [4, 4])")
    assert "rowsum[:, :, None]" in result.message  # the line of the student's code


def test_batch_only_failure_names_the_trial_and_shapes():
    def one_head_only(q, k, v, grad_c):
        if q.ndim == 3:
            q = q.T  # a classic: .T reverses every axis
        return SOLUTIONS["attention_backward"](q, k, v, grad_c)

    result = ex.check("attention_backward", one_head_only)
    assert not result.ok and result.trial == 2
    assert "trial 3 of 5: q [2, 4, 3]" in result.message
    assert result.status == "wrong"  # it crashes on a later trial too: nothing is right on every trial


def test_a_function_with_the_wrong_arguments_is_told_so():
    result = ex.check("softmax_backward", lambda p: p)
    assert not result.ok
    assert "it needs 2 positional arguments" in result.message


def test_inputs_are_not_shared_with_the_student():
    seen = []

    def greedy(p, grad_p):
        seen.append(p.copy())
        p[...] = 0.0  # vandalise the input
        grad_p[...] = 0.0
        return np.zeros_like(p)

    ex.check("softmax_backward", greedy, trials=1)
    # A fresh check still sees the original inputs and passes the right answer.
    assert ex.check("softmax_backward", SOLUTIONS["softmax_backward"]).ok
    assert np.allclose(seen[0].sum(axis=-1), 1.0)


def test_bad_arguments_to_check():
    with pytest.raises(ValueError, match="Did you mean 'softmax_backward'"):
        ex.check("softmax_backwrd", SOLUTIONS["softmax_backward"])
    with pytest.raises(TypeError, match="must be a function"):
        ex.check("softmax_backward", 3)
    with pytest.raises(ValueError, match=r"check\(trials=0\)"):
        ex.check("softmax_backward", SOLUTIONS["softmax_backward"], trials=0)
    with pytest.raises(ValueError, match=r"check\(time_limit=-1\): expected a positive number"):
        ex.check("softmax_backward", SOLUTIONS["softmax_backward"], time_limit=-1)
    with pytest.raises(ValueError, match="has no output named 'grad_z'"):
        ex.get("linear_backward").output("grad_z")


def test_result_renders():
    good = ex.check("dropout_backward", SOLUTIONS["dropout_backward"])
    bad = ex.check("dropout_backward", lambda grad_y, mask, p: grad_y * mask)
    assert bool(good) and not bool(bad)
    assert str(bad) == bad.message
    assert "<pre" in good._repr_html_() and "&lt;" not in good._repr_html_()
    assert "dropout scale missing" in bad._repr_html_()
    assert bad.hints and bad.kinds == ("dropout_scale_missing",)
    assert "wrong, 0/1" in repr(bad)


def test_starter_file_is_valid_python_with_every_stub():
    text = ex.starter_file()
    compile(text, "starter.py", "exec")
    for name in NAMES:
        assert f"def {name}(" in text


def test_tanh_layer_answer_lines_up_with_compare_by_node_name():
    import microtape as mt
    from microtape.exercises.lab.layer import NODES, tanh_layer_tape

    rng = np.random.default_rng(5)
    x, weight, bias = rng.standard_normal((3, 4)), rng.standard_normal((2, 4)), rng.standard_normal(2)
    grad_h = rng.standard_normal((3, 2))
    tape, h = tanh_layer_tape(x, weight, bias)
    mine = SOLUTIONS["tanh_layer_backward"](x, weight, bias, grad_h)
    report = mt.check.compare(tape, h, mine, grad=grad_h)
    assert report.ok and {row.name for row in report} == set(NODES)
    wrong = dict(mine, z=grad_h * (1 - (x @ weight.T + bias) ** 2))
    assert mt.check.compare(tape, h, wrong, grad=grad_h).first_failure == "z"


# ---------------------------------------------------------------- the notebooks' storage

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebook_07_has_a_stub_and_a_check_for_every_exercise_in_lab_order():
    (notebook,) = [path for path in NOTEBOOKS if path.name == "07_exercises.ipynb"]
    sources = ["".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"]]
    stubs = []
    for i, source in enumerate(sources):
        for name in NAMES:
            if source.startswith(f"def {name}(") and "raise NotImplementedError" in source:
                stubs.append(name)
                assert f'ex.check("{name}", {name})' in sources[i + 1], name
    assert stubs == NAMES
    assert any("ex.score(globals())" in source for source in sources)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_notebooks_are_stored_without_outputs(notebook):
    """The notebooks are committed clean (see notebooks/README.md); `make test` executes them."""
    cells = json.loads(notebook.read_text())["cells"]
    dirty = [i for i, cell in enumerate(cells) if cell.get("outputs") or cell.get("execution_count")]
    assert not dirty, (
        f"{notebook.name}: cells {dirty} have stored outputs; clear them with "
        "`jupyter nbconvert --clear-output --inplace notebooks/*.ipynb`"
    )


def test_the_op_exercise_registers_the_students_vjp_as_an_op():
    """Notebook 07's last step: the (right) VJP becomes an op — recorded, drawn, passed by gradcheck."""
    import microtape as mt
    from microtape.exercises.lab.op_vjp import logsumexp_forward
    from microtape.ops import OPS

    op = mt.ops.define("student_logsumexp", forward=logsumexp_forward, vjp=SOLUTIONS["logsumexp_vjp"],
                       formula="{g} * softmax({x})")  # fmt: skip
    try:
        scores = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
        assert mt.check.gradcheck(lambda t: op(t).sum(), scores).ok
        wrong = ex.get("logsumexp_vjp").mistake("not_normalised").fn
        careless = mt.ops.define("careless_logsumexp", forward=logsumexp_forward,
                                 vjp=lambda g, ans, x: (wrong(g, ans, x)["grad_x"],), formula="{g}")  # fmt: skip
        assert not mt.check.gradcheck(lambda t: careless(t).sum(), scores, raise_exception=False).ok
        x = mt.Tensor(scores, requires_grad=True, name="scores")
        with mt.Tape() as tape:
            op(x, name="lse").sum(name="total")
        assert "student_logsumexp" in mt.viz.graph(tape, backward=True).source
    finally:
        OPS.pop("student_logsumexp", None)
        OPS.pop("careless_logsumexp", None)


def test_the_logaddexp_exercise_registers_a_vjp_that_agrees_with_the_builtin_op():
    """The derived VJP, registered with define: gradcheck passes, and it equals mt.logaddexp's (b broadcast)."""
    import microtape as mt
    from microtape.exercises.lab.logaddexp_vjp import logaddexp_forward
    from microtape.ops import OPS

    op = mt.ops.define("student_logaddexp", forward=logaddexp_forward, vjp=SOLUTIONS["logaddexp_vjp"],
                       formula=["{g} * exp({a} - y)", "{g} * exp({b} - y)"])  # fmt: skip
    try:
        a0, b0 = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]]), np.array([0.5, 0.5, -2.0])
        assert mt.check.gradcheck(lambda s, t: op(s, t).sum(), a0, b0).ok
        a, b = mt.Tensor(a0, requires_grad=True), mt.Tensor(b0, requires_grad=True)
        mine, builtin = mt.gradients(op(a, b).sum()), mt.gradients(mt.logaddexp(a, b).sum())
        np.testing.assert_allclose(mine[a], builtin[a], rtol=1e-14)
        np.testing.assert_allclose(mine[b], builtin[b], rtol=1e-14)
        # The known mistake of the exercise (b's gradient not summed back) fails gradcheck.
        wrong = ex.get("logaddexp_vjp").mistake("b_not_summed").fn
        careless = mt.ops.define(
            "careless_logaddexp", forward=logaddexp_forward, formula=["{g}", "{g}"],
            vjp=lambda g, ans, a, b: (SOLUTIONS["logaddexp_vjp"](g, ans, a, b)[0], wrong(g, ans, a, b)["grad_b"]),
        )  # fmt: skip
        assert not mt.check.gradcheck(lambda s, t: careless(s, t).sum(), a0, b0, raise_exception=False).ok
    finally:
        OPS.pop("student_logaddexp", None)
        OPS.pop("careless_logaddexp", None)
