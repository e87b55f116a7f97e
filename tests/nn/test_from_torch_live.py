"""from_torch against PyTorch live: it converts exactly or refuses naming the field.

Needs torch (`make test-torch`); skipped when it is missing, unless
``MICROTAPE_REQUIRE_TORCH=1``. Also: logsumexp's infinite edge values are
PyTorch's, computed now.
"""

import os
import re

import numpy as np
import pytest

if os.environ.get("MICROTAPE_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch")

import microtape as mt  # noqa: E402

pytestmark = pytest.mark.torch


def _decoder(**options):
    torch.manual_seed(0)
    return torch.nn.TransformerDecoderLayer(8, 2, 16, batch_first=True, dtype=torch.float64, **options).eval()


def _encoder(**options):
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dtype=torch.float64, **options).eval()


def test_a_decoder_whose_attentions_have_different_head_counts_is_refused():
    module = _decoder()
    module.multihead_attn = torch.nn.MultiheadAttention(8, 4, batch_first=True, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"multihead_attn\.num_heads is 4 but self_attn\.num_heads is 2"):
        mt.nn.TransformerDecoderLayer.from_torch(module)


@pytest.mark.parametrize("kind", ["Encoder", "Decoder"])
def test_batch_first_false_is_refused_naming_the_field(kind):
    torch.manual_seed(0)
    module = getattr(torch.nn, f"Transformer{kind}Layer")(8, 2, 16, batch_first=False, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"self_attn\.batch_first is False"):
        getattr(mt.nn, f"Transformer{kind}Layer").from_torch(module)
    attention = torch.nn.MultiheadAttention(8, 2, batch_first=False, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"batch_first=False"):
        mt.nn.MultiHeadAttention.from_torch(attention)


@pytest.mark.parametrize(
    "make, field",
    [
        (_encoder, "dropout1.p"),
        (_encoder, "dropout.p"),
        (_encoder, "self_attn.dropout"),
        (_decoder, "dropout3.p"),
        (_decoder, "multihead_attn.dropout"),
    ],
)
def test_a_dropout_probability_that_differs_is_refused_naming_it(make, field):
    module = make(dropout=0.1)
    owner, attribute = field.rsplit(".", 1)
    target = getattr(module, owner)
    setattr(target, attribute, 0.3)
    ours = mt.nn.TransformerEncoderLayer if make is _encoder else mt.nn.TransformerDecoderLayer
    named = re.escape(field)
    either_order = rf"({named} is 0\.3 but .* is 0\.1|is 0\.1 but {named} is 0\.3); microtape's layer has one"
    with pytest.raises(ValueError, match=either_order):
        ours.from_torch(module)


def test_the_same_dropout_everywhere_converts():
    layer = mt.nn.TransformerDecoderLayer.from_torch(_decoder(dropout=0.25))
    assert layer.dropout == 0.25 and layer.self_attn.dropout == 0.25 and layer.multihead_attn.dropout == 0.25


def test_a_feedforward_dropout_out_of_place_is_refused():
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Linear(4, 8, dtype=torch.float64),
        torch.nn.ReLU(),
        torch.nn.Linear(8, 4, dtype=torch.float64),
        torch.nn.Dropout(0.1),
    )
    with pytest.raises(ValueError, match=r"FeedForward\.from_torch: expected Sequential\(Linear, ReLU"):
        mt.nn.FeedForward.from_torch(module)


def test_logsumexp_edge_values_match_pytorch_now():
    rows = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.inf, -np.inf], [-np.inf, 1.0], [np.nan, 1.0], [3.0, 4.0]])
    ours = mt.Tensor(rows, requires_grad=True).logsumexp(axis=1).data
    theirs = torch.logsumexp(torch.from_numpy(rows), dim=1).numpy()
    np.testing.assert_array_equal(ours, theirs)
