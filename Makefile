# lakehouse-replay. `make help` lists the targets.
# Everything a target needs (virtualenv, Python packages, JVM jars) is set up by `make setup`,
# which the other targets depend on; a second run downloads nothing.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements.lock
LOCK_TOOLS := .lock-tools
UV_VERSION ?= 0.13.9
LOCK_ARGS ?=
CONF ?= conf/lakehouse.yaml
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help setup lock jars postgres demo check test test-fast docs notebooks lint format bench clean clean-work cluster-demo

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'

# The environment is installed from the lock file (every package pinned, with hashes), then the
# project itself without dependencies, so two fresh clones get the same versions.
$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found %s); set PYTHON=/path/to/python3.11" % sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

setup: $(STAMP) jars postgres ## create .venv, install the locked packages and the project, resolve the JVM jars, check PostgreSQL

postgres: $(STAMP) ## install Debian's postgresql package if missing (the tests' throwaway Iceberg catalog server)
	@$(BIN)/python -m local_services.postgres install >/dev/null

lock: ## resolve pyproject.toml (with the dev extra) into $(LOCK), keeping pins that still fit; LOCK_ARGS=--upgrade for the newest
	@test -x $(LOCK_TOOLS)/bin/uv || { $(PYTHON) -m venv $(LOCK_TOOLS) && $(LOCK_TOOLS)/bin/pip install --quiet --disable-pip-version-check 'uv==$(UV_VERSION)'; }
	$(LOCK_TOOLS)/bin/uv pip compile pyproject.toml --extra dev $(LOCK_ARGS) \
		--python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
		--generate-hashes --custom-compile-command 'make lock' --quiet -o $(LOCK)

# The second set adds the PostgreSQL JDBC driver (a catalog on PostgreSQL, and the test session,
# which also serves one): resolved here, once, not by two test workers at the same time.
jars: $(STAMP) ## resolve the JVM jars once into ~/.cache/lakehouse-replay (outside git)
	@$(BIN)/lakehouse jars --conf $(CONF)
	@LAKEHOUSE__ICEBERG__URI=jdbc:postgresql://localhost/iceberg $(BIN)/lakehouse jars --conf $(CONF)

demo: $(STAMP) jars ## run the main job on the embedded default (work/ under this folder)
	$(BIN)/lakehouse demo --conf $(CONF)

# Two workers (pytest-xdist): one Spark driver keeps about 1.2 of 2 cores busy on tiny data,
# so a second driver fills the rest. Each test module is one unit of work (its history is
# built once); tests/conftest.py schedules them. WORKERS=0 runs in this process.
WORKERS ?= 2
XDIST = $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --no-loadscope-reorder)

# The JVM-free tier: no jars, no PostgreSQL, no Spark (tests/conftest.py gives the run a
# JAVA_HOME whose java refuses, so a test that needs Spark cannot slip in unmarked).
check: $(STAMP) lint ## lint and every test that starts no JVM (minutes): run it after every change
	$(BIN)/pytest $(XDIST) -m 'not spark' $(PYTEST_ARGS)

test: setup lint ## the whole suite: lint, unit, Spark integration on both formats, notebooks
	$(BIN)/pytest $(XDIST) --durations=30 $(PYTEST_ARGS)

test-fast: setup ## the suite without the slow end-to-end tests
	$(BIN)/pytest $(XDIST) -m 'not slow' $(PYTEST_ARGS)

lint: $(STAMP) ## ruff (lint + format check) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

docs: $(STAMP) ## regenerate the CLI reference (docs/reference/cli.md), fetch the pinned mermaid, build the site into site/ (mkdocs --strict)
	$(BIN)/python -m jobs.cli_reference
	$(BIN)/python -m docs_tools.mermaid
	$(BIN)/mkdocs build --strict

# The executed notebooks the site shows (docs/notebooks/, committed with their outputs): a
# fresh demo lake in .work/notebooks (Spark, about 11 min), then each notebook run on it with
# nbclient, then the check tests/test_notebooks_docs.py makes. NOTEBOOKS_ARGS="--reuse" keeps
# the lake of an earlier run; "--lake work --reuse" uses the one make demo built.
NOTEBOOKS_ARGS ?=

notebooks: setup ## execute notebooks/*.ipynb on a fresh demo lake (Spark) into docs/notebooks/, with their outputs, and check them
	$(BIN)/python -m docs_tools.notebooks execute $(NOTEBOOKS_ARGS)

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

BENCH_DIR ?= benchmarks/out
BENCH_EVENTS ?= 200000
BENCH_ROWS ?= 200000

bench: setup ## run the benchmarks small (prints ratios; not part of the suite); BENCH_EVENTS=1000000 for the figures in docs/benchmarks.md
	$(BIN)/python -m benchmarks pipeline --events $(BENCH_EVENTS) --workdir $(BENCH_DIR)/pipeline
	$(BIN)/python -m benchmarks replay --events $(BENCH_EVENTS)
	$(BIN)/python -m benchmarks asof --rows $(BENCH_ROWS) --workdir $(BENCH_DIR)/asof

clean-work: ## remove the demo work dir
	rm -rf work

clean: clean-work ## remove the virtualenv and caches (the jar cache in ~/.cache is kept)
	rm -rf $(VENV) $(LOCK_TOOLS) .mypy_cache .ruff_cache .pytest_cache *.egg-info site .cache

CLUSTER_ARGS ?= --catalog postgres

cluster-demo: setup ## the whole story job by job on a Spark standalone master + worker on 127.0.0.1 (spark-submit), with proof that executors ran it
	$(BIN)/python -m local_services.cluster_demo $(CLUSTER_ARGS)
