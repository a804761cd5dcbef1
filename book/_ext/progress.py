"""Local Sphinx extension: one line per chapter on the terminal while the book builds, and the failing cell first.

Executing a chapter takes minutes on a 2-core machine, and Sphinx says nothing meanwhile. This extension prints,
on stderr and flushed at once,

* ``book: <page> ...`` when Sphinx starts reading a page (for a chapter, MyST-NB executes it then), and
  ``book: <page> done in 93.4 s (2/9)`` when its document is ready;
* when the build fails, before anything else Jupyter Book prints, the name of the page that was being read, the
  failing cell's source and its error (the ``CellExecutionError`` MyST-NB raises from), and any execution report
  MyST-NB wrote (``<outdir>/reports/<page>.err.log``), so that the cause does not drown in the traceback of a
  kernel's shutdown.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sphinx.application import Sphinx

#: Lines of each failure report shown (the cell and its error come first in MyST-NB's report).
REPORT_LINES = 80


def _say(line: str) -> None:
    print(f"book: {line}", file=sys.stderr, flush=True)


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    app.env._progress_start = (docname, time.perf_counter())  # type: ignore[attr-defined]
    _say(f"{docname} ...")


def _doctree_read(app: Sphinx, doctree) -> None:
    docname = app.env.docname
    start = getattr(app.env, "_progress_start", None)
    if start and start[0] == docname:
        done = getattr(app.env, "_progress_done", 0) + 1
        app.env._progress_done = done  # type: ignore[attr-defined]
        total = len(getattr(app.env, "found_docs", ())) or "?"
        _say(f"{docname} done in {time.perf_counter() - start[1]:.1f} s ({done}/{total})")


def _build_finished(app: Sphinx, exception: BaseException | None) -> None:
    if exception is None:
        return
    start = getattr(app.env, "_progress_start", None) if app.env else None
    _say(f"FAILED while reading {start[0] if start else 'the book'}: {type(exception).__name__}: {exception}")
    cause = exception.__cause__  # MyST-NB raises from nbclient's CellExecutionError: the cell and its error
    if cause is not None:
        lines = str(cause).splitlines()
        _say(f"the failing cell and its error ({type(cause).__name__}, first {min(len(lines), REPORT_LINES)} lines):")
        print("\n".join(lines[:REPORT_LINES]), file=sys.stderr, flush=True)
    for report in sorted(Path(app.outdir, "reports").glob("**/*.err.log")):
        lines = report.read_text(encoding="utf-8", errors="replace").splitlines()
        _say(f"execution report {report} (first {min(len(lines), REPORT_LINES)} of {len(lines)} lines):")
        print("\n".join(lines[:REPORT_LINES]), file=sys.stderr, flush=True)


def setup(app: Sphinx) -> dict:
    app.connect("source-read", _source_read)
    app.connect("doctree-read", _doctree_read)
    app.connect("build-finished", _build_finished, priority=100)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
