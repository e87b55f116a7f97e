"""The teaching notebooks: each runs, stays light, and every picture it shows reads at notebook width.

``make test`` executes every notebook in a fresh kernel (nbclient), then checks what it showed:

* no cell fails (a failing cell names the notebook and the cell);
* every cell that makes a matplotlib figure shows an image (the kernel marks such
  cells: docs/_kernel/figures.py), so ``plt.show()`` on a backend that draws nothing fails;
* executed, with its outputs, the notebook weighs at most 500 kB;
* every graph it shows (an SVG) keeps its smallest text at least
  ``READABLE_PX`` pixels tall once scaled to a 900-pixel cell, and every image
  (a PNG) is at most 900 pixels wide, so Jupyter shows it unscaled.

Each notebook's execution time and size are printed at the end of the run
(the time is reported, not asserted: speed is measured, never a test).
"""

import base64
import json
import re
import struct
import time
from pathlib import Path

import nbclient  # the dev extra installs it: a missing runner must fail the suite, not skip the notebooks
import nbformat
import pytest

from microtape.viz.fit import NOTEBOOK_WIDTH, READABLE_PX, smallest_text_px

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
DREW = re.compile(r'<span class="mt-drew" data-figures="(\d+)"')
MAX_BYTES = 500_000

EXECUTED = {}  # notebook name -> the executed notebook, for the JupyterLab test below
REPORT = {}  # notebook name -> (seconds, bytes): printed by conftest.py's terminal summary


def png_width(data):
    """The width in pixels of a PNG (its IHDR chunk)."""
    raw = base64.b64decode(data)
    return struct.unpack(">I", raw[16:20])[0]


def fitted_svgs(output):
    """The Graphviz SVGs one output shows scaled to the cell (a graph, or a player's frames).

    A graph shown with ``.full_size()`` is at its natural size (the cell
    scrolls): its text is as large as drawn, so it is not among these.
    """
    text = output.get("data", {}).get("text/html") or ""
    text = "".join(text) if isinstance(text, list) else text
    return re.findall(r"<svg [^>]*data-width=.*?</svg>", text, re.S)


def readable(svg):
    """The smallest text of a fitted SVG (``width="100%" ... data-width="W"``), in px at notebook width."""
    natural = re.search(r'data-width="([\d.]+)"', svg).group(1)
    return smallest_text_px(re.sub(r"<svg [^>]*", f'<svg width="{natural}pt"', svg, count=1))


def strings(value):
    """Every string inside a JSON-like value (a notebook's widget state)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def html_of(output):
    text = output.get("data", {}).get("text/html") or ""
    return "".join(text) if isinstance(text, list) else text


def shows_an_image(output):
    data = output.get("data", {})
    return "image/png" in data or "image/svg+xml" in data or "<img" in html_of(output) or "<svg" in html_of(output)


def figures_not_shown(notebook):
    """The cells that made a matplotlib figure (marked by the kernel) and show no image; the markers are removed."""
    missing = []
    for k, cell in enumerate(notebook.cells):
        outputs = cell.get("outputs", [])
        marked = [o for o in outputs if DREW.search(html_of(o))]
        kept = [o for o in outputs if o not in marked]
        if marked and not any(shows_an_image(o) for o in kept):
            missing.append(k)
        if marked:
            cell.outputs = kept
    return missing


def marking_kernel(tmp_path, monkeypatch):
    """Kernels started from now on run docs/_kernel/figures.py at startup (as the site's build does)."""
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-microtape-figures.py").write_bytes((ROOT / "docs" / "_kernel" / "figures.py").read_bytes())
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_light_and_readable(path, tmp_path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    marking_kernel(tmp_path, monkeypatch)
    folder = {"metadata": {"path": str(tmp_path)}}  # files a notebook writes go to a scratch folder
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", resources=folder)
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    missing = figures_not_shown(notebook)
    assert not missing, f"{path.name}: cells {missing} make a matplotlib figure and show no image"
    EXECUTED[path.name] = notebook
    size = len(json.dumps(notebook.dict()).encode("utf-8"))
    REPORT[path.name] = (seconds, size)
    assert size <= MAX_BYTES, f"{path.name}: {size / 1000:.0f} kB executed (at most {MAX_BYTES / 1000:.0f} kB)"
    # A widget's picture (the backward pass stepped by a slider) is kept in the notebook's widget state.
    for svg in re.findall(r"<svg [^>]*data-width=.*?</svg>", "".join(strings(notebook.metadata.get("widgets"))), re.S):
        smallest = readable(svg)
        assert smallest >= READABLE_PX, (
            f"{path.name}: a widget's graph has {smallest:.1f} px text at {NOTEBOOK_WIDTH} px"
        )
    for k, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                width = png_width(png)
                assert width <= NOTEBOOK_WIDTH, f"{path.name} cell {k}: an image {width} px wide (> {NOTEBOOK_WIDTH})"
            for svg in fitted_svgs(output):
                smallest = readable(svg)
                assert smallest >= READABLE_PX, (
                    f"{path.name} cell {k}: the smallest text of a graph is {smallest:.1f} px at "
                    f"{NOTEBOOK_WIDTH} px wide (at least {READABLE_PX})"
                )


# ---------------------------------------------------------------- as JupyterLab shows them (#48)
# JupyterLab at 1280 px with its file browser open leaves 833 px to a cell's output. The executed notebooks are
# rendered with JupyterLab's own stylesheet (nbconvert's "lab" template) in headless Chromium at that column:
# every graph's smallest text is at least 8 px, and still 8 CSS px at 150 % zoom (the column 555 CSS px wide: the
# picture scrolls sideways rather than shrink, so on screen its text grows with the zoom); every table fits the
# column (its text wraps).

LAB_COLUMN = 833
LAB_STATE = """
const shown = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
const small = [], wide = [];
let column = 0;
for (const area of document.querySelectorAll('.jp-OutputArea-output')) {
  if (!shown(area)) continue;
  column = Math.max(column, area.clientWidth);
  for (const svg of area.querySelectorAll('svg')) {
    if (!shown(svg)) continue;
    for (const t of svg.querySelectorAll('text')) {
      const m = t.getScreenCTM();
      if (!m || !t.textContent.trim()) continue;
      const size = parseFloat(t.getAttribute('font-size') || getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
      if (size < 8) small.push(size.toFixed(1) + ' px: ' + t.textContent.trim().slice(0, 30));
    }
  }
  for (const table of area.querySelectorAll('table')) {
    if (shown(table) && table.getBoundingClientRect().width > area.clientWidth + 1)
      wide.push(Math.round(table.getBoundingClientRect().width) + ' px: ' + table.innerText.slice(0, 40));
  }
}
return {column, small: small.slice(0, 5), wide: wide.slice(0, 3)};
"""


@pytest.fixture(scope="module")
def lab_browser(tmp_path_factory):
    from browser import chromium

    chrome = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chrome
    chrome.quit()


def lab_page(notebook, folder):
    """The executed notebook as JupyterLab's HTML, with nothing fetched from the network (no scripts from a CDN)."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    body = re.sub(r'<script[^>]*src="https?://[^"]*"[^>]*>\s*</script>', "", body)
    page = folder / "lab.html"
    page.write_text(body, encoding="utf-8")
    return page.as_uri()


def at_column(browser, column):
    """Resize the window so that an output area is ``column`` CSS pixels wide; what the page shows there."""
    state = browser.execute_script(LAB_STATE)
    size = browser.get_window_size()
    browser.set_window_size(size["width"] + column - state["column"], size["height"])
    return browser.execute_script(LAB_STATE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_reads_in_jupyterlab_at_833_px_and_zoomed(path, lab_browser, tmp_path):
    notebook = EXECUTED.get(path.name)
    assert notebook is not None, f"{path.name} was not executed: run this file whole (its first test executes it)"
    lab_browser.set_window_size(1100, 900)
    lab_browser.get(lab_page(notebook, tmp_path))
    state = at_column(lab_browser, LAB_COLUMN)
    assert abs(state["column"] - LAB_COLUMN) <= 2, state
    assert not state["small"], f"{path.name}: graph text under 8 px in an {LAB_COLUMN} px column: {state['small']}"
    assert not state["wide"], f"{path.name}: tables wider than the {LAB_COLUMN} px column: {state['wide']}"
    zoomed = at_column(lab_browser, round(LAB_COLUMN / 1.5))
    assert not zoomed["small"], f"{path.name}: graph text under 8 CSS px at 150 % zoom: {zoomed['small']}"


STORED = NOTEBOOKS + sorted((ROOT / "assignment" / "source").glob("*.ipynb"))


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_notebook_is_stored_valid_and_without_outputs(path):
    # Read as stored, not upgraded: nbformat.read would add missing cell ids
    # silently, and a notebook without them warns in every tool that opens it.
    stored = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k, cell in enumerate(stored["cells"]) if "id" not in cell]
    assert not missing, f"{path.name}: cells {missing} have no id (nbformat >= 4.5 wants one on every cell)"
    nbformat.validate(stored)  # after the id check: validate also adds missing ids, silently
    ids = [cell["id"] for cell in stored["cells"]]
    assert len(set(ids)) == len(ids), f"{path.name}: two cells share an id"
    ran = [k for k, cell in enumerate(stored["cells"]) if cell.get("outputs") or cell.get("execution_count")]
    assert not ran, f"{path.name}: cells {ran} are stored with outputs (the notebooks are committed clean)"
