"""The exb exercises beyond attention: what the registry-looped tests in test_exercises.py do not cover.

The looped tests already feed every exercise its reference solution (visible
and hidden trials), each named mistake (diagnosed by name, its hint naming
only the outputs it gets wrong) and the stub. Here: that each tape answer is
the function the prompt describes (checked independently — finite
differences of a plain loop, the untiled attention chain, the transpose
identity of forward mode, the Hessian's symmetry), the overlap and flip cases
the hints talk about, the large hidden trial, and the errors.
"""

import numpy as np
import pytest
from exercise_helpers import replacing

import microtape as mt
import microtape.exercises as ex
from instructor.solutions import SOLUTIONS
from microtape.exercises.lab import conv_chain, gru, maxpool, rnn, tiled_attention_backward
from microtape.exercises.lab.core import taped

NEW = [
    "conv1d_backward",
    "conv2d_backward",
    "maxpool_backward",
    "avgpool_backward",
    "rnn_bptt",
    "gru_cell_backward",
    "softmax_jvp",
    "logsumexp_hvp",
    "tiled_attention_backward",
]


def _inputs(name, case, seed=0):
    return ex.get(name).make_inputs(np.random.default_rng(seed), case)


def _numeric_gradient(f, x, eps=1e-6):
    """Central differences of the scalar ``f`` at every entry of ``x`` (changed in place, then restored)."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        keep = x[index]
        x[index] = keep + eps
        up = f()
        x[index] = keep - eps
        down = f()
        x[index] = keep
        grad[index] = (up - down) / (2 * eps)
    return grad


def test_the_new_exercises_are_in_the_lab():
    names = ex.list_exercises()
    assert set(NEW) <= set(names)
    assert len(names) >= 25


@pytest.mark.parametrize("name", ex.list_exercises())
def test_every_exercise_has_at_least_five_named_mistakes_with_hints(name):
    exercise = ex.get(name)
    assert len(exercise.mistakes) >= 5
    assert all(len(mistake.hint) > 40 for mistake in exercise.mistakes)


@pytest.mark.parametrize("name", NEW)
def test_one_hidden_trial_is_too_large_for_finite_differences(name):
    # Two forward passes per input entry: ~10 000 entries or more cannot be done within a second.
    exercise = ex.get(name)
    sizes = []
    for case in exercise.hidden:
        inputs = _inputs(name, case)
        sizes.append(sum(np.size(inputs[p]) for p in exercise.parameters if isinstance(inputs[p], np.ndarray)))
    assert max(sizes) >= 10_000
    assert max(sizes) > 20 * max(
        sum(np.size(v) for v in _inputs(name, case).values() if isinstance(v, np.ndarray)) for case in exercise.visible
    )


# ---------------------------------------------------------------- convolution and pooling


def _loop_conv(x, w, b, stride, padding):
    """Convolution by the definition, one output entry at a time (1 or 2 spatial axes)."""
    spatial = x.ndim - 2
    padded = np.pad(x, ((0, 0), (0, 0)) + ((padding, padding),) * spatial)
    kernels = w.shape[2:]
    outs = tuple(conv_chain.out_size(n, k, stride, padding) for n, k in zip(x.shape[2:], kernels))
    y = np.zeros((x.shape[0], w.shape[0], *outs))
    for n, o, *where in np.ndindex(y.shape):
        window = tuple(slice(stride * i, stride * i + k) for i, k in zip(where, kernels))
        y[(n, o, *where)] = np.sum(padded[(n, slice(None), *window)] * w[o]) + b[o]
    return y


@pytest.mark.parametrize("name", ["conv1d_backward", "conv2d_backward"])
def test_the_conv_tape_is_the_convolution_of_the_prompt(name):
    # The tape's im2col (pad, take, einsum) against finite differences of a plain loop.
    case = ex.get(name).visible[1]  # stride 2, padding 1
    inputs = _inputs(name, case)
    x, w, b = inputs["x"].copy(), inputs["w"].copy(), inputs["b"].copy()
    grad_y = inputs["grad_y"]

    def loss():
        return float(np.sum(_loop_conv(x, w, b, inputs["stride"], inputs["padding"]) * grad_y))

    grad_x, grad_w, grad_b = ex.get(name).tape_gradients(inputs)
    assert np.allclose(grad_x, _numeric_gradient(loss, x), atol=1e-7)
    assert np.allclose(grad_w, _numeric_gradient(loss, w), atol=1e-7)
    assert np.allclose(grad_b, _numeric_gradient(loss, b), atol=1e-7)


def test_the_conv_input_gradient_is_a_full_correlation_with_the_flipped_kernel():
    # Stride 1, no padding: grad_x = full correlation of grad_y with w flipped (the prompt's claim).
    inputs = _inputs("conv1d_backward", ex.get("conv1d_backward").visible[0])
    grad_x = ex.get("conv1d_backward").tape_gradients(inputs)[0]
    w, grad_y = inputs["w"], inputs["grad_y"]
    size = w.shape[2]
    padded = np.pad(grad_y, ((0, 0), (0, 0), (size - 1, size - 1)))
    flipped = w[:, :, ::-1]
    by_correlation = np.stack(
        [np.einsum("nok,ock->nc", padded[:, :, j : j + size], flipped) for j in range(grad_x.shape[2])], axis=-1
    )
    assert np.allclose(grad_x, by_correlation, rtol=1e-12, atol=1e-12)


def test_the_conv_mistakes_refuse_an_unknown_name():
    inputs = _inputs("conv1d_backward", ex.get("conv1d_backward").visible[0])
    args = [inputs[p] for p in ex.get("conv1d_backward").parameters]
    with pytest.raises(ValueError, match=r"conv_with_mistake\(mistake='right'\): expected one of"):
        conv_chain.conv_with_mistake("right", *args)


def test_the_conv_family_is_declared_once_with_each_exercises_own_trials_and_words():
    one, two = ex.get("conv1d_backward"), ex.get("conv2d_backward")
    assert [m.name for m in one.mistakes] == [m.name for m in two.mistakes] == list(conv_chain.CONV_MISTAKES)
    assert [m.kind for m in one.mistakes] == [m.kind for m in two.mistakes]
    assert all(a.hint != b.hint for a, b in zip(one.mistakes, two.mistakes)), "each is worded for its axes"
    assert one.visible != two.visible and one.tape_gradients is two.tape_gradients is conv_chain.taped_conv
    hints = {name: "a hint" for name in conv_chain.CONV_MISTAKES if name != "w_grad_flipped"}
    with pytest.raises(ValueError, match="expected a hint for each of"):
        conv_chain.conv_exercise(one.stub, title="t", visible=one.visible, hidden=one.hidden, hints=hints)


def test_maxpool_an_entry_that_is_the_max_of_overlapping_windows_gets_both_gradients():
    x = np.zeros((1, 1, 3, 3))
    x[0, 0, 1, 1] = 5.0  # the centre is the maximum of all four 2×2 windows (stride 1)
    x[0, 0] += np.arange(9).reshape(3, 3) * 1e-3  # no ties elsewhere
    grad_y = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    inputs = {"x": x, "grad_y": grad_y, "kernel": 2, "stride": 1}
    (grad_x,) = maxpool.tape_gradients(inputs)
    expected = np.zeros_like(x)
    expected[0, 0, 1, 1] = 10.0
    assert np.array_equal(grad_x, expected)
    assert np.array_equal(SOLUTIONS["maxpool_backward"](x, grad_y, 2, 1), expected)
    # Overwriting instead of adding keeps one window's gradient: the named mistake.
    overwritten = maxpool._with_mistake("overlap_overwritten", x, grad_y, 2, 1)["grad_x"]
    assert overwritten[0, 0, 1, 1] in (1.0, 2.0, 3.0, 4.0)


def test_avgpool_entries_in_no_window_get_nothing():
    name = "avgpool_backward"
    case = next(c for c in ex.get(name).visible if c["stride"] > c["kernel"])
    inputs = _inputs(name, case)
    (grad_x,) = ex.get(name).tape_gradients(inputs)
    kernel, stride = inputs["kernel"], inputs["stride"]
    covered = np.zeros(grad_x.shape[2:], dtype=bool)
    for i in range(inputs["grad_y"].shape[2]):
        for j in range(inputs["grad_y"].shape[3]):
            covered[stride * i : stride * i + kernel, stride * j : stride * j + kernel] = True
    assert not covered.all() and np.all(grad_x[..., ~covered] == 0.0)
    assert np.allclose(grad_x.sum(), inputs["grad_y"].sum())  # each window hands out exactly its gradient


# ---------------------------------------------------------------- recurrent nets


def test_rnn_tape_matches_finite_differences_of_the_loop():
    inputs = _inputs("rnn_bptt", ex.get("rnn_bptt").visible[0])
    arrays = {name: inputs[name].copy() for name in ("x", "h0", "W_xh", "W_hh", "b")}

    def loss():
        h, total = arrays["h0"], 0.0
        for t in range(arrays["x"].shape[0]):
            h = np.tanh(arrays["x"][t] @ arrays["W_xh"].T + h @ arrays["W_hh"].T + arrays["b"])
            total += np.sum(h * inputs["grad_h"][t])
        return total

    taped_grads = dict(zip(("W_xh", "W_hh", "b", "h0", "x"), rnn.tape_gradients(inputs), strict=True))
    for name, grad in taped_grads.items():
        assert np.allclose(grad, _numeric_gradient(loss, arrays[name]), atol=1e-7), name


def test_gru_tape_matches_finite_differences_of_pytorchs_equations():
    inputs = _inputs("gru_cell_backward", ex.get("gru_cell_backward").visible[0])
    names = ("x", "h", "W_ih", "W_hh", "b_ih", "b_hh")
    arrays = {name: inputs[name].copy() for name in names}

    def loss():
        a = arrays
        i_r, i_z, i_n = np.split(a["x"] @ a["W_ih"].T + a["b_ih"], 3, axis=1)
        h_r, h_z, h_n = np.split(a["h"] @ a["W_hh"].T + a["b_hh"], 3, axis=1)
        r, z = 1 / (1 + np.exp(-(i_r + h_r))), 1 / (1 + np.exp(-(i_z + h_z)))
        n = np.tanh(i_n + r * h_n)
        return float(np.sum(((1 - z) * n + z * a["h"]) * inputs["grad_h_next"]))

    for name, grad in zip(names, gru.tape_gradients(inputs), strict=True):
        assert np.allclose(grad, _numeric_gradient(loss, arrays[name]), atol=1e-7), name


def test_a_bptt_that_stops_after_one_step_back_is_told_about_the_recurrent_path():
    def truncated(x, h0, W_xh, W_hh, b, grad_h):
        # Truncated BPTT (one step): a common shortcut, not the gradient asked for.
        right = SOLUTIONS["rnn_bptt"](x, h0, W_xh, W_hh, b, grad_h)
        return right[:3] + (right[3] * 0.0 + 1.0, right[4])

    result = ex.check("rnn_bptt", truncated)
    assert not result.ok and "grad_h0" in result.message
    assert result.score == 4


# ---------------------------------------------------------------- forward mode and second order


@pytest.mark.parametrize("seed", range(3))
def test_softmax_jvp_and_the_tapes_vjp_are_transposes(seed):
    # ⟨u, J v⟩ = ⟨Jᵀ u, v⟩: the student's forward mode against the tape's reverse mode.
    rng = np.random.default_rng(seed)
    s, v, u = (rng.standard_normal((3, 5)) for _ in range(3))
    jv = SOLUTIONS["softmax_jvp"](s, v)
    scores = mt.Tensor(s, requires_grad=True)
    with mt.Tape() as tape:
        p = scores.softmax(-1)
    tape.backward(p, u)
    assert np.isclose(np.sum(u * jv), np.sum(scores.grad * v), rtol=1e-12, atol=1e-14)
    # And the tape's own forward mode is what the exercise grades against.
    (tangent,) = ex.get("softmax_jvp").tape_gradients({"s": s, "ds": v})
    assert np.allclose(tangent, jv, rtol=1e-12, atol=1e-14)


def test_logsumexp_hvp_is_the_hessian_diag_p_minus_p_p_transposed():
    rng = np.random.default_rng(0)
    x, v, u = (rng.standard_normal(6) for _ in range(3))
    hessian = mt.hessian(lambda t: t.logsumexp(axis=-1).sum(), x)
    p = np.exp(x - np.log(np.sum(np.exp(x))))
    assert np.allclose(hessian, np.diag(p) - np.outer(p, p), rtol=1e-12, atol=1e-14)
    (hv,) = ex.get("logsumexp_hvp").tape_gradients({"x": x, "v": v})
    assert np.allclose(hv, hessian @ v, rtol=1e-12, atol=1e-14)
    # Symmetric: ⟨u, H v⟩ = ⟨H u, v⟩, and the student's answer says so too.
    solution = SOLUTIONS["logsumexp_hvp"]
    assert np.isclose(u @ solution(x, v), solution(x, u) @ v, rtol=1e-12)


def test_an_hvp_that_mixes_the_rows_is_caught_only_where_there_are_rows():
    result = ex.check("logsumexp_hvp", ex.get("logsumexp_hvp").mistake("rows_mixed").fn)
    assert not result.ok and result.mistakes == ("rows_mixed",)


# ---------------------------------------------------------------- tiled attention


def test_the_tiled_tape_answer_is_the_untiled_attention_chains():
    for case in ex.get("tiled_attention_backward").visible:
        inputs = _inputs("tiled_attention_backward", case)
        by_tiles = tiled_attention_backward.tape_gradients(inputs)
        context, *by_chain = taped({"q": inputs["q"], "k": inputs["k"], "v": inputs["v"], "grad_c": inputs["grad_o"]})
        assert np.allclose(context, inputs["o"], rtol=1e-12, atol=1e-14)
        for tiled, chain in zip(by_tiles, by_chain, strict=True):
            assert np.allclose(tiled, chain, rtol=1e-12, atol=1e-14)


def test_the_saved_lse_is_what_makes_p_cheap():
    inputs = _inputs("tiled_attention_backward", ex.get("tiled_attention_backward").visible[1])
    q, k, lse = inputs["q"], inputs["k"], inputs["lse"]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - lse[..., None])
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


def test_a_dk_built_from_dp_names_its_step_and_leaves_dq_and_dv_right():
    student = replacing(
        "tiled_attention_backward",
        grad_k=lambda *args: tiled_attention_backward._with_mistake("grad_k_from_grad_weights", *args)["grad_k"],
    )
    result = ex.check("tiled_attention_backward", student)
    assert result.mistakes == ("grad_k_from_grad_weights",)
    assert result.score == 2 and "grad_k" in result.message


# ---------------------------------------------------------------- bad answers get clear words


@pytest.mark.parametrize("name", NEW)
def test_a_wrong_shape_names_the_output_and_the_input_it_should_look_like(name):
    exercise = ex.get(name)
    first = exercise.outputs[0]

    def wrong_shape(*args):
        right = SOLUTIONS[name](*args)
        right = right if isinstance(right, tuple) else (right,)
        return (right[0][..., None],) + right[1:] if len(right) > 1 else right[0][..., None]

    result = ex.check(name, wrong_shape)
    assert not result.ok
    assert f"{first.name} has shape" in result.message and f"the shape of {first.like}" in result.message


@pytest.mark.parametrize("name", NEW)
def test_a_wrong_signature_is_told_the_arguments(name):
    result = ex.check(name, lambda only_one: only_one)
    assert not result.ok and result.trials_run == 0
    assert all(parameter in result.message for parameter in ex.get(name).parameters)
