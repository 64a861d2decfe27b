# Quick start: `make demo` (set up, run the headline comparison) and `make test` (set up, run the
# library's tests). `make test-all` adds the reproductions' tests (reproductions/tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-reproductions test-all test-full-data lint docs bench clean

setup: $(STAMP)

# dpdl with its test tools, and the papers' reproductions beside it (a plugin of dpdl: `dpdl
# reproduce`), both editable.
$(STAMP): pyproject.toml reproductions/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]' -e reproductions
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dpdl demo

# The library's tests (tests/), on the data slices that ship in tests/data: the fast lane, in one
# worker process per core (pytest-xdist; at most 4: each imports torch).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 tests

# The reproductions' tests: every --quick setting run, the committed runs and reports checked.
test-reproductions: $(STAMP)
	$(BIN)/python -m pytest -q reproductions/tests

test-all: test test-reproductions

# The tests that need the full data sets (marked full_data), with DPDL_DATA_DIR set to a folder holding them.
test-full-data: $(STAMP)
	@test -n "$(DPDL_DATA_DIR)" || { echo "set DPDL_DATA_DIR to the folder holding the full data sets (see 'dpdl data list')"; exit 2; }
	$(BIN)/python -m pytest -q -m full_data tests reproductions/tests

# The habits that keep the code readable (docs/design.md, Layers): ruff's rules and format, and the
# import-linter contracts of pyproject.toml. pre-commit runs the same on each commit.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=src:reproductions/src $(BIN)/lint-imports

# The documentation site (mkdocs-material, mkdocstrings) into site/, strictly: a broken link or a
# missing reference fails the build.
docs: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_example_clipping.py
	$(BIN)/python benchmarks/bench_mafalda.py
	$(BIN)/python benchmarks/bench_tracking.py
	$(BIN)/python benchmarks/bench_runtime.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_quadratic_forms.py

clean:
	rm -rf $(VENV) build site src/*.egg-info .pytest_cache .ruff_cache .import_linter_cache .grimp_cache
