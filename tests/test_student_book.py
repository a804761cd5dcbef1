"""The student edition (tools/student_book.py, book/_ext/student_edition.py, `make book-student`): the exercises stay,
their solutions -- prose, code and the output of executed solution code -- are left out.

Built on a small book in a temporary folder (the intro, chapter 1 unexecuted, and a two-cell chapter that is
executed, whose solution prints a marker), once as the student edition and once with the solutions shown, which
shows that the check finds solutions when they are there. Together about 20-30 s.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("student_book", ROOT / "tools" / "student_book.py")
student_book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(student_book)

MARKER = "SOLUTION-OUTPUT-" + "7f3a"  # spelled in two parts here and in the chapter, so only the output holds it
DEMO_CHAPTER = """\
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

# A chapter with one exercise

```{exercise} Add two numbers (implementation · easy)
:label: ex-90-add
Practises nothing in particular. Add 41 and 1.
```

```{solution-start} ex-90-add
:label: sol-90-add
:class: dropdown
```

The sum of the two numbers is computed below and printed with a marker.

```{code-cell} ipython3
answer_of_the_demo_solution = 41 + 1
assert answer_of_the_demo_solution == 42
print("SOLUTION-OUTPUT-" + "7f3a", answer_of_the_demo_solution)
```

```{solution-end}
```
"""
DEMO = "book/90_exercise_demo"
CHAPTER_1 = "book/01_vanishing_attention"
GUIDE = "book/instructor_guide"
# chapter 1 is built from its source, not executed (its solutions' code is still checked, as source)
OVERRIDES = {"execute": {"exclude_patterns": [f"{CHAPTER_1}.md", f"{CHAPTER_1}.ipynb"]}}


def _small_book(root: Path) -> Path:
    (root / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(ROOT / "book" / "_ext", root / "book" / "_ext")
    shutil.copy(ROOT / "book" / "intro.md", root / "book" / "intro.md")
    shutil.copy(ROOT / f"{CHAPTER_1}.md", root / f"{CHAPTER_1}.md")
    (root / f"{DEMO}.md").write_text(DEMO_CHAPTER, encoding="utf-8")
    (root / f"{GUIDE}.md").write_text("# Instructor guide\n\nFor instructors only.\n", encoding="utf-8")
    (root / "_toc.yml").write_text(
        f"format: jb-book\nroot: book/intro\nchapters:\n  - file: {CHAPTER_1}\n  - file: {DEMO}\n  - file: {GUIDE}\n",
        encoding="utf-8",
    )
    return root


@pytest.fixture(scope="module")
def small_book(tmp_path_factory) -> Path:
    return _small_book(tmp_path_factory.mktemp("student"))


@pytest.fixture(scope="module")
def student_html(small_book) -> Path:
    return student_book.build(small_book, small_book / "_build" / "student", overrides=OVERRIDES)


@pytest.fixture(scope="module")
def full_html(small_book) -> Path:
    shown = dict(OVERRIDES, sphinx={"config": {"hide_solutions": False}})
    return student_book.build(small_book, small_book / "_build" / "with-solutions", overrides=shown)


def _page(html_dir: Path, name: str) -> str:
    return (html_dir / f"{name}.html").read_text(encoding="utf-8")


def test_student_config_hides_solutions_and_loads_the_extension():
    config = student_book.student_config(ROOT)
    assert config["sphinx"]["config"]["hide_solutions"] is True
    ext = Path(config["sphinx"]["local_extensions"]["student_edition"])
    assert ext.is_absolute() and (ext / "student_edition.py").is_file()
    # everything else is the book's own configuration
    assert config["execute"] == student_book.yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]


def test_overrides_merge_key_by_key():
    config = student_book.student_config(ROOT, {"execute": {"execute_notebooks": "off"}})
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["execute"]["timeout"] == 600  # the rest of the section is kept
    assert config["sphinx"]["config"]["hide_solutions"] is True


def test_solution_lines_are_the_verbatim_lines_of_the_solutions():
    lines = student_book.solution_lines(DEMO_CHAPTER)
    assert "answer_of_the_demo_solution = 41 + 1" in lines
    assert "The sum of the two numbers is computed below and printed with a marker." in lines
    assert not any("Add 41 and 1" in line for line in lines)  # the exercise text is not part of the solution
    assert not any(line.startswith((":", "```")) for line in lines)


def test_a_solution_line_that_the_chapter_also_has_elsewhere_is_not_counted():
    shared = "result_of_the_chapter_body = compute_everything(handle, text)"
    body = f"```{{code-cell}} ipython3\n{shared}  # in the chapter\n```\n\n"
    solution = DEMO_CHAPTER.replace(
        "answer_of_the_demo_solution = 41 + 1", f"{shared}\nanswer_of_the_demo_solution = 41 + 1"
    )
    lines = student_book.solution_lines(body + solution)
    assert shared not in lines and "answer_of_the_demo_solution = 41 + 1" in lines
    assert shared in student_book.solution_lines(solution)  # counted when only the solution has it


def test_student_edition_keeps_the_exercises_and_leaves_out_the_solutions(student_html, small_book):
    assert student_book.check(student_html, small_book) == []
    demo, chapter = _page(student_html, DEMO), _page(student_html, CHAPTER_1)
    assert "Add 41 and 1" in demo and re.search(r'class="caption-number">Exercise \d+', demo)
    assert "answer_of_the_demo_solution" not in demo and MARKER not in demo  # neither the code nor its output
    assert 'class="solution' not in chapter and "sol-01-" not in chapter
    assert chapter.count('<div class="exercise') >= 3


def test_the_check_finds_solutions_in_a_build_that_shows_them(full_html, small_book):
    assert MARKER in _page(full_html, DEMO)  # the solution was executed and its output shown
    problems = student_book.check(full_html, small_book)
    for chapter in (CHAPTER_1, DEMO):
        name = Path(chapter).name
        assert f"{name}.md: a solution block is on the page" in problems
        assert any(p.startswith(f"{name}.md: ") and "solution lines on the page" in p for p in problems)


def test_the_check_reports_a_lost_exercise(student_html, small_book, tmp_path):
    copy = tmp_path / "html"
    shutil.copytree(student_html, copy)
    page = copy / f"{DEMO}.html"
    page.write_text(page.read_text(encoding="utf-8").replace('<div class="exercise', '<div class="x'), encoding="utf-8")
    assert "90_exercise_demo.md: 0 exercises on the page, 1 in the source" in student_book.check(copy, small_book)


def test_the_command_line_check_fails_without_a_build(tmp_path, capsys):
    (tmp_path / "book").mkdir()
    assert student_book.main(["check", "--root", str(tmp_path)]) == 1
    assert "make book-student" in capsys.readouterr().err


def test_the_student_toc_leaves_out_the_instructor_pages():
    files = [entry["file"] for entry in student_book.student_toc(ROOT)["chapters"]]
    assert GUIDE not in files and CHAPTER_1 in files
    assert GUIDE in (ROOT / "_toc.yml").read_text()  # the instructors' book keeps it


def test_the_student_edition_has_no_instructor_page(student_html, small_book, tmp_path):
    assert not (student_html / f"{GUIDE}.html").exists() and (student_html / f"{DEMO}.html").exists()
    leaked = tmp_path / "html"
    shutil.copytree(student_html, leaked)
    (leaked / f"{GUIDE}.html").write_text("<p>For instructors only.</p>", encoding="utf-8")
    assert any("instructor page" in p for p in student_book.check(leaked, small_book))
