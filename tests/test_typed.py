"""The package stays typed: mypy checks every module (``make lint``), and this test keeps the
share of annotated public functions and methods from sliding back (issue 43).

A function counts as annotated when its return and every parameter but ``self``/``cls`` carry an
annotation. Public: a module-level function or a method of a module-level class whose name does not
start with ``_`` (dunders excluded too). The course's stubs count as they are: unannotated on purpose
(the student's starter file prints them verbatim), they are part of the share the floor allows for.
"""

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "microtape"
FLOOR = 0.9


def _public_functions(tree):
    """``(name, node)`` for the module's public functions and its public classes' public methods."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_"):
                    yield f"{node.name}.{item.name}", item


def _annotated(function, is_method):
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    if (
        is_method
        and positional
        and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list)
    ):
        positional = positional[1:]  # self or cls
    every = positional + arguments.kwonlyargs + [a for a in (arguments.vararg, arguments.kwarg) if a]
    return function.returns is not None and all(a.annotation is not None for a in every)


def _census():
    annotated, missing = 0, []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, function in _public_functions(tree):
            if _annotated(function, "." in name):
                annotated += 1
            else:
                missing.append(f"{path.relative_to(ROOT)}:{function.lineno} {name}")
    return annotated, missing


def test_annotated_share_of_public_functions_holds_the_floor():
    annotated, missing = _census()
    total = annotated + len(missing)
    assert total > 500, f"only {total} public functions found: is the census reading the package?"
    share = annotated / total
    assert share >= FLOOR, (
        f"{share:.1%} of {total} public functions and methods are annotated (floor {FLOOR:.0%}); "
        "not annotated:\n" + "\n".join(missing)
    )


def test_the_census_tells_annotated_from_not():
    tree = ast.parse(
        "def typed(a: int, *rest: str, key: bool = True) -> None: ...\n"
        "def half(a: int, b) -> None: ...\n"
        "def bare(a): ...\n"
        "def _private(a): ...\n"
        "class Thing:\n"
        "    def method(self, a: int) -> int: ...\n"
        "    @staticmethod\n"
        "    def static(a) -> int: ...\n"
        "    def __repr__(self): ...\n"
    )
    found = {name: _annotated(node, "." in name) for name, node in _public_functions(tree)}
    assert found == {"typed": True, "half": False, "bare": False, "Thing.method": True, "Thing.static": False}


def test_mypy_checks_the_whole_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["files"] == ["microtape"], "mypy's files must be the whole package, not a list of modules"
    assert config["disallow_untyped_defs"] and config["disallow_incomplete_defs"]
    assert "exclude" not in config, f"modules left out of mypy: {config['exclude']}"
