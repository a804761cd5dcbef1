"""tools/sizes.py: the non-blank line counts of attn_lib's parts and the core's public names, and one line of error
for bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIZES = ROOT / "tools" / "sizes.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SIZES), *args], capture_output=True, text=True, timeout=120)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def package(tmp_path):
    """A package with 2 + 3 core lines (and blank ones), 1 accelerator line, 2 book lines and 3 distinct core names."""
    pkg = tmp_path / "attn_lib"
    _write(pkg / "__init__.py", '__all__ = ["a", "b"]\n\n\nx = 1\n')
    _write(pkg / "sub" / "m.py", "__all__: list[str] = ['b', 'c']\n   \n__all__ += ['a']\ny = 2\n")
    _write(pkg / "accel" / "k.py", "\n__all__ = ['fast']\n")
    _write(pkg / "book" / "toy.py", "__all__ = ('d',)\n\nz = 3\n")
    _write(pkg / "notes.txt", "not counted\n")
    return pkg


def test_counts_each_part_of_a_package(package):
    out = run(str(package), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"core": 5, "accel": 1, "book": 2, "package": 8, "core __all__ names": 3}


def test_prints_every_part_of_this_repository():
    out = run()
    assert out.returncode == 0 and out.stderr == "", out.stderr
    for label in ("core", "accel", "book", "package", "distinct names in the core's __all__ lists"):
        assert label in out.stdout
    got = json.loads(run("--json").stdout)
    assert got["package"] == got["core"] + got["accel"] + got["book"] and got["core"] > 0


@pytest.mark.parametrize(
    "args, says",
    [(["--frobnicate"], "unrecognized arguments"), (["/no/such/attn_lib"], "package must be"), (["a", "b"], "unrec")],
)
def test_bad_arguments_give_one_line(args, says):
    out = run(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and says in out.stderr and "Traceback" not in out.stderr


def test_a_file_that_is_not_python_gives_one_line(package):
    (package / "broken.py").write_text("def (:\n")
    out = run(str(package))
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1 and "cannot read" in out.stderr
