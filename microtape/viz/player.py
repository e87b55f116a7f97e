"""The step-by-step player: plain HTML and JavaScript that flips through the frames of a backward pass.

This module lets :class:`~microtape.viz.BackwardFrames` show itself in a
browser or a notebook::

    fragment(pictures, captions, focus, uid="mt1")   # a <div> with controls, frames and a script
    page(fragment_html, title)                       # a whole index.html around it

The controls: a slider, ◀ prev / next ▶, play, and a zoom button; the arrow
keys step too (on the page anywhere, in a notebook once the player has the
focus). The slider, the caption and the picture always change together, and
they count the same steps (``step k of steps 0–N``). The layout is pinned:
the caption keeps the height of the tallest caption, so stepping never moves
the picture, and the picture sits in a stage that fills the window below the
controls (or, when the frames are smaller, is as tall as the tallest frame)
and scrolls by itself, so the controls never scroll away; in a page with a
sticky header (a documentation site) the stage fits below it, and scrolling
the player into view stops under it. "Fit" (the default) scales the picture
to the stage's width, never below the width at which its smallest text is
8 px (:func:`~microtape.viz.render.fit_svg`: the stage scrolls instead);
"100 %" shows it at its natural size; both scroll the stage so the current
step's box stays in view (each frame knows where that box is: ``focus``,
fractions of the picture).
No server and no libraries: the page opens from disk. (ipywidgets would need
a running kernel; :meth:`~microtape.viz.BackwardFrames.widget` is that variant.)
"""

import html
import json
from typing import Any

__all__ = ["fragment", "page"]


def fragment(pictures: Any, captions: Any, focus: Any = None, *, uid: Any, page_keys: bool = False) -> Any:
    """The player's HTML: ``pictures`` (``<img>`` tags or inline SVGs), one caption and focus per frame.

    ``page_keys``: the arrow keys work anywhere on the page (for ``index.html``;
    in a notebook only while the player has the focus).
    """
    frames = "\n".join(
        f'<div class="mt-frame" data-step="{k}" style="display:{"block" if k == 0 else "none"}">{p}</div>'
        for k, p in enumerate(pictures)
    )
    return _FRAGMENT.format(
        uid=uid,
        last=len(pictures) - 1,
        frames=frames,
        captions=json.dumps(captions),
        focus=json.dumps(focus or [None] * len(pictures)),
        caption=html.escape(captions[0]),
        keys="document" if page_keys else "root",
    )


def page(body: Any, title: str) -> Any:
    """A whole HTML page around a player."""
    return _PAGE.format(body=body, title=html.escape(title))


_FRAGMENT = """<div id="{uid}" class="mt-frames mt-fit" tabindex="0" style="outline:none">
<style>
#{uid} .mt-controls {{ background: #fff; padding: 4px 0; font: 13px sans-serif; border-bottom: 1px solid #eee; }}
#{uid} .mt-controls button {{ font: 13px sans-serif; }}
#{uid} .mt-caption {{ margin-top: 4px; min-height: 2.6em; }}
#{uid} .mt-stage {{ overflow: auto; position: relative; }}
#{uid}.mt-fit .mt-frame img, #{uid}.mt-fit .mt-frame svg {{ max-width: 100%; width: auto; height: auto; }}
#{uid}:not(.mt-fit) .mt-frame img, #{uid}:not(.mt-fit) .mt-frame svg {{ max-width: none !important; max-height: none; }}
</style>
<div class="mt-controls">
<button data-go="prev">&#9664; prev</button>
<input type="range" min="0" max="{last}" value="0" step="1" style="width:40%;vertical-align:middle"
  aria-label="step">
<button data-go="next">next &#9654;</button>
<button data-go="play">play</button>
<button data-go="zoom" title="fit the window, or show the picture at its natural size">100 %</button>
<div class="mt-caption">{caption}</div>
</div>
<div class="mt-stage">
{frames}
</div>
<script>
(function() {{
  var root = document.getElementById("{uid}");
  var captions = {captions};
  var focus = {focus};
  var frames = root.querySelectorAll(".mt-frame");
  var slider = root.querySelector('input[type="range"]');
  var caption = root.querySelector(".mt-caption");
  var stage = root.querySelector(".mt-stage");
  var play = root.querySelector('[data-go="play"]');
  var zoom = root.querySelector('[data-go="zoom"]');
  var controls = root.querySelector(".mt-controls");
  var timer = null;
  function picture(k) {{ return frames[k].querySelector("img, svg"); }}
  function headerBottom() {{
    // A page's sticky or fixed header (a documentation site's) covers the window's top: what is below it.
    var bottom = 0, seen = document.elementsFromPoint(window.innerWidth / 2, 1);
    for (var i = 0; i < seen.length; i++) {{
      var el = seen[i];
      for (; el && el !== document.body; el = el.parentElement) {{
        var position = getComputedStyle(el).position;
        if (position === "sticky" || position === "fixed") bottom = Math.max(bottom, el.getBoundingClientRect().bottom);
      }}
    }}
    return Math.max(0, bottom);
  }}
  function pin() {{
    // The layout is pinned: the caption is as tall as the tallest caption at this width, so stepping never
    // moves the picture; the stage fills the window below the controls and scrolls by itself at 100 %, so
    // the controls never scroll away.
    var shown = caption.textContent, tallest = 0;
    caption.style.minHeight = "0";
    for (var i = 0; i < captions.length; i++) {{
      caption.textContent = captions[i];
      tallest = Math.max(tallest, caption.offsetHeight);
    }}
    caption.textContent = shown;
    caption.style.minHeight = tallest + "px";
    // No taller than the tallest frame as shown now (fitted: at the player's width), so a player of
    // small frames inside a page does not hold a window's height of blank space below them.
    var header = headerBottom();
    // Scrolled into view, the player stops below the header (less what the page already keeps clear at its top).
    var padded = parseFloat(getComputedStyle(document.documentElement).scrollPaddingTop) || 0;
    root.style.scrollMarginTop = Math.max(0, header - padded) + "px";
    var room = Math.max(240, window.innerHeight - header - controls.offsetHeight - 16), drawn = 0;
    for (var j = 0; j < frames.length; j++) {{
      var p = picture(j), display = frames[j].style.display;
      if (!p) continue;
      frames[j].style.display = "block";
      var limit = p.style.maxHeight;
      p.style.maxHeight = "none";
      drawn = Math.max(drawn, p.getBoundingClientRect().height);
      p.style.maxHeight = limit;
      frames[j].style.display = display;
    }}
    stage.style.height = (drawn > 0 ? Math.min(room, Math.ceil(drawn) + 8) : room) + "px";
  }}
  function fit(k) {{
    // Fit: as wide as the stage (never below the picture's readable min-width); 100 %: its natural size.
    var p = picture(k);
    if (!p) return;
    var natural = p.tagName === "IMG" ? p.naturalWidth + "px" : (p.getAttribute("data-width") || "") + "pt";
    p.style.width = root.classList.contains("mt-fit") || natural === "pt" ? "" : natural;
  }}
  function keepInView(k) {{
    var p = picture(k), f = focus[k];
    if (!p || !f) return;
    var box = p.getBoundingClientRect(), room = stage.getBoundingClientRect();
    stage.scrollLeft += box.left - room.left + f[0] * box.width - stage.clientWidth / 2;
    stage.scrollTop += box.top - room.top + f[1] * box.height - stage.clientHeight / 2;
  }}
  function show(k) {{
    k = Math.max(0, Math.min(frames.length - 1, k));
    for (var i = 0; i < frames.length; i++) frames[i].style.display = i === k ? "block" : "none";
    slider.value = k;
    caption.textContent = captions[k];
    root.setAttribute("data-step", k);
    fit(k);
    keepInView(k);
  }}
  function current() {{ return parseInt(slider.value, 10); }}
  function stop() {{ if (timer) {{ clearInterval(timer); timer = null; }} play.textContent = "play"; }}
  slider.addEventListener("input", function() {{ show(current()); }});
  root.querySelector('[data-go="prev"]').addEventListener("click", function() {{ show(current() - 1); }});
  root.querySelector('[data-go="next"]').addEventListener("click", function() {{ show(current() + 1); }});
  play.addEventListener("click", function() {{
    if (timer) {{ stop(); return; }}
    if (current() === frames.length - 1) show(0);
    play.textContent = "pause";
    timer = setInterval(function() {{
      if (current() >= frames.length - 1) {{ stop(); return; }}
      show(current() + 1);
    }}, 900);
  }});
  zoom.addEventListener("click", function() {{
    var fitted = root.classList.toggle("mt-fit");
    zoom.textContent = fitted ? "100 %" : "fit";
    show(current());
  }});
  {keys}.addEventListener("keydown", function(e) {{
    if (e.target && e.target.tagName === "INPUT" && e.target !== slider) return;
    if (e.key === "ArrowRight") {{ show(current() + 1); e.preventDefault(); }}
    if (e.key === "ArrowLeft") {{ show(current() - 1); e.preventDefault(); }}
  }});
  window.addEventListener("resize", function() {{ pin(); show(current()); }});
  for (var i = 0; i < frames.length; i++) {{
    var p = picture(i);
    if (p && p.tagName === "IMG") p.addEventListener("load", function() {{ pin(); fit(current()); }});
  }}
  pin();
  show(0);
}})();
</script>
</div>"""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 8px 16px; }}
h1 {{ font-size: 16px; margin: 4px 0; }}
.mt-help {{ font-size: 12px; color: #555; margin: 2px 0 4px; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p class="mt-help">Slider, buttons or arrow keys. Orange: gradient complete; light orange: partly there;
bright orange: the current step; grey: not reached yet. Borders: green input, gold parameter, dashed constant.</p>
{body}
</body>
</html>
"""
