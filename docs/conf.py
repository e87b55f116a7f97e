"""Sphinx configuration of microtape's site: `make docs` builds it into docs/_build/html.

The site is built offline: the notebooks are executed by MyST-NB (cached in
docs/_build/.jupyter_cache, so a rebuild re-runs only the notebooks that
changed, or all of them when the package changed), the maths is rendered by the MathJax that the pip package
jupyter-server-mathjax bundles (copied next to the pages), and no page loads
anything from the network. `-W` turns every warning into an error.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the _ext helpers beside this file

project = "microtape"
author = "the microtape authors"
copyright = "the microtape authors, MIT licence"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxarg.ext",
]

exclude_patterns = ["_build", "_kernel", "_templates", "**/.ipynb_checkpoints"]


def _copy_notebooks():
    # The notebooks live in notebooks/ (where `make test` runs them); Sphinx reads only
    # below docs/, so they are copied into docs/notebooks/ (ignored by git). A symlink
    # would not do: MyST resolves links between notebooks through the real path.
    target = HERE / "notebooks"
    for source in sorted((HERE.parent / "notebooks").glob("*.ipynb")):
        copy = target / source.name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            shutil.copyfile(source, copy)  # only when changed: Sphinx rereads what is newer


_copy_notebooks()
suppress_warnings = []

# ---------------------------------------------------------------- get the code from the site
# The install page links a wheel of this very source, built here (offline: no build isolation,
# no dependency downloaded) and copied to the site's root; the page names it through the token
# MICROTAPE_WHEEL (replaced in setup() below). Each notebook page links its .ipynb (stored without
# outputs, as in the repository), copied beside the page; microtape-notebooks.zip holds them all.
WHEEL_DIR = HERE / "_build" / "wheel"


def _build_wheel():
    shutil.rmtree(WHEEL_DIR, ignore_errors=True)
    WHEEL_DIR.mkdir(parents=True)
    # From a fresh copy of what the wheel is made of: setuptools' build/ folder in the repository
    # would keep files since deleted from the source, and they would ship.
    with tempfile.TemporaryDirectory(prefix="microtape-wheel-") as copy:
        for name in ("pyproject.toml", "README.md", "LICENSE", "microtape"):
            source = HERE.parent / name
            if source.is_dir():
                shutil.copytree(source, Path(copy) / name, ignore=shutil.ignore_patterns("__pycache__"))
            elif source.exists():
                shutil.copy(source, Path(copy) / name)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", copy, "--no-deps", "--no-build-isolation",
             "--quiet", "--wheel-dir", str(WHEEL_DIR)],
            check=True,
        )  # fmt: skip
    (wheel,) = WHEEL_DIR.glob("microtape-*.whl")
    return wheel.name


def _zip_notebooks():
    # Every notebook in one archive (as stored: without outputs), beside the wheel at the site's root. Fixed
    # times and order: the same notebooks make the same bytes.
    target = WHEEL_DIR / "microtape-notebooks.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in [*sorted((HERE.parent / "notebooks").glob("*.ipynb")), HERE.parent / "notebooks" / "README.md"]:
            entry = zipfile.ZipInfo(f"microtape-notebooks/{source.name}", date_time=(2020, 1, 1, 0, 0, 0))
            archive.writestr(entry, source.read_bytes(), compress_type=zipfile.ZIP_DEFLATED)
    return target.name


microtape_wheel = _build_wheel()
notebooks_zip = _zip_notebooks()
html_extra_path = [str(WHEEL_DIR)]

# ---------------------------------------------------------------- MyST and the notebooks
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("MICROTAPE_DOCS_EXECUTE", "cache")


def _source_digest():
    # What the pages show depends on the package, not only on the pages: a change to
    # microtape/ re-executes every notebook (a cache of its own) and rereads every page
    # (the CLI page from the parser, the API from the docstrings) — see setup() below.
    digest = hashlib.sha256()
    for path in sorted((HERE.parent / "microtape").rglob("*.py")):
        digest.update(path.relative_to(HERE.parent).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update((HERE / "_kernel" / "figures.py").read_bytes())  # the kernel's marker of figures drawn
    return digest.hexdigest()[:16]


microtape_source = _source_digest()

# Each cell that makes a matplotlib figure is marked in its outputs (docs/_kernel/figures.py, an IPython
# startup script of the executing kernel only), so the site's test fails on a figure that was never drawn.
KERNEL_FIGURES = HERE / "_kernel" / "figures.py"
_startup = HERE / "_build" / "ipython" / "profile_default" / "startup"
_startup.mkdir(parents=True, exist_ok=True)
shutil.copyfile(KERNEL_FIGURES, _startup / "00-microtape-figures.py")
os.environ["IPYTHONDIR"] = str(_startup.parents[1])
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache" / microtape_source)
nb_execution_timeout = 600
nb_execution_raise_on_error = True  # a notebook that fails fails the build
nb_execution_show_tb = True
nb_merge_streams = True
nb_render_markdown_format = "myst"  # Markdown from a cell (the primitives' table) gets tables and $maths$
# Widgets would load their JavaScript from a CDN: the site loads nothing from the network.
nb_ipywidgets_js = {}
# So a widget's output shows its static alternative (the flip-book's plain-HTML player, which
# frames.widget() puts beside the widget's view): a static page has no kernel to drive a widget.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
os.environ["MICROTAPE_STATIC_PAGES"] = "1"  # the executing kernel inherits it (microtape.viz.frames)

# ---------------------------------------------------------------- API reference
# Inherited members too: MultiHeadAttention's grad_key_input() lives in a shared base class.
autodoc_default_options = {"members": True, "inherited-members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autosummary_generate = True
autodoc_typehints = "none"
napoleon_google_docstring = False
napoleon_numpy_docstring = True

# ---------------------------------------------------------------- maths, offline
# MathJax 2.7 as bundled by the pip package jupyter-server-mathjax (what Jupyter
# serves): copied into _static/mathjax at the end of the build; the path below is
# relative to _static. That bundle carries the combined configuration file and
# only the STIX-Web fonts, so MathJax is told to use those (as Jupyter does).
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
mathjax2_config = {
    "HTML-CSS": {"availableFonts": [], "webFont": "STIX-Web", "imageFont": None},
    "tex2jax": {
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "processEscapes": True,
        # MyST marks each page's section tex2jax_ignore and its maths with the class math:
        # only the maths (and notebook outputs) are typeset, never a stray $ in the prose.
        "ignoreClass": "tex2jax_ignore|mathjax_ignore",
        "processClass": "tex2jax_process|mathjax_process|math|output_area",
    },
    "messageStyle": "none",
    # HTML-CSS in every browser, with the bundled STIX-Web fonts: Chromium would otherwise get the native
    # MathML output, whose styles ask for MathJax's own TeX fonts (MathJax_AMS-Regular.otf), not bundled.
    "MMLorHTML": {"prefer": "HTML"},
}
myst_update_mathjax = False  # it would write a MathJax 3 configuration; the one above is MathJax 2's

# ---------------------------------------------------------------- theme
html_theme = "pydata_sphinx_theme"
html_title = "microtape"
html_static_path = ["_static"]
html_css_files = ["microtape.css"]
templates_path = ["_templates"]
# The left column holds the whole site on every page (docs/_templates/sidebar-site.html): the theme's own
# starts one level down and was empty on every top-level page. The header then needs no links of its own:
# the name and the search, one row at any width.
html_sidebars = {"**": ["sidebar-site"]}
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
    "navbar_center": [],
    "navbar_end": ["navbar-icon-links"],
}
html_show_sourcelink = False


def _copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    import jupyter_server_mathjax

    bundled = Path(jupyter_server_mathjax.__file__).parent / "static"
    shutil.copytree(bundled, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def _name_the_wheel(app, docname, source):
    source[0] = source[0].replace("MICROTAPE_WHEEL", app.config.microtape_wheel)


def _offer_the_notebook(app, pagename, templatename, context, doctree):
    # A notebook page: a link to its .ipynb under the title (the file is copied beside the page).
    if doctree is None or not str(app.env.doc2path(pagename)).endswith(".ipynb"):
        return
    name = pagename.rsplit("/", 1)[-1] + ".ipynb"
    link = (
        f'<p class="mt-download">Download this notebook: <a class="reference download" href="{name}" '
        f'download="{name}"><code>{name}</code></a> (to run it, see <a href="../install.html">install</a>)</p>'
    )
    body = context.get("body", "")
    at = body.find("</h1>")
    context["body"] = body[: at + 5] + link + body[at + 5 :] if at >= 0 else link + body


def _copy_notebook_files(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    for source in sorted((HERE.parent / "notebooks").glob("*.ipynb")):
        shutil.copyfile(source, target / source.name)


def setup(app):
    # A config value that rebuilds the environment when it changes: the package's digest.
    app.add_config_value("microtape_source", "", "env")
    app.add_config_value("microtape_wheel", "", "env")
    app.connect("source-read", _name_the_wheel)
    app.connect("html-page-context", _offer_the_notebook)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _copy_notebook_files)
