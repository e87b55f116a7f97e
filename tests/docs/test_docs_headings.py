"""The site's Markdown keeps its heading levels in steps of one.

`make docs` builds with ``-W``, and MyST warns when a heading jumps a level
(``##`` then ``####``). That build runs in CI but not in ``make test``, so a
change to a page — or to ``benchmarks/RESULTS.md``, which the benchmarks page
includes — could pass the suite and still fail the site. This test reads the
same files without Sphinx, in a fraction of a second.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "benchmarks" / "RESULTS.md", ROOT / "README.md"]
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6}) \S")


def heading_jumps(text):
    """``[(line number, level before, level)]`` for every heading deeper than one below the last one."""
    jumps, last, fenced = [], None, False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            level = len(match.group(1))
            if last is not None and level > last + 1:
                jumps.append((number, last, level))
            last = level
    return jumps


@pytest.mark.parametrize("path", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_headings_go_down_one_level_at_a_time(path):
    jumps = heading_jumps(path.read_text(encoding="utf-8"))
    assert not jumps, f"{path.relative_to(ROOT)}: headings that skip a level (line, from, to): {jumps}"


def test_the_rule_sees_a_jump_and_ignores_code():
    assert heading_jumps("# a\n## b\n#### c\n") == [(3, 2, 4)]
    assert heading_jumps("# a\n```\n#### not a heading\n```\n## b\n") == []
    assert heading_jumps("## a\n# b\n## c\n") == []
