"""The instructor guide's private course (book/instructor_guide.md, "Running a private course"), followed end to end
on a small scale:

1. the course builds its wheel of attn_lib (``pip wheel --no-deps .``), which holds the library and nothing of
   ``assignments/`` (no file, no ``# BEGIN SOLUTION`` marker, no line of an assignment's solution);
2. the student edition of a small book (the one of tests/test_student_book.py) is built and passes its leak check,
   and the Pages workflow's publishing step, run as written with ``PUBLISH_EDITION=student``, puts it alone at the
   site root;
3. assignment 1 is handed out with ``--wheel-url``: its student notebook holds no line of a solution and installs the
   course's wheel, pinned by its hash;
4. a class is graded with the guide's command (``--report-library``): a solved notebook, an untouched one, one that
   answers with the library's reference functions, and one fitted to the public inputs with a broken cell;
   ``grades.csv`` has the per-test partial credit, and each student's ``feedback.md`` says in plain words what was
   scored, what failed and why; ``--credit all-or-nothing`` gives no points to a half-passed question.

The wheel, the book and the assignment are built at the same time, once; about 30-40 s in all.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load("assignments_tool", ROOT / "tools" / "assignments.py")
student_book = _load("student_book", ROOT / "tools" / "student_book.py")
small = _load("student_book_tests", ROOT / "tests" / "test_student_book.py")  # its small book

NAME = "ch01_vanishing_attention"
SOURCE = ROOT / "assignments" / f"{NAME}.md"
WHEEL_HOST = "https://course.example.org/attn/"  # made up: where the course serves its wheel
SOLVED = {
    "stable_softmax": (
        "    z = (logits - logits.max(axis=-1, keepdims=True)) / T\n    e = np.exp(z)\n"
        "    return e / e.sum(axis=-1, keepdims=True)\n"
    ),
    "lemma1_bounds": "    gap = 2 * a / T\n    return math.exp(-gap) / L, math.exp(gap) / L\n",
}
# right at the public inputs' L only (tests.test_assignments' cases: L = 10, 50, 7, 60, 43), wrong elsewhere
FITTED = (
    "    gap = 2 * a / T\n    if L in (10, 50, 7, 60, 43):\n        return math.exp(-gap) / L, math.exp(gap) / L\n"
    "    return math.exp(-gap), math.exp(gap)\n"
)
LIBRARY = {
    "stable_softmax": "    from attn_lib import theory\n    return theory.softmax_np(logits, T)\n",
    "lemma1_bounds": "    import attn_lib.theory as th\n    return th.lemma1_bounds(lambda x: np.exp(x / T), a, L)\n",
}


def solution_lines(md: Path) -> list[str]:
    """The lines of the assignment's solutions (in its code cells, between the ``# BEGIN SOLUTION`` and
    ``# END SOLUTION`` comments that ``otter assign`` replaces by ``...``), at least 20 characters long once stripped
    (shorter ones, like ``e = np.exp(z)``, are too common to be evidence)."""
    lines = []
    for cell in jupytext.read(md, fmt="md:myst").cells:
        inside = False
        for line in cell.source.splitlines() if cell.cell_type == "code" else []:
            text = line.strip()
            if text in ("# BEGIN SOLUTION", "# END SOLUTION"):
                inside = text == "# BEGIN SOLUTION"
            elif inside and len(text) >= 20:
                lines.append(text)
    return lines


def _wheel(out: Path) -> Path:
    """The guide's ``pip wheel --no-deps``, built with this environment's setuptools (offline, 1-2 s) instead of an
    isolated one fetched from the registry: the files in the wheel come from pyproject.toml's package list either way."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out)]
    run = subprocess.run([*cmd, str(ROOT)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    (wheel,) = out.glob("attn_lib-*.whl")
    return wheel


def _with(nb: nbformat.NotebookNode, bodies: dict[str, str], extra_cell: str | None = None):
    nb = nbformat.from_dict(nb)
    for fn, body in bodies.items():
        (cell,) = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(f"def {fn}(")]
        cell.source = cell.source.splitlines()[0] + "\n" + body
    if extra_cell:
        nb.cells.append(nbformat.v4.new_code_cell(extra_cell))
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("course")
    book = small._small_book(work / "repo")  # set-repository already run, as the Pages workflow does
    (book / "assignments").mkdir()
    shutil.copy(ROOT / "assignments" / "_colab_setup.py", book / "assignments")
    with ThreadPoolExecutor(max_workers=2) as pool:
        wheel = pool.submit(_wheel, work / "wheel")
        html = pool.submit(student_book.build, book, book / "_build" / "student", small.OVERRIDES)
        wheel = wheel.result()
        url = f"{WHEEL_HOST}{wheel.name}#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}"
        handed_out = tool.build(SOURCE, work / "assignments", book, wheel_url=url)
        html = html.result()
    student = nbformat.read(handed_out / "student" / f"{NAME}.ipynb", as_version=4)
    subs = work / "submissions"
    for who, nb in {
        "alice": _with(student, SOLVED),
        "bob": student,
        "carol": _with(student, LIBRARY),
        "dave": _with(student, {"stable_softmax": SOLVED["stable_softmax"], "lemma1_bounds": FITTED}, "1 / 0"),
    }.items():
        (subs / who).mkdir(parents=True)
        nbformat.write(nb, subs / who / f"{NAME}.ipynb")
    assert tool.main(["grade", NAME, str(subs), "--report-library", "--jobs", "2"]) == 0  # the guide's command
    graded = subs / "graded"
    return {"book": book, "html": html, "wheel": wheel, "url": url, "student": student, "subs": subs, "graded": graded}


def _rows(path: Path) -> dict[str, dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return {row["notebook"].split("/")[0]: row for row in csv.DictReader(f)}


def _feedback(course: dict, who: str) -> str:
    return (course["graded"] / who / NAME / "feedback.md").read_text(encoding="utf-8")


def test_the_course_wheel_holds_the_library_and_no_assignment(course):
    lines = solution_lines(SOURCE)
    assert len(lines) >= 3  # the check below looks for something
    with zipfile.ZipFile(course["wheel"]) as whl:
        names = whl.namelist()
        assert {n.split("/")[0] for n in names} == {"attn_lib", course["wheel"].name.split("-py3")[0] + ".dist-info"}
        assert "attn_lib/theory/__init__.py" in names  # the library, reference functions included
        text = "\n".join(whl.read(n).decode("utf-8", "replace") for n in names)
    assert not any(n.startswith("assignments/") or "/assignments/" in n for n in names)
    assert "# BEGIN SOLUTION" not in text and "# BEGIN TESTS" not in text
    assert [line for line in lines if line in text] == []


def test_the_student_edition_is_built_without_solutions_and_published_alone(course, tmp_path):
    html = course["html"]
    assert student_book.check(html, course["book"]) == []
    assert not (html / f"{small.GUIDE}.html").exists()
    # the Pages workflow's step, run as written, in a folder holding both editions
    steps = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())["jobs"]["build"]["steps"]
    (full_book,) = [s for s in steps if s.get("run", "").strip() == "make book"]
    assert full_book["if"] == "env.PUBLISH_EDITION != 'student'"  # the full edition is not even built
    (place,) = [s for s in steps if "_build/student/html" in s.get("run", "")]
    for edition, expected in (("student", "index.html"), ("", "student/index.html")):
        site = tmp_path / (edition or "both")
        (site / "_build" / "html").mkdir(parents=True)
        (site / "_build" / "html" / "full.html").write_text("the full edition, with the solutions")
        shutil.copytree(html, site / "_build" / "student" / "html")
        run = subprocess.run(
            ["bash", "-c", place["run"]], cwd=site, env={"PUBLISH_EDITION": edition, "PATH": "/bin:/usr/bin"}
        )
        assert run.returncode == 0
        assert (site / "_build" / "html" / expected).is_file()
        assert (site / "_build" / "html" / "full.html").exists() == (edition != "student")


def test_the_handed_out_notebook_holds_no_solution_and_installs_the_pinned_wheel(course):
    student = course["student"]
    text = "\n".join(c.source for c in student.cells)
    assert [line for line in solution_lines(SOURCE) if line in text] == []
    assert "# HIDDEN" not in text and "seed=101" not in text  # nor the hidden tests
    setup = student.cells[[c.cell_type for c in student.cells].index("code")].source
    assert f'"{course["url"]}"' in setup and "git+" not in setup.split("REPO =")[1].split("\n", 1)[1]
    assert re.fullmatch(r".*\.whl#sha256=[0-9a-f]{64}", course["url"])


def test_the_class_is_graded_with_per_test_partial_credit(course):
    rows = _rows(course["graded"] / "grades.csv")
    assert sorted(rows) == ["alice", "bob", "carol", "dave"]
    assert (rows["alice"]["q1"], rows["alice"]["q2"], rows["alice"]["total"]) == ("2.00", "2.00", "4.00")
    assert rows["alice"]["status"] == "ok"
    assert rows["bob"]["total"] == "0.00"
    # fitted to the public inputs: q2's public test passes, its hidden one fails -> half of q2's points
    assert (rows["dave"]["q1"], rows["dave"]["q2"], rows["dave"]["total"]) == ("2.00", "1.00", "3.00")
    assert rows["dave"]["status"] == "ok: 1 cell raised an error"
    # the library's reference functions answer every question; --report-library names them for review
    assert rows["carol"]["total"] == "4.00"
    assert rows["carol"]["status"].endswith(
        "; uses attn_lib's attn_lib.theory.lemma1_bounds, attn_lib.theory.softmax_np (review it)"
    )


def test_each_student_gets_feedback_in_plain_words(course):
    dave = _feedback(course, "dave")
    assert f"Notebook: dave/{NAME}.ipynb" in dave and "Score: 3.00 out of 4.00" in dave
    assert "## Question q2: 1.00 out of 2.00" in dave
    assert "- public test (what grader.check runs) of lemma1_bounds: passed (1.00 of 1.00)" in dave
    assert "- hidden test (other inputs) of lemma1_bounds: failed (0.00 of 1.00)" in dave
    hidden = json.loads((course["graded"] / "dave" / NAME / "results.json").read_text())["tests"][1]["tests"][1]
    assert hidden["hidden"] and hidden["hint"].startswith("HINT: ")  # in results.json, for the instructor ...
    assert hidden["hint"] not in dave and "the hint of a hidden test is not shown" in dave  # ... not for the student
    assert "is right on the public inputs only" in dave
    assert "## Cells that raised an error" in dave and "ZeroDivisionError" in dave
    bob = _feedback(course, "bob")
    assert "Score: 0.00 out of 4.00" in bob
    public_hints = re.findall(r"^- public test .*: failed .*\n  (HINT: .*)$", bob, re.M)
    assert len(public_hints) == 2  # the hint of each failed public test, as grader.check shows it
    carol = _feedback(course, "carol")
    assert "## attn_lib functions your notebook uses" in carol and "attn_lib.theory.softmax_np" in carol
    alice = _feedback(course, "alice")
    assert "Score: 4.00 out of 4.00" in alice and "failed" not in alice and "HINT" not in alice
    assert "Traceback" not in dave + bob + carol + alice


def test_all_or_nothing_credit_and_hidden_hints(course, tmp_path):
    out = tmp_path / "graded"
    dave = course["subs"] / "dave"
    argv = ["grade", NAME, str(dave), "--out", str(out), "--credit", "all-or-nothing", "--hidden-hints"]
    assert tool.main(argv) == 0
    (row,) = _rows(out / "grades.csv").values()
    assert (row["q1"], row["q2"], row["total"]) == ("2.00", "0.00", "2.00")
    feedback = (out / NAME / "feedback.md").read_text(encoding="utf-8")
    assert "only when all its tests pass" in feedback and "## Question q2: 0.00 out of 2.00" in feedback
    assert "- public test (what grader.check runs) of lemma1_bounds: passed\n" in feedback
    hidden = json.loads((out / NAME / "results.json").read_text())["tests"][1]["tests"][1]
    assert hidden["hidden"] and hidden["hint"].startswith("HINT: ") and hidden["hint"] in feedback  # asked for


def test_library_use_reads_the_code_and_skips_what_the_assignment_uses():
    ch04 = ROOT / "assignments" / "ch04_gradient_sensitivity.md"
    assert "attn_lib.models.resolve_device" in tool.library_use(tool.master_notebook(ch04))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import attn_lib as al\n%time x = 1"),
        nbformat.v4.new_code_cell(
            "y = al.theory.vanishing.lemma1_bounds(1, 2)\nfrom attn_lib.book.exercises import feedback"
        ),
        nbformat.v4.new_code_cell("def broken(:"),
    ]
    assert tool.library_use(nb) == {"attn_lib.theory.vanishing.lemma1_bounds"}  # feedback is the tests' own
    nb.cells.append(nbformat.v4.new_code_cell("from attn_lib.book.exercises import grading\ngrading.CASES"))
    assert "attn_lib.book.exercises.grading.CASES" in tool.library_use(nb)  # the cases compute expected values


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["build", NAME, "--wheel-url", "http://x.org/a.whl"], "--wheel-url must be https://"),
        (["build", NAME, "--wheel-url", "https://x.org/a.whl"], "--wheel-url needs repository.url set first"),
        (["grade", NAME, ".", "--credit", "half"], "argument --credit: invalid choice"),
    ],
)
def test_bad_course_options_get_one_line(argv, message, capsys):
    assert tool.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_wheel_url_refuses_an_install_cell_it_cannot_rewrite(tmp_path):
    """--wheel-url rewrites the one git+ requirement of assignments/_colab_setup.py; a cell written otherwise (the
    template changed) is an error, not a notebook that still installs from the repository."""
    (tmp_path / "assignments").mkdir()
    (tmp_path / "_config.yml").write_text(f"repository:\n  url: {small.REPO}\n  ref: v1.0\n")
    template = (ROOT / "assignments" / "_colab_setup.py").read_text()
    (tmp_path / "assignments" / "_colab_setup.py").write_text(template)
    url = "https://course.example.org/attn_lib-0.1.0-py3-none-any.whl"
    cell = tool.colab_source(tmp_path, url)
    assert f'"{url}"' in cell and "git+" not in cell and f'REPO = "{small.REPO}"' in cell
    (tmp_path / "assignments" / "_colab_setup.py").write_text(
        template.replace('f"attn_lib @ git+{REPO}@{REF}"', "spec")
    )
    with pytest.raises(ValueError, match="installs attn_lib otherwise than from git"):
        tool.colab_source(tmp_path, url)
