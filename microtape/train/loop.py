"""The training loop of the toy model: seeded, float32, with a held-out check and attention snapshots.

This module lets you train the tiny Transformer in a few lines::

    >>> from microtape.train import TrainConfig, train
    >>> result = train(TrainConfig(task="reverse", steps=60))      # doctest: +SKIP
    >>> result.held_out_accuracy                                   # doctest: +SKIP

One step is the whole story of the package::

    with mt.Tape() as tape:
        logits = model(ids)                               # every layer records on the tape
        loss = mt.nn.cross_entropy(logits, targets)
    optimizer.zero_grad()
    tape.backward(loss)                                   # one reverse pass fills every .grad
    optimizer.step()                                      # Adam

Everything random comes from ``config.seed`` (weights, batches, the held-out
set), so the same configuration gives the same curve, step for step, on the
same machine. ``snapshot_every`` keeps the attention weights of the first
layer on one held-out sequence every so many steps — the frames of a film of
what the model learns to look at.
"""

import contextlib
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .. import nn, optim
from ..engine import Tape
from .model import TinyTransformer
from .tasks import TASKS, HeldOut, training_batch

__all__ = [
    "TrainConfig",
    "TrainResult",
    "train",
    "one_blas_thread",
    "DEFAULT_STEPS",
    "LIMITS",
    "ConfigError",
    "Diverged",
]

#: Steps each task needs with the default model (measured: reverse is learnt
#: in about 300 steps, sort in about 1200).
DEFAULT_STEPS = {"reverse": 600, "sort": 1500}

#: The largest value of each size a run accepts, checked before any work: a
#: toy model on a laptop (the scores grow as length², the task as vocab^length).
LIMITS = {
    "steps": 1_000_000,
    "length": 256,
    "vocab": 1000,
    "embed": 1024,
    "heads": 64,
    "ff_dim": 8192,
    "layers": 16,
    "batch": 4096,
    "held_out": 100_000,
    "eval_every": 1_000_000,
}
#: Adam moves every weight by about ``lr`` a step: beyond 1 a run can only diverge.
MAX_LR = 1.0


class ConfigError(ValueError):
    """A :class:`TrainConfig` field out of range; ``field``, ``value`` and ``reason`` say which and why."""

    def __init__(self, field: Any, value: Any, reason: Any) -> None:
        super().__init__(f"TrainConfig({field}={value!r}): {reason}")
        self.field, self.value, self.reason = field, value, reason


class Diverged(ArithmeticError):
    """Training blew up: the loss or a gradient stopped being a finite number. ``step`` says when."""

    def __init__(self, step: Any, steps: Any, lr: Any, reason: Any) -> None:
        super().__init__(
            f"training diverged at step {step} of {steps}: {reason}; try a smaller learning rate than lr={lr:g}"
        )
        self.step = step


@dataclass
class TrainConfig:
    """Everything a run depends on. The defaults train ``reverse`` to 100% held-out in a few seconds."""

    task: str = "reverse"
    steps: int | None = None  # None: DEFAULT_STEPS[task]
    length: int = 8
    vocab: int = 10
    embed: int = 32
    heads: int = 2
    ff_dim: int = 64
    layers: int = 1
    batch: int = 64
    lr: float = 3e-3
    seed: int = 0
    held_out: int = 1000
    eval_every: int = 50
    snapshot_every: int | None = None
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"TrainConfig(task={self.task!r}): expected one of {', '.join(TASKS)}")
        if self.steps is None:
            self.steps = DEFAULT_STEPS[self.task]
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise ConfigError(name, value, f"expected a positive integer, at most {limit}")
        if self.embed % self.heads:
            raise ConfigError("heads", self.heads, f"must divide embed={self.embed}")
        if self.vocab < 2:
            raise ConfigError("vocab", self.vocab, "expected at least 2 digits")
        if self.held_out >= self.vocab**self.length // 2:
            raise ConfigError(
                "held_out",
                self.held_out,
                f"too many for sequences of {self.length} digits (there are only {self.vocab**self.length} of "
                "them; keep it under half)",
            )
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not 0 < self.lr <= MAX_LR:
            raise ConfigError("lr", self.lr, f"expected a learning rate with 0 < lr <= {MAX_LR:g}")


@dataclass
class TrainResult:
    """What a run produced: the trained model, its curve, its accuracy and the attention it learnt."""

    model: TinyTransformer
    config: TrainConfig
    history: list  # one dict per step: step, loss, accuracy (of that batch), and held_out at evaluations
    held_out_accuracy: float
    seconds: float
    probe: np.ndarray  # the held-out sequence the attention snapshots look at, [1, T]
    attention_before: np.ndarray  # [1, H, T, T] of the first layer, before training
    attention_after: np.ndarray  # the same after training
    snapshots: list = field(default_factory=list)  # (step, [1, H, T, T]) every snapshot_every steps

    @property
    def steps_per_second(self) -> Any:
        """Training steps per second of wall-clock time (evaluations included)."""
        return self.config.steps / self.seconds if self.seconds else float("inf")  # type: ignore[operator]  # __post_init__ set steps

    def curve(self) -> Any:
        """The history as plain data (what ``history.json`` holds): the same run gives the same curve."""
        return {"config": asdict(self.config), "history": self.history}


def _token_accuracy(model: Any, ids: Any, targets: Any) -> Any:
    return float(np.mean(model.predict(ids) == targets))


def _attention_on(model: Any, probe: Any) -> Any:
    """The first layer's attention weights ``[1, H, T, T]`` on ``probe`` (evaluation mode)."""
    model.predict(probe)
    return np.array(model.attention_weights(0))


def one_blas_thread() -> Any:
    """A context running numpy's BLAS on one thread, when threadpoolctl is installed (the ``train`` extra).

    The model's matrices are tiny (64·8 rows of 32 numbers): a second BLAS
    thread only waits for the first. Measured on this project's 2-core
    machine: 300 steps took 1.3 s of CPU time on one thread, 6–8 s on two.
    Without threadpoolctl nothing changes (set ``OPENBLAS_NUM_THREADS=1``
    before starting Python for the same effect).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def train(config: Any = None, progress: Any = None) -> Any:
    """Train a :class:`TinyTransformer` on ``config.task``; returns a :class:`TrainResult`.

    ``progress(step, loss, accuracy)`` is called after every step (``microtape
    train`` moves a :func:`microtape.viz.progress.progress` bar with it). BLAS runs on one thread
    meanwhile (:func:`one_blas_thread`).
    """
    config = config or TrainConfig()
    with one_blas_thread():
        return _train(config, progress)


def _train(config: Any, progress: Any) -> "TrainResult":
    seeds = np.random.SeedSequence(config.seed).spawn(3)
    model = TinyTransformer(
        config.vocab, config.length, config.embed, config.heads, config.ff_dim, config.layers,
        seed=seeds[0], dtype=config.dtype,
    )  # fmt: skip
    optimizer = optim.Adam(model.parameters(), lr=config.lr)
    held_out = HeldOut(config.task, config.held_out, config.length, config.vocab, seed=seeds[1])
    batches = np.random.default_rng(seeds[2])
    probe = held_out.ids[:1]
    before = _attention_on(model, probe)
    snapshots = [(0, before)] if config.snapshot_every else []
    history = []
    started = time.perf_counter()
    for step in range(1, config.steps + 1):
        ids, targets = training_batch(config.task, batches, config.batch, config.length, config.vocab, held_out)
        try:
            with Tape() as tape:
                logits = model(ids)
                loss = nn.cross_entropy(logits, targets)
            if not np.isfinite(loss.data):
                raise FloatingPointError(f"the loss is {float(loss.data)}")
            optimizer.zero_grad()
            tape.backward(loss)
            optimizer.step()  # refuses a non-finite gradient before it moves anything
        except FloatingPointError as error:  # an overflow the layers or the optimizer refused, or the loss above
            raise Diverged(step, config.steps, config.lr, error) from error
        record = {
            "step": step,
            "loss": float(loss.data),
            "accuracy": float(np.mean(logits.data.argmax(axis=-1) == targets)),
        }
        if step % config.eval_every == 0 or step == config.steps:
            record["held_out"] = _token_accuracy(model, held_out.ids, held_out.targets)
        if config.snapshot_every and step % config.snapshot_every == 0:
            snapshots.append((step, _attention_on(model, probe)))
        history.append(record)
        if progress is not None:
            progress(step, record["loss"], record["accuracy"])
    seconds = time.perf_counter() - started
    return TrainResult(
        model, config, history, history[-1]["held_out"], seconds, probe, before, _attention_on(model, probe), snapshots
    )
