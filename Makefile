# TokenPulse: `make up` starts the local stack, `make test` runs the suite.
# Both set up what is missing first (venv, pinned Python packages, Debian packages).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODELS ?= models
PRESET ?= default

.PHONY: up test lint typecheck debs venv model clean-models bench

$(STAMP): pyproject.toml requirements.lock
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# grafana-client's niquests needs urllib3-future, whose wheel overwrites urllib3 in place
	# (breaking requests and elastic-transport). Built from source with URLLIB3_NO_OVERRIDE it
	# installs beside urllib3 as `urllib3_future`, which niquests uses as is.
	URLLIB3_NO_OVERRIDE=1 $(BIN)/pip install -q --no-binary urllib3-future -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	@touch $(STAMP)

venv: $(STAMP)

debs:
	@bash scripts/ensure-debs.sh

model: venv
	$(BIN)/tokenpulse model build --preset $(PRESET) --base-path $(MODELS)/gen --version 1

up: venv
	@bash scripts/ensure-debs.sh stack
	$(BIN)/tokenpulse up --preset $(PRESET)

test: venv debs
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

bench: venv
	$(BIN)/tokenpulse bench model

clean-models:
	rm -rf $(MODELS) .cache/tokenpulse
