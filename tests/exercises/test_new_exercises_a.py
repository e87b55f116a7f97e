"""Issue #36, part a: eight exercises from the chain rule to a residual block.

The registry-looped tests (tests/exercises/test_exercises.py and
test_exercises_trust.py) already feed each of them its reference solution,
each named mistake, float32 answers and the stub. Here: what is particular to
them — the large hidden trial, and the classic mistakes written the way a
student writes them (not built from the registered variants).
"""

import importlib
import time

import numpy as np
import pytest

import microtape.exercises as ex
from instructor.solutions import SOLUTIONS

NEW = {
    "scalar_chain_rule": "chain_rule",
    "mlp_backward": "mlp",
    "affine_relu_backward": "affine_relu",
    "softmax_cross_entropy_backward": "softmax_cross_entropy",
    "mse_backward": "mse",
    "logistic_loss_backward": "logistic_loss",
    "embedding_backward": "embedding",
    "residual_norm_backward": "residual_norm",
}


def test_the_eight_are_in_the_lab_in_their_modules():
    names = ex.list_exercises()
    assert set(NEW) <= set(names) and set(NEW.values()) <= set(ex.LAB)
    # The chain rule opens the lab: the first thing a unit on backpropagation teaches.
    assert names[0] == "scalar_chain_rule"


@pytest.mark.parametrize("name", NEW)
def test_each_has_five_named_mistakes_with_hints_and_a_stub(name):
    exercise = ex.get(name)
    assert len(exercise.mistakes) >= 5
    assert all(len(mistake.hint) > 40 for mistake in exercise.mistakes)
    assert not exercise.stretch and "raise NotImplementedError" in exercise.stub_source()


def _float_inputs(exercise, case):
    inputs = exercise.make_inputs(np.random.default_rng(0), case)
    args = [inputs[p] for p in exercise.parameters]
    return sum(a.size for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f")


@pytest.mark.parametrize("name", NEW)
def test_a_hidden_trial_is_too_large_to_differentiate_numerically_in_a_second(name):
    """Issue #35: thousands of inputs (one forward each, twice for a central difference); a derivation passes.

    (How long the check takes is measured in benchmarks/, never asserted here.)
    """
    exercise = ex.get(name)
    largest = max(_float_inputs(exercise, case) for case in exercise.hidden)
    assert largest >= 10_000, largest
    assert max(_float_inputs(exercise, case) for case in exercise.visible) < 200  # the visible ones stay readable
    result = ex.check(name, SOLUTIONS[name], hidden=True, secret=f"a fresh secret {name} {time.time_ns()}")
    assert result.ok, result.message


@pytest.mark.parametrize("module_name", NEW.values())
def test_no_mistake_switch_gives_the_right_answer(module_name):
    module = importlib.import_module(f"microtape.exercises.lab.{module_name}")
    (name,) = [n for n in module.__all__ if n in ex.EXERCISES]
    switches = getattr(module, "_CHANGES", None) or module._MISTAKES
    for mistake in switches:
        with np.errstate(all="ignore"):
            assert not ex.check(name, lambda *args, m=mistake: module._with_mistake(m, *args)).ok
    with pytest.raises(ValueError, match="expected one of"):
        module._with_mistake("right", *[None] * len(ex.get(name).parameters))


# ---------------------------------------------------------------- the classics, as students write them


def test_chain_rule_splitting_the_sum_and_a_tuple_answer():
    def student(a, b, c, g):
        f = np.tanh(a * b + c)
        grad_d = g * (1 - f**2)
        grad_e = grad_c = grad_d / 2  # "the + shares the gradient between its inputs"
        return grad_e * b, grad_e * a, grad_c, grad_e, grad_d, g, f

    result = ex.check("scalar_chain_rule", student)
    assert result.mistakes == ("sum_splits_the_gradient",), result.message
    assert set(result.right_outputs) == {"grad_d", "grad_f", "grad_g"}
    assert result.score == 3 and result.max_score == 7


def test_chain_rule_with_the_tanh_derivative_of_d():
    def student(a, b, c, g):
        d = a * b + c
        grad_d = g * (1 - d**2)
        return {"grad_a": grad_d * b, "grad_b": grad_d * a, "grad_c": grad_d, "grad_e": grad_d,
                "grad_d": grad_d, "grad_f": g, "grad_g": np.tanh(d)}  # fmt: skip

    result = ex.check("scalar_chain_rule", student)
    assert "tanh_derivative_of_d" in result.mistakes and "1 − f²" in result.message


def test_affine_relu_with_pytorch_layout_and_the_mask_from_the_gradient():
    def pytorch_layout(x, w, b, grad_out):
        grad_z = grad_out * (x @ w + b > 0)
        return grad_z @ w.T, grad_z.T @ x, grad_z.sum(axis=0)

    result = ex.check("affine_relu_backward", pytorch_layout)
    assert result.mistakes == ("w_grad_transposed",) and result.right_outputs == ("grad_x", "grad_b")

    def mask_from_gradient(x, w, b, grad_out):
        grad_z = np.where(grad_out > 0, grad_out, 0.0)  # relu applied to the gradient
        return grad_z @ w.T, x.T @ grad_z, grad_z.sum(axis=0)

    assert ex.check("affine_relu_backward", mask_from_gradient).mistakes == ("relu_mask_from_the_gradient",)


def test_cross_entropy_classics():
    def softmax(s):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def np_mean_of_everything(logits, y):
        onehot = np.eye(logits.shape[1])[y]
        return (softmax(logits) - onehot) / onehot.size

    def naive_exp(logits, y):
        e = np.exp(logits)
        p = e / e.sum(axis=-1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
        return p / len(y)

    assert ex.check("softmax_cross_entropy_backward", np_mean_of_everything).mistakes == ("mean_over_every_entry",)
    with np.errstate(all="ignore"):
        result = ex.check("softmax_cross_entropy_backward", naive_exp)
    assert result.mistakes == ("exp_not_stabilised",) and result.trial == 4, result.message  # the large trial


def test_logistic_loss_with_an_overflowing_sigmoid_and_with_the_mse_derivative():
    def overflowing(logits, y):
        sigma = np.exp(logits) / (1 + np.exp(logits))
        return (sigma - y) / len(y)

    with np.errstate(all="ignore"):
        result = ex.check("logistic_loss_backward", overflowing)
    assert result.mistakes == ("sigmoid_overflows",), result.message

    def through_sigma_prime(logits, y):
        sigma = 1 / (1 + np.exp(-np.clip(logits, -500, 500)))
        return (sigma - y) * sigma * (1 - sigma) / len(y)

    assert ex.check("logistic_loss_backward", through_sigma_prime).mistakes == ("sigmoid_derivative_extra",)


def test_mse_dividing_by_the_rows():
    def student(pred, target):
        grad = 2 * (pred - target) / len(pred)
        return grad, -grad

    assert ex.check("mse_backward", student).mistakes == ("mean_over_rows_only",)


@pytest.mark.parametrize("write", ["assign", "add_in_place"])
def test_embedding_fancy_index_writes_drop_the_repeats(write):
    def student(tokens, table, grad_out):
        grad = np.zeros_like(table)
        if write == "assign":
            grad[tokens] = grad_out
        else:
            grad[tokens] += grad_out  # buffered: still one gradient per repeated id
        return grad

    result = ex.check("embedding_backward", student)
    assert result.mistakes == ("fancy_index_assignment",), result.message
    assert "np.add.at" in result.message
    assert not ex.check("embedding_backward", student, hidden=True, secret="test secret").ok


def test_embedding_trials_always_repeat_a_token():
    exercise = ex.get("embedding_backward")
    for hidden in (False, True):
        for trial, case in enumerate(exercise.cases(hidden)):
            tokens = exercise.make_inputs(np.random.default_rng([5, trial]), case)["tokens"]
            assert np.unique(tokens).size < tokens.size


def test_residual_block_without_the_skip_path():
    def student(x, w, b, gamma, grad_y, eps):
        r = x + x @ w.T + b
        centred = r - r.mean(axis=-1, keepdims=True)
        inv_std = 1 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
        rhat = centred * inv_std
        g = grad_y * gamma
        grad_r = inv_std * (g - g.mean(axis=-1, keepdims=True) - rhat * (g * rhat).mean(axis=-1, keepdims=True))
        grad_x = grad_r @ w  # through f only: the skip connection forgotten
        return grad_x, grad_r.T @ x, grad_r.sum(axis=0), (grad_y * rhat).sum(axis=0), grad_y.sum(axis=0)

    result = ex.check("residual_norm_backward", student)
    assert result.mistakes == ("identity_path_forgotten",), result.message
    assert result.right_outputs == ("grad_w", "grad_b", "grad_gamma", "grad_beta")


def test_a_function_with_the_wrong_arguments_names_the_expected_ones():
    result = ex.check("residual_norm_backward", lambda x, w, b, grad_y: None)
    assert not result.ok and "residual_norm_backward(x, w, b, gamma, grad_y, eps)" in result.message
