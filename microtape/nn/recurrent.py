"""RNNCell and GRUCell: one step of a recurrent net, in PyTorch's names, layout and gate order.

This module lets you unroll a recurrent net over time and backpropagate through it::

    >>> import numpy as np, microtape as mt
    >>> cell = mt.nn.RNNCell(3, 5, seed=0)
    >>> xs = np.random.default_rng(0).normal(size=(4, 2, 3))      # T = 4 steps, batch 2
    >>> h = None
    >>> for x in xs:
    ...     h = cell(x, h)                                           # [2, 5]; every step on the tape
    >>> h.sum().backward()                                           # backpropagation through time

The vanilla cell::

    h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)          (nonlinearity="relu": relu instead)

The GRU (PyTorch's formula; the rows of ``weight_ih``/``weight_hh`` hold the
gates in the order r, z, n)::

    r  = σ(x W_irᵀ + b_ir + h W_hrᵀ + b_hr)              reset gate
    z  = σ(x W_izᵀ + b_iz + h W_hzᵀ + b_hz)              update gate
    n  = tanh(x W_inᵀ + b_in + r ⊙ (h W_hnᵀ + b_hn))     candidate
    h' = (1 − z) ⊙ n + z ⊙ h

Parameters ``weight_ih [G·hidden, input]``, ``weight_hh [G·hidden, hidden]``,
``bias_ih`` and ``bias_hh [G·hidden]`` (G = 1 for the vanilla cell, 3 for the
GRU), all drawn uniformly from ``±1/√hidden_size`` (PyTorch's default), so
weights copy straight across.
"""

from typing import Any

import numpy as np

from ..values.tensor import Tensor
from .checks import float_dtype, input_array, positive_int, seed_value
from .linear import linear
from .module import Module

__all__ = ["RNNCell", "GRUCell"]


class _Cell(Module):
    """The parameters and the input checks the two cells share; ``gates`` rows per hidden unit."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: Any, seed: int | None, dtype: Any) -> None:
        super().__init__()
        kind = type(self).__name__
        self.input_size = positive_int(input_size, f"{kind}(input_size)")
        self.hidden_size = positive_int(hidden_size, f"{kind}(hidden_size)")
        if not isinstance(bias, (bool, np.bool_)):
            raise TypeError(f"{kind}(bias={bias!r}): expected True or False")
        dtype = float_dtype(dtype, f"{kind}(dtype)")
        rng = np.random.default_rng(seed_value(seed, f"{kind}(seed)"))
        bound = 1.0 / np.sqrt(self.hidden_size)
        rows = self.gates * self.hidden_size

        def draw(*shape: Any) -> Tensor:
            return Tensor(rng.uniform(-bound, bound, shape).astype(dtype), requires_grad=True)

        self.weight_ih = draw(rows, self.input_size)
        self.weight_hh = draw(rows, self.hidden_size)
        self.bias_ih = draw(rows) if bias else None
        self.bias_hh = draw(rows) if bias else None

    @property
    def dtype(self) -> Any:
        return self.weight_ih.data.dtype

    def _node(self, value: Any, argument: str, size: Any, batch: int | None = None) -> Any:
        where = f"{type(self).__name__}.forward"
        data = input_array(value, argument, where, self.dtype)
        if data.ndim != 2 or data.shape[1] != size or (batch is not None and data.shape[0] != batch):
            rows = "B" if batch is None else str(batch)
            raise ValueError(f"{where}: {argument} has shape {data.shape}; expected [{rows}, {size}]")
        if isinstance(value, Tensor) and value.requires_grad:
            return value if value.dtype == self.dtype else value.astype(self.dtype)
        return Tensor(data, name=argument)

    def _inputs(self, x: Any, h: Any) -> Any:
        x = self._node(x, "x", self.input_size)
        if h is None:
            h = Tensor(np.zeros((x.shape[0], self.hidden_size), dtype=self.dtype), name="h")
        else:
            h = self._node(h, "h", self.hidden_size, batch=x.shape[0])
        return x, h


class RNNCell(_Cell):
    """``h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`` (PyTorch's ``nn.RNNCell``); ``h`` defaults to zeros."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        *,
        seed: int | None = None,
        dtype: Any = np.float64,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell(nonlinearity={nonlinearity!r}): expected 'tanh' or 'relu'")
        super().__init__(input_size, hidden_size, bias, seed, dtype)
        self.nonlinearity = nonlinearity

    def __repr__(self) -> str:
        return f"RNNCell({self.input_size}, {self.hidden_size}, nonlinearity={self.nonlinearity!r})"

    def forward(self, x: Any, h: Any = None, name: str = "h_next") -> Any:
        """One step: ``x [B, input_size]``, ``h [B, hidden_size]`` (or None: zeros) → the next hidden state."""
        x, h = self._inputs(x, h)
        with self.scope():
            pre = linear(x, self.weight_ih, self.bias_ih, name="x_part") + linear(
                h, self.weight_hh, self.bias_hh, name="h_part"
            )
            pre.name = "pre"
            return pre.tanh(name=name) if self.nonlinearity == "tanh" else pre.relu(name=name)


class GRUCell(_Cell):
    """A gated recurrent unit (PyTorch's ``nn.GRUCell``): gates r, z, n in that order; ``h`` defaults to zeros."""

    gates = 3

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, *, seed: int | None = None, dtype: Any = np.float64
    ) -> None:
        super().__init__(input_size, hidden_size, bias, seed, dtype)

    def __repr__(self) -> str:
        return f"GRUCell({self.input_size}, {self.hidden_size})"

    def forward(self, x: Any, h: Any = None, name: str = "h_next") -> Any:
        """One step: ``x [B, input_size]``, ``h [B, hidden_size]`` (or None: zeros) → the next hidden state."""
        x, h = self._inputs(x, h)
        size = self.hidden_size
        with self.scope():
            from_x = linear(x, self.weight_ih, self.bias_ih, name="x_gates")  # [B, 3H]: r, z, n parts side by side
            from_h = linear(h, self.weight_hh, self.bias_hh, name="h_gates")
            r = (from_x[:, :size] + from_h[:, :size]).sigmoid(name="r")
            z = (from_x[:, size : 2 * size] + from_h[:, size : 2 * size]).sigmoid(name="z")
            n = (from_x[:, 2 * size :] + r * from_h[:, 2 * size :]).tanh(name="n")
            output = (1.0 - z) * n + z * h
            output.name = name
            return output
