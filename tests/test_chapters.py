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
# runs a model: the chapter asks for a GPU
handle, text = chapter.load_inputs(cfg)
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
    assert any(
        "runs a model, so its header must request a Colab GPU runtime" in p for p in chapters_tool.problems(book_copy)
    )


def test_a_chapter_without_a_model_asks_for_a_cpu(book_copy):
    """A model call inside a solution does not count; a GPU request there is reported, and dropping it is in order."""
    md = _first_chapter(book_copy)
    solution = "```{solution-start} ex-x\n:label: sol-x\n```\n\n```{code-cell} ipython3\nh = chapter.load_inputs(cfg)\n```\n\n```{solution-end}\n```\n"
    text = md.read_text().replace(
        "# runs a model: the chapter asks for a GPU\nhandle, text = chapter.load_inputs(cfg)\n", ""
    )
    md.write_text(text + "\n" + solution)
    chapters_tool.sync(book_copy)
    assert not chapters_tool.needs_gpu(md.read_text())
    assert any("runs no model, so it must request a Colab CPU runtime" in p for p in chapters_tool.problems(book_copy))
    md.write_text(md.read_text().replace("accelerator: GPU\n", "", 1))
    chapters_tool.sync(book_copy)
    assert chapters_tool.problems(book_copy) == []
    import nbformat

    meta = nbformat.read(md.with_suffix(".ipynb"), as_version=4).metadata
    assert "accelerator" not in meta and meta["colab"] == {"provenance": []}  # Colab's CPU runtime


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_set_repository_fills_in_the_one_url_and_commit_and_every_colab_cell(book_copy):
    url = "https://github.com/someone/some-fork"
    chapters_tool.set_repository(book_copy, url, COMMIT)
    assert chapters_tool.repository_url(book_copy) == url and chapters_tool.repository_ref(book_copy) == COMMIT
    import yaml

    repository = yaml.safe_load((book_copy / "_config.yml").read_text())["repository"]
    assert repository["branch"] == "notebooks" and repository["ref"] == COMMIT
    assert "# The repository URL" in (book_copy / "_config.yml").read_text()  # the comments are kept
    for path in (_first_chapter(book_copy), _first_chapter(book_copy).with_suffix(".ipynb")):
        text = path.read_text().replace('\\"', '"')
        assert f'REPO = "{url}"' in text and f'REF = "{COMMIT}"' in text
        assert 'f"attn_lib @ git+{REPO}@{REF}"' in text  # the library at the book's commit, not the default branch
    assert chapters_tool.problems(book_copy) == []
    chapters_tool.set_repository(book_copy, "")  # back to "not published"
    text = _first_chapter(book_copy).read_text()
    assert 'REPO = ""' in text and 'REF = ""' in text and chapters_tool.problems(book_copy) == []
    assert (book_copy / "_config.yml").read_text() == (ROOT / "_config.yml").read_text()  # as committed again
    with pytest.raises(ValueError, match="url must be"):
        chapters_tool.set_repository(book_copy, "github.com/no-scheme", COMMIT)


@pytest.mark.parametrize("ref", ["v1.2.0", "course/2026-fall", "release_3"])
def test_set_repository_takes_a_tag(book_copy, ref):
    chapters_tool.set_repository(book_copy, "https://github.com/o/r", ref)
    assert chapters_tool.repository_ref(book_copy) == ref and chapters_tool.problems(book_copy) == []


@pytest.mark.parametrize(
    ("url", "ref", "match"),
    [
        ("https://github.com/o/r", "", "must name the commit or tag"),  # a published book never floats
        ("", COMMIT, "must be '' while the repository URL is ''"),
        ("https://github.com/o/r", COMMIT.upper(), "must be a commit"),  # neither a commit as git writes it nor a tag
        ("https://github.com/o/r", "v1 ", "must be a commit"),
        ("https://github.com/o/r", 'v1"; import os; x="', "must be a commit"),
        ("https://github.com/o/r", "-v1", "must be a commit"),
        ("https://github.com/o/r", "v1..2", "must be a commit"),
        ("https://github.com/o/r", "v1/", "must be a commit"),
        ("https://github.com/o/r", "v1.lock", "must be a commit"),
        ("https://github.com/o/r", "v\u0131", "must be a commit"),  # a dotless i: not ASCII
        ("https://github.com/o/r", "v" * 101, "must be a commit"),
    ],
)
def test_set_repository_refuses_a_ref_that_is_not_a_commit_or_tag_in_one_line(book_copy, url, ref, match):
    before = (book_copy / "_config.yml").read_text()
    with pytest.raises(ValueError, match=match):
        chapters_tool.set_repository(book_copy, url, ref)
    assert (book_copy / "_config.yml").read_text() == before
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "chapters.py"),
            "--root",
            str(book_copy),
            "--",  # then a ref starting with "-" is not taken for an option
            "set-repository",
            url,
            ref,
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert "ref" in run.stderr and (book_copy / "_config.yml").read_text() == before


def test_the_pages_workflow_fills_in_the_commit_it_builds():
    workflow = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert "BUILT_FROM: ${{ github.sha }}" in workflow
    assert 'tools/chapters.py set-repository "$REPOSITORY_URL" "$BUILT_FROM"' in workflow


INJECTED = 'https://github.com/a/b"; import os; os.system("touch PWNED"); x = "'


@pytest.mark.parametrize(
    "url",
    [
        INJECTED,
        "https://g\u0456thub.com/someone/fork",  # a Cyrillic i: a look-alike host
        "https://github.com/someone/fork/",
        "https://github.com/someone/..",
        "https://user@github.com/someone/fork",
        "https://github.com:8080/someone/fork",
        "http://github.com/someone/fork",
        "https://github.com/someone/fork?x=1",
        "https://localhost/someone/fork",
    ],
)
def test_set_repository_refuses_a_url_that_is_not_the_documented_form_in_one_line(book_copy, url):
    before = (book_copy / "_config.yml").read_text()
    with pytest.raises(ValueError, match="url must be https://HOST/OWNER/NAME"):
        chapters_tool.set_repository(book_copy, url, COMMIT)
    assert (book_copy / "_config.yml").read_text() == before
    tool = str(ROOT / "tools" / "chapters.py")
    run = subprocess.run(
        [sys.executable, tool, "set-repository", url, COMMIT, "--root", str(book_copy)], capture_output=True, text=True
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_a_hand_edited_url_never_reaches_a_cell_and_check_fails(book_copy):
    """_config.yml edited by hand, past set-repository: every writer reads the one validated value, so sync and the
    assignments' cell refuse it (one line, no traceback) and check fails, naming repository.url."""
    import json

    config = book_copy / "_config.yml"
    config.write_text(config.read_text().replace('url: ""', "url: " + json.dumps(INJECTED), 1))
    with pytest.raises(ValueError, match="repository.url"):
        chapters_tool.colab_source(book_copy)
    spec = importlib.util.spec_from_file_location("assignments_tool", ROOT / "tools" / "assignments.py")
    assignments_tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(assignments_tool)
    (book_copy / "assignments").mkdir()
    shutil.copy(ROOT / "assignments" / "_colab_setup.py", book_copy / "assignments")
    with pytest.raises(ValueError, match="repository.url"):
        assignments_tool.colab_source(book_copy)
    twin = _first_chapter(book_copy).with_suffix(".ipynb")
    before = twin.read_text()
    for command in ("sync", "check"):
        run = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "chapters.py"), command, "--root", str(book_copy)],
            capture_output=True,
            text=True,
        )
        assert run.returncode != 0 and "repository.url" in run.stderr and "Traceback" not in run.stderr
    assert twin.read_text() == before and "PWNED" not in before
    assert not (book_copy / "PWNED").exists()


def test_a_cell_holds_the_url_as_a_python_literal(book_copy):
    import ast

    url = "https://github.com/some_one/some.fork-2"
    chapters_tool.set_repository(book_copy, url, "v1.0")
    tree = ast.parse(chapters_tool.colab_source(book_copy))
    values = {
        n.targets[0].id: n.value.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
    }
    assert values["REPO"] == url and values["REF"] == "v1.0"


def test_an_unpublished_book_stops_on_colab_with_a_message(monkeypatch):
    """With no repository URL, the Colab cell raises a plain message instead of a pip error."""
    import types

    source = chapters_tool.colab_source(ROOT)
    if chapters_tool.repository_url(ROOT):
        pytest.skip("this checkout names its repository")
    assert 'REPO = ""' in source and "not published" in source
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    with pytest.raises(RuntimeError, match="not published"):
        exec(compile(source, "colab_setup", "exec"), {})


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


def test_a_hand_edited_ref_never_reaches_a_cell_and_check_fails(book_copy):
    """A ref edited by hand into _config.yml past set-repository (code, not a commit or tag): refused by every
    writer of the cells, naming repository.ref."""
    config = book_copy / "_config.yml"
    text = config.read_text().replace('url: ""', 'url: "https://github.com/o/r"', 1)
    config.write_text(text.replace('ref: ""', 'ref: "main\\"; import os; x=\\""', 1))
    with pytest.raises(ValueError, match="repository.ref"):
        chapters_tool.colab_source(book_copy)
    assert any("repository.ref" in p for p in chapters_tool.problems(book_copy))
    config.write_text(text)  # a URL without the commit it was built from
    with pytest.raises(ValueError, match="repository.ref .* must name the commit or tag"):
        chapters_tool.colab_source(book_copy)
