"""The explorer's widget in a real JupyterLab and Notebook 7: displayed, clicked, and following its layer.

A Jupyter server is started for the test (no token, a temporary folder, this
checkout's microtape), headless Chromium opens a notebook, runs its cells with
the toolbar's ▶ as a student would, clicks a node of the widget and reads the
panel; then a new forward of the layer, in the next cell, must reach the view
by itself (the front end polls; the kernel answers when the layer changed).
Skips, saying why, when JupyterLab, anywidget or a browser is missing.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from browser import chromium

pytest.importorskip("anywidget", reason="anywidget is not installed (pip install microtape[notebooks])")
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (pip install microtape[notebooks])")
pytest.importorskip("selenium.webdriver", reason="selenium is not installed (`make browser` installs it)")
from selenium.webdriver.common.by import By  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIRST_CELL = """import numpy as np
import microtape as mt
layer = mt.nn.MultiHeadAttention(8, 2, seed=0)
x = np.ones((1, 3, 8))
layer(x)
view = mt.viz.explore(layer)
view"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jupyter")
    notebook = nbformat.v4.new_notebook()
    # the second cell runs the layer again: the view must follow without a new cell showing it
    notebook.cells = [nbformat.v4.new_code_cell(FIRST_CELL), nbformat.v4.new_code_cell("layer(2 * x);")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for name in ("lab.ipynb", "classic.ipynb", "reopen.ipynb"):
        nbformat.write(notebook, folder / name)
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), JUPYTER_CONFIG_DIR=str(folder / ".config"))
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
               "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
               f"--ServerApp.root_dir={folder}"]  # fmt: skip
    log = open(folder / "server.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/status", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        process.terminate()
        pytest.fail("the Jupyter server did not start: " + (folder / "server.log").read_text()[-2000:])
    yield url
    process.terminate()
    process.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chrome = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chrome
    chrome.quit()


def wait_for(browser, script, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = browser.execute_script(script)
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"waited {timeout} s for: {script}")


def visible_explorers(browser):
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('.jp-OutputArea .mt-explore')).filter(function (e) {"
        " return e.offsetParent !== null; }).length"
    )


def open_and_run(browser, server, path):
    browser.get(f"{server}/{path}?reset")  # a fresh workspace: this notebook alone
    wait_for(browser, "return document.querySelector('jp-button[data-command=\"notebook:run-cell-and-select-next\"]')")
    name = path.rsplit("/", 1)[1]
    deadline = time.time() + 120
    while not kernel_idle(server, name):  # the notebook's kernel has started
        assert time.time() < deadline, f"no idle kernel for {name}"
        time.sleep(0.5)
    run_cell(browser)
    wait_for(browser, "return document.querySelectorAll('.jp-OutputArea .mt-explore [data-node]').length > 5")


def kernel_idle(server, name):
    """Is the kernel of the notebook ``name`` started and idle (the server's sessions say)?"""
    sessions = json.load(urllib.request.urlopen(server + "/api/sessions", timeout=5))
    return any(s["path"].endswith(name) and s["kernel"]["execution_state"] == "idle" for s in sessions)


def toolbar_button(browser, command):
    """The toolbar button of ``command`` on the notebook on show (other tabs keep theirs, hidden)."""
    buttons = browser.find_elements(By.CSS_SELECTOR, f'jp-button[data-command="{command}"]')
    return next(button for button in buttons if button.is_displayed())


def run_cell(browser):
    """Run the selected cell and select the next, by the toolbar's ▶ (what Shift+Enter does)."""
    toolbar_button(browser, "notebook:run-cell-and-select-next").click()


def value_of_x(browser):
    """Click x in the explorer on show and read its value off the panel."""
    return browser.execute_script(
        "var shown = Array.from(document.querySelectorAll('.mt-explore')).filter(function (e) {"
        " return e.offsetParent !== null; })[0];"
        "var g = shown && shown.querySelector('[data-node=\"x\"]');"
        "if (!g) return null; g.dispatchEvent(new MouseEvent('click', {bubbles: true}));"
        "var v = shown.querySelector('.mt-explore-panel [data-role=\"value\"]'); return v && v.textContent;"
    )


@pytest.mark.parametrize("front_end", ["lab", "notebook"])
def test_the_widget_shows_answers_a_click_and_follows_its_layer(server, browser, front_end):
    path = "lab/tree/lab.ipynb" if front_end == "lab" else "notebooks/classic.ipynb"
    browser.get(f"{server}/{path}")
    wait_for(browser, "return document.querySelector('jp-button[data-command=\"notebook:run-cell-and-select-next\"]')")
    name = path.rsplit("/", 1)[1]
    deadline = time.time() + 120
    while not kernel_idle(server, name):  # the notebook's kernel has started
        assert time.time() < deadline, f"no idle kernel for {name}"
        time.sleep(0.5)
    run_cell(browser)
    wait_for(browser, "return document.querySelectorAll('.jp-OutputArea .mt-explore [data-node]').length > 5")
    assert visible_explorers(browser) == 1  # live: the static copy above the widget is hidden
    assert value_of_x(browser) == "mean 1 · |max| 1"
    run_cell(browser)  # layer(2 * x): a new forward
    deadline = time.time() + 60
    while value_of_x(browser) != "mean 2 · |max| 2" and time.time() < deadline:
        time.sleep(0.5)
    assert value_of_x(browser) == "mean 2 · |max| 2"


def test_a_saved_notebook_reopened_without_a_kernel_shows_the_last_view(server, browser):
    open_and_run(browser, server, "lab/tree/reopen.ipynb")
    toolbar_button(browser, "docmanager:save").click()
    time.sleep(2)
    for session in json.load(urllib.request.urlopen(server + "/api/sessions", timeout=5)):
        if session["path"].endswith("reopen.ipynb"):  # the kernel goes: no widget model is left
            request = urllib.request.Request(server + "/api/sessions/" + session["id"], method="DELETE")
            urllib.request.urlopen(request, timeout=10)
    browser.get(f"{server}/lab/tree/reopen.ipynb?reset")  # (a fresh workspace: this notebook alone)
    wait_for(browser, "return document.querySelectorAll('.jp-OutputArea .mt-explore [data-node]').length > 5")
    time.sleep(6)  # the page's copy waits a few seconds for a live view before hiding the widget's line
    assert visible_explorers(browser) == 1
    shown = browser.execute_script(
        "return Array.from(document.querySelectorAll('.jp-OutputArea-child')).filter(function (e) {"
        " return e.offsetParent !== null; }).map(function (e) { return e.innerText; }).join('\\n')"
    )
    assert "Error displaying widget" not in shown and "Loading widget" not in shown
    assert browser.execute_script("return document.querySelector('.jp-OutputArea [data-role=\"step\"]').textContent")
