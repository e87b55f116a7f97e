"""`microtape train`: train the tiny Transformer on a toy task, on the command line.

This module gives the command its options and its body; ``microtape.cli.main``
wires them in::

    microtape train --task reverse --out DIR      # about 600 steps, a few seconds
    microtape train --task sort --out DIR --steps 2000

It prints the configuration, a progress bar on stderr (tqdm's, through
:mod:`microtape.viz.progress`: on a terminal only, so a log gets no redrawn lines),
the held-out accuracy and the files it
wrote (:mod:`microtape.train.pictures`). Exit status: 0 when the trained
layer's backward check passes, 1 when a row of it fails or the run diverged
(the message says at which step), 2 for a bad option (every size and the
learning rate are checked against :data:`~microtape.train.loop.LIMITS`
before any work).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

from ..train.loop import DEFAULT_STEPS, ConfigError, Diverged, TrainConfig, train
from ..train.tasks import TASKS
from ..viz.progress import progress
from .args import UsageError, non_negative_int, output_folder, positive_float, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> Any:
    """Add the options of `microtape train` to an ``argparse`` parser."""
    defaults = TrainConfig()
    steps = ", ".join(f"{task} {count}" for task, count in DEFAULT_STEPS.items())
    parser.add_argument("--task", choices=sorted(TASKS), default="reverse", help="what to learn (default: reverse)")
    parser.add_argument(
        "--out", type=output_folder, default="train-output", help="folder for the outputs (default: train-output)"
    )
    parser.add_argument("--steps", type=positive_int, default=None, help=f"training steps (default: {steps})")
    parser.add_argument("--length", type=positive_int, default=defaults.length, help="digits per sequence (default: 8)")
    parser.add_argument("--embed", type=positive_int, default=defaults.embed, help="model width E (default: 32)")
    parser.add_argument("--heads", type=positive_int, default=defaults.heads, help="attention heads (default: 2)")
    parser.add_argument("--ff-dim", type=positive_int, default=defaults.ff_dim, help="feed-forward width (default: 64)")
    parser.add_argument("--layers", type=positive_int, default=defaults.layers, help="encoder layers (default: 1)")
    parser.add_argument("--batch", type=positive_int, default=defaults.batch, help="sequences per step (default: 64)")
    parser.add_argument("--lr", type=positive_float, default=defaults.lr, help="Adam's learning rate (default: 3e-3)")
    parser.add_argument("--seed", type=non_negative_int, default=defaults.seed, help="seed of everything (default: 0)")
    parser.add_argument(
        "--eval-every",
        type=positive_int,
        default=defaults.eval_every,
        help="steps between held-out checks (default: 50)",
    )
    parser.add_argument(
        "--held-out", type=positive_int, default=defaults.held_out, help="held-out sequences (default: 1000)"
    )
    return parser


def config_from(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` the options describe; a value out of range, or a combination that makes no
    sense, is a UsageError naming the option (checked before any work: ``--length`` sizes the task as 10^length).
    """
    if args.embed % args.heads:
        raise UsageError(f"--heads {args.heads}: must divide --embed {args.embed}")
    try:
        return TrainConfig(
            task=args.task, steps=args.steps, length=args.length, embed=args.embed, heads=args.heads,
            ff_dim=args.ff_dim, layers=args.layers, batch=args.batch, lr=args.lr, seed=args.seed,
            eval_every=args.eval_every, held_out=args.held_out,
        )  # fmt: skip
    except ConfigError as error:
        value = f"{error.value:g}" if isinstance(error.value, float) else error.value
        raise UsageError(f"--{error.field.replace('_', '-')} {value}: {error.reason}") from None


def run(args: argparse.Namespace) -> Any:
    """Train, write the outputs, print where they went; the exit status (see the module doc)."""
    from ..train.pictures import write_outputs

    config = config_from(args)
    args.out.mkdir(parents=True, exist_ok=True)  # a folder we cannot write fails now, before training
    print(
        f"Training a tiny Transformer to {config.task} sequences of {config.length} digits: embed={config.embed}, "
        f"heads={config.heads}, ff_dim={config.ff_dim}, layers={config.layers}, {config.steps} steps of "
        f"{config.batch} sequences, Adam lr={config.lr:g}, seed={config.seed}, {config.dtype}"
    )
    try:
        with progress(total=config.steps, desc=config.task, unit="step") as bar:

            def show(step: Any, loss: Any, accuracy: Any) -> None:
                bar.set_postfix(loss=f"{loss:.4f}", acc=f"{100 * accuracy:.1f}%", refresh=False)
                bar.update(step - bar.n)

            result = train(config, progress=show)
    except Diverged as error:
        print(f"microtape train: {error} (--lr {config.lr:g})", file=sys.stderr)
        return 1
    reached = "reached" if result.held_out_accuracy >= 0.99 else "did NOT reach"
    print(
        f"Held-out token accuracy: {100 * result.held_out_accuracy:.2f}% on {config.held_out} unseen sequences "
        f"({reached} 99%), after {result.seconds:.1f} s ({result.steps_per_second:.0f} steps/s)"
    )
    paths, report = write_outputs(result, args.out)
    print(f"Layer report of the trained layer 0 (float64): {report.verdict_text()}")
    width = max(len(name) for name in paths)
    print(f"Wrote into {args.out.resolve()}:")
    for name, path in paths.items():
        print(f"  {name:<{width}}  {path}")
    sys.stdout.flush()
    return 0 if report.ok else 1
