"""The lab: which exercises there are, in which order, and the files a student starts from.

Importing this module imports each exercise's module, and each registers its
exercise (:mod:`.registry`); so :data:`LAB` is the one place the order is
written — ``EXERCISES``, :func:`list_exercises`, the command line, notebook 07
and the autograder assignment all follow it.
"""

import importlib

from .registry import EXERCISES, get

__all__ = ["LAB", "ORDER", "list_exercises", "stub_source", "prompt", "starter_file"]

#: The lab, in order: the module of each exercise. Importing a module
#: registers its exercise, so this tuple is the one place the order is
#: written — ``EXERCISES``, ``list_exercises()``, the command line, notebook 07
#: and the autograder assignment all follow it.
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
    importlib.import_module(f"{__package__}.{_module}")
del _module

#: The exercise names in the order of the lab.
ORDER = tuple(EXERCISES)


def list_exercises(include_stretch=True):
    """The exercise names in the order they were registered: the lab's, then any registered later (a teacher's)."""
    return [name for name, exercise in EXERCISES.items() if include_stretch or not exercise.stretch]


def stub_source(name):
    """The stub of exercise ``name`` as source text: signature, prompt, ``raise NotImplementedError``."""
    return get(name).stub_source()


def prompt(name):
    """The maths prompt of exercise ``name`` (its stub's docstring)."""
    return get(name).prompt


def starter_file(names=None):
    """A ready-to-fill Python file holding the stubs of ``names`` (default: all)."""
    names = list_exercises() if names is None else [get(name).name for name in names]
    parts = [
        '"""My microtape exercises.\n\n'
        "Fill in each function, then check them all with:\n\n"
        "    microtape exercises check THIS_FILE.py\n"
        '"""\n\nimport numpy as np\n'
    ]
    parts += [get(name).stub_source() for name in names]
    return "\n\n".join(parts)
