"""Training curves: the loss and the token accuracy of a run, step by step.

This module lets ``microtape train`` (and notebook 08) draw how a model learns::

    fig = mt.viz.training_curve(result.history, title="reverse, 8 digits")

``history`` is a list of dicts with ``"step"``, ``"loss"`` and ``"accuracy"``
(on the training batch), and ``"held_out"`` where the held-out accuracy was
measured. The loss is drawn on a log scale; the 99% line is the target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


from .figure import new_figure

__all__ = ["training_curve"]


def training_curve(history: Any, title: str | None = None) -> Figure:
    """A figure: loss (log scale) and token accuracy (batch and held-out) against the step."""
    steps = [h["step"] for h in history]
    evaluated = [h for h in history if "held_out" in h]
    fig = new_figure(figsize=(8.8, 3.4), layout="constrained")  # 880 px: a notebook cell, with room
    loss_axes, accuracy_axes = fig.subplots(1, 2)
    loss_axes.plot(steps, [h["loss"] for h in history], color="#1f77b4", linewidth=1)
    loss_axes.set_yscale("log")
    loss_axes.set(xlabel="step", ylabel="cross-entropy (training batch)", title="loss")
    accuracy_axes.plot(steps, [h["accuracy"] for h in history], color="#bbbbbb", linewidth=1, label="batch")
    accuracy_axes.plot(
        [h["step"] for h in evaluated], [h["held_out"] for h in evaluated], "o-", color="#d62728", label="held-out"
    )
    accuracy_axes.axhline(0.99, color="#2ca02c", linestyle="--", linewidth=1, label="99%")
    accuracy_axes.set(xlabel="step", ylabel="token accuracy", title="accuracy", ylim=(0, 1.02))
    accuracy_axes.legend(loc="lower right")
    if title:
        fig.suptitle(title)
    return fig
