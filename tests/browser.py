"""A headless Chromium driven by selenium, for the tests that open pages in a real browser.

The frames player's test and the documentation site's test both start it
here. ``make browser`` installs Debian's ``chromium`` and ``chromium-driver``
and selenium (the ``[browser]`` extra).
"""

import os
import shutil

import pytest

WIDTH, HEIGHT = 1400, 1000
# Without the networking flags Chromium stalls on a closed network.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def chromium(profile_dir):
    """A started headless Chromium (selenium's driver) at WIDTH×HEIGHT; skips the test when none can be had."""
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (`make browser` installs it)"
    )
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not binary or not driver:
        pytest.skip("no Chromium and chromedriver on PATH (`make browser` installs Debian's chromium, chromium-driver)")
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.add_argument(f"--window-size={WIDTH},{HEIGHT}")
    # The console's messages, for failed_requests(): a missing file is logged there, never raised.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    chrome.set_window_size(WIDTH, HEIGHT)
    return chrome


def failed_requests(driver):
    """The requests that failed since the last call (a file not found, a refused connection), from the console."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if ("Failed to load resource" in entry["message"] or "ERR_FILE_NOT_FOUND" in entry["message"])
        and not entry["message"].startswith("about:blank")  # MathJax's own probe of a blank frame, no file
    ]
