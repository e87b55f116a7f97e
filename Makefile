# The two commands of the README: `make demo` and `make test`.
# For teachers: `make assignment` and `make grade-sample` (assignment/: the boxed grader, a Gradescope bundle).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
DOCS_STAMP = $(VENV)/.installed-docs
OUT    ?= demo-output
# The CPU build of PyTorch used only as a reference in cross-checks. Always this
# exact pin: a bare `torch` pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: demo test test-torch bench lint format dot sandbox browser clean assignment grade-sample docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/pip install --quiet -e '.[notebooks,dev,train,progress]'
	touch $(STAMP)

dot:
	@bash scripts/ensure-dot.sh

# Students' code is checked inside bubblewrap (the exercise checker, `microtape grade`).
sandbox:
	@bash scripts/ensure-bwrap.sh

# The frames player (index.html) is tested in a real headless Chromium: this
# installs Debian's chromium + chromium-driver when missing (and allowed), and
# selenium into .venv (the [browser] extra). Without a browser that test skips.
browser: $(STAMP)
	@bash scripts/ensure-browser.sh
	@$(BIN)/python -c "import selenium" 2>/dev/null || $(BIN)/pip install --quiet -e '.[browser]' \
		|| echo "Could not install selenium; the browser test will be skipped."

demo: $(STAMP) dot
	$(BIN)/microtape demo --out $(OUT)

test: $(STAMP) dot sandbox browser
	MPLBACKEND=Agg $(BIN)/python -m pytest -m "not torch and not docs" -q -p no:cacheprovider tests

test-torch: $(STAMP)
	$(BIN)/pip install --quiet '$(TORCH)'
	MICROTAPE_REQUIRE_TORCH=1 MPLBACKEND=Agg $(BIN)/python -m pytest -m torch -q -p no:cacheprovider tests

# assignment/source/microtape_lab.ipynb -> assignment/dist: the student notebook, and the autograder
# bundle (a fresh instructor secret, microtape's wheel, Gradescope's setup.sh and run_autograder).
assignment: $(STAMP)
	$(BIN)/python assignment/autograde.py assign

# Grade assignment/samples/* with `microtape grade` (boxed, hidden trials from the bundle's secret),
# fail if a score differs from assignment/expected_scores.json, then run the bundle's entry script on
# a sample in a fresh virtual environment, as Gradescope would.
grade-sample: assignment sandbox
	$(BIN)/python assignment/autograde.py grade --bundle

# The site (docs/, Sphinx + MyST-NB) into docs/_build/html, offline; any warning fails it (-W).
# The notebooks are executed, cached in docs/_build/.jupyter_cache: a rebuild reruns only the
# pages whose code changed (all of them when microtape/ changed). Then every count of exercises, points, sessions
# and notebooks is checked against the registry (tests/docs/test_counts.py), and the site is opened in headless
# Chromium (tests/docs/test_docs_site.py).
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP) dot browser
	MPLBACKEND=Agg $(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider tests/docs/test_counts.py
	MPLBACKEND=Agg $(BIN)/python -m pytest -m docs -q -p no:cacheprovider tests/docs/test_docs_site.py
	@echo "The site: docs/_build/html/index.html"

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks

# mypy checks the typed folders named in pyproject.toml's [tool.mypy] (every function annotated there).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(OUT) .mypy_cache build *.egg-info assignment/dist assignment/build docs/_build docs/api/generated docs/notebooks/*.ipynb
