"""What a value check cannot prove, shown to the teacher: the signs of an answer that was not derived.

The rule of the course (docs/grading.md): derive each gradient by hand.
Numeric differentiation, an autograd written or carried in the file, and a
library's answer are not derivations, even when their numbers are right. The
checker compares numbers, so this module reads the submission's source (its
syntax tree — nothing is run here) and lists what it finds::

    flags = source_flags(cells)
    # [{"kind": "numeric differentiation", "evidence": "line 12: a complex step (1e-20j)"}, ...]

Kinds (each with one line of evidence, the place in the file):

``numeric differentiation``
    complex arithmetic (a complex literal, ``.imag``, a complex dtype), a
    difference quotient of two calls of one function, or a function of the
    file called once per entry (``np.ndindex``, ``np.nditer``).
``encoded code``
    a blob decoded or decompressed (base64/base85/lzma/zlib/bz2/gzip/marshal)
    in a file that also builds code at run time (``exec``, ``compile``,
    ``__import__``, ``types.FunctionType``), or a long encoded string literal.
``own autograd``
    a class whose values overload arithmetic and remember where they came
    from (parents and local derivatives, a ``backward``), or a topological
    walk of a graph.
``autograd library``
    an import of torch, jax, autograd, mygrad, micrograd, tinygrad, or of
    microtape beyond ``microtape.exercises`` and ``mt.ops.define``.

The box adds what it observed while running the file (the child's
``observed`` list: classes of that shape that only exist after decoding, a
library module that appeared); :func:`merge` joins both. Flags go to the
teacher (the gradebook, its CSV, the summary), never into the student's
feedback. They are evidence for a person to read, not a verdict: no points
are taken for them.
"""

import ast
from typing import Any

from .boxed.ipython import strip_magics
from .untrusted import safe_text

__all__ = ["KINDS", "AUTOGRAD_LIBRARIES", "source_flags", "imported_packages", "merge"]

KINDS = ("numeric differentiation", "encoded code", "own autograd", "autograd library")
AUTOGRAD_LIBRARIES = ("torch", "jax", "autograd", "mygrad", "micrograd", "tinygrad", "microtape")
#: What of microtape a submission may use: the exercises (the notebook's check cells) and mt.ops.define.
MICROTAPE_ALLOWED = ("microtape.exercises", "microtape.ops")
_DECODERS = {"b64decode", "b85decode", "a85decode", "b32decode", "decodebytes", "standard_b64decode",
             "urlsafe_b64decode", "decompress", "unhexlify", "a2b_base64", "loads"}  # fmt: skip
_DECODER_MODULES = {"base64", "binascii", "lzma", "zlib", "bz2", "gzip", "marshal", "codecs", "zipfile", "pickle"}
_CODE_BUILDERS = {"exec", "eval", "compile", "__import__", "FunctionType", "CodeType", "import_module", "zipimporter"}
_ARITHMETIC = {"__add__", "__radd__", "__mul__", "__rmul__", "__sub__", "__rsub__", "__truediv__", "__matmul__",
               "__pow__", "__neg__"}  # fmt: skip
_MEMORY_WORDS = ("parent", "prev", "children", "backward", "vjp", "grad_fn", "inputs", "_op")
#: A string literal this long, of a base64/base85 alphabet only, is a blob (a lab's strings are short text).
_BLOB_CHARS = 2000
#: Flags of one kind kept per submission (the first places; the kind is what matters).
_PER_KIND = 3


def _trees(cells: Any) -> Any:
    """``(cell number or None, tree)`` for each cell that parses (IPython lines read as a notebook would)."""
    trees = []
    for number, source in enumerate(cells, start=1):
        text = source if len(cells) == 1 else strip_magics(source)
        try:
            trees.append((number if len(cells) > 1 else None, ast.parse(text)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return trees


def _where(cell: Any, node: Any) -> Any:
    line = f"line {getattr(node, 'lineno', '?')}"
    return f"cell {cell}, {line}" if cell is not None else line


def _dotted(node: Any) -> Any:
    """``np.linalg.norm`` for an attribute chain, the name for a name, else ''."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _library(module: Any) -> Any:
    """The autograd library ``module`` (a dotted name) belongs to, or None (microtape's allowed parts: None)."""
    top = module.split(".")[0]
    if top not in AUTOGRAD_LIBRARIES:
        return None
    if top == "microtape" and (module == "microtape" or module.startswith(MICROTAPE_ALLOWED)):
        return None
    return top


class _Reader(ast.NodeVisitor):
    """One pass over a cell's tree, collecting ``(kind, evidence)`` and what the file imports."""

    def __init__(self, cell: Any, defined: Any) -> None:
        self.cell = cell
        self.defined = defined  # the names of functions the whole file defines
        self.found: list[Any] = []
        self.packages: set[str] = set()
        self.decoders: list[Any] = []
        self.builders: list[Any] = []
        self.microtape_names = {"microtape", "mt"}

    def note(self, kind: Any, node: Any, text: Any) -> Any:
        self.found.append((kind, f"{_where(self.cell, node)}: {text}"))

    # imports
    def visit_Import(self, node: Any) -> Any:
        for alias in node.names:
            self._imported(alias.name, node)
            if alias.name == "microtape" and alias.asname:
                self.microtape_names.add(alias.asname)

    def visit_ImportFrom(self, node: Any) -> Any:
        if node.module and not node.level:
            self._imported(node.module, node)
            if node.module == "microtape":
                for alias in node.names:
                    self._imported(f"microtape.{alias.name}", node)

    def _imported(self, module: Any, node: Any) -> Any:
        self.packages.add(module.split(".")[0])
        library = _library(module)
        if library:
            self.note("autograd library", node, f"imports {module}")
        if module.split(".")[0] in _DECODER_MODULES:
            self.decoders.append(node)

    # calls
    def visit_Call(self, node: Any) -> Any:
        name = _dotted(node.func)
        last = name.rpartition(".")[2] if name else getattr(node.func, "attr", "")
        first = name.split(".")[0] if name else ""
        if last in _CODE_BUILDERS:
            self.builders.append(node)
            if last in ("__import__", "import_module") and node.args and isinstance(node.args[0], ast.Constant):
                if isinstance(node.args[0].value, str):
                    self._imported(node.args[0].value, node)
        if last in _DECODERS and (first in _DECODER_MODULES or last.endswith("decode") or last == "decompress"):
            self.decoders.append(node)
        if first in self.microtape_names and name.count(".") >= 1:
            module = "microtape." + name.split(".", 1)[1]
            if _library(module):
                self.note("autograd library", node, f"calls {name}")
        if name in ("complex", "np.complex128", "numpy.complex128", "np.complex64"):
            self.note("numeric differentiation", node, f"complex arithmetic ({name})")
        self.generic_visit(node)

    def visit_BinOp(self, node: Any) -> Any:
        # (f(x + h) - f(x - h)) / (2 h): a difference quotient of two calls of one function.
        if isinstance(node.op, ast.Div) and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Sub):
            left, right = node.left.left, node.left.right
            if isinstance(left, ast.Call) and isinstance(right, ast.Call) and _dotted(left.func) == _dotted(right.func):
                if _dotted(left.func):
                    self.note("numeric differentiation", node, f"a difference quotient of {_dotted(left.func)}")
        self.generic_visit(node)

    def visit_Constant(self, node: Any) -> Any:
        if isinstance(node.value, complex):
            self.note("numeric differentiation", node, f"complex arithmetic ({node.value!r})")
        elif isinstance(node.value, (str, bytes)) and len(node.value) >= _BLOB_CHARS and _looks_encoded(node.value):
            self.note("encoded code", node, f"an encoded string of {len(node.value)} characters")

    def visit_Attribute(self, node: Any) -> Any:
        if node.attr in ("imag", "complex128", "complex64", "cdouble"):
            self.note("numeric differentiation", node, f"complex arithmetic (.{node.attr})")
        self.generic_visit(node)

    def visit_For(self, node: Any) -> Any:
        iterator = _dotted(node.iter.func) if isinstance(node.iter, ast.Call) else ""
        if iterator.rpartition(".")[2] in ("ndindex", "nditer"):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and _dotted(inner.func) in self.defined:
                    self.note("numeric differentiation", node,
                              f"calls {_dotted(inner.func)} once per entry ({iterator})")  # fmt: skip
                    break
        self.generic_visit(node)

    # an autograd of its own
    def visit_ClassDef(self, node: Any) -> Any:
        methods = {item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        overloads = sorted(methods & _ARITHMETIC)
        remembers = sorted(
            {target.attr for target in ast.walk(node) if isinstance(target, ast.Attribute)
             and isinstance(target.ctx, ast.Store) and any(word in target.attr.lower() for word in _MEMORY_WORDS)}
            | {method for method in methods if "backward" in method or "vjp" in method}
        )  # fmt: skip
        if len(overloads) >= 2 and remembers:
            kept = ", ".join(remembers[:3])
            self.note("own autograd", node, f"class {node.name} overloads {', '.join(overloads[:3])} and keeps "
                                            f"{kept} (values that remember their parents)")  # fmt: skip
        self.generic_visit(node)

    def visit_FunctionDef(self, node: Any) -> Any:
        lowered = node.name.lower()
        if "topo" in lowered or "toposort" in lowered:
            self.note("own autograd", node, f"def {node.name} (a topological walk of a graph)")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef


def _looks_encoded(value: Any) -> Any:
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    sample = text[:4000]
    spaces = sum(char.isspace() for char in sample)
    return spaces < len(sample) // 50  # prose and code have a space every few characters; base64 has none


def _file_reader(cells: Any) -> Any:
    trees = _trees(cells)
    defined = {node.name for _, tree in trees for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    readers = []
    for cell, tree in trees:
        reader = _Reader(cell, defined)
        reader.visit(tree)
        readers.append(reader)
    return readers


def source_flags(cells: Any) -> Any:
    """The flags the source shows: ``[{"kind", "evidence"}, ...]`` (a few per kind, in file order)."""
    found, decoders, builders = [], [], []
    for reader in _file_reader(cells):
        found += reader.found
        decoders += [(reader.cell, node) for node in reader.decoders]
        builders += [(reader.cell, node) for node in reader.builders]
    if decoders and builders:
        cell, node = builders[0]
        found.append(("encoded code", f"{_where(cell, node)}: builds code at run time from decoded or "
                                      f"decompressed data ({len(decoders)} decoding call(s))"))  # fmt: skip
    return merge([{"kind": kind, "evidence": evidence} for kind, evidence in found])


def imported_packages(cells: Any) -> Any:
    """The top-level packages the source imports (by statement, ``__import__`` or ``import_module`` of a literal)."""
    packages = set()
    for reader in _file_reader(cells):
        packages |= reader.packages
    return packages


def merge(*lists: Any) -> Any:
    """One list of flags from several (the source's, the box's): at most a few per kind, each made safe text."""
    merged: list[dict[str, str]] = []
    count: dict[str, int] = {}
    seen: set[Any] = set()
    for flags in lists:
        for flag in flags or ():
            if not isinstance(flag, dict):
                continue
            kind, evidence = str(flag.get("kind", "")), safe_text(flag.get("evidence", ""), 300)
            if kind not in KINDS or (kind, evidence) in seen or count.get(kind, 0) >= _PER_KIND:
                continue
            seen.add((kind, evidence))
            count[kind] = count.get(kind, 0) + 1
            merged.append({"kind": kind, "evidence": evidence})
    return merged
