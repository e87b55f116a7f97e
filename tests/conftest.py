"""Make the repository's top-level folders, and the tests' shared helpers, importable from the tests.

The reference solutions live in ``instructor/`` (deliberately outside the
``microtape`` package, so they are not installed for students); the tests
import them as ``instructor.solutions`` from the repository's root.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# The repository's root (instructor/, benchmarks/), and tests/ itself: the tests mirror the package
# folder by folder, and share helpers kept here (strategies, golden/, browser, pictures, exercise_helpers).
for folder in (ROOT, TESTS):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture
def define():
    """``mt.ops.define`` that forgets the ops a test made (the registry is global)."""
    import microtape as mt
    from microtape.ops import OPS

    made = []

    def make(name, *args, **kwargs):
        op = mt.ops.define(name, *args, **kwargs)
        made.append(name)
        return op

    yield make
    for name in made:
        OPS.pop(name, None)


def pytest_terminal_summary(terminalreporter):
    """Each notebook's execution time and executed size, as tests/docs/test_notebooks.py measured them."""
    report = getattr(sys.modules.get("test_notebooks"), "REPORT", None)
    if not report:
        return
    terminalreporter.section("notebooks: execution time and executed size")
    for name, (seconds, size) in sorted(report.items()):
        terminalreporter.write_line(f"{name:<40} {seconds:6.1f} s  {size / 1000:7.1f} kB")
