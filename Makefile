# Quickstart: `make run` writes the full report; `make test` runs the whole test suite.
# Both create .venv when it is missing and install what they need into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODEL ?= llama-3.1-8b
OUT ?= out/report

.PHONY: run test test-fast lint bench lab figures screenshots kernels native clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is pinned first so no other requirement can pull a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[torch,dev,web,web-test,serve,serve-test,ray,parquet,pandas]'
	touch $(STAMP)

# The engine's C++ kernels, built once for this environment (a no-op when built): native for
# this CPU, portable (no AVX-512) for the tests of the paths every CPU takes.
kernels: $(STAMP)
	$(BIN)/ridgeline engine build --target native --target portable

# The simulator's fast mode compiled with mypyc beside its sources (a no-op when the build
# matches them; the interpreted modules give the same results in about twice the time).
native: $(STAMP)
	$(BIN)/ridgeline native build

run: $(STAMP) kernels native
	$(BIN)/ridgeline report --model $(MODEL) --out $(OUT) --validate
	@echo "Explore it live: $(BIN)/ridgeline explore --open   (serves http://127.0.0.1:8765/)"

test: $(STAMP) kernels native
	$(BIN)/python -m ruff check src tests benchmarks tools
	$(BIN)/python -m ruff format --check src tests benchmarks tools
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest

# The unit tier: no torch, nothing marked slow (README commands, notebooks, full reports).
# Bytecode caching on even where the environment turns it off: pytest then keeps each test
# module's rewritten asserts instead of rewriting all of them on every run (about 4 s here).
test-fast: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -p no:schemathesis -p no:faker -m 'not torch and not gpu and not bench and not slow'

bench: $(STAMP)
	$(BIN)/python benchmarks/sweep.py

# Measure this machine: the whole lab into out/lab/ (SIZE=quick, the default: every figure at
# smaller sizes, under 10 minutes on a quiet 2-core machine; SIZE=full: the grid docs/lab.md
# reports; FRESH=1 to start over). Each step says what it runs and how long it took.
lab: $(STAMP)
	BIN=$(BIN) benchmarks/lab_run.sh

# Redraw the figures docs/ shows from the current code (docs/figures/*.png).
figures: $(STAMP)
	BIN=$(BIN) tools/docs_figures.sh

# The explorer's screenshots, taken by its browser tests, into out/explorer/.
screenshots: $(STAMP)
	RIDGELINE_SCREENSHOTS=out/explorer $(BIN)/python -m pytest tests/test_web_browser.py -q

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
