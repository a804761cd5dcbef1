"""book/_ext/progress.py: the book build's line per page, and the failing cell before any traceback.

A two-notebook Sphinx project with MyST-NB, executed as the book executes its chapters: one page runs, one fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CONF = f"""
import sys
sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
extensions = ["myst_nb", "progress"]
nb_execution_mode = "force"
nb_execution_raise_on_error = True
"""


def _project(tmp: Path, second: str) -> Path:
    (tmp / "conf.py").write_text(CONF)
    (tmp / "index.md").write_text("# Book\n\n```{toctree}\nfirst\nsecond\n```\n")
    for name, src in (("first", "x = 6 * 7\nprint(x)"), ("second", second)):
        nb = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_markdown_cell(f"# {name}"), nbformat.v4.new_code_cell(src)]
        )
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp / f"{name}.ipynb")
    return tmp


def _build(src: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(src / "_out")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))


def test_each_page_gets_a_line_with_its_time(tmp_path):
    run = _build(_project(tmp_path, "print('fine')"))
    assert run.returncode == 0, run.stderr
    for name in ("first", "second"):
        assert f"book: {name} ...\n" in run.stderr
        assert re.search(rf"^book: {name} done in \d+\.\d s \(\d+/\d+\)$", run.stderr, re.M), run.stderr


def test_a_failing_cell_and_its_error_come_before_the_traceback(tmp_path):
    run = _build(_project(tmp_path, "def halve(n):\n    return n / 0\n\nhalve(3)"))
    assert run.returncode != 0
    err = run.stderr
    first = err.index("book: FAILED while reading second")
    assert first < err.index("def halve(n):") < err.index("ZeroDivisionError")
    assert err.index("ZeroDivisionError") < err.index("Exception occurred")  # Sphinx's own report comes after
