"""Checking derivatives: finite differences, and step-by-step reports.

* ``gradcheck`` compares a taped gradient with central finite differences (and
  raises ``GradcheckError`` on a failure, as PyTorch's does);
  ``gradgradcheck`` does the same for second derivatives (the reverse pass
  recorded with ``create_graph=True``, against differences of the first).
* ``attention_report`` differentiates one attention forward twice — by the
  tape and by the hand-derived formulas — and compares every named step
  (``dC, dP, dV, dS, dQ, dK``, each projection's ``dW, db``, the inputs).
* ``tiled_report`` walks the tiled (flash) kernel tile by tile — running
  max, sum and output after each key block, then each tile's share of the
  backward — against the standard chain (``mistakes={"forgot_rescale"}``).
* ``layer_report`` does the same for LayerNorm, FeedForward and the
  Transformer encoder and decoder layers, sublayer by sublayer (residual sums,
  norms, feed-forward, then the attention rows).
* ``compare`` does the same for your own hand-derived gradients of any taped
  computation, by node name.
* ``walk`` goes through the backward pass one tape step at a time.
* ``MISTAKES`` are deliberately wrong formulas, for teaching
  (``attention_report(..., mistakes={"forgot_scale"})``); ``LAYER_MISTAKES``
  the same for LayerNorm, the feed-forward block and the residual connections.
* ``command`` holds the ``microtape check`` command line.
"""

from .attention_report import AttentionReport, attention_report
from .compare import NameNotOnTape, compare
from .gradcheck import GradcheckError, GradcheckResult, gradcheck, numeric_gradient
from .gradgradcheck import gradgradcheck
from .layer_mistakes import LAYER_MISTAKES, LayerMistake
from .layer_report import LayerReport, layer_report
from .mistakes import MISTAKES, Mistake
from .rows import GradientReport, Row
from .tiled_report import TILED_MISTAKES, TiledReport, tiled_report
from .walk import WalkStep, walk

__all__ = [
    "gradcheck",
    "GradcheckError",
    "gradgradcheck",
    "GradcheckResult",
    "numeric_gradient",
    "attention_report",
    "AttentionReport",
    "tiled_report",
    "TiledReport",
    "TILED_MISTAKES",
    "layer_report",
    "LayerReport",
    "compare",
    "NameNotOnTape",
    "GradientReport",
    "Row",
    "walk",
    "WalkStep",
    "MISTAKES",
    "Mistake",
    "LAYER_MISTAKES",
    "LayerMistake",
]
