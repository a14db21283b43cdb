# Quickstart: `make run` writes the full report; `make test` runs the whole test suite.
# Each creates .venv when it is missing and installs what it needs into it: `make run` the core
# alone (numpy, scipy, matplotlib, typer, rich, pydantic), `make test` every extra as well.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.installed-core
STAMP := $(VENV)/.installed
MODEL ?= llama-3.1-8b
OUT ?= out/report

.PHONY: run install test test-fast test-explore lint bench lab figures docs screenshots kernels native clean

$(BIN)/python:
	@echo "== creating $(VENV) with $(PY)"
	$(PY) -m venv $(VENV)

# The core: what `make run` and every analytic and serving command need.
$(CORE): $(BIN)/python pyproject.toml
	@echo "== installing ridgeline and its core dependencies into $(VENV)"
	$(BIN)/python -m pip install --progress-bar on -e .
	touch $(CORE)

# Everything `make test` uses. torch is pinned first so no other requirement can pull a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	@echo "== installing ridgeline with every extra (torch, web, dev, ...) into $(VENV)"
	$(BIN)/python -m pip install --progress-bar on torch==2.13.0
	$(BIN)/python -m pip install --progress-bar on -e '.[torch,dev,web,web-test,serve,serve-test,ray,parquet,pandas]'
	touch $(STAMP) $(CORE)

install: $(STAMP)

# The engine's C++ kernels, built once for this environment (a no-op when built): native for
# this CPU, portable (no AVX-512) for the tests of the paths every CPU takes. The engine also
# builds them on first use; `make test` builds both targets up front.
kernels: $(STAMP)
	$(BIN)/ridgeline engine build --target native --target portable

# The simulator's fast mode compiled with mypyc beside its sources (a no-op when the build
# matches them; the interpreted modules give the same results in about twice the time).
native: $(STAMP)
	$(BIN)/ridgeline native build

# The report (about a minute of CPU; progress on stderr), then how to run the commands.
run: $(CORE)
	@echo "== writing the report for $(MODEL) to $(OUT)/"
	$(BIN)/ridgeline report --model $(MODEL) --out $(OUT) --validate
	@echo
	@echo "Open $(OUT)/report.html. To run the commands of README.md and docs/, activate the environment:"
	@echo "  source $(BIN)/activate          (then: ridgeline --help)"
	@echo "or call the command by its path:"
	@echo "  $(BIN)/ridgeline hw list"
	@echo "The explorer, the engine and the lab need the extras: make install (or pip install -e '.[web,torch]')."

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

# Property and schema tests (Hypothesis, schemathesis) with fresh random examples, where
# `make test` replays fixed ones; a failure found is saved to tests/hypothesis-examples/ (commit
# it with the fix). RUNS=10 repeats the whole tier ten times, each with new examples.
RUNS ?= 1
test-explore: $(STAMP)
	@for i in $$(seq $(RUNS)); do \
		echo "== exploration run $$i of $(RUNS)"; \
		$(BIN)/python -m pytest -p no:faker -m 'hypothesis and not torch and not gpu and not bench' --hypothesis-profile explore || exit 1; \
	done

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
	RIDGELINE_SCREENSHOTS=out/explorer $(BIN)/python -m pytest tests/web/test_web_browser.py -q

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
