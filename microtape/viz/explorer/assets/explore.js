// microtape's explorer: click a node, see its local derivative; step the backward pass.
// One function, mtExplore(root, data, options), used by the saved page and by the Jupyter widget.
// `data` is what microtape.viz.explore.model builds (the graph as SVG, every node's panel, the steps).
// No libraries and no network: everything the page needs is in `data`.
function mtExplore(root, data, options) {
  "use strict";
  options = options || {};
  var steps = data.steps, count = steps.length;
  var state = { step: -1, view: 0, selected: null, entry: null, timer: null, mode: "backward" };
  var boxStates = {};

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var key in attrs || {}) node.setAttribute(key, attrs[key]);
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function add(parent, tag, attrs, text) { var node = el(tag, attrs, text); parent.appendChild(node); return node; }

  // ------------------------------------------------------------------ the frame
  root.innerHTML = "";
  root.classList.add("mt-explore");
  if (!root.hasAttribute("tabindex")) root.setAttribute("tabindex", "0");
  var bar = add(root, "div", { "class": "mt-explore-bar" });
  var controls = add(bar, "div", { "class": "mt-explore-controls" });
  var first = add(controls, "button", { type: "button", "data-role": "first", title: "before the pass (Home)" }, "⇤ start");
  var back = add(controls, "button", { type: "button", "data-role": "back", title: "previous step (←)" }, "◀ step");
  var play = add(controls, "button", { type: "button", "data-role": "play", title: "play / pause (space)" }, "▶ play");
  var next = add(controls, "button", { type: "button", "data-role": "next", title: "next step (→)" }, "step ▶");
  var last = add(controls, "button", { type: "button", "data-role": "last", title: "the whole pass (End)" }, "end ⇥");
  var stepLabel = add(controls, "span", { "data-role": "step", "aria-live": "polite" });
  var overview = add(controls, "button", { type: "button", "data-role": "overview", hidden: "" }, "⤺ overview");
  var mode = add(controls, "button", { type: "button", "data-role": "mode", title: "backward pass or forward mode" });
  if (!data.forward) mode.hidden = true;
  var caption = add(bar, "div", { "class": "mt-explore-caption", "data-role": "caption" });
  var body = add(root, "div", { "class": "mt-explore-body" });
  var graph = add(body, "div", { "class": "mt-explore-graph" });
  var panel = add(body, "div", { "class": "mt-explore-panel", hidden: "", "aria-live": "polite" });
  if (data.title) bar.insertBefore(el("div", { "class": "mt-explore-title" }, data.title), controls);
  if (data.note) add(bar, "div", { "class": "mt-explore-note" }, data.note);

  // ------------------------------------------------------------------ states at a step
  // A name's state after step k: "current" (its step is k), "done", "partial" (some shares arrived),
  // "pending", or "off" (not on the path to the output). A box's state: those of its members.
  function forwardState(name, k) {
    var f = data.forward, s = f.step_of[name];
    if (s === undefined) return f.tangents[name] ? "done" : "off";  // a seeded input: its tangent is given
    return s === k ? "current" : s < k ? "done" : "pending";
  }
  function nameState(name, k) {
    if (state.mode === "forward") return forwardState(name, k);
    var node = data.nodes[name];
    if (!node) return "off";
    if (node.step === k && k >= 0) return "current";
    var gets = node.gets || [];
    if (node.step === null || node.step === undefined) {
      if (!gets.length) return "off";
      var got = 0;
      for (var i = 0; i < gets.length; i++) if (gets[i] <= k) got++;
      return got === gets.length ? "done" : got ? "partial" : "pending";
    }
    if (node.step <= k) return "done";
    for (var j = 0; j < gets.length; j++) if (gets[j] <= k) return "partial";
    return "pending";
  }
  function boxState(members, k) {
    var seen = {};
    for (var i = 0; i < members.length; i++) seen[nameState(members[i], k)] = true;
    if (seen.current) return "current";
    if (seen.off && !seen.done && !seen.partial && !seen.pending) return "off";
    if (seen.done && !seen.partial && !seen.pending) return "done";
    if (seen.done || seen.partial) return "partial";
    return "pending";
  }
  function paint() {
    var view = data.views[state.view], k = state.step;
    var groups = graph.querySelectorAll("[data-node]");
    var current = null;
    for (var i = 0; i < groups.length; i++) {
      var g = groups[i], members = view.boxes[g.getAttribute("data-node")] || [];
      var s = k < 0 && state.mode === "backward" ? "none" : boxState(members, k);
      boxStates[g.getAttribute("data-node")] = s;
      g.setAttribute("data-state", s);
      var verdict = verdictOf(members);
      if (verdict) g.setAttribute("data-verdict", verdict);
      var shape = g.querySelector("polygon, path, ellipse");
      // Before the pass is stepped, a checked answer's boxes show their links' verdicts.
      if (shape) shape.style.fill = s !== "none" ? data.palette[s] : verdict ? data.verdict_palette[verdict] : "";
      if (s === "current") current = g;
      if (g.getAttribute("data-node") === state.selected) g.classList.add("mt-selected");
      else g.classList.remove("mt-selected");
    }
    if (data.verdicts) redLinks(view);
    if (current && options.scroll !== false) keepInView(current);
  }
  function verdictOf(members) {
    if (!data.verdicts) return null;
    var order = ["wrong", "carried", "missing", "right"], found = null;
    members.forEach(function (name) {
      var v = data.verdicts[name];
      if (v && (found === null || order.indexOf(v) < order.indexOf(found))) found = v;
    });
    return found;
  }
  // A checked answer: the link into a wrong step — the edges out of its box in the forward picture, along
  // which its gradient comes back — is drawn red; a click on it opens that step's comparison.
  function redLinks(view) {
    var edges = graph.querySelectorAll("[data-edge-from]");
    for (var i = 0; i < edges.length; i++) {
      var from = edges[i].getAttribute("data-edge-from");
      var wrong = verdictOf(view.boxes[from] || []) === "wrong";
      edges[i].setAttribute("data-link", wrong ? "wrong" : "");
      var lines = edges[i].querySelectorAll("path, polygon");
      for (var j = 0; j < lines.length; j++) {
        lines[j].style.stroke = wrong ? "#c62828" : "";
        lines[j].style.strokeWidth = wrong ? "3px" : "";
        if (lines[j].tagName === "polygon") lines[j].style.fill = wrong ? "#c62828" : "";
      }
    }
  }
  function keepInView(g) {
    var box = g.getBoundingClientRect(), frame = graph.getBoundingClientRect();
    if (box.left < frame.left || box.right > frame.right) graph.scrollLeft += box.left - frame.left - frame.width / 3;
    if (box.top < frame.top || box.bottom > frame.bottom) graph.scrollTop += box.top - frame.top - frame.height / 3;
  }

  // ------------------------------------------------------------------ stepping
  function stepText(k) {
    if (k < 0) return "before " + (state.mode === "forward" ? "forward mode" : "the backward pass") + " (steps 0–" + (count - 1) + ")";
    return "step " + k + " of steps 0–" + (count - 1);
  }
  function go(k) {
    k = Math.max(-1, Math.min(count - 1, k));
    state.step = k;
    stepLabel.textContent = count ? stepText(k) : "no backward steps";
    caption.textContent = k < 0 ? (state.mode === "forward" ? data.forward.before : data.before) : steps[k].text;
    var order = k < 0 ? 0 : steps[k].order;
    caption.setAttribute("data-order", String(order));
    back.disabled = first.disabled = k < 0;
    next.disabled = last.disabled = k >= count - 1;
    paint();
    if (state.selected) showPanel(state.selected, true);
  }
  function toggle() {
    if (state.timer) { clearInterval(state.timer); state.timer = null; play.textContent = "▶ play"; return; }
    if (state.step >= count - 1) go(-1);
    play.textContent = "⏸ pause";
    state.timer = setInterval(function () {
      if (state.step >= count - 1) { toggle(); return; }
      go(state.step + 1);
    }, options.interval || 900);
  }
  function setMode(which) {
    state.mode = which;
    steps = which === "forward" ? data.forward.steps : data.steps;
    count = steps.length;
    mode.textContent = which === "forward" ? "forward mode ⇄ backward" : "backward ⇄ forward mode";
    root.setAttribute("data-mode", which);
    go(-1);
  }
  mode.onclick = function () { setMode(state.mode === "forward" ? "backward" : "forward"); };
  mode.textContent = "backward ⇄ forward mode";
  first.onclick = function () { go(-1); };
  back.onclick = function () { go(state.step - 1); };
  next.onclick = function () { go(state.step + 1); };
  last.onclick = function () { go(count - 1); };
  play.onclick = toggle;
  overview.onclick = function () { showView(0); };
  function onKey(event) {
    var target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) return;
    var keys = { ArrowRight: 1, ArrowLeft: -1 };
    if (event.key in keys) go(state.step + keys[event.key]);
    else if (event.key === "Home") go(-1);
    else if (event.key === "End") go(count - 1);
    else if (event.key === " " && target === root) toggle();
    else if (event.key === "Enter" && target && target.getAttribute && target.getAttribute("data-node")) select(target);
    else if (event.key === "Escape") closePanel();
    else return;
    event.preventDefault();
  }
  (options.pageKeys ? document : root).addEventListener("keydown", onKey);

  // ------------------------------------------------------------------ views (a module opened)
  function showView(index) {
    state.view = index;
    graph.innerHTML = data.views[index].svg;
    var svg = graph.querySelector("svg");
    if (svg) naturalSize(svg);
    overview.hidden = index === 0;
    paint();
  }
  // The SVG at its natural size in CSS pixels (1 pt = 4/3 px): browser zoom and a wider window enlarge it,
  // and a graph wider than its column scrolls instead of shrinking.
  function naturalSize(svg) {
    var w = parseFloat(svg.getAttribute("width")), h = parseFloat(svg.getAttribute("height"));
    if (w && h) { svg.style.width = (w * 4 / 3) + "px"; svg.style.height = (h * 4 / 3) + "px"; }
    svg.style.maxWidth = "none";
  }
  function viewOf(group) {
    for (var i = 1; i < data.views.length; i++) if (data.views[i].key === group) return i;
    return -1;
  }
  graph.addEventListener("click", function (event) {
    var g = event.target.closest ? event.target.closest("[data-node]") : null;
    if (g) { select(g); return; }
    var link = event.target.closest ? event.target.closest('[data-link="wrong"]') : null;
    if (link) showPanel(link.getAttribute("data-edge-from"));  // the red link: its step's comparison
  });
  function select(g) {
    var name = g.getAttribute("data-node");
    if (g.getAttribute("data-kind") === "summary") {
      var index = viewOf(name);
      if (index > 0) showView(index);
      showSummary(name);
      return;
    }
    showPanel(name);
  }

  // ------------------------------------------------------------------ the panel
  function closePanel() { panel.hidden = true; state.selected = null; paint(); }
  function header(title, sub) {
    panel.innerHTML = "";
    panel.hidden = false;
    var top = add(panel, "div", { "class": "mt-panel-top" });
    add(top, "h3", { "data-role": "title" }, title);
    var close = add(top, "button", { type: "button", "data-role": "close", title: "close (Esc)" }, "×");
    close.onclick = closePanel;
    if (sub) add(panel, "div", { "class": "mt-panel-sub", "data-role": "op" }, sub);
  }
  function section(title) {
    var part = add(panel, "section", {});
    add(part, "h4", {}, title);
    return part;
  }
  function line(parent, text, role) {
    return add(parent, "div", role ? { "class": "mt-line", "data-role": role } : { "class": "mt-line" }, text);
  }
  function fmt(x) {
    if (typeof x === "string") return x;
    if (x === null || x === undefined) return "—";
    if (x === 0) return "0";
    var text = Number(x.toPrecision(4)).toString();
    if (Math.abs(x) >= 1e5 || Math.abs(x) < 1e-4) text = x.toExponential(3).replace(/\.?0+e/, "e");
    return text.replace("-", "−");
  }
  function said(entry) { return entry ? (typeof entry.number === "number" ? fmt(entry.number) : entry.text) : "—"; }
  function inParens(x) { var t = fmt(x); return t.charAt(0) === "−" ? "(" + t + ")" : t; }

  function showSummary(group) {
    var summary = data.summaries[group] || { members: [], text: "" };
    state.selected = group;
    header(group, summary.text);
    var part = section("its ops (click one)");
    var list = add(part, "div", { "class": "mt-members" });
    summary.members.forEach(function (name) {
      var link = add(list, "button", { type: "button", "class": "mt-link", "data-member": name }, name);
      link.onclick = function () { showPanel(name); };
    });
    paint();
  }

  function arrived(node, k) {
    // What has reached this node by step k: the seed, and the shares of the uses already handled.
    var total = 0, got = 0, expected = 0, numbers = true;
    if (node.seed) { expected++; if (k >= -1) { got++; total += node.seed.number || 0; } }
    node.uses.forEach(function (use) {
      if (use.step === null || use.step === undefined || !use.share) return;
      expected++;
      if (use.step <= k) { got++; if (typeof use.share.number === "number") total += use.share.number; else numbers = false; }
    });
    return { total: total, got: got, expected: expected, numbers: numbers && node.scalar };
  }

  function showPanel(name, keepEntry) {
    var node = data.nodes[name];
    if (!node) return;
    if (!keepEntry) state.entry = null;
    state.selected = name;
    var sub = node.kind === "op" ? node.op + (node.shape ? " " + node.shape : "") : node.kind + (node.shape ? " " + node.shape : "");
    header(node.expr ? name + " = " + node.expr : name, sub);
    if (node.order_text) line(panel, node.order_text, "order").className += " mt-order-" + node.order;
    if (node.check) checkSection(node.check);
    var value = section("value");
    line(value, node.value.text, "value");
    if (node.value.heat) heatmap(value, node, "value");
    if (state.mode === "forward") tangentSection(node);
    if (node.grad) gradientSection(node);
    if (node.local && node.local.length) localSection(node);
    if (node.uses.length) chainSection(node);
    if (node.saved && node.saved.length) {
      var saved = section("what its VJP saved (reads in backward)");
      node.saved.forEach(function (pair) { line(saved, pair[0] + " = " + pair[1], "saved"); });
    }
    if (state.entry) entryDetail(node);
    paint();
  }

  function checkSection(check) {
    var part = section("your step " + check.step + ": " + check.state);
    part.setAttribute("data-role", "check");
    part.className = "mt-check mt-check-" + check.state;
    line(part, check.text, "check-text");
    var rows = [["yours", check.yours], ["the tape's", check.tape], ["what your upstream steps imply", check.implied]];
    rows.forEach(function (row) {
      if (!row[1]) return;
      var item = line(part, row[0] + ": " + row[1].text, "check-" + (row[0] === "yours" ? "yours" : row[0] === "the tape's" ? "tape" : "implied"));
      if (row[1].heat) heatmapOf(part, row[1].heat, null);
    });
    if (typeof check.off_tape === "number") line(part, "largest |yours − tape's| = " + fmt(check.off_tape), "off-tape");
    if (typeof check.off_implied === "number") line(part, "largest |yours − implied| = " + fmt(check.off_implied), "off-implied");
  }

  function tangentSection(node) {
    var f = data.forward, tangent = f.tangents[node.name];
    var part = section("forward mode: tangent d" + node.name);
    line(part, tangent ? said(tangent) : "no tangent reaches it", "tangent");
    var s = f.step_of[node.name];
    if (s !== undefined) line(part, f.steps[s].text, "tangent-step");
    else if (tangent) line(part, "given (an input's direction)", "tangent-step");
  }

  function gradientSection(node) {
    var part = section("gradient ∂" + data.loss + "/∂" + node.name);
    line(part, "complete: " + said(node.grad), "grad");
    if (node.grad.heat) heatmap(part, node, "grad");
    if (state.mode === "backward") {  // (what the backward pass has brought so far)
      var a = arrived(node, state.step);
      var text = a.expected === 0 ? "nothing reaches it" : a.got === 0 ? "nothing has arrived yet" :
        (a.numbers ? fmt(a.total) : a.got === a.expected ? said(node.grad) : "partly") +
        " (" + a.got + " of " + a.expected + (a.expected === 1 ? " share)" : " shares)");
      line(part, "arrived by " + (state.step < 0 ? "the start" : "step " + state.step) + ": " + text, "arrived");
    }
  }

  function localSection(node) {
    var part = section(node.scalar ? "local derivatives (this op's formula, this run's numbers)" : "local derivatives (this op's VJP)");
    node.local.forEach(function (local) {
      var text = local.symbol + " = " + local.text;
      if (local.numbers) text += " = " + local.numbers;
      if (typeof local.value === "number") text += " = " + fmt(local.value);
      var row = line(part, text, "local");
      row.setAttribute("data-input", local.input);
      if (local.latex) row.setAttribute("title", local.latex);
    });
  }

  function chainSection(node) {
    var part = section("chain rule: upstream × local = this use's share");
    var shares = [];
    node.uses.forEach(function (use) {
      var row = add(part, "div", { "class": "mt-line mt-use", "data-role": "use", "data-at": use.at });
      if (state.mode === "backward" && use.step !== null && use.step !== undefined && use.step > state.step) {
        row.classList.add("mt-later");  // this share has not been sent yet at the step shown
      }
      var local = use.symbol + " = " + use.text + (use.numbers ? " = " + use.numbers : "") +
        (typeof use.local === "number" ? " = " + fmt(use.local) : "");
      add(row, "div", { "class": "mt-local" }, local);
      if (!use.share) { add(row, "div", {}, "no gradient flows back here"); return; }
      var up = said(use.upstream);
      var product = node.scalar && typeof use.local === "number" ?
        "∂" + data.loss + "/∂" + use.at + " × " + inParens(use.local) + " = " + inParens(use.upstream.number) + " × " +
        inParens(use.local) + " = " + said(use.share) :
        "upstream d" + use.at + " = " + up + " → share " + said(use.share);
      add(row, "div", { "class": "mt-product", "data-role": "product" }, product + (use.step === null ? "" : "  (step " + use.step + ")"));
      shares.push(typeof use.share.number === "number" ? inParens(use.share.number) : use.share.text);
    });
    if (node.more_uses) line(part, "… and " + node.more_uses + " more uses", "more");
    if (node.grad) {
      var sum = node.uses.length > 1 || node.more_uses ? "sum over its " + (node.uses.length + node.more_uses) + " uses: " : "";
      var terms = node.scalar && shares.length > 1 && !node.more_uses ? shares.join(" + ") + " = " : "";
      if (node.seed) terms = "";
      line(part, sum + "∂" + data.loss + "/∂" + node.name + " = " + terms + said(node.grad), "sum");
    }
  }

  // ------------------------------------------------------------------ heatmaps (click an entry)
  function colour(x, scale) {
    if (typeof x !== "number") return "#bdbdbd";
    var t = scale ? Math.max(-1, Math.min(1, x / scale)) : 0;
    // Blue for negative, orange for positive, white at 0: a diverging pair that survives colour-blindness.
    var to = t < 0 ? [33, 102, 172] : [230, 97, 1], a = Math.abs(t);
    return "rgb(" + [0, 1, 2].map(function (i) { return Math.round(255 + (to[i] - 255) * a); }).join(",") + ")";
  }
  function heatmap(parent, node, which) {
    heatmapOf(parent, node[which].heat, node, which);
  }
  function heatmapOf(parent, heat, node, which) {
    if (!heat || !heat.cells) return;
    var scale = 0;
    heat.cells.forEach(function (row) { row.forEach(function (x) { if (typeof x === "number") scale = Math.max(scale, Math.abs(x)); }); });
    var table = add(parent, "table", { "class": "mt-heat", "data-role": "heat-" + (which || "check") });
    heat.cells.forEach(function (row, r) {
      var tr = add(table, "tr");
      row.forEach(function (x, c) {
        var td = add(tr, "td", { tabindex: "0", "data-entry": r + "," + c, title: "[" + r + "," + c + "] " + fmt(x) });
        td.style.background = colour(x, scale);
        if (state.entry && state.entry[0] === r && state.entry[1] === c) td.classList.add("mt-selected");
        if (!node) return;  // (a comparison's heatmap: its entries are in the tooltips)
        td.onclick = function () { state.entry = [r, c]; showPanel(node.name, true); };
        td.onkeydown = function (event) { if (event.key === "Enter") td.onclick(); };
      });
    });
    if (heat.note) add(parent, "div", { "class": "mt-note" }, "shown: " + heat.note);
  }
  function cell(heat, r, c) { return heat && heat.cells && heat.cells[r] ? heat.cells[r][c] : undefined; }
  function entryDetail(node) {
    var r = state.entry[0], c = state.entry[1];
    var part = section("entry [" + r + "," + c + "]");
    part.setAttribute("data-role", "entry");
    line(part, "value " + fmt(cell(node.value.heat, r, c)), "entry-value");
    if (!node.grad) return;
    var terms = [], sum = 0;
    var single = node.uses.length === 1 && !node.more_uses;
    node.uses.forEach(function (use) {
      var from = single ? node.grad.heat : { cells: use.share_cells };  // one use: its share is the gradient
      if (!from || !from.cells) return;
      var x = from.cells[r] ? from.cells[r][c] : undefined;
      if (typeof x !== "number") return;
      sum += x;
      terms.push(inParens(x));
      line(part, "from " + use.at + ": " + fmt(x), "entry-share");
    });
    var total = cell(node.grad.heat, r, c);
    var text = "∂" + data.loss + "/∂" + node.name + "[" + r + "," + c + "] = " + (terms.length > 1 ? terms.join(" + ") + " = " : "") + fmt(total);
    line(part, text, "entry-sum");
  }

  showView(0);
  go(options.step === undefined ? -1 : options.step);
  return {
    go: go,
    select: function (name) {
      var g = graph.querySelector('[data-node="' + (window.CSS && CSS.escape ? CSS.escape(name) : name) + '"]');
      if (g) select(g); else showPanel(name);
    },
    state: state,
  };
}

// The static copy a notebook keeps beside the live widget (microtape.viz.explorer.widget): when no live
// view appears in the output below it (the notebook was reopened: no kernel, no widget model), that output's
// "Loading widget..." / "Error displaying widget" line is hidden and this copy stays. The live widget, when it
// renders, hides this copy and shows itself again: whichever is live wins.
function mtStaticFallback(root, waitMs) {
  "use strict";
  var mine = root.closest(".jp-OutputArea-child, .output_area, .cell-output-ipywidget-background") || root;
  setTimeout(function () {
    var next = mine.nextElementSibling;
    if (next && !next.querySelector(".mt-explore") && /widget/i.test(next.textContent)) next.style.display = "none";
  }, waitMs || 4000);
}
