"""The same Transformer pieces in PyTorch eager, built from microtape's own models (``to_torch``).

Imported only by the torch workers, under an interpreter that has torch
(and microtape on its path). "The same model": every torch module here is
``to_torch()`` of the microtape layer it is compared with (the same weights,
``nn.TransformerEncoderLayer`` post-norm, batch_first), the positions are the
same table, the loss ``F.cross_entropy`` over the flattened tokens, the
optimizer ``torch.optim.Adam`` with the same settings. One thread.
"""

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:  # already set: harmless
    pass


class TorchTiny(torch.nn.Module):
    """``microtape.train.TinyTransformer`` in torch: embedding + positions, encoder layers, head."""

    def __init__(self, model):
        super().__init__()
        self.embedding = model.embedding.to_torch()
        self.register_buffer("positions", torch.from_numpy(np.array(model.positions.table[: model.length])))
        self.layers = torch.nn.ModuleList([layer.to_torch() for layer in model.layers])
        dtype = torch.float64 if model.dtype == np.float64 else torch.float32
        self.head = torch.nn.Linear(model.head.in_features, model.head.out_features, dtype=dtype)
        with torch.no_grad():
            self.head.weight.copy_(torch.from_numpy(model.head.weight.data))
            self.head.bias.copy_(torch.from_numpy(model.head.bias.data))

    def forward(self, ids):
        h = self.embedding(ids) + self.positions
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def train_step(model, optimizer, ids, targets):
    """One step: forward, cross-entropy, backward, Adam. Returns the loss."""
    optimizer.zero_grad()
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss.item()


def encoder_step(module, x, grad_y):
    """One forward + backward of a torch encoder layer; returns dx."""
    x.grad = None
    for p in module.parameters():
        p.grad = None
    module(x).backward(grad_y)
    return x.grad
