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
from browser import chromium

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


def test_the_landing_page_says_what_it_is_with_its_picture_and_the_two_commands(browser):
    open_page(browser, "index.html")
    assert browser.title.startswith("microtape")
    text = browser.find_element("css selector", "main").text
    assert "autograd engine" in text and "make demo" in text and "make test" in text
    loaded, broken = images(browser)
    assert not broken and any("attention_backward_graph" in src for src in loaded)


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
