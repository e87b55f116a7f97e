"""Every count of exercises, points, sessions and notebooks that the README, the notebooks' README, the
assignment's README and the site's pages state agrees with the registry (``microtape.exercises``'s
exercises, the unit's ``SESSIONS``) and with the notebooks folder.

The lab is what the unit's sessions hold (an exercise a teacher registers later is not the lab's).
A count is a number (digits or a word: "thirteen", "Thirty-one") written just before "notebooks",
"exercises", "points", "sessions" or "lab sessions". The unit plan between its markers is generated
(per-session counts there are checked by test_exercises' unit test), so it is left out. `make test`
and `make docs` both run this file: a stale count fails the site's build.
"""

import re
from pathlib import Path

import pytest

from microtape.exercises import get
from microtape.exercises.lab.unit import BEGIN, END, SESSIONS
from microtape.viz.heatmap.annotation import ANNOTATE_AUTO_UP_TO, ANNOTATE_UP_TO

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = ROOT / "assignment"
PAGES = [
    ROOT / "README.md",
    ROOT / "notebooks" / "README.md",
    ASSIGNMENT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs").glob("*/*.md")),
]

UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
UNITS += "seventeen eighteen nineteen"
UNITS = UNITS.split()
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
NUMBER = r"\d+|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:-[a-z]+)?|" + "|".join(UNITS)


def value(word):
    """The number a count is written as: ``31``, ``thirty-one``, ``Thirteen``."""
    word = word.lower()
    if word.isdigit():
        return int(word)
    if word in UNITS:
        return UNITS.index(word)
    tens, _, unit = word.partition("-")
    return TENS[tens] + (UNITS.index(unit) if unit else 0)


def notebooks():
    return len(list((ROOT / "notebooks").glob("*.ipynb")))


def lab():
    """The lab's exercises, in its sessions (the unit plan checks that they are every exercise of the lab)."""
    return [name for _, names in SESSIONS for name in names]


def truth():
    return {
        "notebooks": notebooks(),
        "exercises": len(lab()),
        "points": sum(get(name).max_score for name in lab()),
        "sessions": len(SESSIONS),
    }


COUNT = re.compile(
    rf"\b({NUMBER})(?:\s+(?:short|teaching|graded|lab|Jupyter))*\s+\[?(notebooks|exercises|points|sessions)\b",
    re.IGNORECASE,
)


def without_unit_plan(text):
    while BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + rest.split(END, 1)[1]
    return text


def counts(text):
    """``(number, noun, context)`` of every count in ``text`` (the unit plan left out).

    Points are counted in digits only: "a slope needs two points" is geometry, not a grade.
    """
    text = re.sub(r"\s+", " ", without_unit_plan(text))
    return [
        (value(m.group(1)), m.group(2).lower(), text[max(0, m.start() - 40) : m.end() + 10])
        for m in COUNT.finditer(text)
        if m.group(2).lower() != "points" or m.group(1).isdigit()
    ]


def test_the_count_reader_reads_what_is_written():
    read = counts("Thirteen short notebooks; thirty-one exercises in five lab sessions, 92 points")
    assert [(number, noun) for number, noun, _ in read] == [
        (13, "notebooks"),
        (31, "exercises"),
        (5, "sessions"),
        (92, "points"),
    ]
    assert [(n, noun) for n, noun, _ in counts("the ten [notebooks](README.md), 24 points")] == [
        (10, "notebooks"),
        (24, "points"),
    ]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_count_on_the_page_is_the_registrys(page):
    expected = truth()
    wrong = [
        f"{context!r}: {number} {noun}, the registry says {expected[noun]}"
        for number, noun, context in counts(page.read_text(encoding="utf-8"))
        if number != expected[noun]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_pages_that_promise_counts_state_them():
    """The counts a reader looks for are there (so removing them does not pass the test above by silence)."""
    stated = {
        path: {noun for _, noun, _ in counts((ROOT / path).read_text(encoding="utf-8"))}
        for path in ("README.md", "notebooks/README.md", "docs/exercises.md")
    }
    assert {"notebooks", "sessions"} <= stated["README.md"]
    assert {"notebooks", "exercises", "sessions"} <= stated["notebooks/README.md"]
    assert {"exercises", "sessions"} <= stated["docs/exercises.md"]
    assert {"exercises", "points"} <= {noun for _, noun, _ in counts((ASSIGNMENT / "README.md").read_text())}


def session_of(name):
    return next(k for k, (_, names) in enumerate(SESSIONS, start=1) if name in names)


def test_notebook_12_is_sent_to_the_session_of_its_exercises():
    text = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    said = re.search(r"Notebook 12 \(recurrent nets\) goes with session (\d+)", text)
    assert said and int(said.group(1)) == session_of("rnn_bptt") == session_of("gru_cell_backward")


def test_exercises_are_named_not_numbered():
    """'exercise 4' means nothing once the lab is reordered: pages name the exercise."""
    for page in PAGES:
        found = re.findall(r"\bexercises? \d+(?:[–-]\d+)?\b", without_unit_plan(page.read_text(encoding="utf-8")))
        assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_the_second_order_exercise_is_the_one_the_exercises_page_names():
    second_order = [name for name in lab() if "second order" in get(name).title.lower()]
    assert second_order == ["logsumexp_hvp"]
    intro = (ROOT / "docs" / "exercises.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert "logsumexp's\nHessian-vector product" in intro and "attention's second derivative" not in intro


def test_the_pictures_page_says_where_numbers_are_written():
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "pictures.md").read_text(encoding="utf-8"))
    auto, forced = re.search(
        r"Numbers are written in the cells of weight maps up to (\d+) × \1 .*?up to (\d+) × \2", text
    ).groups()
    assert (int(auto), int(forced)) == (ANNOTATE_AUTO_UP_TO, ANNOTATE_UP_TO)
