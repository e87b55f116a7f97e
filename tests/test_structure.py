"""The shape of the package: a folder per layer, short functions, imports that only flow downward.

* The package root holds only the public surface (``__init__.py``,
  ``__main__.py``) and folders, one per layer of the architecture. There is
  no cap on a module's length: a module is one concept, and a split follows
  a seam of the idea, never a line count.
* No function is over :data:`MAX_FUNCTION_LINES` lines of code (its
  docstring not counted) or over cyclomatic complexity
  :data:`MAX_COMPLEXITY` (ruff's C901, the rule ``ruff check --select C901``
  applies) — unless a comment says why: ``# long on purpose: <why>`` on the
  line above its ``def``, or ``# noqa: C901 <why>`` on the ``def`` line.
* Imports flow downward: engine ← ops ← values ← numpy_api, transforms ←
  nn, optim ← check ← viz ← exercises, train ← grading ← cli (see
  :data:`LAYERS`), and no module imports a module that imports it back (no
  cycles) — both counting the imports inside functions too, and no module
  imports the package facade.
* The course (``microtape/exercises/lab/``) uses only the public names of the
  framework it is written with (``microtape.exercises.__all__``), as a
  teacher's own exercise does.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "microtape"

MAX_FUNCTION_LINES = 60
MAX_COMPLEXITY = 15

# Files allowed over the function rules while someone splits them; each leaves when its file is
# within them again. Not a place to park a new file. Empty: every module keeps the rules.
STILL_BEING_SPLIT = {}

# The layer of each top-level folder. A module may import only from its own layer or a lower one;
# within a folder, the modules import each other without cycles.
LAYERS = {
    "engine": 0,
    "ops": 1,
    "values": 2,
    "numpy_api": 3,
    "transforms": 3,
    "nn": 4,
    "optim": 4,
    "check": 5,
    "viz": 6,
    "exercises": 7,
    "train": 7,
    "grading": 8,
    "cli": 9,
    "__main__": 10,
}
# The package itself (microtape/__init__.py) is the public surface, not a layer: it is loaded before
# any of its submodules, imports the lower layers and loads the upper ones on first use. No module
# imports it.
FACADE = "microtape"
# What runs inside the grader's box is not part of the package's import graph: it is a script
# folder of its own (a stand-in ``microtape`` included) that the box puts on its path.
BOXED = "microtape/grading/boxed/"
# The course's modules declare their exercises with the names ``microtape.exercises`` exports, as a
# teacher's module does; ``microtape/exercises/__init__.py`` binds those names first and imports the
# course last. So an import of that package from the course counts as an import of the framework
# modules the names come from (the package's own ``from .x import name`` lines), not of the package.
COURSE, FRAMEWORK = "microtape.exercises.lab", "microtape.exercises"


def _modules():
    """``{module name: path}`` for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE.parent).as_posix().startswith(BOXED):
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _relative(path):
    return path.relative_to(PACKAGE).as_posix()


def test_the_package_root_holds_only_the_public_surface_and_folders():
    loose = sorted(path.name for path in PACKAGE.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules loose in the package root: {loose}; each belongs in the folder of its layer"
    folders = sorted(path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__")
    assert set(folders) == set(LAYERS) - {"__main__"}, f"folders {folders} against the layers {sorted(LAYERS)}"


def _function_lines(node):
    """Lines of code of a function: from the end of its docstring (or its first line) to its end."""
    body = node.body
    docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    first = body[0].end_lineno + 1 if docstring and len(body) > 1 else body[0].lineno
    return node.end_lineno - first + 1


def _long_functions(source, name):
    """``[(where, lines)]`` for the functions of ``source`` over the limit without a comment saying why."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _function_lines(node) > MAX_FUNCTION_LINES:
            top = min([node.lineno] + [d.lineno for d in node.decorator_list])
            above = lines[top - 2].strip() if top >= 2 else ""
            if not re.match(r"# long on purpose: \S", above):
                found.append((f"{name}:{node.lineno} {node.name}", _function_lines(node)))
    return found


def test_no_function_is_too_long_without_saying_why():
    long = []
    for path in MODULES.values():
        if _relative(path) not in STILL_BEING_SPLIT:
            long += _long_functions(path.read_text(), _relative(path))
    assert not long, (
        f"functions over {MAX_FUNCTION_LINES} lines of code: {long}. Give a step a name of its own, or say why "
        "it must be one piece in a comment '# long on purpose: ...' above the def."
    )


def test_the_length_rule_catches_a_long_function_and_reads_the_reason():
    body = "".join(f"    x{k} = {k}\n" for k in range(MAX_FUNCTION_LINES + 1))
    source = f'def f():\n    """Doc."""\n{body}'
    assert [where for where, _ in _long_functions(source, "m.py")] == ["m.py:1 f"]
    assert _long_functions("# long on purpose: one table, read top to bottom\n" + source, "m.py") == []
    short = f'def f():\n    """Doc."""\n{"".join(body.splitlines(True)[:MAX_FUNCTION_LINES])}'
    assert _long_functions(short, "m.py") == []


def _ruff():
    """The ruff of this environment (a dev dependency, pinned in pyproject.toml)."""
    for folder in (os.path.dirname(sys.executable), *os.environ.get("PATH", "").split(os.pathsep)):
        candidate = Path(folder) / "ruff"
        if candidate.is_file():
            return str(candidate)
    pytest.fail("ruff is not installed: `make test` installs it with the [dev] extra")


def test_no_function_is_too_complex_without_saying_why():
    excluded = ",".join(f"microtape/{path}" for path in STILL_BEING_SPLIT)
    done = subprocess.run(
        [_ruff(), "check", "--no-cache", "--select", "C901", "--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
         "--extend-exclude", excluded, "--output-format", "concise", "--quiet", "microtape"],
        cwd=PACKAGE.parent, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"functions over cyclomatic complexity {MAX_COMPLEXITY}:\n{done.stdout}{done.stderr}\nSplit them, or say "
        "why they must be one piece: '# noqa: C901 <why>' on the def line."
    )
    silenced = [
        f"{_relative(path)}:{number}"
        for path in MODULES.values()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"# noqa: C901\s*$", line)
    ]
    assert not silenced, f"'# noqa: C901' without saying why: {silenced}"


def _imports(name, path, *, at_import_time):
    """The package's modules that ``name`` imports (only those of its top level, with ``at_import_time``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = tree.body if at_import_time else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                # `from . import masks` imports the module masks; `from .tape import Tape` the module tape.
                if f"{target}.{alias.name}" in MODULES:
                    found.add(f"{target}.{alias.name}")
                elif target == FRAMEWORK and _in(name, COURSE):
                    found.add(_FRAMEWORK_NAMES.get(alias.name, target))
                else:
                    found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {target for target in found if target in MODULES and target != name}


def _in(name, package):
    return name == package or name.startswith(package + ".")


def _framework_names():
    """``{name: module}`` for each name ``microtape/exercises/__init__.py`` takes from a module of its own."""
    found = {}
    for node in ast.parse(MODULES[FRAMEWORK].read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.update({alias.asname or alias.name: f"{FRAMEWORK}.{node.module}" for alias in node.names})
    return found


_FRAMEWORK_NAMES = _framework_names()


def _layer(name):
    parts = name.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else max(LAYERS.values()) + 1


def test_imports_flow_downward():
    upward = [
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if name != FACADE
        for target in sorted(_imports(name, path, at_import_time=False))  # lazy imports too
        if _layer(target) > _layer(name)
    ]
    assert not upward, f"imports flow downward (see LAYERS), imports inside functions too; upward: {upward}"


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_cycles():
    graph = {name: _imports(name, path, at_import_time=False) for name, path in MODULES.items()}
    assert not _cycles(graph), f"modules that import each other (imports inside functions too): {_cycles(graph)}"


def test_the_import_checks_catch_an_upward_import_and_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    report, layer = _layer("microtape.check.attention_report"), _layer("microtape.nn.attention.layer")
    assert _layer("microtape.viz.graph") > report > layer
    assert _layer("microtape.engine.tape") == 0 and _layer("microtape.cli.main") == LAYERS["cli"]
    assert _layer(FACADE) > _layer("microtape.cli.main")  # importing the facade from inside is upward
    tape = _imports("microtape.engine.tape", MODULES["microtape.engine.tape"], at_import_time=True)
    assert tape and all(_layer(target) == 0 for target in tape), tape
    # An import inside a function counts: the lazy walk sees it, the import-time walk does not.
    source = "def f():\n    from ..viz import graph\n"
    lazy_module = PACKAGE / "engine" / "_probe_for_the_test.py"
    lazy_module.write_text(source)
    try:
        assert "microtape.viz.graph" in _imports(
            "microtape.engine._probe_for_the_test", lazy_module, at_import_time=False
        )
        assert not _imports("microtape.engine._probe_for_the_test", lazy_module, at_import_time=True)
    finally:
        lazy_module.unlink()


def _engine_private_names():
    """The private names the engine defines (module functions and globals, attributes it sets).

    Left out: the members the class ``Node`` declares for its kinds (``_init_leaf``,
    ``_constant``, ``_output_data``): Scalar and Tensor (values/) subclass Node and
    implement or call them — a base class's interface to its subclasses.
    """
    names, node_members = set(), set()
    for path in (PACKAGE / "engine").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            if isinstance(node, ast.ClassDef) and node.name == "Node":
                for member in node.body:
                    target = getattr(member, "target", None)
                    node_members.add(getattr(member, "name", None) or getattr(target, "id", None))
    return {name for name in names - node_members if name.startswith("_") and not name.startswith("__")}


def _private_engine_reads(source, private):
    """``[(line, what)]``: an import of a private engine name, or a read of one on an object not ``self``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and "engine" in (node.module or "").split("."):
            found += [(node.lineno, f"import {alias.name}") for alias in node.names if alias.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr in private:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_private_engine_name_is_read_outside_the_engine():
    private = _engine_private_names()
    assert {"_nodes", "_active_tapes", "_position"} <= private and "_constant" not in private, sorted(private)
    reads = [
        f"{_relative(path)}:{line} {what}"
        for name, path in MODULES.items()
        if _layer(name) > LAYERS["engine"]
        for line, what in _private_engine_reads(path.read_text(), private)
    ]
    assert not reads, f"private engine names read outside engine/ (give them a public name): {reads}"


def test_the_private_name_rule_catches_a_tape_read_and_an_import():
    private = {"_nodes", "_topological_order"}
    source = "from ..engine.tape import _topological_order\ndef f(tape):\n    return tape._nodes, self._nodes\n"
    assert _private_engine_reads(source, private) == [(1, "import _topological_order"), (3, "tape._nodes")]


# Inside nn/, attention is built on the layers below it (linear, masks, dropout_mask, module, checks…)
# and under the layers built on it. Only these may import nn/attention from the rest of nn/.
BUILT_ON_ATTENTION = {
    "microtape.nn",
    "microtape.nn.transformer",
    "microtape.nn.transformer_torch",
    "microtape.nn.post_norm",
}


def _attention_importers(modules):
    """``{module: the nn/attention modules it imports}`` for the modules of nn/ outside nn/attention."""
    found = {}
    for name, path in modules.items():
        if name.startswith("microtape.nn") and not name.startswith("microtape.nn.attention"):
            targets = {t for t in _imports(name, path, at_import_time=False) if t.startswith("microtape.nn.attention")}
            if targets:
                found[name] = sorted(targets)
    return found


def test_nothing_in_nn_that_attention_builds_on_imports_attention():
    importers = _attention_importers(MODULES)
    assert set(importers) <= BUILT_ON_ATTENTION, (
        f"{sorted(set(importers) - BUILT_ON_ATTENTION)} import nn/attention: only the layers built on attention "
        f"({sorted(BUILT_ON_ATTENTION)}) may; what attention builds on (Linear, masks, …) keeps its own code"
    )
    # And attention builds on none of those layers (that would be the upward arrow again).
    used_by_attention = {
        target
        for name, path in MODULES.items()
        if name.startswith("microtape.nn.attention")
        for target in _imports(name, path, at_import_time=False)
    }
    assert not used_by_attention & BUILT_ON_ATTENTION, sorted(used_by_attention & BUILT_ON_ATTENTION)
    assert "microtape.nn.linear" in used_by_attention  # the rule reads what it is about


def test_the_attention_rule_catches_linear_importing_attention():
    probe = PACKAGE / "nn" / "_probe_for_the_attention_rule.py"
    probe.write_text("def backward():\n    from .attention import analytic\n")
    try:
        modules = {"microtape.nn._probe_for_the_attention_rule": probe}
        assert _attention_importers(modules) == {
            "microtape.nn._probe_for_the_attention_rule": ["microtape.nn.attention.analytic"]
        }
    finally:
        probe.unlink()


def _framework_imports(path):
    """``[(module, name)]`` of each import from ``microtape.exercises``'s own modules in the course module ``path``."""
    name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if _in(target, FRAMEWORK) and not _in(target, COURSE):
                found += [(target, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if _in(alias.name, FRAMEWORK)]
    return found


def test_the_course_uses_only_the_frameworks_public_names():
    import microtape.exercises as ex

    public = set(ex.__all__)
    assert {"Exercise", "Output", "Step", "Mistake", "KINDS", "register", "get", "trials"} <= public
    wrong = [
        f"{_relative(path)}: from {module} import {name}"
        for path in sorted((PACKAGE / "exercises" / "lab").rglob("*.py"))
        for module, name in _framework_imports(path)
        if module != FRAMEWORK or name is None or name.startswith("_") or name not in public
    ]
    assert not wrong, (
        "the course's modules import from the framework only the names `microtape.exercises` exports "
        f"(`from microtape.exercises import Exercise, register`, as a teacher does): {wrong}"
    )
    # The rule reads what it is meant to: a module path or a private name is caught.
    probe = PACKAGE / "exercises" / "lab" / "_probe_for_the_test.py"
    probe.write_text("from ..registry import register\nfrom .. import _private, Exercise\nimport microtape.exercises\n")
    try:
        assert _framework_imports(probe) == [
            ("microtape.exercises.registry", "register"),
            ("microtape.exercises", "_private"),
            ("microtape.exercises", "Exercise"),
            ("microtape.exercises", None),
        ]
    finally:
        probe.unlink()
