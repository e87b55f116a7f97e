"""The course: the lab's 31 exercises, each declared with the framework's public names.

Each module of this folder holds one exercise — its stub (the signature and
the maths prompt), its visible and hidden trials, ``make_inputs``, the tape's
answer ``tape_gradients`` and its known mistakes — and declares it the way a
teacher declares one of their own::

    from microtape.exercises import Exercise, Mistake, Output, register

    register(Exercise(name="softmax_backward", stub=softmax_backward, title=..., visible=VISIBLE,
                      hidden=HIDDEN, make_inputs=make_inputs, tape_gradients=tape_gradients,
                      outputs=(Output("grad_s", "p"),), mistakes=(Mistake(...), ...)))

The shared chains are modules of their own: :mod:`.core` (the attention core
the attention exercises differentiate), :mod:`.norm_chain` (layer and batch
norm, step by step), :mod:`.conv_chain` (convolution and pooling).
:mod:`.unit` groups the lab into sessions for the pages that plan the course.

Importing this package imports the module of each exercise in the order of
:data:`LAB`, and each registers its exercise: that order is the one of
``microtape.exercises.EXERCISES``, ``list_exercises()``, the command line,
notebook 07 and the autograder assignment. ``import microtape.exercises``
imports it.
"""

import importlib

__all__ = ["LAB"]

#: The lab, in order: the module of each exercise (in this folder). Importing a module registers its
#: exercise, so this tuple is the one place the order is written.
LAB = (
    # 1. From the chain rule to a layer
    "chain_rule",
    "mlp",
    "affine_relu",
    "linear",
    "layer",
    "softmax",
    # 2. Losses, an embedding, normalisation step by step, a residual block
    "softmax_cross_entropy",
    "mse",
    "logistic_loss",
    "embedding",
    "layernorm_steps",
    "batchnorm",
    "residual_norm",
    # 3. Attention
    "attention",
    "attention_steps",
    "masking",
    "masked_attention",
    "dropout",
    "attention_dropout",
    "tiled_attention_backward",
    # 4. Convolution, pooling and recurrent nets
    "conv1d",
    "conv2d",
    "maxpool",
    "avgpool",
    "rnn",
    "gru",
    # 5. Ops of your own, and beyond the first derivative
    "op_vjp",
    "logaddexp_vjp",
    "softmax_jvp",
    "logsumexp_hvp",
    # The stretch exercise, last
    "layernorm",
)
for _module in LAB:
    importlib.import_module(f"{__name__}.{_module}")
del _module
