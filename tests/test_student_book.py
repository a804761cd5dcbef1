"""The student edition (tools/student_book.py, book/_ext/student_edition.py, `make book-student`): the exercises stay,
their solutions -- prose, code and the output of executed solution code -- are left out.

Built on a small book in a temporary folder (the intro, chapter 1 unexecuted with its .ipynb twin, and a two-cell
chapter that is executed, whose solution prints a marker), published from a made-up repository so that it has Colab
buttons, once as the student edition and once with the solutions shown, which shows that the check finds solutions
when they are there. Together about 20-30 s. The check of served files and links is also shown failing on small
hand-made sites (no build).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("student_book", ROOT / "tools" / "student_book.py")
student_book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(student_book)
_spec = importlib.util.spec_from_file_location("chapters_tool", ROOT / "tools" / "chapters.py")
chapters_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chapters_tool)

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
REPO = "https://github.com/some-teacher/attn-book"  # made up: the small book is "published" from here


def _small_book(root: Path) -> Path:
    (root / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(ROOT / "book" / "_ext", root / "book" / "_ext")
    shutil.copytree(ROOT / "book" / "_shared", root / "book" / "_shared")
    shutil.copy(ROOT / "book" / "intro.md", root / "book" / "intro.md")
    shutil.copy(ROOT / f"{CHAPTER_1}.md", root / f"{CHAPTER_1}.md")
    chapters_tool.set_repository(root, REPO, "v1.0")  # as the Pages workflow does; writes the twin Colab opens
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
    kept = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"]
    assert config["execute"]["timeout"] == kept  # the rest of the section is kept
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


# ---- what the student site serves besides its pages: sources, notebooks, the student branch -----------------------


def test_student_config_opens_the_student_branch_and_has_no_repository_button():
    config = student_book.student_config(ROOT)
    assert config["repository"]["branch"] == student_book.STUDENT_BRANCH == "student"
    assert config["html"]["use_repository_button"] is False
    assert (
        config["repository"]["url"]
        == student_book.yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    )


def test_build_writes_the_config_the_student_branch_and_stripped_downloads(student_html, small_book):
    written = student_book.yaml.safe_load((student_html.parent / "_config.yml").read_text())
    assert written["repository"] == {"url": REPO, "ref": "v1.0", "path_to_book": "", "branch": "student"}
    assert f'href="{REPO}"' not in _page(student_html, CHAPTER_1)  # no repository button
    chapter = _page(student_html, CHAPTER_1)
    colab = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', chapter)
    assert colab == [f"https://colab.research.google.com/github/some-teacher/attn-book/blob/student/{CHAPTER_1}.ipynb"]
    branch = student_html.parent / "branch"
    notebook = json.loads((branch / f"{CHAPTER_1}.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in notebook["cells"])
    assert "solution-start" not in code and "chapter.load_inputs(cfg)" not in code  # ex-01-model's solution
    assert "ex-01-model-corollary1" in code and "colab-setup" in json.dumps(notebook)  # exercise and Colab cell kept
    assert not (branch / f"{GUIDE}.ipynb").exists()
    # the download buttons' files: the stripped source and the student notebook, not the executed one
    for name in (CHAPTER_1, DEMO):
        for suffix in (".md", ".ipynb"):
            served = (student_html / "_sources" / f"{name}{suffix}").read_text()
            assert "solution-start" not in served and MARKER not in served and "answer_of_the_demo" not in served
    assert (student_html / "_sources" / f"{CHAPTER_1}.ipynb").read_text() == (branch / f"{CHAPTER_1}.ipynb").read_text()
    # a page that is not a notebook with an .ipynb twin has no launch button; the intro links to no default branch
    assert "colab.research.google.com" not in _page(student_html, DEMO)
    assert "colab.research.google.com" not in _page(student_html, "book/intro")
    assert f"{REPO}/tree/student" in _page(student_html, "book/intro")


def test_the_check_finds_the_solutions_in_the_downloads_of_a_build_that_shows_them(full_html, small_book):
    problems = student_book.served_problems(full_html, small_book)
    assert any(p.startswith(f"served file _sources/{DEMO}.md holds a {{solution-start}} directive") for p in problems)
    assert any(p.startswith(f"served file _sources/{CHAPTER_1}.ipynb holds") for p in problems)


def _leaky_site(tmp_path: Path) -> tuple[Path, Path]:
    """A hand-made student site (no build) whose files and links give the demo chapter's solution away."""
    root = tmp_path / "repo"
    (root / "book").mkdir(parents=True)
    (root / f"{DEMO}.md").write_text(DEMO_CHAPTER)
    (root / "_config.yml").write_text(f"repository:\n  url: {REPO}\n")
    html_dir = tmp_path / "site" / "html"
    (html_dir / "book").mkdir(parents=True)
    (html_dir / "_sources" / "book").mkdir(parents=True)
    clean = student_book._extension(ROOT).strip_solutions(DEMO_CHAPTER)
    (html_dir / "_sources" / f"{DEMO}.md").write_text(clean)
    (html_dir / f"{DEMO}.html").write_text('<div class="exercise">Add 41 and 1.</div>')
    (tmp_path / "site" / "branch" / "book").mkdir(parents=True)
    return root, html_dir


def test_a_clean_hand_made_site_passes(tmp_path):
    root, html_dir = _leaky_site(tmp_path)
    assert student_book.served_problems(html_dir, root) == []


def test_the_check_fails_on_each_kind_of_leak(tmp_path):
    root, html_dir = _leaky_site(tmp_path)
    branch = html_dir.parent / "branch"
    # 1. a download under _downloads (a notebook whose solution cell kept only its code)
    download = html_dir / "_downloads" / "0a1b" / "90_exercise_demo.ipynb"
    download.parent.mkdir(parents=True)
    cell = {"cell_type": "code", "source": ["answer_of_the_demo_solution = 41 + 1\n"], "metadata": {}, "outputs": []}
    download.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    # 2. a Colab button on the default branch, 3. one on the student branch whose notebook leaks, 4. one to a file
    # the branch lacks, 5. the repository's home page, 6. a local link to a source outside _sources
    prose = "The sum of the two numbers is computed below and printed with a marker."  # a line of the solution
    output = {"output_type": "stream", "name": "stdout", "text": [prose + "\n"]}
    leaky = {"cells": [dict(cell, source=["print(text)"], outputs=[output])], "metadata": {}, "nbformat": 4}
    (branch / "book" / "leaky.ipynb").write_text(json.dumps(leaky))  # leaks through an output
    (html_dir / "extra").mkdir()
    (html_dir / "extra" / "full.md").write_text(DEMO_CHAPTER)
    colab = "https://colab.research.google.com/github/some-teacher/attn-book/blob"
    (html_dir / "book" / "links.html").write_text(
        f'<a href="{colab}/main/{DEMO}.ipynb">Colab</a> <a href="{colab}/student/book/leaky.ipynb">Colab</a>'
        f' <a href="{colab}/student/book/missing.ipynb">Colab</a> <a href="{REPO}">repo</a>'
        ' <a href="../extra/full.md">source</a> <a href="https://github.com/other/repo/blob/main/x.ipynb">x</a>'
    )
    problems = student_book.served_problems(html_dir, root)
    expected = [
        "served file _downloads/0a1b/90_exercise_demo.ipynb holds 1 solution lines",
        f"book/links.html links to {DEMO}.ipynb on the branch 'main', which holds the solutions",
        "book/leaky.ipynb on the student branch (linked from book/links.html) holds 1 solution lines",
        "book/links.html links to book/missing.ipynb, which the student branch",
        "book/links.html links to the repository's home page",
        "served file extra/full.md holds a {solution-start} directive",
    ]
    (branch / "book" / "unlinked.md").write_text(DEMO_CHAPTER)  # 7. a file of the branch that no page links to
    expected.append("student branch file book/unlinked.md holds a {solution-start} directive")
    problems = student_book.served_problems(html_dir, root)
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)
    assert not any("other/repo" in p for p in problems)  # another repository's notebook is not this book's
    assert len(problems) == len(expected), problems
    # and the whole check (what `tools/student_book.py check` prints) reports them too
    assert set(problems) <= set(student_book.check(html_dir, root))


def test_the_check_fails_on_a_student_notebook_that_installs_from_elsewhere(student_html, small_book, tmp_path):
    """Built without set-repository, the branch's install cells would name no repository: the check says so."""
    copy = tmp_path / "site"
    shutil.copytree(student_html.parent, copy, ignore=shutil.ignore_patterns("work"))
    notebook = copy / "branch" / f"{CHAPTER_1}.ipynb"
    notebook.write_text(notebook.read_text().replace(f'REPO = \\"{REPO}\\"', 'REPO = \\"\\"'))
    problems = student_book.served_problems(copy / "html", small_book)
    assert problems == [
        f"student branch notebook {CHAPTER_1}.ipynb installs attn_lib from '', not from the edition's repository "
        f"{REPO} (run tools/chapters.py set-repository URL REF before the build)"
    ]


def test_a_solution_fragment_that_stands_inside_a_chapter_line_is_not_a_solution_line():
    md = (
        "```{code-cell} ipython3\nk = int((normalizers.sparsemax(X[0], temperature=t0) > 0).sum())\n```\n\n"
        "```{solution-start} ex-a\n:label: sol-a\n```\n\n```{code-cell} ipython3\nfits = (\n"
        "        normalizers.sparsemax(\n            logits_of_the_solution_only_here\n        )\n)\n```\n\n"
        "```{solution-end}\n```\n"
    )
    lines = student_book.solution_lines(md)
    assert "normalizers.sparsemax(" not in lines
    assert "logits_of_the_solution_only_here" in lines


FORMS = {  # the same solution in each form and fence MyST accepts
    "gated, colons": ":::{solution-start} ex-90-add\n:::\n\n{body}\n:::{solution-end}\n:::\n",
    "gated, tildes": "~~~{solution-start} ex-90-add\n~~~\n\n{body}\n~~~{solution-end}\n~~~\n",
    "plain, backticks": "```{solution} ex-90-add\n{body}\n```\n",
    "plain, colons": ":::{solution} ex-90-add\n{body}\n:::\n",
}
PROSE = "Both numbers are added and the total is forty two exactly."
MATH = r"\alpha_{41} + \alpha_{1} = \frac{84}{2}"


@pytest.mark.parametrize("form", FORMS)
def test_every_solution_form_is_stripped_and_its_lines_are_known(form):
    chapter = "# Demo\n\n```{exercise} Add\n:label: ex-90-add\nAdd 41 and 1.\n```\n\n" + FORMS[form].replace(
        "{body}", PROSE
    )
    assert PROSE in student_book.solution_lines(chapter)
    stripped = student_book._extension(ROOT).strip_solutions(chapter)
    assert PROSE not in stripped and "Add 41 and 1." in stripped


def test_an_all_math_solution_has_lines_to_look_for():
    chapter = f"```{{exercise}} Sum\nAdd.\n```\n\n```{{solution}} ex\n$$\n{MATH}\n$$\n```\n"
    assert MATH in student_book.solution_lines(chapter)
    assert "Add." not in " ".join(student_book.solution_lines(chapter))


@pytest.mark.parametrize(
    "served",
    ["searchindex.js", "_static/notes.js", "_images/figure.svg", "_static/data.json", "extra.html", "search.html"],
)
def test_a_solution_in_any_served_file_is_found(tmp_path, served):
    """Every file the site serves is read, not only sources and downloads: the search index, static files, SVG and
    JSON files, and HTML pages that are not chapters (as text, entities decoded, MathJax sources included)."""
    root, html_dir = _leaky_site(tmp_path)
    math_chapter = DEMO_CHAPTER.replace(
        "The sum of the two numbers", f"The sum, ${MATH}$, of the two numbers"
    )  # the solution's prose now carries math
    (root / f"{DEMO}.md").write_text(math_chapter)
    path = html_dir / served
    path.parent.mkdir(parents=True, exist_ok=True)
    escaped = MATH.replace("<", "&lt;")
    text = f'<p>Solution: <span class="math">\\({escaped}\\)</span></p>' if served.endswith((".html", ".svg")) else MATH
    path.write_text(f"Search.setIndex({{'x': {text!r}}})" if served.endswith(".js") else text)
    problems = student_book.served_problems(html_dir, root)
    assert any(p.startswith(f"served file {served} holds") for p in problems), problems


def test_binary_files_are_skipped_and_a_clean_static_folder_passes(tmp_path):
    root, html_dir = _leaky_site(tmp_path)
    (html_dir / "_images").mkdir()
    (html_dir / "_images" / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0" + MATH.encode())
    (html_dir / "_static").mkdir()
    (html_dir / "_static" / "theme.js").write_text("function solution() { return 42; }")
    assert student_book.served_problems(html_dir, root) == []
