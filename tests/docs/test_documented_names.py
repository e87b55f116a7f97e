"""Every name the README, the docs and the notebooks use from microtape still resolves.

The package's folders may move (internal paths change freely), but what a
reader was shown — ``mt.nn.MultiHeadAttention``, ``from microtape.nn import
derivation``, ``microtape.viz.graph`` — keeps working. This test reads every
Markdown page and notebook of the repository, collects the dotted names
(``mt.x.y``, ``microtape.x.y``) and the ``from microtape… import …`` lines, and
resolves each one.
"""

import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "notebooks").glob("*.md"))]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "assignment" / "source").glob("*.ipynb"))
SKIPPED_FOLDERS = ("_build", "generated")

DOTTED = re.compile(r"\b(?:mt|microtape)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
FROM_IMPORT = re.compile(r"from (microtape(?:\.[A-Za-z_][A-Za-z0-9_]*)*) import (?:\(([^)]*)\)|([^\n(#]+))")


def _texts():
    for page in PAGES:
        if not any(part in SKIPPED_FOLDERS for part in page.parts):
            yield page.relative_to(ROOT).as_posix(), page.read_text()
    for notebook in NOTEBOOKS:
        cells = json.loads(notebook.read_text())["cells"]
        sources = (cell["source"] for cell in cells)
        text = "\n".join("".join(source) if isinstance(source, list) else source for source in sources)
        yield notebook.relative_to(ROOT).as_posix(), text


def _names():
    """``{(where, dotted name)}``: every documented name, as ``microtape.a.b`` paths."""
    found = set()
    for where, text in _texts():
        for match in DOTTED.finditer(text):
            found.add((where, "microtape" + match.group(1)))
        for module, grouped, inline in FROM_IMPORT.findall(text):
            for name in (grouped or inline).replace("\n", " ").split(","):
                name = name.strip().split(" as ")[0].strip().strip("`")
                if name.isidentifier():
                    found.add((where, f"{module}.{name}"))
    return sorted(found)


def _resolve(dotted):
    """Import the longest module prefix of ``dotted``, then walk its attributes; raise if any step fails."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(dotted)


# Dotted names in the prose that are files or commands, not Python names.
NOT_NAMES = {"microtape.ipynb", "microtape.egg", "microtape.py"}


def test_the_pages_name_many_things():
    assert len(_names()) > 100


@pytest.mark.parametrize(("where", "dotted"), _names(), ids=lambda value: value)
def test_a_documented_name_resolves(where, dotted):
    if dotted in NOT_NAMES or dotted.endswith((".py", ".md", ".rst", ".ipynb", ".svg", ".png")):
        return
    try:
        _resolve(dotted)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"{where} names {dotted}, which no longer resolves: {error}")
