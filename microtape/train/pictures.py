"""What ``microtape train`` leaves behind: the loss curve, attention before and after, the layer report.

This module lets you write a training run's pictures and checks into a folder::

    >>> from microtape.train import TrainConfig, train, write_outputs
    >>> result = train(TrainConfig(steps=60))                     # doctest: +SKIP
    >>> paths, report = write_outputs(result, "train-output")     # doctest: +SKIP

* ``loss_curve.png`` — the training loss (log scale) and the token accuracy,
  on the training batches and on the held-out sequences;
* ``attention_before.png``, ``attention_after.png`` — the first layer's
  attention weights on one held-out sequence, one panel per head
  (``mt.viz.paired_heatmaps``: one colour scale for both, said in the titles);
  for ``reverse`` the trained heads light up the anti-diagonal;
* ``layer_report.txt`` / ``.html`` — :func:`microtape.check.layer_report` of
  the trained first layer (copied to float64, checked to 1e-10) on the
  held-out sequence's embedding;
* ``history.json`` — the curve as numbers (the same command writes the same file).

(Every picture comes from ``microtape.viz``: ``training_curve`` and
``paired_heatmaps``.)
"""

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..check import layer_report
from ..nn import TransformerEncoderLayer

__all__ = ["attention_figures", "trained_layer_report", "write_outputs"]


def attention_figures(result: Any) -> Any:
    """``{"before": Figure, "after": Figure}``: the first layer's attention on the probe, on one colour scale.

    One scale for both (``mt.viz.paired_heatmaps``), so what training changed is what the colours show.
    """
    from ..viz import paired_heatmaps

    task, probe = result.config.task, result.probe
    tokens = [str(int(digit)) for digit in probe[0]]
    title = f"{task}: attention of layer 0 on a held-out sequence, {{}} training"
    pictures = {title.format("before"): result.attention_before, title.format("after"): result.attention_after}
    before, after = paired_heatmaps(pictures, tokens=tokens)
    return {"before": before, "after": after}


def trained_layer_report(result: Any, layer_index: int = 0) -> Any:
    """``layer_report`` of a trained layer, copied to float64, on the probe sequence's input to that layer."""
    layer = result.model.layers[layer_index]
    exact = TransformerEncoderLayer(
        layer.embed, layer.num_heads, layer.ff_dim, layer.dropout, layer.activation,
        layer_norm_eps=layer.eps, dtype=np.float64,
    ).eval()  # fmt: skip
    for (_, ours), (_, trained) in zip(exact.named_parameters(), layer.named_parameters()):
        ours.data[...] = trained.data
    h = result.model.embed(result.probe)
    for earlier in result.model.layers[:layer_index]:
        h = earlier(h)
    return layer_report(exact, np.asarray(h.data, dtype=np.float64))


def write_outputs(result: Any, out: Any) -> Any:
    """Write the pictures, the report and the curve into ``out``; returns ``({what: path}, report)``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    from ..viz import training_curve

    config = result.config
    fig = training_curve(
        result.history,
        title=f"{config.task} {config.length} digits: embed={config.embed}, heads={config.heads}, "
        f"layers={config.layers}, {config.steps} steps of {config.batch}, "
        f"held-out accuracy {100 * result.held_out_accuracy:.1f}%",
    )
    paths["loss curve"] = out / "loss_curve.png"
    fig.savefig(paths["loss curve"], dpi=110)
    for when, figure in attention_figures(result).items():
        paths[f"attention {when}"] = out / f"attention_{when}.png"
        figure.savefig(paths[f"attention {when}"], dpi=110)
    report = trained_layer_report(result)
    paths["layer report"] = out / "layer_report.txt"
    paths["layer report"].write_text(str(report) + "\n")
    paths["layer report (HTML)"] = out / "layer_report.html"
    paths["layer report (HTML)"].write_text(report._repr_html_())
    paths["history"] = out / "history.json"
    paths["history"].write_text(json.dumps(result.curve(), indent=1) + "\n")
    return paths, report
