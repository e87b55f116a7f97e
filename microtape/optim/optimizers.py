"""Optimizers: SGD (with momentum) and Adam, with PyTorch's update rules.

This module lets you train any microtape model::

    model = mt.nn.Linear(3, 1, seed=0)
    optimizer = mt.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in batches:
        loss = ((model(x) - y) * (model(x) - y)).mean()
        optimizer.zero_grad()
        loss.backward()          # fills every parameter's .grad
        optimizer.step()         # changes the parameters in place

The update rules, for a parameter ``p`` with gradient ``g`` at step ``t``
(the formulas of ``torch.optim.SGD`` and ``torch.optim.Adam``; the tests
follow PyTorch's trajectories for 20 steps):

    SGD       v ← g (first step),  v ← μ v + g (later);   p ← p − lr · v        (μ = momentum; v = g when μ = 0)
    Adam      g ← g + λ p                                   (weight_decay λ: L2 added to the gradient)
              m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²
              p ← p − lr · (m / (1 − β₁ᵗ)) / (sqrt(v / (1 − β₂ᵗ)) + eps)

Dividing by ``1 − βᵗ`` undoes the pull of the zero start of ``m`` and ``v``
in the first steps (the "bias correction"). A parameter whose ``.grad`` is
None is skipped (its step count does not advance), as in PyTorch. ``step``
checks every gradient before it changes anything: a missing shape or a NaN
is refused with the parameter's name, and no parameter moves.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..values.tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adam"]


def _hyper_parameter(value: Any, what: str, expected: str, accept: Callable[[float], bool]) -> float:
    """A finite real number for which ``accept(number)`` holds, as a float; ValueError naming ``what`` otherwise.

    Every hyper-parameter must be finite: an infinite weight decay or a
    learning rate of 10**400 (an int too large for a float) is refused here,
    not met as inf/NaN parameters (or a bare OverflowError) in the first step.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what}: expected {expected}, got {value!r:.60}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{what}: expected {expected}, got {value!r:.40}, too large for a float") from None
    if not math.isfinite(number) or not accept(number):
        raise ValueError(f"{what}: expected {expected}, got {value!r:.60}")
    return number


def _positive(value: Any, what: str) -> float:
    return _hyper_parameter(value, what, "a finite positive number", lambda x: x > 0)


def _fraction(value: Any, what: str) -> float:
    """A number with 0 <= value < 1 (a momentum, a beta)."""
    return _hyper_parameter(value, what, "a number with 0 <= value < 1", lambda x: 0 <= x < 1)


class Optimizer:
    """What SGD and Adam share: the parameter list, ``zero_grad``, and a ``step`` that checks before it moves."""

    def __init__(self, params: Iterable[Tensor], where: str) -> None:
        if isinstance(params, Tensor):
            raise TypeError(f"{where}(params): expected a list of parameters, got a single Tensor; wrap it: [p]")
        if hasattr(params, "named_parameters") and hasattr(params, "parameters"):
            raise TypeError(f"{where}(params): expected model.parameters(), got the module itself")
        try:
            params = list(params)
        except TypeError:
            raise TypeError(f"{where}(params): expected an iterable of Tensors, got {type(params).__name__}") from None
        if not params:
            raise ValueError(f"{where}(params): the parameter list is empty")
        seen = set()
        for position, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{where}(params): item {position} is a {type(p).__name__}, expected a Tensor")
            if not (p.requires_grad and p.is_leaf):
                raise ValueError(
                    f"{where}(params): item {position} ({p.name or 'unnamed'}) is not a parameter "
                    "(a leaf Tensor with requires_grad=True)"
                )
            if id(p) in seen:
                raise ValueError(f"{where}(params): item {position} ({p.name or 'unnamed'}) is listed twice")
            seen.add(id(p))
        self.params = params
        self.where = where
        self.state: list[dict[str, Any]] = [{} for _ in params]  # per parameter: step count and buffers

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (``.grad = None``)."""
        for p in self.params:
            p.grad = None

    def _checked_gradients(self) -> list[np.ndarray | None]:
        """Every parameter's gradient, checked (shape, finiteness) before any update."""
        grads = []
        for position, p in enumerate(self.params):
            g = p.grad
            if g is not None:
                label = p.name or f"params[{position}]"
                if not isinstance(g, np.ndarray) or g.dtype.kind not in "fiu":
                    kind = f"dtype {g.dtype}" if isinstance(g, np.ndarray) else f"a {type(g).__name__} ({g!r:.40})"
                    lost = (
                        " (its imaginary part would be lost)"
                        if isinstance(g, np.ndarray) and g.dtype.kind == "c"
                        else ""
                    )
                    raise TypeError(
                        f"{self.where}.step(): {label}.grad is {kind}{lost}; expected a real numpy array of shape "
                        f"{p.shape} (or None); no parameter was changed"
                    )
                if g.shape != p.shape:
                    raise ValueError(f"{self.where}.step(): {label}.grad has shape {g.shape}, the parameter {p.shape}")
                if not np.isfinite(g).all():
                    index = tuple(int(i) for i in np.argwhere(~np.isfinite(g))[0])
                    raise FloatingPointError(
                        f"{self.where}.step(): {label}.grad is {g[index]} at {index}; no parameter was changed"
                    )
            grads.append(g)
        return grads

    def step(self) -> None:
        """Update every parameter that has a gradient (in place). Nothing moves if any gradient is bad."""
        for p, g, state in zip(self.params, self._checked_gradients(), self.state):
            if g is not None:
                state["step"] = state.get("step", 0) + 1
                self._update(p.data, g.astype(p.dtype, copy=False), state)

    def _update(self, data: np.ndarray, grad: np.ndarray, state: dict[str, Any]) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with (heavy-ball) momentum: PyTorch's ``SGD(params, lr, momentum)``."""

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0) -> None:
        super().__init__(params, "SGD")
        self.lr = _positive(lr, "SGD(lr)")
        self.momentum = _fraction(momentum, "SGD(momentum)")

    def __repr__(self) -> str:
        return f"SGD({len(self.params)} parameters, lr={self.lr:g}, momentum={self.momentum:g})"

    def _update(self, data: np.ndarray, grad: np.ndarray, state: dict[str, Any]) -> None:
        if self.momentum:
            velocity = state.get("velocity")
            # The first step starts the velocity at the gradient itself (PyTorch's choice).
            state["velocity"] = grad.copy() if velocity is None else self.momentum * velocity + grad
            grad = state["velocity"]
        data -= self.lr * grad


class Adam(Optimizer):
    """Adam: PyTorch's ``Adam(params, lr, betas, eps, weight_decay)`` (L2 weight decay added to the gradient)."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, "Adam")
        self.lr = _positive(lr, "Adam(lr)")
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"Adam(betas={betas!r}): expected two numbers (beta1, beta2)")
        self.betas = (_fraction(betas[0], "Adam(betas[0])"), _fraction(betas[1], "Adam(betas[1])"))
        self.eps = _positive(eps, "Adam(eps)")
        self.weight_decay = _hyper_parameter(
            weight_decay, f"Adam(weight_decay={weight_decay!r:.40})", "a finite number >= 0", lambda x: x >= 0
        )

    def __repr__(self) -> str:
        return (
            f"Adam({len(self.params)} parameters, lr={self.lr:g}, betas={self.betas}, eps={self.eps:g}, "
            f"weight_decay={self.weight_decay:g})"
        )

    def _update(self, data: np.ndarray, grad: np.ndarray, state: dict[str, Any]) -> None:
        beta1, beta2 = self.betas
        if self.weight_decay:
            grad = grad + self.weight_decay * data
        if "mean" not in state:
            state["mean"], state["square"] = np.zeros_like(data), np.zeros_like(data)
        mean, square = state["mean"], state["square"]
        mean *= beta1
        mean += (1 - beta1) * grad
        square *= beta2
        square += (1 - beta2) * grad * grad
        t = state["step"]
        # In PyTorch's order: the step size carries 1/(1 − β₁ᵗ), the denominator sqrt(1 − β₂ᵗ).
        step_size = self.lr / (1 - beta1**t)
        denominator = np.sqrt(square) / math.sqrt(1 - beta2**t) + self.eps
        data -= step_size * mean / denominator
