"""Run the golden cases on microtape and compare with the torch references.

Shared by ``tests/nn/test_golden_torch.py`` (references read from the committed
``.npz`` files) and ``tests/nn/test_torch_live.py`` (references computed by
torch on the spot).  A reference is always a dict in the format of
``load.py``, so both test files call the same functions below.

The microtape module is passed in as an argument (``mt``) instead of being
imported here, so that this folder stays importable without microtape (for
``make_golden.py``).
"""

from __future__ import annotations

import numpy as np

from .attention_cases import PARAMETER_NAMES
from .expressions import Expression

ATOL = 1e-10
RTOL = 1e-10


def assert_close(actual, expected, what: str) -> None:
    """Check shape and values (atol = rtol = 1e-10); ``what`` names the quantity."""
    assert actual is not None, f"{what}: microtape gave None, expected an array"
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} but torch has {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=what)


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


def make_microtape_inputs(mt, arrays: list[np.ndarray]) -> list:
    """``mt.Scalar`` for 0-d arrays, ``mt.Tensor(..., requires_grad=True)`` otherwise."""
    inputs = []
    for array in arrays:
        if np.ndim(array) == 0:
            inputs.append(mt.Scalar(float(array)))
        else:
            inputs.append(mt.Tensor(np.array(array, dtype=np.float64), requires_grad=True))
    return inputs


def check_expression(mt, expression: Expression, reference: dict, use_tape: bool) -> None:
    """Run ``expression`` on microtape and compare output and input gradients.

    Tensor outputs get ``reference["upstream"]`` as their upstream gradient;
    Scalar outputs are differentiated with ``backward()`` (upstream 1.0).
    With ``use_tape`` the expression runs inside ``mt.Tape()`` and the tape's
    own ``backward(y, grad=...)`` is used instead of ``y.backward(...)``.
    """
    inputs = make_microtape_inputs(mt, reference["inputs"])
    upstream = np.array(reference["upstream"], dtype=np.float64)

    if use_tape:
        with mt.Tape() as tape:
            output = expression.fn(*inputs)
        if expression.is_scalar:
            tape.backward(output)
        else:
            tape.backward(output, grad=upstream)
    else:
        output = expression.fn(*inputs)
        if expression.is_scalar:
            output.backward()
        else:
            output.backward(upstream)

    assert_close(output.data, reference["output"], f"{expression.name}: output")
    for index, (value, expected_grad) in enumerate(zip(inputs, reference["grads"], strict=True)):
        assert_close(value.grad, expected_grad, f"{expression.name}: grad of input {index}")


# --------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------


def build_attention(mt, case: dict):
    """A ``mt.nn.MultiHeadAttention`` with the case's weights copied in."""
    config = case["config"]
    attn = mt.nn.MultiHeadAttention(config["E"], config["H"], causal=config["causal"])
    for name in PARAMETER_NAMES:
        projection, part = name.split(".")  # e.g. "q_proj", "weight"
        parameter = getattr(getattr(attn, projection), part)
        parameter.data[...] = case["params"][name]
    return attn


def attention_forward(attn, case: dict, self_call: str = "one_argument"):
    """Call the layer the way the case describes and return its output.

    For self-attention, ``self_call`` picks ``attn(x)`` (``"one_argument"``)
    or ``attn(x, x, x)`` (``"same_object"``); both must be self-attention.
    The user mask is passed only if the case has one (causality comes from
    the layer's ``causal=True``).
    """
    kind = case["config"]["kind"]
    inputs = case["inputs"]
    mask = case["mask"]
    if kind == "self":
        x = inputs["x"]
        if self_call == "one_argument":
            return attn(x, mask=mask)
        return attn(x, x, x, mask=mask)
    if kind == "cross":
        return attn(inputs["query"], inputs["key"], inputs["value"], mask=mask)
    if kind == "cross_kv_same":
        key_value = inputs["key_value"]
        return attn(inputs["query"], key_value, key_value, mask=mask)
    raise ValueError(f"unknown case kind {kind!r}")


def input_grads_like_torch(attn, case: dict, returned_grad) -> dict:
    """microtape's input gradients, keyed like torch's leaves.

    ``returned_grad`` is what ``attn.backward(...)`` returned.  For
    ``key_value`` (one tensor used as key and value) torch accumulates both
    roles into one gradient, so we add ``dk + dv``.
    """
    kind = case["config"]["kind"]
    if kind == "self":
        return {"x": returned_grad}
    grad_key = np.asarray(attn.grad_key_input())
    grad_value = np.asarray(attn.grad_value_input())
    if kind == "cross":
        return {"query": returned_grad, "key": grad_key, "value": grad_value}
    return {"query": returned_grad, "key_value": grad_key + grad_value}


def parameter_grads(attn) -> dict:
    """``{"q_proj.weight": grad, ...}`` read from each Linear's ``.grad``."""
    grads = {}
    for name in PARAMETER_NAMES:
        projection, part = name.split(".")
        grads[name] = getattr(getattr(attn, projection), part).grad
    return grads


def check_attention_forward(attn, case: dict, output) -> None:
    """Compare the layer output and the per-head attention weights."""
    name = case["name"]
    assert_close(np.asarray(output.data), case["output"], f"{name}: output")
    assert_close(attn.attention_weights, case["attention_weights"], f"{name}: attention weights")


def check_attention_backward(attn, case: dict, returned_grad) -> None:
    """Compare every input gradient and every parameter gradient with torch."""
    name = case["name"]
    assert returned_grad is not None, f"{name}: backward returned None"
    returned_grad = np.asarray(returned_grad)
    actual_inputs = input_grads_like_torch(attn, case, returned_grad)
    for input_name, expected in case["input_grads"].items():
        assert_close(actual_inputs[input_name], expected, f"{name}: grad of {input_name}")
    actual_params = parameter_grads(attn)
    for param_name, expected in case["param_grads"].items():
        assert_close(actual_params[param_name], expected, f"{name}: grad of {param_name}")


def check_attention(mt, case: dict, method: str = "tape", after_tape_pass: bool = False) -> None:
    """The whole cross-check of one case: forward, then backward by ``method``.

    ``method="tape"`` calls ``attn.backward(grad_output)`` (the default:
    replay the tape); ``method="analytic"`` calls ``attn.backward(grad_output,
    method="analytic")`` (the hand-derived formulas), after ``zero_grad()``.

    With ``after_tape_pass`` the layer first runs one complete forward and
    tape backward; then comes a fresh forward, ``attn.zero_grad()`` and the
    backward under test -- which checks that ``zero_grad`` really clears the
    first pass's gradients and that a second forward replaces the first.
    """
    if method not in ("tape", "analytic"):
        raise ValueError(f"method must be 'tape' or 'analytic', got {method!r}")
    attn = build_attention(mt, case)

    if after_tape_pass:
        attention_forward(attn, case)
        attn.backward(case["grad_output"])

    output = attention_forward(attn, case)
    check_attention_forward(attn, case, output)

    if method == "tape":
        if after_tape_pass:
            attn.zero_grad()
        returned_grad = attn.backward(case["grad_output"])
    else:
        attn.zero_grad()
        returned_grad = attn.backward(case["grad_output"], method="analytic")
    check_attention_backward(attn, case, returned_grad)


def check_tiled_attention(mt, case: dict, block_size: int, method: str = "tape") -> None:
    """The cross-check of one case on the tiled path (``block_size``): forward, then backward by ``method``.

    ``method="tape"`` is the tiled backward (the ``tiled_attention`` op's
    VJP); ``"analytic"`` the hand-derived chain on weights recomputed from
    Q, K and the saved log-sum-exp. ``attention_weights`` are recomputed too.
    """
    attn = build_attention(mt, case)
    attn.block_size = block_size
    output = attention_forward(attn, case)
    assert attn.tape.find("context").op.name == "tiled_attention"
    check_attention_forward(attn, case, output)
    returned_grad = attn.backward(case["grad_output"], method=method)
    check_attention_backward(attn, case, returned_grad)
