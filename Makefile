# `make eval` and `make test` each create .venv when it is missing and install the project.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Arize Phoenix, the trace receiver of the OpenTelemetry tests, in a virtualenv of its own
# (its requirements clash with the project's pins; tests/integration/phoenix.py starts it).
PHOENIX_VENV  := $(VENV)/phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
PHOENIX_REQS  := tests/integration/phoenix-requirements.txt

.PHONY: eval test lint bench clean

# Some machines set this; without .pyc caches every pytest run (and each in-process
# pytester run) recompiles and re-rewrites every module, which makes the suite ~4x slower.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,lint,frameworks]'
	touch $(STAMP)

$(PHOENIX_STAMP): $(PHOENIX_REQS)
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install -q -r $(PHOENIX_REQS)
	touch $(PHOENIX_STAMP)

# The pull-request job on this repository's own scenarios: no key, no Docker, no network.
eval: $(STAMP)
	$(BIN)/pytest -m pr --repeat 1 scenarios

# The plugin's own test suite.
test: $(STAMP) $(PHOENIX_STAMP)
	$(BIN)/pytest tests -p no:cacheprovider -n 2

# ruff (lint and format) and mypy strict on the package; .ci/run runs it before the tests.
# mypy cannot follow the editable install to fakes/, which installs as pytest_nodeval_fakes:
# a link under that name in .venv/typecheck (pyproject.toml's mypy_path) shows it the way.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	mkdir -p $(VENV)/typecheck && ln -sfn ../../fakes $(VENV)/typecheck/pytest_nodeval_fakes
	$(BIN)/mypy

# Replay against the SDK floor and vcrpy (benchmarks/README.md has the figures and the rest).
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/replay_vs_peers.py --suite 100 1000

clean:
	rm -rf $(VENV) reports/*/ .pytest_cache
