"""`microtape check`: the attention report on the command line.

This module gives the command its options and its body; ``microtape.cli.main``
wires them in::

    check = commands.add_parser("check", help="...")
    microtape.cli.check.add_arguments(check)
    check.set_defaults(run=microtape.cli.check.run)

``run`` builds a default attention (E=16, H=4, B=2, T=5, self-attention),
prints the step-by-step table and returns the exit status: 0 when every row
passes, 1 when one fails (the first failing step is named on stderr), 2 when
the options make no sense. ``--mistake NAME`` injects a deliberately wrong
formula — a teaching hook: the table then shows where the mistake surfaces.
``--block-size N`` checks the tiled (flash) kernel instead, tile by tile,
against the standard chain (:func:`~microtape.check.tiled_report.tiled_report`;
its mistakes, such as ``forgot_rescale``, go with it).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

import numpy as np

from ..check.attention_report import attention_report
from ..check.mistakes import MISTAKES
from ..check.options import DEFAULT_FD_SAMPLES
from ..check.tiled_report import TILED_MISTAKES, tiled_report
from ..nn import masks
from ..nn.attention.call import check_memory
from ..nn.attention.layer import MultiHeadAttention
from .args import UsageError, non_negative_int, positive_int, probability

__all__ = ["add_arguments", "run", "build_example"]


def add_arguments(parser: argparse.ArgumentParser) -> Any:
    """Add the options of `microtape check` to an ``argparse`` parser."""
    parser.add_argument("--embed", type=positive_int, default=16, help="embedding size E (default: 16)")
    parser.add_argument("--heads", type=positive_int, default=4, help="number of heads H; must divide E (default: 4)")
    parser.add_argument("--batch", type=positive_int, default=2, help="batch size B (default: 2)")
    parser.add_argument("--seq", type=positive_int, default=5, help="query length Tq (default: 5)")
    parser.add_argument(
        "--kv-seq",
        type=positive_int,
        default=None,
        help="key/value length Tk; different from --seq means cross-attention (default: same as --seq)",
    )
    parser.add_argument("--cross", action="store_true", help="cross-attention even when Tk == Tq")
    parser.add_argument("--causal", action="store_true", help="causal mask (query i sees keys 0..i)")
    parser.add_argument(
        "--dropout", type=probability, default=0.0, help="dropout probability on the weights (default: 0)"
    )
    parser.add_argument(
        "--mask-prob",
        type=probability,
        default=0.0,
        help="suppress each score entry with this probability (a random additive mask; no row is left empty)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for weights, inputs, masks, dy (default: 0)"
    )
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64", help="default: float64")
    parser.add_argument(
        "--fd",
        action="store_true",
        help=f"add finite differences as a third opinion ({DEFAULT_FD_SAMPLES} sampled entries per row)",
    )
    parser.add_argument(
        "--block-size",
        type=positive_int,
        default=None,
        metavar="N",
        help="check the tiled (flash) kernel with blocks of N queries and keys, tile by tile, against the "
        "standard chain",
    )
    parser.add_argument(
        "--mistake",
        action="append",
        choices=sorted(MISTAKES) + sorted(TILED_MISTAKES),
        metavar="NAME",
        help="for teaching: inject a wrong formula (repeatable); into the hand-derived route: "
        + ", ".join(sorted(MISTAKES))
        + "; into the tiled kernel (with --block-size): "
        + ", ".join(sorted(TILED_MISTAKES)),
    )
    return parser


def random_mask(q_len: int, k_len: int, probability: Any, rng: np.random.Generator, causal: bool = False) -> Any:
    """An additive mask ``[Tq, Tk]``: each entry is -1e9 with ``probability``, else 0.

    A row that would be left with no allowed key (counting the causal mask)
    gets key 0 back — which the causal mask always allows.
    """
    mask = np.where(rng.random((q_len, k_len)) < probability, masks.NEG_INF, 0.0)
    total = mask + (masks.causal_mask(q_len) if causal else 0.0)
    empty = np.all(masks.suppressed(total), axis=-1)
    mask[empty, 0] = 0.0
    return mask


def build_example(args: argparse.Namespace) -> Any:
    """The layer and the inputs `microtape check` runs on, from parsed options."""
    k_len = args.seq if args.kv_seq is None else args.kv_seq
    if args.embed % args.heads:
        raise UsageError(f"--heads {args.heads} must divide --embed {args.embed}")
    if args.causal and k_len != args.seq:
        raise UsageError(f"--causal needs --kv-seq equal to --seq (causal attention is self-attention), got {k_len}")
    tiled = args.block_size is not None
    for name in args.mistake or ():
        if tiled != (name in TILED_MISTAKES):
            raise UsageError(
                f"--mistake {name} is a mistake of the tiled kernel: add --block-size N"
                if name in TILED_MISTAKES
                else f"--mistake {name} is a mistake of the hand-derived chain; with --block-size use one of "
                + ", ".join(sorted(TILED_MISTAKES))
            )
    if tiled and args.fd:
        raise UsageError("--fd adds finite differences to the standard check; the tiled check has none (drop one)")
    # Sizes first: nothing is allocated for a check that the memory guard would refuse.
    probe = MultiHeadAttention(args.embed, args.heads, dropout=args.dropout, causal=False, dtype=args.dtype)
    check_memory(probe, args.batch, args.seq, k_len)
    attn = MultiHeadAttention(
        args.embed, args.heads, dropout=args.dropout, causal=args.causal, seed=args.seed, dtype=args.dtype,
        block_size=args.block_size,
    )  # fmt: skip
    rng = np.random.default_rng(args.seed)
    query = rng.standard_normal((args.batch, args.seq, args.embed))
    key = value = None
    if args.cross or k_len != args.seq:
        key = rng.standard_normal((args.batch, k_len, args.embed))
        value = rng.standard_normal((args.batch, k_len, args.embed))
    mask = None
    if args.mask_prob > 0:
        mask = random_mask(args.seq, k_len, args.mask_prob, rng, causal=args.causal and k_len == args.seq)
    return attn, query, key, value, mask


def run(args: argparse.Namespace) -> int:
    """Print the report for ``args``; return 0 (all pass), 1 (a row fails) or 2 (bad options)."""
    try:
        attn, query, key, value, mask = build_example(args)
        if attn.block_size is not None:
            report = tiled_report(attn, query, key, value, mask, seed=args.seed, mistakes=args.mistake)
        else:
            report = attention_report(
                attn,
                query,
                key,
                value,
                mask,
                finite_differences=bool(args.fd),
                seed=args.seed,
                mistakes=args.mistake or None,
            )
    except (UsageError, ValueError, TypeError, MemoryError) as error:
        print(f"microtape check: error: {error}", file=sys.stderr)
        return 2
    print(report)
    if report.ok:
        return 0
    row = report.first_failing_row
    where = "tape node" if attn.block_size is None else "quantity"
    print(
        f"microtape check: first failing step: {row.label} ({where} {row.name}): {row.formula}; "
        f"max abs error {row.max_abs_error:.3e}, max rel error {row.max_rel_error:.3e}",
        file=sys.stderr,
    )
    return 1
