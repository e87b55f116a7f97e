# The two commands of the README: `make demo` and `make test`.
# For teachers: `make assignment` and `make grade-sample` (the otter autograder, grading/).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
GRADING_STAMP = $(VENV)/.installed-grading
OUT    ?= demo-output
# The CPU build of PyTorch used only as a reference in cross-checks. Always this
# exact pin: a bare `torch` pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: demo test test-torch bench lint format dot browser clean assignment grade-sample

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/pip install --quiet -e '.[notebooks,dev,train,progress]'
	touch $(STAMP)

dot:
	@bash scripts/ensure-dot.sh

# The frames player (index.html) is tested in a real headless Chromium: this
# installs Debian's chromium + chromium-driver when missing (and allowed), and
# selenium into .venv (the [browser] extra). Without a browser that test skips.
browser: $(STAMP)
	@bash scripts/ensure-browser.sh
	@$(BIN)/python -c "import selenium" 2>/dev/null || $(BIN)/pip install --quiet -e '.[browser]' \
		|| echo "Could not install selenium; the browser test will be skipped."

demo: $(STAMP) dot
	$(BIN)/microtape demo --out $(OUT)

test: $(STAMP) dot browser
	MPLBACKEND=Agg $(BIN)/python -m pytest -m "not torch" -q -p no:cacheprovider tests
	MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider --nbmake notebooks

test-torch: $(STAMP)
	$(BIN)/pip install --quiet '$(TORCH)'
	MICROTAPE_REQUIRE_TORCH=1 MPLBACKEND=Agg $(BIN)/python -m pytest -m torch -q -p no:cacheprovider tests

# The autograder is an optional extra (grading), installed only for these targets:
# `make test` stays light.
$(GRADING_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[grading]'
	touch $(GRADING_STAMP)

# grading/source/microtape_lab.ipynb -> grading/dist/student (hand out) + grading/dist/autograder (hidden tests).
assignment: $(GRADING_STAMP)
	$(BIN)/python grading/autograde.py assign

# Grade grading/samples/* with `otter run` (no Docker; 10 s per exercise, 300 s per submission),
# print the score table, fail if a score differs from grading/expected_scores.json.
grade-sample: assignment
	$(BIN)/python grading/autograde.py grade

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(OUT) build *.egg-info grading/dist grading/build
