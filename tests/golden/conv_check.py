"""What the convolution golden tests share: compare two sets of answers key by key, find torch live, and the two
checks every case gets (tests/ops/test_conv_golden.py for the ops, tests/nn/test_conv_layers.py for the layers)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from .conv_cases import draw_inputs, fingerprint, run_microtape


def assert_same_answers(got, expected, name, tolerance=1e-10):
    """Every key of ``expected`` is in ``got`` with the same shape and values (float64, to ``tolerance``)."""
    assert sorted(got) == sorted(expected), f"{name}: keys {sorted(got)} != {sorted(expected)}"
    for key, value in expected.items():
        assert np.shape(got[key]) == np.shape(value), f"{name} {key}: shape {np.shape(got[key])} != {np.shape(value)}"
        np.testing.assert_allclose(got[key], value, rtol=tolerance, atol=tolerance, err_msg=f"{name} {key}")


def assert_inputs_are_the_ones_torch_saw(stored):
    """The inputs drawn again from the seed have the fingerprint of those torch was given."""
    fresh = fingerprint(draw_inputs(stored["config"]))
    assert sorted(fresh) == sorted(stored["fingerprint"])
    for key, (shape, total, squares) in stored["fingerprint"].items():
        assert fresh[key][0] == shape, key
        np.testing.assert_allclose(fresh[key][1:], [total, squares], rtol=1e-12, atol=1e-12, err_msg=key)


def live_torch():
    """torch for a live check: skipped when missing, unless ``MICROTAPE_REQUIRE_TORCH=1``."""
    if os.environ.get("MICROTAPE_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch")


def assert_matches_fixture(mt, stored, name):
    """The case ``stored`` (one entry of the fixture): drawn again, its inputs are torch's, and microtape ``mt``
    gives the stored answers."""
    assert_inputs_are_the_ones_torch_saw(stored)
    assert_same_answers(run_microtape(mt, stored["config"]), stored["answers"], name)


def assert_matches_torch_live(mt, stored, name):
    """The case computed by torch now: the fixture still holds its answers (to 1e-12), and microtape gives them."""
    live_torch()
    from .make_golden_conv import run_torch

    reference = run_torch(stored["config"])
    assert_same_answers(reference, stored["answers"], f"{name} (the fixture against torch now)", 1e-12)
    assert_same_answers(run_microtape(mt, stored["config"]), reference, name)
