# gpu-drills: two commands on a fresh machine — `make drill` and `make test`.
# Every target bootstraps what it needs and is idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
ARGS ?=
# Test workers: the e2e tests mostly wait on twins' dilated clocks; a file's tests stay on one worker (module
# twins are set up once), handed out longest first (tests/file_weights.json, --no-loadscope-reorder). On 2 cores 4
# workers are CPU-bound, so the suite's CPU sets its time: 15.2 minutes of CPU made 8m36s-8m47s; with the twins'
# components answered in-process and no charts in --no-html runs, 11.4-12.6 minutes make 7m23s-7m53s from a clean
# clone (wave 3's 3,548 tests: 12.0-13.7 minutes of CPU, 7m35s-8m18s in seven runs with weights from a run scheduled
# as this one; with the exporters' own text writer and the other cuts py-spy found, 10.5-12.5 minutes: 7m02s-7m51s in seven runs, mean 7m26s).
TEST_WORKERS ?= 4
# pytest caches the assert-rewritten test modules only where Python may write bytecode: with
# PYTHONDONTWRITEBYTECODE set, the master and each worker rewrote all 150 of them (collection 7.4 → 3.1 s each).
RUN_ENV := env -u PYTHONDONTWRITEBYTECODE
PYTEST := $(RUN_ENV) $(BIN)/python -m pytest
ASSERTS := $(VENV)/.asserts-stamp
TEST_SOURCES := conftest.py $(shell find tests fixtures features -name '*.py' -not -path '*/__pycache__/*')

.PHONY: bootstrap system-deps node-deps bytecode drill test check twin revert clean bench verdicts

# The venv and the Allure CLI install side by side, then our bytecode (and, for `make test`, the asserts' cache).
bootstrap: system-deps
	@$(MAKE) --no-print-directory -j2 $(STAMP) node-deps
	@$(MAKE) --no-print-directory -j2 bytecode $(BOOT_EXTRA)

# Our modules' bytecode, refreshed where the source changed: each drill starts Python processes (a lane, a
# twin), and where PYTHONDONTWRITEBYTECODE is set none of them caches what it compiles (≈ 0.3 s of CPU each).
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 drills fixtures features tests bench > /dev/null

# System packages (fio, chromium, fonts): installed only when missing and we are root.
system-deps:
	@bash scripts/bootstrap-system.sh

# Allure CLI (npm allure-commandline, pinned in package-lock.json) into ./node_modules.
node-deps: node_modules/.bin/allure

node_modules/.bin/allure: package-lock.json
	@npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The package and its test extras with uv (from PyPI, into the venv): resolving, unpacking and linking ~100 wheels
# takes pip 36 s of wall on a clean clone, uv 3 s (its cache is ~/.cache/uv). Not compiled at install: compiling
# every installed module took 7.5 s of wall (16 s of CPU) while a run imports a part of them; `make drill` and
# `make test` run with PYTHONDONTWRITEBYTECODE unset (RUN_ENV), so what they import is compiled once, on first
# import, and cached in the venv (a clean clone's `make test` 7m23s → 7m10s, 11.4 → 11.1 minutes of CPU).
# Without uv (no route to PyPI for it, or an index only pip is configured for), pip does it.
# The venv is made without pip (venv's ensurepip took 4.5 of the 18 s on a clean clone): uv, fetched once with the
# interpreter's own pip into a scratch folder, installs pip and itself into the venv along with the package.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	@uv=$(BIN)/uv; test -x $$uv || { $(PYTHON) -m pip install -q --target $(VENV)/.uv-boot uv 2>/dev/null && uv=$(VENV)/.uv-boot/bin/uv; }; \
	if test -x $$uv && $$uv pip install -q --python $(BIN)/python pip uv -e '.[test]'; then :; \
	else { $(BIN)/python -m pip --version > /dev/null 2>&1 || $(BIN)/python -m ensurepip -q; } && \
	$(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[test]'; fi
	@rm -rf $(VENV)/.uv-boot
	@touch $(STAMP)

drill: bootstrap
	$(RUN_ENV) $(BIN)/drills run $(ARGS)

test: BOOT_EXTRA = $(ASSERTS)
test: bootstrap
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(ARGS)

# pytest rewrites the asserts of each test module, conftest and plugin when it imports them, and caches the result
# beside their bytecode; on a fresh clone every worker did it at once (≈ 8 s of CPU each before its first test,
# 3 s once cached: 16 s of wall on 2 cores with 4 workers). scripts/warm_asserts.py writes that cache first.
$(ASSERTS): $(STAMP) $(TEST_SOURCES)
	@env -u PYTHONDONTWRITEBYTECODE $(BIN)/python scripts/warm_asserts.py > /dev/null
	@touch $@

# The edit-test loop: unit tests and one smoke drill per kind against the twin (under a minute).
check: bootstrap
	$(PYTEST) -n 2 -q tests/unit -m "not slow" $(ARGS)
	$(PYTEST) -q -m smoke tests/e2e $(ARGS)

twin: bootstrap
	$(RUN_ENV) $(BIN)/drills twin up $(ARGS)

revert: bootstrap
	$(RUN_ENV) $(BIN)/drills revert $(ARGS)

bench: bootstrap
	$(RUN_ENV) $(BIN)/python bench/twin_api.py

# Every defect against the drill it must break (bench/verdicts.yaml), a fresh twin each: prints the table
# construction → expected → actual → reason and writes reports/verdicts.md. Long-running; not part of `make test`.
verdicts: bootstrap
	$(RUN_ENV) $(BIN)/python bench/verdicts.py $(ARGS)

clean:
	rm -rf $(VENV) node_modules
