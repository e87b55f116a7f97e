"""The unit plan: every exercise of the lab in one session, and the pages that show it up to date."""

from pathlib import Path

import pytest

import microtape.exercises as ex
from microtape.exercises.lab import unit

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "notebooks" / "README.md", ROOT / "docs" / "exercises.md"]


def test_every_exercise_of_the_lab_is_in_exactly_one_session_in_the_labs_order():
    planned = [name for _, names in unit.SESSIONS for name in names]
    assert sorted(planned) == sorted(ex.list_exercises())
    assert planned == [name for name in ex.ORDER if name in planned], "sessions follow the lab's order"


def test_the_plan_counts_the_registrys_points():
    plan = unit.unit_plan()
    total = sum(ex.get(name).max_score for name in ex.ORDER)
    assert plan.endswith(f"In all: {len(ex.ORDER)} exercises in {len(unit.SESSIONS)} sessions, {total} points.")
    for name in ex.ORDER:
        assert f"| `{name}` | " in plan and f"| {ex.get(name).max_score} |" in plan


def test_a_plan_missing_an_exercise_or_holding_one_twice_is_refused():
    (title, names), *rest = unit.SESSIONS
    with pytest.raises(ValueError, match=f"missing \\['{names[0]}'\\]"):
        unit.unit_plan(((title, names[1:]), *rest))
    with pytest.raises(ValueError, match=f"twice \\['{names[0]}'\\]"):
        unit.unit_plan(((title, (*names, names[0])), *rest))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.parent.name)
def test_the_pages_show_the_plan_as_generated(page, tmp_path):
    """Out of date? Run `python -m microtape.exercises.lab.unit notebooks/README.md docs/exercises.md`."""
    copy = tmp_path / page.name
    copy.write_text(page.read_text())
    assert not unit.rewrite(copy), f"{page} is out of date: run python -m microtape.exercises.lab.unit {page}"
