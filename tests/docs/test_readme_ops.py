"""The README's list of supported ops is generated from the registry, never written by hand.

``supported_ops_block()`` writes the list from :data:`microtape.ops.OPS`
(every built-in op, grouped by the module of its family), and numpy's
functions that record on the tape from :mod:`microtape.numpy_api.protocol`.
The test fails when the README's block differs; to bring it up to date::

    .venv/bin/python tests/docs/test_readme_ops.py
"""

import sys
from pathlib import Path

import microtape  # noqa: F401  (registers every built-in op)
from microtape.numpy_api import functions, joining
from microtape.numpy_api.protocol import FUNCTIONS, UFUNCS, numpy_name
from microtape.ops import OPS

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN = "<!-- supported ops: generated from microtape.ops.OPS by tests/docs/test_readme_ops.py; do not edit -->"
END = "<!-- end of supported ops -->"


def _family(op):
    """The family an op is defined in: the module of its VJP (``microtape.ops.trig`` → ``trig``)."""
    return op.vjp.__module__.rsplit(".", 1)[-1]


def supported_ops_block():
    families = {}
    for name, op in sorted(OPS.items()):
        if op.builtin:
            families.setdefault(_family(op), []).append(name)
    lines = [BEGIN, f"{len(sum(families.values(), []))} primitives, each with its forward, VJP, JVP and formula:", ""]
    lines += [f"- **{family}**: {', '.join(f'`{n}`' for n in names)}" for family, names in sorted(families.items())]
    built = sorted(set(functions.__all__ + joining.__all__) - set(OPS) - {"abs", "max"})
    numpy_names = sorted({numpy_name(f).replace("numpy.", "np.") for f in [*UFUNCS, *FUNCTIONS]})
    lines += [
        "",
        f"Built from them (`mt.<name>`): {', '.join(f'`{n}`' for n in built)}.",
        f"numpy's functions that record on a Tensor: {', '.join(f'`{n}`' for n in numpy_names)}.",
        END,
    ]
    return "\n".join(lines)


def _readme_block(text):
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    return start, stop


def test_the_readme_lists_every_registered_op_as_the_registry_says():
    text = README.read_text()
    assert BEGIN in text and END in text, "the README has no generated list of ops"
    start, stop = _readme_block(text)
    assert text[start:stop] == supported_ops_block(), "out of date: run .venv/bin/python tests/docs/test_readme_ops.py"


def test_the_list_names_each_op_once():
    block = supported_ops_block()
    for name, op in OPS.items():
        if op.builtin:
            assert block.count(f"`{name}`") == 1, name


if __name__ == "__main__":
    text = README.read_text()
    start, stop = _readme_block(text)
    README.write_text(text[:start] + supported_ops_block() + text[stop:])
    print(f"updated {README}", file=sys.stderr)
