"""The backward-frames player (index.html) in a real browser: headless Chromium driven by selenium.

``make test`` runs ``make browser`` first, which installs Debian's
``chromium`` and ``chromium-driver`` (when it may) and selenium (the
``[browser]`` extra). These tests skip, saying why, only when no browser can
be had. They load the page from disk at 1400×1000, press the arrow keys and
the buttons, and check that the slider, the caption and the picture always
change together, that every file the page refers to exists and loads, and
that the current step's box is in view; then in a 700-pixel window, that the
picture never moves as the steps go by and the controls never leave the
window.
"""

import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from browser import HEIGHT, WIDTH, chromium

import microtape as mt
from microtape.viz import backward_frames
from microtape.viz.picture import STATE

pytest.importorskip("selenium.webdriver", reason="selenium is not installed (`make browser` installs it)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not shutil.which("dot"):
        pytest.skip("Graphviz's dot is not installed: no frames to show")
    chrome = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chrome
    chrome.quit()


@pytest.fixture(scope="module")
def player(tmp_path_factory):
    """The demo attention's frames, saved: (frames, folder)."""
    attn = mt.nn.MultiHeadAttention(16, 4, causal=True, seed=0)
    rng = np.random.default_rng(0)
    attn(rng.standard_normal((1, 6, 16)))
    folder = tmp_path_factory.mktemp("frames")
    # Every op (width=None): a picture larger than the window at 100 %.
    frames = backward_frames(attn, grad=rng.standard_normal((1, 6, 16)), out_dir=folder, width=None)
    return frames, folder


def state(browser):
    """What the page shows: (slider value, caption, index of the visible frame, its picture's file name)."""
    return browser.execute_script(
        """
        var root = document.querySelector('.mt-frames');
        var frames = root.querySelectorAll('.mt-frame');
        var shown = [];
        for (var i = 0; i < frames.length; i++) if (frames[i].style.display !== 'none') shown.push(i);
        var img = shown.length === 1 ? frames[shown[0]].querySelector('img') : null;
        return [parseInt(root.querySelector('input[type=range]').value, 10),
                root.querySelector('.mt-caption').textContent, shown, img && img.getAttribute('src')];
        """
    )


def assert_showing(browser, frames, k):
    slider, caption, shown, source = state(browser)
    assert slider == k and shown == [k], (slider, shown, k)
    assert caption == frames.captions[k]
    assert caption.startswith(f"step {k} of steps 0–{len(frames) - 1}:")  # one numbering: slider = caption
    assert source == frames.paths[k].name


def open_page(browser, folder):
    browser.get((folder / "index.html").resolve().as_uri())
    deadline = time.time() + 10
    while time.time() < deadline:
        if browser.execute_script("return Array.from(document.images).every(i => i.complete)"):
            return
        time.sleep(0.05)
    raise AssertionError("the frames did not load")


def test_keys_buttons_and_slider_move_picture_slider_and_caption_together(browser, player):
    frames, folder = player
    open_page(browser, folder)
    assert_showing(browser, frames, 0)
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_RIGHT)
    assert_showing(browser, frames, 1)
    body.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert_showing(browser, frames, 3)
    body.send_keys(Keys.ARROW_LEFT)
    assert_showing(browser, frames, 2)
    browser.find_element(By.CSS_SELECTOR, '[data-go="next"]').click()
    assert_showing(browser, frames, 3)
    browser.find_element(By.CSS_SELECTOR, '[data-go="prev"]').click()
    browser.find_element(By.CSS_SELECTOR, '[data-go="prev"]').click()
    assert_showing(browser, frames, 1)
    # The slider, as a user drags it.
    last = len(frames) - 1
    browser.execute_script(
        "var s = document.querySelector('input[type=range]'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('input'));",
        last,
    )
    assert_showing(browser, frames, last)
    body.send_keys(Keys.ARROW_RIGHT)  # no step beyond the last
    assert_showing(browser, frames, last)
    # Play starts over from the last frame and steps on its own; a second click pauses.
    play = browser.find_element(By.CSS_SELECTOR, '[data-go="play"]')
    play.click()
    assert play.text == "pause"
    time.sleep(2.0)
    play.click()
    assert play.text == "play"
    reached = state(browser)[0]
    assert 1 <= reached < last
    assert_showing(browser, frames, reached)


def test_every_file_the_page_refers_to_exists_and_loads(browser, player):
    frames, folder = player
    page = (folder / "index.html").read_text()
    sources = re.findall(r'src="([^"]+)"', page)
    assert sources == [p.name for p in frames.paths[:-1]]
    assert all((folder / source).is_file() for source in sources)
    open_page(browser, folder)
    broken = browser.execute_script(
        "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )
    assert broken == []


def current_box_fraction(svg_text):
    """Where the current step's box (the bright orange one) sits, as fractions of the picture."""
    width, height = (float(v) for v in re.search(r'viewBox="0\.00 0\.00 ([\d.]+) ([\d.]+)"', svg_text).groups())
    tx, ty = (float(v) for v in re.search(r"translate\(([\d.-]+) ([\d.-]+)\)", svg_text).groups())
    outline = rf'class="node">\s*<title>\w+</title>\s*<(?:polygon|path) fill="{STATE["current"][0]}"[^>]*?(?:points|d)='
    node = re.search(outline + r'"([^"]+)"', svg_text)
    assert node is not None, "no box of the current step"
    xs, ys = zip(*[(float(a), float(b)) for a, b in re.findall(r"([\d.-]+),([\d.-]+)", node.group(1))])
    x = (min(xs) + max(xs)) / 2 + tx
    y = (min(ys) + max(ys)) / 2 + ty
    return x / width, y / height


def focus_on_screen(browser, k, fraction):
    """Where a point of frame k's picture (fractions) is in the window, in CSS pixels."""
    box = browser.execute_script(
        "var r = document.querySelectorAll('.mt-frame')[arguments[0]].querySelector('img').getBoundingClientRect();"
        "return [r.left, r.top, r.width, r.height];",
        k,
    )
    return box[0] + fraction[0] * box[2], box[1] + fraction[1] * box[3], box


def test_the_current_step_is_in_view_at_1400_by_1000(browser, player):
    frames, folder = player
    open_page(browser, folder)
    svgs = [Path(p).read_text() for p in frames.paths[:-1]]
    body = browser.find_element(By.TAG_NAME, "body")
    for k in range(len(frames)):
        # The player's focus is the current box of that frame's picture.
        fx, fy = current_box_fraction(svgs[k])
        assert frames.focus[k][0] == pytest.approx(fx, abs=0.02) and frames.focus[k][1] == pytest.approx(fy, abs=0.02)
        # Fit (the default): the whole picture is in the window, so the current box is too.
        x, y, box = focus_on_screen(browser, k, frames.focus[k])
        assert box[0] >= 0 and box[1] >= 0 and box[0] + box[2] <= WIDTH and box[1] + box[3] <= HEIGHT, box
        assert 0 <= x <= WIDTH and 0 <= y <= HEIGHT
        body.send_keys(Keys.ARROW_RIGHT)
    # 100 %: the picture is larger than the window, and the page scrolls to keep the current box in view.
    body.send_keys(Keys.HOME)
    browser.execute_script(
        "var s = document.querySelector('input[type=range]'); s.value = 0; s.dispatchEvent(new Event('input'));"
    )
    browser.find_element(By.CSS_SELECTOR, '[data-go="zoom"]').click()
    for k in range(len(frames)):
        if k:
            body.send_keys(Keys.ARROW_RIGHT)
        assert_showing(browser, frames, k)
        x, y, box = focus_on_screen(browser, k, frames.focus[k])
        assert box[2] > WIDTH or box[3] > HEIGHT  # natural size: bigger than the window
        assert 0 <= x <= WIDTH and 0 <= y <= HEIGHT, (k, x, y)


def rect(browser, selector):
    """``[left, top, right, bottom]`` of the first element matching ``selector``, in the window."""
    return browser.execute_script(
        "var r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return [r.left, r.top, r.right, r.bottom];",
        selector,
    )


def test_a_narrow_window_keeps_the_picture_still_and_the_controls_in_view(browser, player):
    frames, folder = player
    browser.set_window_size(700, 800)
    try:
        open_page(browser, folder)
        inner = browser.execute_script("return [window.innerWidth, window.innerHeight];")
        body = browser.find_element(By.TAG_NAME, "body")
        # Fit: long captions wrap onto more lines at 700 px, but the picture stays where it is.
        stage = rect(browser, ".mt-stage")
        for k in range(len(frames)):
            if k:
                body.send_keys(Keys.ARROW_RIGHT)
            assert_showing(browser, frames, k)
            assert rect(browser, ".mt-stage") == stage, k
            x, y, box = focus_on_screen(browser, k, frames.focus[k])
            assert box[0] + box[2] <= inner[0] + 1 and box[1] + box[3] <= inner[1] + 1, (k, box)
        # 100 %: the picture scrolls inside the stage; the controls never leave the window.
        browser.execute_script(
            "var s = document.querySelector('input[type=range]'); s.value = 0; s.dispatchEvent(new Event('input'));"
        )
        browser.find_element(By.CSS_SELECTOR, '[data-go="zoom"]').click()
        for k in range(len(frames)):
            if k:
                browser.find_element(By.CSS_SELECTOR, '[data-go="next"]').click()
            assert_showing(browser, frames, k)
            left, top, right, bottom = rect(browser, ".mt-controls")
            assert left >= 0 and top >= 0 and bottom <= inner[1] and left < inner[0], (k, left, top, bottom)
            assert rect(browser, ".mt-stage") == stage, k
            x, y, _ = focus_on_screen(browser, k, frames.focus[k])
            assert stage[0] <= x <= stage[2] and stage[1] <= y <= stage[3], (k, x, y, stage)
    finally:
        browser.set_window_size(WIDTH, HEIGHT)
