"""The `microtape` command (also `python -m microtape`).

::

    microtape demo [--out DIR]        the default attention: graphs, frames, heatmaps, step-check table
    microtape check [options]         check each hand-derived derivative against the tape
    microtape graph [options] FILE    one graph of the default attention (forward, backward, or a frozen step)
    microtape heatmap [options] FILE  one heatmap figure of the default attention
    microtape exercises ...           list, hand out and check the classroom derivative exercises
    microtape grade DIR [-j N] [--csv FILE]   grade a folder of submissions, boxed, on hidden trials
    microtape train [--task reverse|sort] [--out DIR]   train a tiny Transformer; loss curve, attention, layer report
    microtape memory [--out DIR]      what backward keeps: memory timeline, saved-values graph, scaling with T

Each sub-command lives with the part of the package it shows: this file only
parses arguments and calls it. Exit status: 0 done (and every check passed),
1 a check failed, 2 a bad option or path (one line on stderr naming it;
``--debug`` shows the traceback).
"""

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .args import Parser, UsageError, non_negative_int, output_file, output_folder, positive_int, probability

__all__ = ["main", "build_parser"]

# Graph and heatmap files the pictures can be written as.
GRAPH_SUFFIXES = (".svg", ".png", ".pdf", ".dot")
IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def _demo(args: argparse.Namespace) -> Any:
    import numpy as np

    from ..check import attention_report
    from ..viz.demo import DEMO, demo_attention, demo_tokens, write_pictures
    from ..viz.render import GraphvizNotFound

    Path(args.out).mkdir(parents=True, exist_ok=True)  # a place we cannot write fails now, in one line
    attn, x, grad_output = demo_attention()
    print(f"The default attention: {attn!r}, x of shape {list(np.shape(x))}\n")
    print(attn.tape.listing())
    print()
    try:
        paths = write_pictures(attn, grad_output, args.out, tokens=demo_tokens(DEMO["seq"]))
    except GraphvizNotFound as error:
        # Not a failure: the heatmaps and the .dot sources are written, and the
        # message says how to install Graphviz to get the SVGs.
        paths = error.paths
        print(str(error), file=sys.stderr)
    report = attention_report(attn, x, grad_output=grad_output)
    print(report)
    print()
    width = max(len(name) for name in paths)
    print(f"Wrote into {Path(args.out).resolve()}:")
    for name, path in paths.items():
        print(f"  {name:<{width}}  {path}")
    return 0 if report.ok else 1


def _graph(args: argparse.Namespace) -> int:
    from ..viz.demo import render_graph
    from ..viz.fit import NOTEBOOK_WIDTH
    from ..viz.render import GraphvizNotFound

    _check_seq_size(args.seq, "graph")
    try:
        path = render_graph(
            args.file,
            backward=args.backward,
            step=args.step,
            detail=args.detail,
            expand=args.expand,
            width=None if args.every_op else NOTEBOOK_WIDTH,
            **_layer_settings(args),
        )
    except GraphvizNotFound as error:
        print(str(error), file=sys.stderr)
        return 1
    print(f"Wrote {path}")
    return 0


def _check_seq_size(seq: Any, command: Any) -> None:
    """The demo pictures draw every node: refuse lengths no picture can show (before any work)."""
    limit = {"graph": 64, "heatmap": 512}[command]
    if seq > limit:
        raise UsageError(f"--seq {seq}: at most {limit} positions for `microtape {command}` (a picture of every step)")


def _heatmap(args: argparse.Namespace) -> int:
    from ..viz.demo import render_heatmap

    _check_seq_size(args.seq, "heatmap")
    if "dropped" in args.which and args.dropout == 0:
        raise UsageError(
            "--which dropped: the default attention has no dropout, so nothing is dropped; "
            "add --dropout P (for example --dropout 0.1)"
        )
    which = tuple(args.which) if len(args.which) > 1 else args.which[0]
    path = render_heatmap(args.file, which=which, **_layer_settings(args))
    print(f"Wrote {path}")
    return 0


def build_parser() -> Any:
    """The ``microtape`` parser: its sub-commands in the order ``--help`` lists them."""
    parser = Parser(
        prog="microtape",
        description="An educational autograd engine you can see and check.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("::", 1)[1].split("Each sub-command", 1)[0],
    )
    parser.add_argument("--debug", action="store_true", help="show the full traceback when a command fails")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{demo,check,graph,heatmap,exercises,grade,train,memory}",
        parser_class=Parser,
    )

    demo = commands.add_parser("demo", help="render the default attention example and print its step-check table")
    demo.add_argument(
        "--out", type=output_folder, default="demo-output", help="folder for the pictures (default: demo-output)"
    )
    demo.set_defaults(run=_demo)

    from . import check as check_command

    _add_command(commands, "check", "check each hand-derived attention derivative against the tape", check_command)
    _add_graph(commands)
    _add_heatmap(commands)

    from ..grading import gradebook
    from . import exercises as exercises_command
    from . import memory as memory_command
    from . import train as train_command

    _add_command(commands, "exercises", "classroom derivative exercises: list, stub, check FILE", exercises_command)
    grading = "grade a folder of submissions (boxed, hidden trials), write a gradebook"
    _add_command(commands, "grade", grading, gradebook)
    _add_command(commands, "train", "train a tiny Transformer on a toy task (reverse or sort digits)", train_command)
    memory = "what backward keeps: the memory timeline and saved-values graph of the default attention"
    _add_command(commands, "memory", memory, memory_command)
    return parser


def _add_command(commands: Any, name: str, help: Any, module: Any) -> None:
    """A sub-command whose options and run live in its own package's ``module`` (``add_arguments``, ``run``)."""
    command = commands.add_parser(name, help=help)
    module.add_arguments(command)
    command.set_defaults(run=module.run)


def _seq_help() -> str:
    from ..viz.demo import DEMO

    return f"sequence length (default: {DEMO['seq']})"


def _add_layer_options(parser: argparse.ArgumentParser) -> None:
    """The layer options `graph` and `heatmap` share with `check`: which attention to draw."""
    from ..viz.demo import DEMO

    parser.add_argument(
        "--embed", type=positive_int, default=DEMO["embed"], help=f"embedding size E (default: {DEMO['embed']})"
    )
    parser.add_argument(
        "--heads",
        type=positive_int,
        default=DEMO["heads"],
        help=f"number of heads H; must divide E (default: {DEMO['heads']})",
    )
    parser.add_argument(
        "--batch", type=positive_int, default=DEMO["batch"], help=f"batch size B (default: {DEMO['batch']})"
    )
    parser.add_argument("--seq", type=positive_int, default=DEMO["seq"], help=_seq_help())
    parser.add_argument(
        "--causal",
        action=argparse.BooleanOptionalAction,
        default=DEMO["causal"],
        help="causal mask (query i sees keys 0..i); --no-causal for full attention (default: causal)",
    )
    parser.add_argument(
        "--dropout",
        type=probability,
        default=DEMO["dropout"],
        help=f"dropout probability of the attention weights (default: {DEMO['dropout']})",
    )
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        default=DEMO["seed"],
        help=f"seed for weights, inputs, dy (default: {DEMO['seed']})",
    )


def _layer_settings(args: argparse.Namespace) -> Any:
    """The demo settings the layer options chose, checked before any work (heads must divide embed)."""
    if args.embed % args.heads:
        raise UsageError(f"--heads {args.heads} must divide --embed {args.embed}")
    return {name: getattr(args, name) for name in ("embed", "heads", "batch", "seq", "causal", "dropout", "seed")}


def _add_graph(commands: Any) -> None:

    graph = commands.add_parser("graph", help="draw the default attention's computational graph")
    graph.add_argument(
        "file",
        nargs="?",
        type=output_file(GRAPH_SUFFIXES),
        default="graph.svg",
        help="output file; .svg, .png, .pdf or .dot (default: graph.svg)",
    )
    graph.add_argument("--backward", action="store_true", help="annotate with gradients and VJP formulas")
    graph.add_argument(
        "--step", type=non_negative_int, default=None, help="freeze the backward pass after this step (0 = the output)"
    )
    graph.add_argument(
        "--detail", choices=("auto", "full", "summary"), default="auto", help="collapse view/reshape noise"
    )
    _add_layer_options(graph)
    graph.add_argument(
        "--expand",
        metavar="MODULE",
        action="append",
        help="draw this module op by op (q_proj, k_proj, v_proj, attention, out_proj); may be repeated",
    )
    graph.add_argument(
        "--every-op",
        action="store_true",
        help="draw every op, however wide (by default a graph too wide to read at 900 px is one box per module)",
    )
    graph.set_defaults(run=_graph)


def _add_heatmap(commands: Any) -> None:

    heatmap = commands.add_parser("heatmap", help="draw the default attention's weights or gradients per head")
    heatmap.add_argument(
        "file",
        nargs="?",
        type=output_file(IMAGE_SUFFIXES),
        default="heatmap.png",
        help="output image: .png, .svg or .pdf (default: heatmap.png)",
    )
    heatmap.add_argument(
        "--which",
        nargs="+",
        default=["weights"],
        choices=("weights", "dropped", "grad_scores", "grad_weights"),
        help="what to draw (several: one row each)",
    )
    _add_layer_options(heatmap)
    heatmap.set_defaults(run=_heatmap)


def main(argv: Any = None) -> Any:
    """Run the command line; returns the exit status (0 ok, 1 a check failed, 2 bad usage)."""
    args = build_parser().parse_args(argv)
    try:
        status = args.run(args)
        sys.stdout.flush()  # here, so a closed pipe is seen now, not at exit
        return status
    except BrokenPipeError:
        # `microtape exercises list | head -1`: the reader has all it wants — a normal end.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except UsageError as error:
        if args.debug:
            raise
        print(f"microtape {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, MemoryError, OSError) as error:
        # The library's own refusals (a size too large, a file that cannot be
        # written) name what was wrong: one line, not a traceback.
        if args.debug:
            raise
        print(f"microtape {args.command}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
