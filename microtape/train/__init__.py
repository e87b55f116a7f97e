"""A tiny Transformer that learns: the toy tasks, the model, the training loop, ``microtape train``.

This package lets you watch a Transformer built from microtape's own layers
learn to reverse (or sort) short digit sequences::

    from microtape.train import TrainConfig, train, write_outputs
    result = train(TrainConfig(task="reverse"))          # a few seconds on a laptop
    result.held_out_accuracy                             # 1.0: every digit of 1000 unseen sequences
    write_outputs(result, "train-output")                # loss curve, attention before/after, layer report

``tasks`` makes the data, ``model`` the network (embedding + sinusoidal
positions, post-norm encoder layers, a linear head), ``loop`` trains it with
:class:`microtape.optim.Adam` (float32, seeded), ``pictures`` writes the
results, ``command`` is
``microtape train``.
"""

from .loop import DEFAULT_STEPS, LIMITS, ConfigError, Diverged, TrainConfig, TrainResult, one_blas_thread, train
from .model import TinyTransformer
from .pictures import write_outputs
from .tasks import TASKS

__all__ = [
    "TrainConfig",
    "TrainResult",
    "train",
    "Diverged",
    "ConfigError",
    "LIMITS",
    "DEFAULT_STEPS",
    "one_blas_thread",
    "TinyTransformer",
    "TASKS",
    "write_outputs",
]
