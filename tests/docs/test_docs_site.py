"""The documentation site, as built by `make docs`, opened in a real headless Chromium.

`make docs` builds the site into docs/_build/html and then runs this file
(marker ``docs``; `make test` leaves it out, it has no site to open). It
checks what a reader would see: the landing page and its picture, a notebook
page whose images load and whose formulas MathJax has typeset, the API page
of MultiHeadAttention, the frames player working inside a page — and, over
every page of the site, that no link inside the site is broken and that no
page loads anything from the network.
"""

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser import HEIGHT, WIDTH, chromium, failed_requests

pytestmark = pytest.mark.docs

SITE = Path(__file__).resolve().parents[2] / "docs" / "_build" / "html"


@pytest.fixture(scope="module")
def site():
    if not (SITE / "index.html").exists():
        pytest.fail(f"no site in {SITE}: run `make docs` (it builds the site, then runs this file)")
    return SITE


@pytest.fixture(scope="module")
def browser(tmp_path_factory, site):
    chrome = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chrome
    chrome.quit()


def open_page(browser, page):
    """Load ``page`` and wait until MathJax (when the page has it) has typeset everything."""
    browser.get((SITE / page).as_uri())
    browser.set_script_timeout(30)
    browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        if (window.MathJax && MathJax.Hub) { MathJax.Hub.Queue(() => done(true)); } else { done(false); }
        """
    )


def images(browser):
    """(loaded, broken) <img> sources of the page."""
    return browser.execute_script(
        """
        const all = Array.from(document.images);
        return [all.filter(i => i.complete && i.naturalWidth > 0).map(i => i.src),
                all.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)];
        """
    )


def maths(browser):
    """(typeset formulas, formulas MathJax failed on, raw TeX left untypeset in the page's text)."""
    return browser.execute_script(
        """
        const typeset = document.querySelectorAll('.MathJax, .MathJax_Display').length;
        const errors = document.querySelectorAll('.MathJax_Error, [title^="Math Processing Error"]').length;
        const main = document.querySelector('main') || document.body;
        const raw = (main.innerText.match(/\\\\\\(|\\\\\\[/g) || []).length;
        return [typeset, errors, raw];
        """
    )


def readme_first_example():
    return re.search(
        r"## A first look\n\n```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S
    ).group(1)


def test_the_landing_page_starts_with_the_sites_wheel_and_the_readmes_first_example_then_the_clone(browser):
    open_page(browser, "index.html")
    assert browser.title.startswith("microtape")
    text = browser.find_element("css selector", "main").text
    assert "autograd engine" in text
    wheel = browser.find_element("css selector", "main a[href$='.whl']").get_attribute("href")
    name = Path(unquote(urlsplit(wheel).path)).name
    install, example = text.find(f'pip install "{name}[notebooks]"'), text.find(readme_first_example().strip())
    clone = text.find("make demo")
    assert 0 < install < example < clone and text.find("make test") > clone, (install, example, clone)
    assert text.find("pip install") == install  # the first install line a reader meets is the wheel's
    loaded, broken = images(browser)
    assert not broken and any("attention_backward_graph" in src for src in loaded)


def test_one_archive_holds_every_notebook(browser):
    import zipfile

    for page in ("index.html", "notebooks/index.html", "install.html"):
        open_page(browser, page)
        links = browser.find_elements("css selector", "main a[href$='microtape-notebooks.zip']")
        assert links, f"{page} offers no archive of the notebooks"
        archive = Path(unquote(urlsplit(links[0].get_attribute("href")).path))
        assert archive == SITE / "microtape-notebooks.zip"
    with zipfile.ZipFile(SITE / "microtape-notebooks.zip") as archive:
        held = {Path(name).name: archive.read(name) for name in archive.namelist()}
    stored = {p.name: p.read_bytes() for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert {name: data for name, data in held.items() if name.endswith(".ipynb")} == stored


def test_a_notebook_page_has_its_pictures_and_its_formulas_rendered(browser):
    open_page(browser, "notebooks/03_softmax_jacobian.html")
    loaded, broken = images(browser)
    assert not broken and len(loaded) >= 1  # the Jacobian heatmap, executed at build time
    typeset, errors, raw = maths(browser)
    assert typeset >= 5 and errors == 0 and raw == 0


def test_the_derivation_page_typesets_every_formula(browser):
    open_page(browser, "derivation.html")
    typeset, errors, raw = maths(browser)
    assert typeset >= 20 and errors == 0 and raw == 0
    table = browser.find_element("css selector", "main table").text
    assert "dS" in table and "scaled_scores" in table  # generated from microtape.nn.attention.derivation


def test_the_api_page_of_multihead_attention(browser):
    open_page(browser, "api/generated/microtape.nn.MultiHeadAttention.html")
    signature = browser.find_element("id", "microtape.nn.MultiHeadAttention").text
    assert "MultiHeadAttention" in signature and "num_heads" in signature
    for method in ("forward", "backward", "grad_key_input"):
        assert browser.find_elements("id", f"microtape.nn.MultiHeadAttention.{method}"), method


def test_the_frames_player_steps_inside_the_page(browser):
    open_page(browser, "pictures.html")
    graphs = browser.execute_script("return document.querySelectorAll('main svg .node').length")
    assert graphs > 5  # the SVG graph, inline
    slider = browser.find_element("css selector", "main input[type=range]")
    first = slider.get_attribute("value")
    browser.execute_script(
        "arguments[0].value = arguments[0].max; arguments[0].dispatchEvent(new Event('input'))", slider
    )
    assert slider.get_attribute("value") != first
    visible = browser.execute_script(
        "return Array.from(arguments[0].closest('div').parentElement.querySelectorAll('svg'))"
        ".filter(s => s.getBoundingClientRect().height > 0).length",
        slider,
    )
    assert visible >= 1


class Links(HTMLParser):
    """Every href and src of a page, and every id it defines."""

    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name):
                self.links.append((tag, attrs[name]))


def parse(path, cache={}):  # noqa: B006 - one parse per page for the whole test
    if path not in cache:
        parser = Links()
        parser.feed(path.read_text(encoding="utf-8"))
        cache[path] = parser
    return cache[path]


def test_no_link_inside_the_site_is_broken_and_nothing_comes_from_the_network(site):
    pages = sorted(page for page in site.rglob("*.html") if not page.relative_to(site).parts[0].startswith("_"))
    assert len(pages) > 30
    broken, fetched = [], []
    for page in pages:
        for tag, link in parse(page).links:
            parts = urlsplit(link)
            if parts.scheme in ("http", "https") or link.startswith("//"):
                if tag != "a":  # a script, stylesheet, image or font from the network
                    fetched.append(f"{page.relative_to(site)}: <{tag}> {link}")
                continue
            if parts.scheme or not (parts.path or parts.fragment):
                continue  # mailto:, data:, javascript:
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in parse(target).ids:
                broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert not broken, "\n".join(broken[:20])
    assert not fetched, "\n".join(fetched[:20])


def test_the_cli_page_is_generated_from_the_parser(site):
    from microtape.cli.main import build_parser

    text = re.sub(r"<[^>]+>", "", (site / "cli.html").read_text(encoding="utf-8"))
    for action in build_parser()._subparsers._group_actions[0].choices:
        assert f"microtape {action}" in text, action


# ---------------------------------------------------------------- a student starts from the site (#39)

ROOT = SITE.parents[2]


def test_the_install_page_links_a_wheel_that_installs(browser, tmp_path):
    import subprocess
    import sys
    import zipfile

    open_page(browser, "install.html")
    links = browser.find_elements("css selector", "main a[href$='.whl']")
    assert links, "the install page links no wheel"
    wheel = Path(unquote(urlsplit(links[0].get_attribute("href")).path))
    assert wheel.parent == SITE and zipfile.is_zipfile(wheel)
    text = browser.find_element("css selector", "main").text
    assert f'pip install "{wheel.name}[notebooks]"' in text and "make demo" in text and "python -m microtape" in text
    # It installs (its dependencies are this environment's) and imports from where it was installed.
    target = tmp_path / "installed"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    where = subprocess.run(
        [sys.executable, "-c", "import microtape, microtape.exercises; print(microtape.__file__)"],
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(target))


NOTEBOOK_PAGES = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_each_notebook_page_offers_its_notebook_for_download(browser):
    assert len(NOTEBOOK_PAGES) >= 10
    for stem in NOTEBOOK_PAGES:
        open_page(browser, f"notebooks/{stem}.html")
        link = browser.find_element("css selector", "main p.mt-download a[download]")
        saved = Path(unquote(urlsplit(link.get_attribute("href")).path))
        assert saved.name == f"{stem}.ipynb" and saved.read_bytes() == (ROOT / "notebooks" / saved.name).read_bytes()


def test_the_flip_book_of_notebook_4_plays_on_the_static_page(browser):
    open_page(browser, "notebooks/04_attention_step_by_step.html")
    players = browser.find_elements("css selector", "main .mt-frames")
    assert len(players) == 1  # the widget's static player, not an empty widget tag
    player = players[0]
    browser.execute_script("arguments[0].scrollIntoView()", player)

    def shown():
        return browser.execute_script(
            "const r = arguments[0]; const f = Array.from(r.querySelectorAll('.mt-frame'))"
            ".filter(f => f.style.display !== 'none'); return [f.map(f => f.dataset.step),"
            " r.querySelector('.mt-caption').textContent, f[0].getBoundingClientRect().height];",
            player,
        )

    steps, caption, height = shown()
    assert steps == ["0"] and height > 50
    player.find_element("css selector", '[data-go="next"]').click()
    player.find_element("css selector", '[data-go="next"]').click()
    steps2, caption2, _ = shown()
    assert steps2 == ["2"] and caption2 != caption
    # Sized to its frames: the stage is no taller than the tallest frame shown (plus its margin).
    tallest, stage = browser.execute_script(
        "const r = arguments[0]; let t = 0; for (const f of r.querySelectorAll('.mt-frame')) {"
        " const d = f.style.display; f.style.display = 'block';"
        " t = Math.max(t, f.querySelector('svg, img').getBoundingClientRect().height); f.style.display = d; }"
        " return [t, r.querySelector('.mt-stage').getBoundingClientRect().height];",
        player,
    )
    assert stage <= tallest + 12, (stage, tallest)


CLIPPED = """
// Maths and tables a reader cannot see whole. MathJax's own box of a formula clips it when it is
// wider than its column; an element is also cut when an ancestor hides its overflow (before any
// ancestor that scrolls), or when it runs past the window with nothing to scroll.
const main = document.querySelector('main') || document.body;
const found = [];
const describe = (el, why) => (why + ': ' + (el.innerText || '').replace(/\\s+/g, ' ').slice(0, 60));
for (const box of main.querySelectorAll('.MathJax_Display span.math, .MathJax_Display .MathJax')) {
  const s = getComputedStyle(box);
  if ((s.overflowX === 'hidden' || s.overflowX === 'clip') && box.scrollWidth > box.clientWidth + 1)
    found.push(describe(box, 'formula cut by its own box'));
}
for (const el of main.querySelectorAll('.MathJax_Display, div.math, table')) {
  const r = el.getBoundingClientRect();
  if (r.width === 0) continue;
  let scrolls = false;
  for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
    const s = getComputedStyle(a), ar = a.getBoundingClientRect();
    if (s.overflowX === 'auto' || s.overflowX === 'scroll') { scrolls = true; break; }
    if ((s.overflowX === 'hidden' || s.overflowX === 'clip') && r.right > ar.right + 1) {
      found.push(describe(el, 'cut by ' + a.tagName + '.' + a.className)); scrolls = true; break;
    }
  }
  if (!scrolls && r.right > document.documentElement.clientWidth + 1) found.push(describe(el, 'past the window'));
}
return found;
"""


def pages_with_maths_or_tables():
    found = []
    for page in sorted(SITE.rglob("*.html")):
        relative = page.relative_to(SITE)
        if (
            relative.parts[0].startswith("_")
            or relative.parts[0] == "api"
            or relative.name in ("search.html", "genindex.html")
        ):
            continue
        text = page.read_text(encoding="utf-8")
        if 'class="math' in text or "<table" in text:
            found.append(relative.as_posix())
    return found


@pytest.mark.parametrize("width", [900, 1280, 1920])
def test_no_formula_or_table_is_clipped_at_any_width(browser, width):
    pages = pages_with_maths_or_tables()
    assert "notebooks/04_attention_step_by_step.html" in pages and "derivation.html" in pages
    browser.set_window_size(width, 1000)
    try:
        clipped = {}
        for page in pages:
            open_page(browser, page)
            found = browser.execute_script(CLIPPED)
            if found:
                clipped[page] = found[:3]
            if page == "notebooks/04_attention_step_by_step.html":
                # The column is not narrower than at 900 px, where the side bars fold away.
                column = browser.execute_script("return document.querySelector('.bd-article').clientWidth")
                assert column >= min(width - 60, 800), (width, column)
        assert not clipped, clipped
    finally:
        browser.set_window_size(WIDTH, HEIGHT)


# ---------------------------------------------------------------- round 3 (#48): read at 900, 1280 and 1920 px

WIDTHS = [900, 1280, 1920]
SMALLEST_PX = 8

PAGE_STATE = """
// Every measure a page's reader depends on, in one pass: graph text, pictures, navigation, header.
const main = document.querySelector('main') || document.body;
const shown = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
const small = [];
for (const svg of main.querySelectorAll('svg')) {
  if (!shown(svg)) continue;  // a player's frames not on show
  for (const t of svg.querySelectorAll('text')) {
    const m = t.getScreenCTM();
    if (!m || !t.textContent.trim()) continue;
    const size = parseFloat(t.getAttribute('font-size') || getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    if (size < arguments[0]) small.push(size.toFixed(1) + ' px: ' + t.textContent.trim().slice(0, 30));
  }
}
const shrunk = [];
for (const img of main.querySelectorAll('.cell_output img')) {
  if (!shown(img) || !img.naturalWidth) continue;
  const scale = img.getBoundingClientRect().width / img.naturalWidth;
  // Figures are drawn at 100 dpi with 8 pt (11 px) text at least: shown under 3/4 of their size it is under 8 px.
  if (scale < 0.75) shrunk.push(img.src.split('/').pop().slice(0, 40) + ' at ' + scale.toFixed(2));
}
const primary = document.querySelector('.bd-sidebar-primary');
const secondary = document.querySelector('.bd-sidebar-secondary');
const header = document.querySelector('.bd-header');
const titles = Array.from(document.querySelectorAll('.bd-links__title')).filter(shown).map(t => t.textContent);
return {
  small: small.slice(0, 5), smallCount: small.length, shrunk,
  primaryShown: !!primary && shown(primary),
  primaryLinks: primary ? primary.querySelectorAll('a.reference').length : 0,
  titles,
  secondaryShown: !!secondary && shown(secondary) && secondary.querySelectorAll('a').length > 0,
  headerHeight: header ? header.getBoundingClientRect().height : 0,
};
"""


def site_pages():
    return [
        page.relative_to(SITE).as_posix()
        for page in sorted(SITE.rglob("*.html"))
        if not page.relative_to(SITE).parts[0].startswith("_")
        and page.relative_to(SITE).parts[0] != "api"
        and page.name not in ("search.html", "genindex.html", "py-modindex.html")
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_reads_at_every_width(browser, width):
    """No graph text under 8 px, no figure shrunk, a sidebar never empty, no failed request, the header one row."""
    pages = site_pages()
    assert "memory.html" in pages and "notebooks/13_memory.html" in pages
    browser.set_window_size(width, 1000)
    failed_requests(browser)  # forget what came before
    try:
        problems = {}
        for page in pages:
            open_page(browser, page)
            state = browser.execute_script(PAGE_STATE, SMALLEST_PX)
            found = (
                [f"{state['smallCount']} graph texts under {SMALLEST_PX} px: {state['small']}"]
                if state["small"]
                else []
            )
            found += [f"pictures shrunk: {state['shrunk']}"] if state["shrunk"] else []
            if width >= 960 and not (state["primaryShown"] and state["primaryLinks"] >= 10):
                found.append(f"the navigation column is empty or missing ({state['primaryLinks']} links)")
            if "Section Navigation" in state["titles"]:
                found.append("a 'Section Navigation' title")
            if width >= 960 and state["headerHeight"] > 80:
                found.append(f"the header is {state['headerHeight']:.0f} px tall (two rows)")
            failed = failed_requests(browser)
            found += [f"failed request: {message[:160]}" for message in failed]
            if found:
                problems[page] = found
        assert not problems, "\n".join(f"{page}: {found}" for page, found in problems.items())
    finally:
        browser.set_window_size(WIDTH, HEIGHT)


@pytest.mark.parametrize("width", WIDTHS)
def test_on_this_page_from_1200_px(browser, width):
    browser.set_window_size(width, 1000)
    try:
        open_page(browser, "notebooks/07_exercises.html")  # the longest page
        state = browser.execute_script(PAGE_STATE, SMALLEST_PX)
        assert state["secondaryShown"] == (width >= 1200), state
        column = browser.execute_script("return document.querySelector('.bd-article').clientWidth")
        assert column >= min(width - 60, 700), (width, column)  # the text keeps its room
    finally:
        browser.set_window_size(WIDTH, HEIGHT)


PLAYER_STATE = """
const root = arguments[0];
const next = root.querySelector('[data-go="next"]').getBoundingClientRect();
const hit = document.elementFromPoint(next.left + next.width / 2, next.top + next.height / 2);
const button = root.querySelector('[data-go="next"]');
const stage = root.querySelector('.mt-stage').getBoundingClientRect();
const header = document.querySelector('.bd-header').getBoundingClientRect();
const frame = Array.from(root.querySelectorAll('.mt-frame')).find(f => f.style.display !== 'none');
const picture = frame.querySelector('svg, img');
return {
  nextIsHit: !!hit && (hit === button || button.contains(hit)),
  top: root.getBoundingClientRect().top, headerBottom: header.bottom,
  stageBottom: stage.bottom, windowHeight: window.innerHeight,
  width: picture.getBoundingClientRect().width, natural: parseFloat(picture.getAttribute('data-width')) * 4 / 3,
  stageWidth: root.querySelector('.mt-stage').clientWidth, label: root.querySelector('[data-go="zoom"]').textContent,
};
"""


@pytest.mark.parametrize("width", WIDTHS)
def test_the_player_sits_below_the_sticky_header_and_its_100_percent_button_works(browser, width):
    browser.set_window_size(width, 900)
    try:
        open_page(browser, "notebooks/04_attention_step_by_step.html")
        player = browser.find_element("css selector", "main .mt-frames")
        browser.execute_script("arguments[0].scrollIntoView()", player)
        state = browser.execute_script(PLAYER_STATE, player)
        assert state["top"] >= state["headerBottom"] - 1, state  # not under the header
        assert state["stageBottom"] <= state["windowHeight"] + 1, state  # not cut at the window's bottom
        assert state["nextIsHit"], state  # a click on "next" reaches it
        player.find_element("css selector", '[data-go="next"]').click()
        assert player.get_attribute("data-step") == "1"
        fitted = state["width"]
        assert fitted <= state["stageWidth"] + 1 or fitted <= state["natural"] + 1
        player.find_element("css selector", '[data-go="zoom"]').click()
        zoomed = browser.execute_script(PLAYER_STATE, player)
        assert zoomed["label"] == "fit" and abs(zoomed["width"] - zoomed["natural"]) <= 2, zoomed  # its natural size
        player.find_element("css selector", '[data-go="zoom"]').click()
        back = browser.execute_script(PLAYER_STATE, player)
        assert back["label"] == "100 %" and abs(back["width"] - fitted) <= 2, (back, fitted)
    finally:
        browser.set_window_size(WIDTH, HEIGHT)


def test_every_cell_that_made_a_figure_shows_it():
    """The executing kernel marks each cell in which pyplot made a figure (docs/_kernel/figures.py): it shows one."""
    from bs4 import BeautifulSoup

    marked, missing = 0, []
    for page in site_pages():
        soup = BeautifulSoup((SITE / page).read_text(encoding="utf-8"), "html.parser")
        for cell in soup.select("div.cell"):
            if not cell.select("span.mt-drew"):
                continue
            marked += 1
            if not cell.select(".cell_output img, .cell_output svg"):
                missing.append(f"{page}: {cell.get_text(' ', strip=True)[:80]}")
    assert marked >= 3 and not missing, missing  # notebooks 3, 11 and 12 draw with pyplot


def test_the_memory_page_shows_its_second_order_graph_and_timeline():
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((SITE / "memory.html").read_text(encoding="utf-8"), "html.parser")
    section = soup.find(id="second-order")
    assert section is not None
    outputs = section.select(".cell_output")
    assert any(o.select("svg .node") for o in outputs), "no graph"
    assert any(o.select("img") for o in outputs), "no timeline"
