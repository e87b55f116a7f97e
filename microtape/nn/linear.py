"""Linear: ``y = x @ weight.T + bias``, taped and hand-derived.

This module lets you build and differentiate a fully connected layer::

    >>> import numpy as np, microtape as mt
    >>> layer = mt.nn.Linear(3, 2, seed=0)
    >>> y = layer(np.ones((4, 3)))          # a Tensor of shape [4, 2]
    >>> dx = layer.backward(np.ones((4, 2)))  # analytic: fills weight.grad, bias.grad

The weight has shape ``[out, in]`` and the bias ``[out]`` — PyTorch's
convention, so weights copy straight across. Inputs may have any number of
leading axes (``[B, T, in]``): every row shares the same weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

import numpy as np

from ..engine import Tape
from ..values.tensor import Tensor
from .checks import float_dtype, gradient_array, input_array, positive_int, seed_value
from .module import Module, add_to_grads

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from ..values.array_like import ArrayLike

__all__ = ["Linear", "linear", "linear_steps", "linear_backward"]


def linear_steps(
    x: ArrayLike, weight: ArrayLike, bias: Any = None, name: str | None = None
) -> tuple[ArrayLike, ArrayLike]:
    """``x @ weight.T + bias`` with Tensor methods; returns ``(product, output)``.

    Runs on Tensors, ScalarArrays and Plain arrays alike. The product is
    called ``xW^T`` (listings qualify it by module: ``q_proj.xW^T``); the
    result gets ``name``. Without a bias the product is the output.
    """
    product = x.matmul(weight.T, name="xW^T" if bias is not None else name)
    if bias is None:
        return product, product
    output = product + bias
    output.name = name
    return product, output


@overload
def linear(x: Tensor, weight: Tensor, bias: Any = None, name: str | None = None) -> Tensor: ...
@overload
def linear(x: ArrayLike, weight: ArrayLike, bias: Any = None, name: str | None = None) -> ArrayLike: ...
def linear(x: ArrayLike, weight: ArrayLike, bias: Any = None, name: str | None = None) -> ArrayLike:
    """``x @ weight.T + bias`` (see :func:`linear_steps`)."""
    return linear_steps(x, weight, bias, name)[1]


def linear_backward(grad_y: np.ndarray, x: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``y = x Wᵀ + b``: returns ``(dx, dW, db)``.

    Every row of ``x`` used the same ``W`` and ``b``, so their gradients sum
    over all rows (all leading axes, flattened).
    """
    rows_x = x.reshape(-1, x.shape[-1])
    rows_g = grad_y.reshape(-1, grad_y.shape[-1])
    grad_x = grad_y @ weight
    grad_weight = rows_g.T @ rows_x
    grad_bias = rows_g.sum(axis=0)
    return grad_x, grad_weight, grad_bias


class Linear(Module):
    """A fully connected layer ``y = x Wᵀ + b``.

    Initialisation is PyTorch's default: every weight and bias entry is drawn
    uniformly from ``[-1/√in, 1/√in]``, which keeps the output's scale close
    to the input's. ``seed`` makes it reproducible.

    ``forward`` records ``matmul`` and ``add`` on the tape (run ``.backward()``
    on anything computed from the output); ``backward(grad)`` is the analytic
    route: it returns the input gradient and *adds* into ``weight.grad`` and
    ``bias.grad``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        seed: int | None = None,
        dtype: DTypeLike = np.float64,
    ) -> None:
        super().__init__()
        in_features = positive_int(in_features, "Linear(in_features)")
        out_features = positive_int(out_features, "Linear(out_features)")
        if not isinstance(bias, (bool, np.bool_)):
            raise TypeError(f"Linear(bias={bias!r}): expected True or False")
        dtype = float_dtype(dtype, "Linear(dtype)")
        rng = np.random.default_rng(seed_value(seed, "Linear(seed)"))
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / np.sqrt(in_features)
        self.weight = Tensor(rng.uniform(-bound, bound, (out_features, in_features)).astype(dtype), requires_grad=True)
        self.bias = None
        if bias:
            self.bias = Tensor(rng.uniform(-bound, bound, out_features).astype(dtype), requires_grad=True)
        self._last_input = None

    def __repr__(self) -> str:
        return f"Linear(in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None})"

    @property
    def dtype(self) -> Any:
        return self.weight.data.dtype

    def _input_node(self, x: Any) -> Any:
        data = input_array(x, "x", "Linear.forward", self.dtype)
        if data.ndim < 1 or data.shape[-1] != self.in_features:
            raise ValueError(
                f"Linear.forward: x has shape {data.shape}; expected [..., {self.in_features}] "
                f"(the last axis must be in_features={self.in_features})"
            )
        if isinstance(x, Tensor) and x.requires_grad:
            # A taped input stays connected; a cast to our dtype is recorded too.
            return x if x.dtype == self.dtype else x.astype(self.dtype)
        return Tensor(data, name="x")

    def forward(self, x: Any, name: str | None = "y") -> Tensor:
        """``x @ weight.T + bias`` on the tape. Returns a Tensor; refuses a result that overflowed."""
        with Tape.atomic(), np.errstate(all="ignore"):
            x = self._input_node(x)
            with self.scope():
                output = linear(x, self.weight, self.bias, name=name)
            if not np.isfinite(output.data).all():
                index = tuple(int(i) for i in np.argwhere(~np.isfinite(output.data))[0])
                raise FloatingPointError(
                    f"Linear.forward: the output overflowed {self.dtype.name} at index {index} "
                    "(x or the weights are too large for this dtype); nothing was recorded"
                )
        self._last_input = x
        return output

    def backward(self, grad_output: Any) -> np.ndarray:
        """The analytic backward of the last forward: returns dx, *adds* into dW and db."""
        if self._last_input is None:
            raise RuntimeError("Linear.backward(): call forward() first")
        x = self._last_input.data
        expected = x.shape[:-1] + (self.out_features,)
        grad_output = gradient_array(grad_output, "grad_output", "Linear.backward", expected, self.dtype)
        with np.errstate(all="ignore"):
            grad_x, grad_weight, grad_bias = linear_backward(grad_output, x, self.weight.data)
        for value, what in ((grad_x, "dx"), (grad_weight, "dW"), (grad_bias, "db")):
            if not np.isfinite(value).all():
                raise FloatingPointError(
                    f"Linear.backward: {what} overflowed {self.dtype.name} (grad_output or x too large); "
                    "nothing was changed"
                )
        add_to_grads([(self.weight, grad_weight)] + ([(self.bias, grad_bias)] if self.bias is not None else []))
        return grad_x
