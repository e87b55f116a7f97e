"""Hints for the slips students make in attention, and a headline that agrees with the score.

Each student below writes the whole attention backward by hand with one
common slip; the checker must name that slip (not a generic "wrong"), and the
first line of its message must never call an output right that the score
table calls wrong.
"""

import numpy as np
import pytest

import microtape.exercises as ex


def _t(x):
    return np.swapaxes(x, -1, -2)


def attention(q, k, v, grad_c, *, scale=None, shift=None, keepdims=True, grad_v=None):
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale(q.shape[-1])
    s = q @ _t(k) * scale
    e = np.exp(s - (s.max(axis=-1, keepdims=True) if shift is None else shift(s)))
    p = e / e.sum(axis=-1, keepdims=True)
    dp = grad_c @ _t(v)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=keepdims))
    return ds @ k * scale, _t(ds) @ q * scale, (_t(p) @ grad_c if grad_v is None else grad_v(p, grad_c))


SLIPS = {
    "global_max": dict(shift=lambda s: s.max()),
    "rowsum_without_keepdims": dict(keepdims=False),
    "scale_one_over_d": dict(scale=lambda d: 1.0 / d),
}


@pytest.mark.parametrize("slip", SLIPS)
@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_each_slip_gets_its_own_hint(slip, hidden):
    def student(q, k, v, grad_c):
        return attention(q, k, v, grad_c, **SLIPS[slip])

    with np.errstate(all="ignore"):
        result = ex.check("attention_backward", student, hidden=hidden, secret="test secret")
    assert not result.ok
    assert slip in result.mistakes, result.message
    assert ex.get("attention_backward").mistake(slip).hint in result.message


def test_the_headline_agrees_with_the_score_when_a_later_trial_crashes():
    """dV = P dC runs on the square first trial (wrong values) and crashes on the next: 0 of 3."""

    def student(q, k, v, grad_c):
        return attention(q, k, v, grad_c, grad_v=lambda p, g: p @ g)

    result = ex.check("attention_backward", student)
    assert result.score == 0 and result.status == "wrong"
    headline = result.message.splitlines()[0]
    assert headline == "✗ attention_backward: grad_v is wrong.", result.message
    assert "score 0 of 3" in result.message


def test_the_headline_names_as_right_only_what_was_right_on_every_trial():
    def student(q, k, v, grad_c):
        return attention(q, k, v, grad_c, grad_v=lambda p, g: np.swapaxes(_t(p) @ g, -1, -2))

    result = ex.check("attention_backward", student)
    headline = result.message.splitlines()[0]
    assert headline == "✗ attention_backward: grad_v is wrong; grad_q and grad_k are right.", result.message
    assert result.right_outputs == ("grad_q", "grad_k") and result.score == 2
