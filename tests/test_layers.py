"""The library's core does not depend on the book's helpers: no module outside ``attn_lib/book/`` imports
``attn_lib.book`` (absolute or relative, at module level or inside a function), and ``import attn_lib`` loads none
of it. The book's helpers may import the core, never the other way round."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attn_lib"
BOOK = PACKAGE / "book"


def _package_of(path: Path) -> str:
    """The package a module file's relative imports start from (``attn_lib.report`` for attn_lib/report/x.py)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1])


def imported_modules(source: str, package: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``source`` names, relative ones resolved from
    ``package`` (for ``from a import b`` both ``a`` and ``a.b``, since ``b`` may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _book_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m == "attn_lib.book" or m.startswith("attn_lib.book."))


@pytest.mark.parametrize(
    ("source", "package", "imports_book"),
    [
        ("from ..book import toy", "attn_lib.report", True),
        ("from . import book", "attn_lib", True),
        ("from .book.widgets import precomputed_slider", "attn_lib", True),
        ("import attn_lib.book.widgets", "attn_lib.report", True),
        ("from attn_lib.book.exercises import feedback", "attn_lib", True),
        ("def f():\n    from attn_lib import book\n", "attn_lib.metrics", True),
        ("from .book import toy", "attn_lib.report", False),  # attn_lib.report.book, not the book
        ("from attn_lib import report, theory", "attn_lib", False),
    ],
)
def test_the_scan_sees_every_spelling_of_an_import_of_the_book(source, package, imports_book):
    assert bool(_book_modules(imported_modules(source, package))) is imports_book


def test_no_core_module_imports_the_book():
    core = sorted(p for p in PACKAGE.rglob("*.py") if BOOK not in p.parents)
    assert len(core) > 20, f"the scan found only {len(core)} core modules"
    offenders = {}
    for path in core:
        found = _book_modules(imported_modules(path.read_text(encoding="utf-8"), _package_of(path)))
        if found:
            offenders[str(path.relative_to(PACKAGE.parent))] = found
    assert not offenders, f"core modules that import attn_lib.book (move what they share into the core): {offenders}"


def test_import_attn_lib_loads_nothing_of_the_book():
    code = "import sys, attn_lib; print(sorted(m for m in sys.modules if m.startswith('attn_lib.book')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def test_no_core_module_imports_the_accelerator():
    """The compiled kernels of ``attn_lib/accel/`` register themselves through the entry-point group
    ``attn_lib.accelerators``; no other module imports ``attn_lib.accel`` (the scan is the one above)."""
    accel = PACKAGE / "accel"
    core = sorted(p for p in PACKAGE.rglob("*.py") if accel not in p.parents)
    assert len(core) > 20, f"the scan found only {len(core)} core modules"
    offenders = {}
    for path in core:
        found = imported_modules(path.read_text(encoding="utf-8"), _package_of(path))
        found = sorted(m for m in found if m == "attn_lib.accel" or m.startswith("attn_lib.accel."))
        if found:
            offenders[str(path.relative_to(PACKAGE.parent))] = found
    assert not offenders, f"modules that import attn_lib.accel (look it up in metrics._engine instead): {offenders}"
    assert imported_modules("from ..accel import kernels", "attn_lib.metrics") >= {"attn_lib.accel"}


def test_import_attn_lib_loads_neither_the_accelerator_nor_numba():
    code = (
        "import sys, attn_lib, attn_lib.experiments, attn_lib.report; "
        "print(sorted(m for m in sys.modules if m.startswith('attn_lib.accel') or m.split('.')[0] == 'numba'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def test_every_subpackage_is_installed():
    """``[tool.setuptools.packages.find]`` finds every folder of Python modules (a folder without ``__init__.py``
    would import from a checkout but be missing from the wheel)."""
    import tomllib

    from setuptools import find_packages

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    found = set(find_packages(str(PACKAGE.parent), **config["tool"]["setuptools"]["packages"]["find"]))
    folders = {
        ".".join(d.relative_to(PACKAGE.parent).parts)
        for d in [PACKAGE, *PACKAGE.rglob("*")]
        if d.is_dir() and any(d.glob("*.py"))
    }
    assert {"attn_lib.book", "attn_lib.book.toy", "attn_lib.book.exercises"} <= folders
    assert folders <= found, f"not installed: {sorted(folders - found)}"
