# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
OUT    ?= demo-output
# The CPU build of PyTorch used only as a reference in cross-checks. Always this
# exact pin: a bare `torch` pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: demo test test-torch bench lint format dot clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[notebooks,dev,train]'
	touch $(STAMP)

dot:
	@bash scripts/ensure-dot.sh

demo: $(STAMP) dot
	$(BIN)/microtape demo --out $(OUT)

test: $(STAMP) dot
	MPLBACKEND=Agg $(BIN)/python -m pytest -m "not torch" -q -p no:cacheprovider tests
	MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider --nbmake notebooks

test-torch: $(STAMP)
	$(BIN)/pip install --quiet '$(TORCH)'
	MICROTAPE_REQUIRE_TORCH=1 MPLBACKEND=Agg $(BIN)/python -m pytest -m torch -q -p no:cacheprovider tests

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
	rm -rf $(VENV) $(OUT) build *.egg-info
