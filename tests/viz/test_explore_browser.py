"""The explorer's saved page in a real browser (headless Chromium, selenium): click, read, step.

The page is opened from disk, as a student (or the docs site) opens it: no
kernel and no network. A click on ``a`` in the README's first example must
show ∂(a·b)/∂a = b = −3 and ∂(a²)/∂a = 2a = 4 and the gradient that reaches
``a`` (read against microtape's own numbers); the arrow keys step the
attention layer's backward pass, the step label and the highlighted box
moving together; a heatmap entry shows its chain-rule sum. The 5,000-op
tape's opening and a click are timed (printed for the report: performance
is measured, bounds here are only generous sanity limits).
"""

import re
import shutil
import time

import numpy as np
import pytest
from browser import chromium

import microtape as mt
from microtape.viz.explorer.page import data_json
from microtape.viz.program import collect

pytest.importorskip("selenium.webdriver", reason="selenium is not installed (`make browser` installs it)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not shutil.which("dot"):
        pytest.skip("Graphviz's dot is not installed: the explorer's graph is laid out by it")
    chrome = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chrome
    chrome.quit()


def open_page(browser, path):
    browser.get(path.as_uri())
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def click(browser, name):
    node = browser.find_element(By.CSS_SELECTOR, f'[data-node="{name}"]')
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", node)


def texts(browser, selector):
    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, selector)]


def press(browser, key, times=1):
    body = browser.find_element(By.TAG_NAME, "body")
    for _ in range(times):
        body.send_keys(key)


def step_label(browser):
    return browser.find_element(By.CSS_SELECTOR, '[data-role="step"]').text


def states(browser):
    return browser.execute_script(
        "var out = {}; document.querySelectorAll('[data-node]').forEach(function (g) {"
        " out[g.getAttribute('data-node')] = g.getAttribute('data-state'); }); return out;"
    )


def number(text):
    return float(text.replace("−", "-"))


@pytest.fixture(scope="module")
def readme(tmp_path_factory):
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    with mt.Tape():
        y = (a * b + a**2).tanh()
    path = mt.viz.explore(y, widget=False).save(tmp_path_factory.mktemp("readme") / "readme.html")
    return mt.gradients(y), a, b, path


def test_clicking_a_shows_its_local_derivatives_and_the_gradient_that_reaches_it(browser, readme):
    g, a, b, path = readme
    open_page(browser, path)
    click(browser, "a")
    panel = browser.find_element(By.CSS_SELECTOR, ".mt-explore-panel")
    assert panel.is_displayed()
    assert panel.find_element(By.CSS_SELECTOR, '[data-role="title"]').text == "a"
    uses = texts(browser, '.mt-explore-panel [data-role="use"] .mt-local')
    assert uses == ["∂(a·b)/∂a = b = −3", "∂(a²)/∂a = 2a = 2·2 = 4"]
    products = texts(browser, '.mt-explore-panel [data-role="product"]')
    # each use: upstream (tanh's slope at a·b + a² = -2) × local = share
    tanh_slope = 1 - np.tanh(-2.0) ** 2
    shares = [number(re.search(r"= (\S+)\s+\(step", p).group(1)) for p in products]
    assert shares == pytest.approx([tanh_slope * -3.0, tanh_slope * 4.0], rel=1e-3)
    assert products[0].startswith("∂%3/∂%0 × (−3) = 0.07065 × (−3) = ")
    total = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="sum"]').text
    assert total.startswith("sum over its 2 uses: ∂%3/∂a = (−0.212) + 0.2826 = ")
    assert number(total.rsplit("= ", 1)[1]) == pytest.approx(float(g[a]), rel=1e-3)
    grad = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="grad"]').text
    assert number(grad.split(": ")[1]) == pytest.approx(float(g[a]), rel=1e-3)


def test_an_equation_shows_its_ops_formula_with_this_runs_numbers(browser, readme):
    g, a, b, path = readme
    open_page(browser, path)
    click(browser, "%0")
    assert browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="title"]').text == "%0 = a·b"
    assert texts(browser, '.mt-explore-panel [data-role="local"]') == ["∂(a·b)/∂a = b = −3", "∂(a·b)/∂b = a = 2"]
    assert texts(browser, '.mt-explore-panel [data-role="saved"]') == ["a = 2", "b = -3"]


def test_the_arrow_keys_step_the_backward_pass(browser, readme):
    g, a, b, path = readme
    open_page(browser, path)
    assert step_label(browser) == "before the backward pass (steps 0–3)"
    press(browser, Keys.ARROW_RIGHT)
    assert step_label(browser) == "step 0 of steps 0–3"
    assert states(browser)["%3"] == "current" and states(browser)["a"] == "pending"
    press(browser, Keys.ARROW_RIGHT, 3)
    assert step_label(browser) == "step 3 of steps 0–3"
    assert states(browser)["%0"] == "current" and states(browser)["a"] == "done"
    press(browser, Keys.ARROW_RIGHT)  # past the end: stays
    assert step_label(browser) == "step 3 of steps 0–3"
    press(browser, Keys.ARROW_LEFT, 2)
    assert step_label(browser) == "step 1 of steps 0–3"
    assert states(browser)["a"] == "pending" and states(browser)["%0"] == "partial"
    # the panel says what has arrived by this step
    click(browser, "a")
    press(browser, Keys.ARROW_RIGHT)  # step 2: %1 = a² sends a its first share
    arrived = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="arrived"]').text
    assert arrived.startswith("arrived by step 2: 0.2826 (1 of 2 shares)")
    # the buttons do what the keys do
    browser.find_element(By.CSS_SELECTOR, '[data-role="next"]').click()
    assert step_label(browser) == "step 3 of steps 0–3"
    browser.find_element(By.CSS_SELECTOR, '[data-role="first"]').click()
    assert step_label(browser).startswith("before the backward pass")


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    attn = mt.nn.MultiHeadAttention(16, 4, causal=True, seed=0)
    attn(np.random.default_rng(0).standard_normal((1, 6, 16)))
    upstream = np.random.default_rng(1).standard_normal((1, 6, 16))
    path = mt.viz.explore(attn, grad=upstream, widget=False).save(tmp_path_factory.mktemp("attn") / "attn.html")
    return attn, upstream, path


def test_the_attention_layers_backward_steps_with_the_keys(browser, attention):
    attn, upstream, path = attention
    open_page(browser, path)
    steps = mt.gradients(attn.tape.nodes[-1], upstream, tape=attn.tape, steps=True).steps
    names = collect(attn).names  # the names the pictures print (a Linear's W.T reads out_proj.weight^T)
    boxes = browser.execute_script(
        "return Array.from(document.querySelectorAll('[data-node]')).map(function (g) {"
        " return g.getAttribute('data-node'); })"
    )
    for k, step in enumerate(steps):
        press(browser, Keys.ARROW_RIGHT)
        assert step_label(browser) == f"step {k} of steps 0–{len(steps) - 1}"
        caption = browser.find_element(By.CSS_SELECTOR, '[data-role="caption"]').text
        assert caption.startswith(f"step {k} of steps 0–{len(steps) - 1}: {names[step.equation.output]} = ")
        current = [name for name, state in states(browser).items() if state == "current"]
        assert len(current) == 1, current
        if names[step.equation.output] in boxes:
            assert current == [names[step.equation.output]]
        # the current box is in the graph's visible area (scrolled into view)
        assert browser.execute_script(
            "var g = document.querySelector('[data-state=current]').getBoundingClientRect();"
            "var f = document.querySelector('.mt-explore-graph').getBoundingClientRect();"
            "return g.bottom > f.top && g.top < f.bottom && g.right > f.left && g.left < f.right;"
        )
    final = states(browser)
    assert all(state in ("done", "off") for name, state in final.items() if name != current[0]), final
    assert final["causal_mask"] == "off"  # a constant: no gradient reaches it


def test_a_heatmap_entry_shows_its_chain_rule_sum(browser, attention):
    attn, upstream, path = attention
    open_page(browser, path)
    g = mt.gradients(attn.tape.nodes[-1], upstream, tape=attn.tape)
    click(browser, "x")
    cell = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="heat-grad"] [data-entry="2,5"]')
    cell.click()
    shares = texts(browser, '.mt-explore-panel [data-role="entry-share"]')
    assert len(shares) == 3  # x feeds q_proj, k_proj and v_proj
    total = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="entry-sum"]').text
    assert total.startswith("∂output/∂x[2,5] = ")
    expected = float(np.asarray(g[attn.tape.variable("x")])[0, 2, 5])
    assert number(total.rsplit("= ", 1)[1]) == pytest.approx(expected, rel=1e-3)
    parts = [number(s.rsplit(": ", 1)[1]) for s in shares]
    assert sum(parts) == pytest.approx(expected, rel=1e-3, abs=1e-4)


def test_projector_controls_and_step_stay_in_view_and_text_is_readable(browser, attention):
    attn, upstream, path = attention
    browser.set_window_size(833, 640)
    try:
        open_page(browser, path)
        press(browser, Keys.ARROW_RIGHT, 20)
        browser.execute_script("window.scrollTo(0, 400)")
        inside = browser.execute_script(
            "var h = window.innerHeight; return ['step', 'next', 'back'].map(function (role) {"
            " var r = document.querySelector('[data-role=' + role + ']').getBoundingClientRect();"
            " return r.top >= 0 && r.bottom <= h; })"
        )
        assert inside == [True, True, True]
        # node text at its natural size (no shrink to fit): at least 10 px on screen
        smallest = browser.execute_script(
            "var least = 1e9; document.querySelectorAll('.mt-explore-graph svg text').forEach(function (t) {"
            " least = Math.min(least, t.getBoundingClientRect().height); }); return least;"
        )
        assert smallest >= 10
    finally:
        browser.set_window_size(1400, 1000)


def test_a_5000_op_tape_opens_and_answers_a_click(browser, tmp_path):
    w, c, x = mt.Scalar(0.5, name="w"), mt.Scalar(0.1, name="c"), mt.Scalar(0.3, name="x")
    with mt.Tape() as tape:
        h = x
        for _ in range(1667):
            h = (h * w + c).tanh()
    assert len(tape) >= 5000
    path = mt.viz.explore(tape, widget=False).save(tmp_path / "big.html")
    started = time.perf_counter()
    open_page(browser, path)
    opened = browser.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000
    wall = time.perf_counter() - started
    clicked = browser.execute_script(
        "var g = document.querySelector('[data-node=\"w\"]'), t = performance.now();"
        "g.dispatchEvent(new MouseEvent('click', {bubbles: true})); return performance.now() - t;"
    )
    print(f"\n5,000-op tape: opened in {opened:.2f} s (page load), {wall:.2f} s wall; a click: {clicked:.0f} ms")
    assert browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="title"]').text == "w"
    assert "… and" in browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="more"]').text
    assert opened < 10 and clicked < 2000  # generous: the figures are for the report, not a timed test


def test_the_widgets_front_end_renders_redraws_on_new_data_and_polls(browser, tmp_path):
    """The anywidget module in the browser, with a stand-in for the model (what Jupyter gives it)."""
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install microtape[notebooks])")
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    with mt.Tape():
        y = (a * b + a**2).tanh()
    view = mt.viz.explore(y)
    z = mt.Scalar(0.5, name="z")
    with mt.Tape():
        w = (z * z).exp()
    later = mt.viz.explore(w).data
    page = tmp_path / "widget.html"
    module = view._esm.replace("</", "<\\/")
    page.write_text(
        "<!DOCTYPE html><html><body><div id='out'></div>"
        f"<script type='application/json' id='first'>{data_json(view.data)}</script>"
        f"<script type='application/json' id='later'>{data_json(later)}</script>"
        f"<script type='text/plain' id='esm'>{module}</script>"
        "<script type='module'>\n"
        "const listeners = {}; window.sent = [];\n"
        "const model = { values: { data: JSON.parse(document.getElementById('first').textContent), follow: true },\n"
        "  get(k) { return this.values[k]; }, send(m) { window.sent.push(m); },\n"
        "  on(e, f) { listeners[e] = f; }, off(e) { delete listeners[e]; },\n"
        "  set(k, v) { this.values[k] = v; listeners['change:' + k](); } };\n"
        "window.model = model;\n"
        "const url = URL.createObjectURL(new Blob([document.getElementById('esm').textContent],"
        " {type: 'text/javascript'}));\n"
        "const widget = (await import(url)).default;\n"
        "widget.render({ model, el: document.getElementById('out') }); window.ready = true;\n"
        "</script></body></html>",
        encoding="utf-8",
    )
    open_page(browser, page)
    deadline = time.time() + 10
    while not browser.execute_script("return window.ready === true") and time.time() < deadline:
        time.sleep(0.05)
    click(browser, "a")
    assert texts(browser, '.mt-explore-panel [data-role="use"] .mt-local')[0] == "∂(a·b)/∂a = b = −3"
    # in a notebook the keys work while the explorer has the focus
    root = browser.find_element(By.CSS_SELECTOR, ".mt-explore")
    root.click()
    root.send_keys(Keys.ARROW_RIGHT)
    assert step_label(browser) == "step 0 of steps 0–3"
    browser.execute_script("model.set('data', JSON.parse(document.getElementById('later').textContent))")
    assert step_label(browser) == "step 0 of steps 0–1"  # the new object, at the same step
    assert sorted(states(browser)) == sorted(["z", "%0", "%1"])
    time.sleep(1.3)
    assert {"kind": "poll"} in browser.execute_script("return window.sent")


def test_a_stepped_checks_red_link_opens_the_comparison(browser, tmp_path):
    import microtape.exercises as ex

    def mine(q, k, v, grad_c):
        t = np.swapaxes
        scale = 1 / np.sqrt(q.shape[-1])
        s = q @ t(k, -1, -2) * scale
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        grad_p = grad_c @ t(v, -1, -2)
        grad_s = p * grad_p  # the rowsum forgotten: the link into grad_scaled_scores is wrong
        return {"grad_weights": grad_p, "grad_scaled_scores": grad_s, "grad_q": grad_s @ k * scale,
                "grad_k": t(grad_s, -1, -2) @ q * scale, "grad_v": t(p, -1, -2) @ grad_c}  # fmt: skip

    result = ex.check("attention_backward_steps", mine)
    view = mt.viz.explore(result, student=mine, widget=False)
    open_page(browser, view.save(tmp_path / "check.html"))
    red = browser.find_elements(By.CSS_SELECTOR, '[data-verdict="wrong"]')
    assert [g.get_attribute("data-node") for g in red] == ["scaled_scores"]
    fill = browser.execute_script("return arguments[0].querySelector('path, polygon').style.fill", red[0])
    assert fill == "rgb(242, 139, 130)"  # the palette's "first wrong" red (microtape.viz.picture.STATE)
    links = browser.find_elements(By.CSS_SELECTOR, '[data-link="wrong"]')
    assert links and {link.get_attribute("data-edge-from") for link in links} == {"scaled_scores"}
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", links[0])
    check = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="check"]')
    assert check.find_element(By.TAG_NAME, "h4").text == "your step grad_scaled_scores: wrong"
    expected = view.data["nodes"]["scaled_scores"]["check"]
    for role, key in (("off-tape", "off_tape"), ("off-implied", "off_implied")):
        text = check.find_element(By.CSS_SELECTOR, f'[data-role="{role}"]').text
        assert number(text.rsplit("= ", 1)[1]) == pytest.approx(expected[key], rel=1e-3)
    assert len(check.find_elements(By.CSS_SELECTOR, "table.mt-heat")) == 3  # yours, the tape's, implied
    click(browser, "q")
    text = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="check-text"]').text
    assert text.startswith("grad_q differs from the tape's only because grad_scaled_scores does")


def test_a_big_models_modules_are_collapsed_and_open_on_click(browser, tmp_path):
    rng = np.random.default_rng(0)
    layers = [mt.nn.TransformerEncoderLayer(8, 2, 16, seed=i) for i in range(3)]
    x = mt.Tensor(rng.standard_normal((1, 3, 8)), requires_grad=True, name="x")
    with mt.Tape() as tape:
        h = x
        for i, layer in enumerate(layers):
            with mt.module_scope(f"layer{i}"):
                h = layer(h)
    view = mt.viz.explore(tape, widget=False)
    open_page(browser, view.save(tmp_path / "stack.html"))
    assert "one per module: click a module to open it" in browser.find_element(By.CSS_SELECTOR, ".mt-explore-note").text
    overview = set(states(browser))
    module = "layer1.self_attn.attention"
    assert (
        module in overview
        and browser.find_element(By.CSS_SELECTOR, f'[data-node="{module}"]').get_attribute("data-kind") == "summary"
    )
    click(browser, module)
    opened = set(states(browser))
    members = set(view.data["summaries"][module]["members"])
    assert module not in opened and members & opened  # its ops are boxes of their own now
    assert browser.find_element(By.CSS_SELECTOR, '[data-role="title"]').text == module  # and the panel lists them
    press(browser, Keys.ARROW_RIGHT, 3)  # stepping goes on in the opened picture
    assert sum(state == "current" for state in states(browser).values()) == 1
    browser.find_element(By.CSS_SELECTOR, '[data-role="overview"]').click()
    assert set(states(browser)) == overview


def test_the_keyboard_opens_a_node_and_zoom_enlarges_the_text(browser, readme):
    g, a, b, path = readme
    open_page(browser, path)
    node = browser.find_element(By.CSS_SELECTOR, '[data-node="b"]')
    browser.execute_script("arguments[0].focus()", node)
    node.send_keys(Keys.ENTER)
    assert browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="title"]').text == "b"
    node.send_keys(Keys.ESCAPE)
    assert not browser.find_element(By.CSS_SELECTOR, ".mt-explore-panel").is_displayed()

    def text_height():
        return browser.execute_script(
            "return document.querySelector('.mt-explore-graph svg text').getBoundingClientRect().height;"
        )

    plain = text_height()
    browser.execute_script("document.body.style.zoom = '1.5'")
    try:
        assert text_height() >= 1.4 * plain  # no shrinking to fit: zoom makes the graph's text bigger
    finally:
        browser.execute_script("document.body.style.zoom = ''")


def test_forward_mode_and_a_recorded_derivative_step_the_same_way(browser, tmp_path):
    a, b = mt.Scalar(2.0, name="a"), mt.Scalar(-3.0, name="b")
    with mt.Tape() as tape:
        (a * b + a**2).tanh()
    open_page(browser, mt.viz.explore(tape, tangents={"a": 1.0}, widget=False).save(tmp_path / "forward.html"))
    browser.find_element(By.CSS_SELECTOR, '[data-role="mode"]').click()
    assert step_label(browser) == "before forward mode (steps 0–3)"  # four steps too, from the inputs on
    assert states(browser)["a"] == "done" and states(browser)["b"] == "off"  # a's direction is given; b has none
    press(browser, Keys.ARROW_RIGHT, 3)
    caption = browser.find_element(By.CSS_SELECTOR, '[data-role="caption"]').text
    assert caption == "step 2 of steps 0–3: %2 = %0 + %1: d%2 = 1·(-3) + 1·4 = 1"
    assert states(browser)["%2"] == "current" and states(browser)["%3"] == "pending"
    click(browser, "%3")
    tangent = browser.find_element(By.CSS_SELECTOR, '.mt-explore-panel [data-role="tangent"]').text
    _, expected = mt.jvp(lambda a, b: (a * b + a**2).tanh(), (2.0, -3.0), (1.0, 0.0))
    assert number(tangent) == pytest.approx(expected, rel=1e-3)
    browser.find_element(By.CSS_SELECTOR, '[data-role="mode"]').click()  # back to the backward pass
    press(browser, Keys.ARROW_RIGHT)
    assert states(browser)["%3"] == "current"

    x = mt.Scalar(1.5, name="x")
    with mt.Tape():
        dy_dx = mt.gradients(x.sin() * x, create_graph=True)[x]
    open_page(browser, mt.viz.explore(dy_dx, widget=False).save(tmp_path / "second.html"))
    press(browser, Keys.ARROW_RIGHT)
    caption = browser.find_element(By.CSS_SELECTOR, '[data-role="caption"]')
    assert "[first-derivative step]" in caption.text and caption.get_attribute("data-order") == "1"
    border = browser.execute_script(
        'return getComputedStyle(document.querySelector(\'[data-order="1"] > path, [data-order="1"] > polygon\'))'
        ".stroke"
    )
    assert border == "rgb(0, 121, 107)"  # the graphs' colour for a first-derivative step (picture.ORDER)
