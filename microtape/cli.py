"""The `microtape` command: `microtape demo | check | graph | heatmap`."""

import argparse
import sys

import numpy as np

import microtape as mt


def _demo(args):
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    with mt.Tape() as tape:
        y = (a * b + a**2).tanh()
        y.name = "y"
    print(tape)
    tape.backward(y)
    print(f"\ndy/da = {a.grad:.6f}   dy/db = {b.grad:.6f}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="microtape", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="render the default attention example")
    demo.add_argument("--out", default="demo-output", help="folder for the pictures (default: demo-output)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    np.set_printoptions(precision=4, suppress=True)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
