"""`make test` executes each chapter once: nbval's run is stored (book/conftest.py) and the book build reads it
(book/_ext/executed.py).

On a one-chapter book in a temporary folder (a printed marker and a slider): nbval runs it with
``ATTN_LIB_EXECUTED_CACHE`` set, the build then takes the chapter from that cache (its log says so, the page has the
marker and the slider's widget state) and warns about nothing; after the chapter's code changes, the build executes
it itself and warns that it did. About 20-30 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHAPTER = "book/91_cached_demo"
SOURCE = """\
---
jupytext:
  formats: ipynb,md:myst
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3 (ipykernel)
  language: python
  name: python3
---

# A chapter nbval executes once

```{code-cell} ipython3
import ipywidgets

print("MARKER-" + "one")
```

```{code-cell} ipython3
ipywidgets.IntSlider(value=3, min=0, max=9, description="demo")
```
"""
WARNING = "was executed by the book build"
# a page with code but no .ipynb twin (as the instructor guide): nbval never runs it, the build executes it once
NO_TWIN = "book/92_page_without_twin"
NO_TWIN_SOURCE = SOURCE.replace("# A chapter nbval executes once", "# A page only the build executes").replace(
    '"one"', '"page"'
)


def _write_chapter(root: Path, text: str) -> None:
    (root / f"{CHAPTER}.md").write_text(text, encoding="utf-8")
    jupytext.write(jupytext.reads(text, fmt="md:myst"), root / f"{CHAPTER}.ipynb", fmt="ipynb")


def _env(cache: Path) -> dict:
    return {**os.environ, "ATTN_LIB_EXECUTED_CACHE": str(cache)}


def _build(root: Path, cache: Path, out: str) -> tuple[str, str]:
    cmd = [str(BIN / "jupyter-book"), "build", str(root), "--path-output", str(root / out), "--all", "-v"]
    done = subprocess.run(cmd, cwd=root, env=_env(cache), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    page = (root / out / "_build" / "html" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    return done.stdout + done.stderr, page


@pytest.fixture(scope="module")
def small_book(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("executed")
    (root / "book").mkdir()
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(ROOT / "book" / "_ext", root / "book" / "_ext")
    shutil.copy(ROOT / "book" / "conftest.py", root / "book" / "conftest.py")
    (root / "_toc.yml").write_text(
        f"format: jb-book\nroot: {CHAPTER}\nchapters:\n  - file: {NO_TWIN}\n", encoding="utf-8"
    )
    (root / f"{NO_TWIN}.md").write_text(NO_TWIN_SOURCE, encoding="utf-8")
    _write_chapter(root, SOURCE)
    return root


@pytest.fixture(scope="module")
def cache(small_book) -> Path:
    folder = small_book / "_build" / "executed"
    cmd = [str(BIN / "pytest"), "--nbval-lax", f"{CHAPTER}.ipynb", "-p", "no:cacheprovider", "-q"]
    done = subprocess.run(cmd, cwd=small_book, env=_env(folder), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    return folder


def test_nbval_stores_the_chapter_it_executed(cache):
    from jupyter_cache import get_cache

    records = get_cache(str(cache)).list_cache_records()
    assert [r.data.get("executed_by") for r in records] == ["nbval"]
    nb = get_cache(str(cache)).get_cache_bundle(records[0].pk).nb
    outputs = [o for c in nb.cells for o in c.outputs]
    assert any("MARKER-one" in o.get("text", "") for o in outputs)
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert "IntSliderModel" in {m["model_name"] for m in state.values()}
    assert nb.metadata["language_info"]["pygments_lexer"] == "ipython3"


def test_the_build_reads_the_chapter_from_nbvals_run(small_book, cache):
    log, page = _build(small_book, cache, "from-cache")
    assert "Using cached notebook" in log
    assert WARNING not in log  # nor for the page without a twin, which the build executed
    page_log = [line for line in log.splitlines() if NO_TWIN in line]
    assert any("Executed notebook" in line for line in page_log)
    assert "MARKER-one" in page
    assert "IntSliderModel" in page  # the slider's state, for the page without a kernel


def test_a_chapter_missing_from_the_cache_is_executed_and_reported(small_book, cache):
    _write_chapter(small_book, SOURCE.replace('"one"', '"two"'))
    try:
        log, page = _build(small_book, cache, "changed")
    finally:
        _write_chapter(small_book, SOURCE)
    assert WARNING in log
    assert "MARKER-two" in page
