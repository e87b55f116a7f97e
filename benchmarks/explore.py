"""How fast the explorer is: building its page in Python, opening it and answering a click in a browser.

One process per case::

    python -m benchmarks.explore '{"kind": "chain", "n": 5000}'

``kind``: ``chain`` — a scalar chain of about ``n`` ops (``h = tanh(h·w + c)``,
three ops a link: the issue's 5,000-op tape); ``attention`` — the demo's
``MultiHeadAttention(8, 2)`` on ``x [1, 4, 8]``. ``build``: ``mt.viz.explore``
and ``.html()`` in Python (the graph laid out by ``dot``). In headless Chromium
(Debian's ``chromium`` and ``chromium-driver`` with selenium, when installed):
``open`` — the saved page's load event, from navigation start; ``click`` — a
node clicked until its panel is written; ``step`` — one ArrowRight. The issue's
targets: open ≤ 1 s, click ≤ 100 ms.
"""

import shutil
import sys
import tempfile
import time
from pathlib import Path

from ._harness import emit

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking")


def _chain(n):
    import microtape as mt

    w, c, x = mt.Scalar(0.5, name="w"), mt.Scalar(0.1, name="c"), mt.Scalar(0.3, name="x")
    with mt.Tape() as tape:
        h = x
        for _ in range(n // 3):
            h = (h * w + c).tanh()
    return tape, "w"


def _attention():
    import numpy as np

    import microtape as mt

    attn = mt.nn.MultiHeadAttention(8, 2, causal=True, seed=0)
    attn(np.random.default_rng(0).standard_normal((1, 4, 8)))
    return attn, "scores"


def _browser(path, node):
    """``{"open", "click", "step"}`` in seconds, or None without a browser."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    binary, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not binary or not driver:
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory() as profile:
        options.add_argument(f"--user-data-dir={profile}")
        chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
        try:
            chrome.get(Path(path).as_uri())
            opened = chrome.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd")
            click, step = chrome.execute_script(
                "var g = document.querySelector('[data-node=\"' + arguments[0] + '\"]'), t0 = performance.now();"
                "g.dispatchEvent(new MouseEvent('click', {bubbles: true})); var t1 = performance.now();"
                "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowRight', bubbles: true}));"
                "return [t1 - t0, performance.now() - t1];",
                node,
            )
        finally:
            chrome.quit()
    return {"open": opened / 1000, "click": click / 1000, "step": step / 1000}


def worker(spec):
    import microtape as mt

    source, node = _chain(spec["n"]) if spec["kind"] == "chain" else _attention()
    t0 = time.perf_counter()
    view = mt.viz.explore(source, widget=False)
    page = view.html()
    build = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "explore.html"
        path.write_text(page, encoding="utf-8")
        browser = _browser(path, node)
    equations = len(source) if hasattr(source, "nodes") else len(source.tape)
    return {"equations": equations, "build": build, "bytes": len(page.encode()), "browser": browser}


if __name__ == "__main__":
    import json

    emit(worker(json.loads(sys.argv[1])))
