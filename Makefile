# The two quick-start commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test fast typecheck lint clean

$(STAMP): setup.cfg setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[embedded,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py
	$(BIN)/python examples/logfanout/demo.py

test: lint typecheck
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/python -m flake8 minitask tests examples

typecheck: $(STAMP)
	$(BIN)/python -m mypy

fast: $(STAMP)
	$(BIN)/python -m pytest -m "not integration and not crash and not scale" -q

clean:
	rm -rf $(VENV) build *.egg-info
