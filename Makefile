# TokenPulse: `make up` starts the local stack, `make test` runs the suite.
# Both set up what is missing first (venv, pinned Python packages, Debian packages).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STACK_STAMP := $(VENV)/.installed-stack
# uv installs the lock into the venv: from a cold cache 9.5 s here against pip's 50 s, the same
# distributions at the same versions (`pip freeze` of both venvs differs by uv alone), and a warm
# cache makes a second venv (`stack-venv`, as a test builds it) a matter of seconds. uv does not
# read pip's configuration: behind a mirror, set UV_DEFAULT_INDEX (or UV_INDEX_URL) as well.
UV_VERSION := 0.13.9
UV := $(BIN)/uv
# grafana-client's niquests needs urllib3-future, whose wheel overwrites urllib3 in place (breaking
# requests and elastic-transport). Built from source with URLLIB3_NO_OVERRIDE it installs beside
# urllib3 as `urllib3_future`, which niquests uses as is.
# uv, unlike pip, leaves the installed modules without bytecode, and where PYTHONDONTWRITEBYTECODE is
# set (it is on this project's CI machines) every process then compiled what it imported, each
# time: TensorFlow's import took 5.3 CPU-s instead of 2.4, in each of the ~150 processes of a run
# that import it (model servers, trainers, CLIs). Compiling the venv once costs ~25 CPU-s.
UV_COMPILE ?= --compile-bytecode
PIP_INSTALL := URLLIB3_NO_OVERRIDE=1 $(UV) pip install -q $(UV_COMPILE) --python $(BIN)/python --no-binary urllib3-future
MODELS ?= models
PRESET ?= default

.PHONY: up test test-fast lint typecheck debs venv stack-venv model clean-models bench

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(UV): | $(BIN)/python
	$(BIN)/pip install -q uv==$(UV_VERSION)

# Everything the tests and tools need: the whole lock.
$(STAMP): pyproject.toml requirements.lock | $(UV)
	$(PIP_INSTALL) -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	@touch $(STAMP)

# What `make up` runs: every component's set (the `all` extra) plus the `stack` extra, at the
# lock's versions.
$(STACK_STAMP): pyproject.toml requirements.lock scripts/requirements.py | $(UV)
	$(BIN)/python scripts/requirements.py all stack > $(VENV)/stack-requirements.txt
	$(PIP_INSTALL) -r $(VENV)/stack-requirements.txt -c requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	@touch $(STACK_STAMP)

# The development tools (devtools/: benches, stand-ins, the test stack) are not in the wheel, so
# the editable install does not map them; this venv puts the checkout on sys.path so that
# `.venv/bin/tokenpulse bench` finds them. `make up`'s venv (stack-venv) stays without them.
DEVTOOLS_PTH := $(VENV)/.devtools-on-path
$(DEVTOOLS_PTH): $(STAMP)
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "tokenpulse-checkout.pth").write_text("$(CURDIR)\n")'
	@touch $(DEVTOOLS_PTH)

venv: $(STAMP) $(DEVTOOLS_PTH)

# `make up`'s venv alone (`make VENV=/tmp/v stack-venv` builds one elsewhere, as a test does).
stack-venv: $(STACK_STAMP)

debs:
	@bash scripts/ensure-debs.sh

model: venv
	$(BIN)/tokenpulse model build --preset $(PRESET) --base-path $(MODELS)/gen --version 1

up: $(STACK_STAMP)
	@bash scripts/ensure-debs.sh stack
	$(BIN)/tokenpulse up --preset $(PRESET)

# `-n auto`: a worker per core for the modules that compute, and a worker per lane beside them
# (tests/support/scheduling.py). A lane (a drill shard's stack, the e2e stacks, the shared alerting
# stack) mostly waits on clocks, so it runs alone on its worker instead of holding a core's worker
# idle; every other module goes to the per-core workers, whole.
PYTEST_WORKERS ?= auto
# The suite starts some 350 Python processes, and where PYTHONDONTWRITEBYTECODE is set (it is on
# this project's CI machines) each compiled the tree's modules again; bytecode written once
# beforehand is read even then (about 0.2 CPU-s a process, for 7 CPU-s once). The packages are
# named, not `.` with -x: -x skips files but still walks the venv's 100,000 (6 s of every run).
BYTECODE := $(BIN)/python -m compileall -q -j0 $(dir $(wildcard */__init__.py)) scripts
# pytest rewrites each test module's asserts before it imports it, and keeps the result beside the
# module's bytecode only where bytecode may be written, so with PYTHONDONTWRITEBYTECODE every worker
# rewrote every test module; a collection without it, beside the compile, leaves that for the
# workers to read (a worker's collection: 14.3 CPU-s before, 8.4 after), in two halves side by
# side (tests/support/rewrite.py: 5.9 s instead of 9.5). A module that fails to
# collect says so in the run itself. Only when a file under tests/ changed since the last one
# (the stamp): otherwise the results are there, and the collection is 5 s of every inner loop.
REWRITE_STAMP := $(VENV)/.tests-rewritten
REWRITTEN := if [ ! -e $(REWRITE_STAMP) ] || [ -n "$$(find tests -name '*.py' -newer $(REWRITE_STAMP) | head -1)" ]; then \
	touch $(REWRITE_STAMP).new; $(BIN)/python -m tests.support.rewrite; \
	mv $(REWRITE_STAMP).new $(REWRITE_STAMP); fi

test: venv debs
	@$(BYTECODE) & $(REWRITTEN); wait
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# The inner loop: no running stack, no TensorFlow training (markers the collection applies from
# what each test and its fixtures call: tests/support/markers.py) and nothing `slow` (venv builds,
# kill loops, benches end to end, the promtool scenario files), on the workers
# tests/support/scheduling.py's fast_workers() counts (why two per core and one per clocks lane
# is there): a worker per core left ~0.8 of 2 cores idle; on 2 cores, 4 workers took 200-211 s,
# 5 took 187 s and 6, 193 s (each worker collects: ~5 CPU-s), with one clocks lane; that lane,
# 160 s alone, then bound the run (178 s), so there are two.
FAST := -m "not stack and not training and not slow"
FAST_WORKERS = $$($(BIN)/python -c 'from tests.support.scheduling import fast_workers; print(fast_workers())')
test-fast: venv debs
	@$(BYTECODE) & $(REWRITTEN); wait
	$(BIN)/python -m pytest -n $(FAST_WORKERS) --dist loadscope $(FAST) $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: venv
	$(BIN)/mypy

bench: venv
	$(BIN)/tokenpulse bench model

clean-models:
	rm -rf $(MODELS) .cache/tokenpulse
