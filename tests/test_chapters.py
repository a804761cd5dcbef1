"""The chapter format: one MyST Markdown source per chapter, an .ipynb twin in step with it, short code cells and
the shared Colab cell (tools/chapters.py). Each rule is also shown failing on a broken copy of the book."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("chapters_tool", ROOT / "tools" / "chapters.py")
chapters_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chapters_tool)


def test_the_book_is_in_order():
    assert chapters_tool.problems(ROOT) == []


def test_every_chapter_has_a_markdown_source_and_a_twin():
    sources = chapters_tool.chapters(ROOT / "book")
    assert len(sources) >= 5
    for md in sources:
        assert md.with_suffix(".ipynb").exists(), md.name


FIXTURE_CHAPTER = """\
---
accelerator: GPU
colab:
  gpuType: T4
  provenance: []
jupytext:
  formats: ipynb,md:myst
  notebook_metadata_filter: accelerator,colab
kernelspec:
  display_name: Python 3 (ipykernel)
  language: python
  name: python3
---

# A fixture chapter

```{code-cell} ipython3
:tags: [remove-cell, colab-setup]

pass
```

Some prose.

```{code-cell} ipython3
x = 1
assert x == 1
```
"""


@pytest.fixture
def book_copy(tmp_path: Path) -> Path:
    """A minimal book in order (config, shared Colab template, one chapter and its twin), in order to break it."""
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    shutil.copytree(ROOT / "book" / "_shared", tmp_path / "book" / "_shared")
    (tmp_path / "book" / "01_fixture.md").write_text(FIXTURE_CHAPTER)
    chapters_tool.sync(tmp_path)
    assert chapters_tool.problems(tmp_path) == [], "the fixture starts in order"
    return tmp_path


def _first_chapter(root: Path) -> Path:
    return chapters_tool.chapters(root / "book")[0]


def test_an_edited_markdown_source_makes_its_twin_stale(book_copy):
    md = _first_chapter(book_copy)
    md.write_text(md.read_text() + "\nOne more sentence.\n")
    assert any("out of sync" in p for p in chapters_tool.problems(book_copy))
    chapters_tool.sync(book_copy)
    assert chapters_tool.problems(book_copy) == []


def test_a_notebook_without_markdown_source_is_reported(book_copy):
    shutil.copy(_first_chapter(book_copy).with_suffix(".ipynb"), book_copy / "book" / "99_orphan.ipynb")
    assert any("99_orphan.ipynb: notebook without its Markdown source" in p for p in chapters_tool.problems(book_copy))


def test_a_long_code_cell_is_reported(book_copy):
    md = _first_chapter(book_copy)
    body = "\n".join(f"x{i} = {i}" for i in range(chapters_tool.MAX_CELL_LINES + 1))
    md.write_text(md.read_text() + f"\n```{{code-cell}} ipython3\n{body}\n```\n")
    chapters_tool.sync(book_copy)
    found = chapters_tool.problems(book_copy)
    assert any(f"has {chapters_tool.MAX_CELL_LINES + 1} lines" in p for p in found), found


def test_a_cell_of_exactly_the_limit_is_accepted(book_copy):
    md = _first_chapter(book_copy)
    body = "\n".join(f"x{i} = {i}" for i in range(chapters_tool.MAX_CELL_LINES))
    md.write_text(md.read_text() + f"\n```{{code-cell}} ipython3\n{body}\n```\n")
    chapters_tool.sync(book_copy)
    assert chapters_tool.problems(book_copy) == []


def test_outputs_in_a_notebook_are_reported(book_copy):
    import nbformat

    twin = _first_chapter(book_copy).with_suffix(".ipynb")
    nb = nbformat.read(twin, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    nbformat.write(nb, twin)
    assert chapters_tool.output_problems(book_copy / "book")


def test_a_hand_edited_colab_cell_is_reported_and_sync_restores_it(book_copy):
    md = _first_chapter(book_copy)
    md.write_text(md.read_text().replace('"-q"', '"-q", "--upgrade"', 1))
    assert any("Colab cell differs" in p for p in chapters_tool.problems(book_copy))
    chapters_tool.sync(book_copy)
    assert chapters_tool.problems(book_copy) == []


def test_a_chapter_without_the_gpu_request_is_reported(book_copy):
    md = _first_chapter(book_copy)
    md.write_text(md.read_text().replace("accelerator: GPU\n", "", 1))
    assert any("accelerator: GPU" in p for p in chapters_tool.problems(book_copy))


def test_the_colab_cell_installs_from_the_configured_repository():
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    source = chapters_tool.colab_source(ROOT)
    assert f'REPO = "{url}"' in source and "git+{REPO}" in source and "google.colab" in source


def test_the_command_line_exits_non_zero_on_a_problem(book_copy):
    shutil.copy(_first_chapter(book_copy).with_suffix(".ipynb"), book_copy / "book" / "98_orphan.ipynb")
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "chapters.py"), "check", "--root", str(book_copy)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "98_orphan.ipynb" in run.stderr


def test_a_notebook_with_merge_conflict_markers_is_reported_not_a_crash(book_copy):
    twin = _first_chapter(book_copy).with_suffix(".ipynb")
    twin.write_text("<<<<<<< HEAD\n" + twin.read_text() + "=======\n>>>>>>> branch\n")
    found = chapters_tool.problems(book_copy)
    assert any("not a readable notebook" in p for p in found), found
    chapters_tool.sync(book_copy)
    assert chapters_tool.problems(book_copy) == []
