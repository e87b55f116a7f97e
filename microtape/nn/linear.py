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

import numbers

import numpy as np

from ..tape import module_scope
from ..tensor import Tensor
from . import analytic

__all__ = ["Linear", "linear"]


def linear(x, weight, bias=None, name=None):
    """``x @ weight.T + bias`` with Tensor methods (also runs on ScalarArrays)."""
    product = x.matmul(weight.T, name="xW^T" if bias is not None else name)
    if bias is None:
        return product
    output = product + bias
    output.name = name
    return output


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{what}: expected a positive integer, got {value!r}")
    return int(value)


def _float_dtype(dtype, what):
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"{what}: expected float32 or float64, got {dtype}")
    return dtype


class Linear:
    """A fully connected layer ``y = x Wᵀ + b``.

    Initialisation is PyTorch's default: every weight and bias entry is drawn
    uniformly from ``[-1/√in, 1/√in]``, which keeps the output's scale close
    to the input's. ``seed`` makes it reproducible.

    ``forward`` records ``matmul`` and ``add`` on the tape (run ``.backward()``
    on anything computed from the output); ``backward(grad)`` is the analytic
    route: it returns the input gradient and *adds* into ``weight.grad`` and
    ``bias.grad``.
    """

    def __init__(self, in_features, out_features, bias=True, *, seed=None, dtype=np.float64, name="linear"):
        self.in_features = _positive_int(in_features, "Linear(in_features)")
        self.out_features = _positive_int(out_features, "Linear(out_features)")
        dtype = _float_dtype(dtype, "Linear(dtype)")
        self.name = name
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(self.in_features)
        self.weight = Tensor(
            rng.uniform(-bound, bound, (self.out_features, self.in_features)).astype(dtype),
            requires_grad=True,
            name=f"{name}.weight",
        )
        self.bias = None
        if bias:
            self.bias = Tensor(
                rng.uniform(-bound, bound, self.out_features).astype(dtype),
                requires_grad=True,
                name=f"{name}.bias",
            )
        self._last_input = None

    def __repr__(self):
        return f"Linear(in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None})"

    @property
    def dtype(self):
        return self.weight.data.dtype

    def named_parameters(self):
        """``[(name, Tensor), ...]``: the weight, then the bias (if any)."""
        named = [("weight", self.weight)]
        if self.bias is not None:
            named.append(("bias", self.bias))
        return named

    def parameters(self):
        return [tensor for _, tensor in self.named_parameters()]

    def zero_grad(self):
        for tensor in self.parameters():
            tensor.grad = None

    def _check_input(self, x):
        if isinstance(x, Tensor):
            data = x.data
        elif isinstance(x, np.ndarray):
            data = x
        else:
            raise TypeError(f"Linear.forward(x): expected a Tensor or numpy array, got {type(x).__name__}")
        if data.ndim < 1 or data.shape[-1] != self.in_features:
            raise ValueError(
                f"Linear.forward(x): x has shape {data.shape}; expected [..., {self.in_features}] "
                f"(the last axis must be in_features={self.in_features})"
            )
        if data.dtype.kind not in "fiu":
            raise TypeError(f"Linear.forward(x): expected real numbers, got dtype {data.dtype}")
        if isinstance(x, Tensor) and (x.dtype == self.dtype or x.requires_grad):
            # A taped input stays connected; a cast to our dtype is recorded too.
            return x if x.dtype == self.dtype else x.astype(self.dtype)
        return Tensor(data.astype(self.dtype, copy=False), name="x")

    def forward(self, x, name=None):
        """``x @ weight.T + bias`` on the tape. Returns a Tensor."""
        x = self._check_input(x)
        with module_scope(self.name):
            output = linear(x, self.weight, self.bias, name=name or f"{self.name}.out")
        self._last_input = x
        return output

    __call__ = forward

    def backward(self, grad_output):
        """The analytic backward of the last forward: returns dx, adds into dW and db."""
        if self._last_input is None:
            raise RuntimeError("Linear.backward(): call forward() first")
        x = self._last_input.data
        grad_output = np.asarray(getattr(grad_output, "data", grad_output)).astype(self.dtype, copy=False)
        expected = x.shape[:-1] + (self.out_features,)
        if grad_output.shape != expected:
            raise ValueError(f"Linear.backward(grad_output): shape {grad_output.shape}, expected {expected}")
        grad_x, grad_weight, grad_bias = analytic.linear_backward(grad_output, x, self.weight.data)
        _accumulate(self.weight, grad_weight)
        if self.bias is not None:
            _accumulate(self.bias, grad_bias)
        return grad_x


def _accumulate(tensor, grad):
    tensor.grad = grad if tensor.grad is None else tensor.grad + grad
