"""Every ``tools/*.py`` command answers bad input with one line naming the problem and a non-zero exit status, never
a traceback (``attn-lib`` itself: tests/test_cli.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The commands of tools/ (a module there without a ``__main__`` block, such as autograde.py, is a library).
TOOLS = sorted(p.name for p in (ROOT / "tools").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())

#: (tool, arguments) that must be refused; ``{tmp}`` is a fresh empty folder.
BAD = [
    ("chapters.py", ["nope"]),
    ("chapters.py", ["set-repository", 'https://github.com/o/r"; import os; x="']),
    ("chapters.py", ["set-repository"]),
    ("chapters.py", ["check", "--root", "{tmp}/missing"]),
    ("colab_env.py", ["--stages", "nope"]),
    ("colab_env.py", ["--python", "{tmp}/no-python", "--reuse", "--stages", "chapters", "--work", "{tmp}"]),
    ("sizes.py", ["{tmp}"]),
    ("sizes.py", ["--nope"]),
    ("student_book.py", ["nope"]),
    ("student_book.py", ["check", "--nope"]),
    ("vendor_js.py", ["--node-modules", "{tmp}/missing", "--dest", "{tmp}/out"]),
    ("vendor_js.py", ["--dest", "/proc/no-such-folder"]),
    ("warm_kernels.py", ["--processes", "0"]),
    ("warm_kernels.py", ["--processes", "many"]),
    ("assignments.py", ["nope"]),
    ("assignments.py", ["build", "no-such-assignment"]),
    ("assignments.py", ["grade", "no-such-assignment", "{tmp}"]),
    ("assignments.py", ["grade", "ch01_vanishing_attention", "{tmp}"]),  # a folder without notebooks
    ("assignments.py", ["grade", "ch01_vanishing_attention", "{tmp}/missing"]),
    ("assignments.py", ["grade", "ch01_vanishing_attention", "{tmp}", "--time-limit", "0"]),
    ("grade_notebook.py", []),
    ("grade_notebook.py", ["{tmp}/missing", "{tmp}/out"]),
]


def test_every_tool_is_exercised():
    assert {tool for tool, _ in BAD} == set(TOOLS), "a tool without a bad-input case here"


@pytest.mark.parametrize(("tool", "args"), BAD, ids=[f"{t} {' '.join(a)}" for t, a in BAD])
def test_bad_input_gets_one_line_and_no_traceback(tool, args, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert run.returncode != 0, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr, run.stderr
    assert run.stderr.strip(), "the problem must be named on stderr"


@pytest.mark.parametrize("tool", ["sizes.py"])
def test_a_reader_that_stops_early_gets_no_traceback(tool):
    """``sizes.py | head -1``: the pipe closes before the table is written; the command ends without a traceback."""
    for _ in range(5):  # the close races with the writes: a few tries make the broken pipe near certain
        run = subprocess.Popen(
            [sys.executable, str(ROOT / "tools" / tool)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
        )
        run.stdout.close()
        err = run.stderr.read().decode()
        run.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
