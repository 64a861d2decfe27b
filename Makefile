# Quick start: `make demo` (set up, run the headline comparison) and `make test` (set up, run the
# library's tests). `make test-all` adds the reproductions' tests (reproductions/tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-reproductions test-all test-full-data lint docs docs-preview bench clean gpu-check gpu-wheels crosscheck-jax-privacy

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
# missing reference fails the build. Its figures come from committed data (scripts/docs_figures.py),
# about half a minute on 2 cores. Then scripts/check_site.py checks the built pages:
# no raw reST or stray TeX, and, where chromium and chromium-driver are installed (CI installs
# them and sets CHECK_SITE=--browser, which fails without them), the maths typeset by KaTeX and
# the search answering a query typed into its box, in headless Chromium.
CHECK_SITE ?=
docs: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/python scripts/check_site.py site $(CHECK_SITE)

# The same site without drawing its covariance and audit figures (blank placeholders), for a
# quick look at the pages: DPDL_DOCS_FIGURES=0.
docs-preview: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	DPDL_DOCS_FIGURES=0 NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_example_clipping.py
	$(BIN)/python benchmarks/bench_mafalda.py
	$(BIN)/python benchmarks/bench_tracking.py
	$(BIN)/python benchmarks/bench_runtime.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_quadratic_forms.py
	$(BIN)/python benchmarks/bench_graphs.py

# dpdl against jax-privacy 2.0 on the centralized special case (issue 50): jax-privacy (CPU jax)
# in an environment of its own, $(JAX_VENV), never in dpdl's dependencies; it records its numbers
# in tests/factorization/data/jax_privacy_crosscheck.json, then dpdl's side writes its section of
# BENCHMARKS.md and the test that reads the fixture runs. Not part of `make test` (which runs that
# test on the committed fixture).
JAX_VENV ?= .venv-jax
JAX_PRIVACY ?= jax-privacy==2.0.0
$(JAX_VENV)/.installed:
	$(PYTHON) -m venv $(JAX_VENV)
	$(JAX_VENV)/bin/python -m pip install --quiet --disable-pip-version-check '$(JAX_PRIVACY)'
	touch $@

crosscheck-jax-privacy: $(STAMP) $(JAX_VENV)/.installed
	$(JAX_VENV)/bin/python benchmarks/crosscheck_jax_privacy.py
	$(BIN)/python benchmarks/crosscheck_jax_privacy_report.py
	$(BIN)/python -m pytest -q -n 0 tests/factorization/test_jax_privacy_crosscheck.py

# The prepared GPU check (scripts/gpu_check.py): the tests marked gpu and the GPU benchmarks, one
# table into $(GPU_OUT). On a device machine (its python3 holds torch; no network): the wheels of
# `make gpu-wheels` in .whl are installed first into a folder of their own. DRY_RUN=1: the same on
# the CPU with small sizes, on any machine (here with .venv's python).
GPU_OUT ?= gpu-check
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
GPU_SITE ?= /tmp/dpdl-gpu-site
gpu-check:
	@if [ -z "$(DRY_RUN)" ] && ls .whl/*.whl >/dev/null 2>&1; then $(GPU_PYTHON) -m pip install -q --no-index --no-deps \
		--no-compile --no-cache-dir --upgrade --target $(GPU_SITE) .whl/*.whl; fi
	PYTHONPATH=$(GPU_SITE):src:$$PYTHONPATH $(GPU_PYTHON) scripts/gpu_check.py $(GPU_OUT) \
		$(if $(DRY_RUN),--dry-run)

# The wheels the GPU check needs on a device machine (Python 3.12, manylinux x86_64) into .whl.
gpu-wheels: $(STAMP)
	$(BIN)/python scripts/gpu_wheels.py .whl

clean:
	rm -rf $(VENV) $(JAX_VENV) build site src/*.egg-info .pytest_cache .ruff_cache .import_linter_cache .grimp_cache
