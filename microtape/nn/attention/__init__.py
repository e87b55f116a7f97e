"""Multi-head attention — and the map of everything in microtape that is about it.

Read it in this order (this folder):

1. :mod:`.chain` — the forward, written once, for Tensors, ScalarArrays and
   plain numpy (:func:`~.chain.attention_chain`, :func:`~.chain.attention_core`);
2. :mod:`.derivation` — the derivation table: every step of the core with
   its forward, its hand-derived VJP and its formula (text and LaTeX);
3. :mod:`.layer` — :class:`~.layer.MultiHeadAttention` itself, with
   :mod:`.call` (checking a call: inputs, memory guard, masks),
   :mod:`.gradients` (the tape's gradients under the table's names),
   :mod:`.lean` (the ``lean=``/``keep=`` switch) and :mod:`.readout` (what the
   last forward and backward leave, read-only) — each a concept of the layer
   with a docstring of its own, which is why they are not folded into it;
4. :mod:`.analytic` — the analytic route: the table's links composed by hand
   in numpy, with no tape (the independent opinion the reports compare to);
5. :mod:`.tiled` — the tiled (flash) core on the values (one tape row), and
   reading a recorded tiled row back;
6. :mod:`.scalar_trace` — the same forward with one Scalar per number;
   :mod:`.torch_bridge` — weights to and from PyTorch.

Attention outside this folder (each where its layer puts it: ops and what
attention builds on sit below ``nn/attention``; checks, pictures and the
course sit above it and read it):

* ``microtape/ops/tiled_attention.py`` — the tiled kernel as a primitive op
  (``TILED_ATTENTION``: the online softmax forward, the tile-by-tile backward,
  the schedule); ``microtape/ops/attention_links.py`` — the links (softmax,
  scores, context and dropout backward, the head split and merge) the table
  and the tiled kernel share; ``microtape/ops/nn.py`` — softmax's op;
* ``microtape/nn/masks.py`` (the additive masks), ``microtape/nn/dropout_mask.py``
  (the counter-based dropout mask), ``microtape/nn/linear.py`` (the four
  projections and Linear's backward) — what attention is built on;
  ``microtape/nn/transformer.py``, ``microtape/nn/post_norm.py`` and
  ``microtape/nn/transformer_torch.py`` — the layers built on it;
* ``microtape/check/attention_report.py`` (``mt.check.attention_report``: both
  routes step by step), ``microtape/check/attention_fd.py`` (finite
  differences), ``microtape/check/mistakes.py`` (the teaching mistakes),
  ``microtape/check/tiled_report.py`` and ``microtape/check/tile_walk.py`` (the
  tiled kernel tile by tile); ``microtape/cli/check.py`` is ``microtape check``;
* ``microtape/viz/heatmap/`` (``mt.viz.attention_heatmaps``),
  ``microtape/viz/headgrads.py`` (``mt.viz.head_gradients``),
  ``microtape/viz/tiles.py`` (``mt.viz.tile_schedule``, ``mt.viz.online_softmax``);
* the course, in ``microtape/exercises/lab/``: ``attention.py``,
  ``attention_steps.py``, ``attention_dropout.py``, ``masked_attention.py``,
  ``masking.py``, ``softmax.py``, ``tiled_attention_backward.py`` and their
  shared ``core.py``.
"""
