# Two commands for a fresh clone: `make demo` and `make test`. Both install first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest-xdist workers for `make test`: one per core of a CI machine (each starts its own
# control plane). --dist loadgroup hands tests out one at a time, except that a module whose
# tests share a module- or class-scoped fixture goes to one worker whole (tests/conftest.py;
# its names then end in @module).
WORKERS ?= 2
# The suite starts hundreds of Python processes (the CLI, engine workers, benchmarks): with
# bytecode written once, each reads it instead of compiling our modules again (a shell that
# sets PYTHONDONTWRITEBYTECODE would cost each one ~0.3 s, and pytest its rewrite cache).
unexport PYTHONDONTWRITEBYTECODE
# mypy's cache lives outside the clone, beside the Go tools: a fresh clone with a fresh .venv
# then re-checks in seconds instead of ~160 s. mypy reuses an entry only when the file's hash
# matches the one it checked (a new path or mtime only makes it hash the file), so the
# result is the cold run's.
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/anycloud/mypy
MYPY := $(VENV)/bin/mypy --cache-dir $(MYPY_CACHE)

.PHONY: setup tools demo test test-fast lint typecheck bench clean

setup: $(STAMP)

# --no-compile: pip would byte-compile all 25,000 modules of the provider SDKs (~96 s of a
# core); the suite imports ~2,000 of them, compiled on first import (~8 s) and kept.
$(STAMP): pyproject.toml constraints.txt sdk/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e ".[dev]" -e sdk/python
	touch $(STAMP)

# The Go programs the tests run (a real control plane, the Pulumi engine), built from pinned
# modules into ~/.cache/anycloud/tools and reused. Without Go, tests that need them skip
# (they fail under CI=true).
tools:
	$(PYTHON) tools/build.py || [ "$$CI" != true ]

demo: setup
	$(VENV)/bin/anycloud demo

test: setup tools
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m tools.catalog_generator.generate --check
	$(PY) -m tools.sdk.generate --check
	$(MYPY)
	$(PY) -m pytest -q -n $(WORKERS) --dist loadgroup --durations=10

# Only what needs neither the control plane nor the engine (a minute or two).
test-fast: setup
	$(PY) -m pytest -q -n $(WORKERS) -m "not kube and not engine and not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(MYPY)

# The type check for the edit loop: the same rules as `make lint`, but with trimmed stubs of
# the provider SDKs (only the names our code reads; tools/mypy/stubs.py): a cold run takes
# ~35 s of CPU in ~1.1 GB instead of ~200 s in ~7.6 GB (benchmarks/bench_mypy.py), with the
# same errors. DAEMON=1 keeps a dmypy server running: later re-checks take about a second.
typecheck: setup
	$(PY) tools/mypy/typecheck.py $(if $(DAEMON),--daemon)

bench: setup
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script; rc=$$?; \
	  [ $$rc = 0 ] || [ $$rc = 77 ] || exit 1; done  # 77: a tool it needs is not built here

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
