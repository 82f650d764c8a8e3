# Every target that runs code depends on .venv, which is built on first use, so a
# fresh machine needs nothing but python3 (>= 3.11).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The peers stead's benchmarks compare it with (LangGraph, DBOS) and matplotlib
# for the chart live in their own venv, so stead's stays lean.
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS_REQS := bench/peers/requirements.txt

.PHONY: demo test test-fast lint typecheck docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/stead demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# the inner loop: everything but the tests that kill real processes (CI runs all)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not chaos"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench docsgen docs/conf.py
	$(BIN)/ruff format --check src tests bench docsgen docs/conf.py

typecheck: $(STAMP)
	$(BIN)/mypy --strict src docsgen

# the documentation site, strictly: any warning (a broken link, a missing page, a
# docstring autodoc cannot read) fails the build; -E reads every page afresh, as the
# reference pages and captions are made from the code at each build
docs: $(STAMP)
	$(BIN)/sphinx-build -q -E -W --keep-going -b html docs docs/_build/html

$(PEERS_STAMP): $(PEERS_REQS)
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r $(PEERS_REQS)
	touch $(PEERS_STAMP)

bench: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(PEERS_VENV) .stead .stead-demo .pytest_cache .mypy_cache .ruff_cache docs/_build
