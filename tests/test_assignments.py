"""The autograded assignments (assignments/, tools/assignments.py): built with `otter assign` into a temporary
folder, then graded locally with `otter run` (no Docker). The solution notebooks pass every test, the generated
student notebooks fail every question, typical wrong answers fail with the hint that names the mistake, and a
student notebook with its solutions filled in runs top to bottom under `jupyter nbconvert --execute`.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import pytest

from attn_lib.book import exercises

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
_spec = importlib.util.spec_from_file_location("assignments_tool", ROOT / "tools" / "assignments.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

NAMES = [md.stem for md in tool.sources(ROOT)]
#: the assignment whose class also hands in a notebook in a sub-folder (alice/<name>.ipynb)
SUBFOLDER_CLASS = "ch05_multihead_and_remedies"
#: what a traceback in Otter's output would show: the grading machine's file paths
TRACEBACK = re.compile(r'Traceback|File "|/site-packages/|\.py", line')
#: (assignment, function whose solution is replaced, wrong body, question, hint the student must see)
WRONG_ANSWERS = [
    (
        "ch01_vanishing_attention",
        "stable_softmax",
        "    e = np.exp(logits / T)\n    return e / e.sum(axis=-1, keepdims=True)",
        "q1",
        "subtract each row's maximum",
    ),
    (
        "ch01_vanishing_attention",
        "lemma1_bounds",
        "    gap = 2 * a\n    return math.exp(-gap) / L, math.exp(gap) / L",
        "q2",
        "you forgot the temperature: the logits enter as l / T",
    ),
    (
        "ch02_distance_bound",
        "d_tilde",
        "    top = np.argsort(alpha, kind='stable')[:N]\n    sel = np.zeros(len(alpha), dtype=bool)\n    sel[top] = True\n"
        "    A = alpha[:, None] * X\n    return float(np.linalg.norm(A[~sel] - A[sel].sum(axis=0), axis=1).sum())",
        "q1",
        "I_N is the set of the N LARGEST weights; you took the N smallest",
    ),
    (
        "ch02_distance_bound",
        "d_max",
        "    L = len(alpha)\n    top = np.argsort(-alpha, kind='stable')[:N]\n    rest = np.setdiff1d(np.arange(L), top)\n"
        "    abar = alpha[top].sum()\n    d1 = np.linalg.norm(X[rest][:, None, :] - X[top][None, :, :], axis=-1).max()\n"
        "    return float((1 - abar) * d1 + ((L - N - 1) * abar - (1 - abar)) * np.linalg.norm(X[top], axis=1).max())",
        "q2",
        "L - N tokens lie outside I_N, not L - N - 1",
    ),
    (
        "ch03_separability",
        "n_s",
        "    top = np.argsort(-alpha, kind='stable')[:N]\n    sel = np.zeros(len(alpha), dtype=bool)\n    sel[top] = True\n"
        "    A = alpha[:, None] * X\n    D = np.linalg.norm(A - A[sel].sum(axis=0), axis=1)\n"
        "    return int(np.sum(D[sel] <= D[~sel].min()))",
        "q1",
        "at the radius r = rho_min itself the convention is strict",
    ),
    (
        "ch04_gradient_sensitivity",
        "softmax_jacobian",
        "    a = np.exp(logits / T) / np.exp(logits / T).sum()\n    return np.diag(a) - np.outer(a, a)",
        "q1",
        "your Jacobian is missing its 1/T factor",
    ),
    (
        "ch05_multihead_and_remedies",
        "sparsemax",
        "    return np.maximum(logits - logits.max(axis=-1, keepdims=True) + 0.5, 0)",
        "q1",
        "rows of your sparsemax do not sum to one",
    ),
]


def _env() -> dict:
    env = dict(os.environ, ATTN_LIB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _results(graded: Path, stem: str) -> dict:
    """``{question: (score, max_score, output)}`` from Otter's report of one graded notebook (``stem``: its path
    below the submissions folder, without ``.ipynb``)."""
    tests = json.loads((graded / stem / "results.json").read_text())["tests"]
    return {t["name"]: (t["score"], t["max_score"], t["output"]) for t in tests if t["name"] != "Public Tests"}


def _replace_solution(nb: nbformat.NotebookNode, fn: str, body: str) -> nbformat.NotebookNode:
    """``nb`` with the cell defining ``fn`` replaced by ``def fn(...):`` + ``body``."""
    cells = [c for c in nb.cells if c.cell_type == "code" and re.match(rf"def {fn}\(", c.source)]
    assert len(cells) == 1, f"expected one cell defining {fn}"
    cells[0].source = cells[0].source.splitlines()[0] + "\n" + body
    return nb


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("assignments")
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda md: tool.build(md, out, ROOT), tool.sources(ROOT)))
    return out


@pytest.fixture(scope="module")
def graded(built, tmp_path_factory) -> dict:
    """Each assignment's class, graded with tools/assignments.py grade (otter run, no Docker), two assignments at a
    time: the solution notebook, the untouched student notebook and the wrong answers of WRONG_ANSWERS.
    ``{name: folder with grades.csv and <notebook>/results.json}``."""
    work = tmp_path_factory.mktemp("classes")
    for name in NAMES:
        subs = work / name / "submissions"
        subs.mkdir(parents=True)
        (subs / "solution.ipynb").write_bytes((built / name / "autograder" / f"{name}.ipynb").read_bytes())
        (subs / "student.ipynb").write_bytes((built / name / "student" / f"{name}.ipynb").read_bytes())
    for name, fn, body, _, _ in WRONG_ANSWERS:
        nb = nbformat.read(built / name / "autograder" / f"{name}.ipynb", as_version=4)
        nbformat.write(_replace_solution(nb, fn, body), work / name / "submissions" / f"wrong-{fn}.ipynb")
    # a class handed in as one folder per student, with a Jupyter checkpoint that must not be graded
    name = SUBFOLDER_CLASS
    (work / name / "submissions" / "alice" / ".ipynb_checkpoints").mkdir(parents=True)
    student = (built / name / "student" / f"{name}.ipynb").read_bytes()
    (work / name / "submissions" / "alice" / f"{name}.ipynb").write_bytes(student)
    (work / name / "submissions" / "alice" / ".ipynb_checkpoints" / f"{name}-checkpoint.ipynb").write_bytes(student)
    with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(max_workers=2) as pool:
        mp.setenv("PYTHONPATH", _env()["PYTHONPATH"])  # the grading kernels import this checkout's attn_lib
        zips = {name: built / name / "autograder" / "autograder.zip" for name in NAMES}
        jobs = {n: pool.submit(tool.grade, zips[n], work / n / "submissions", work / n / "graded") for n in NAMES}
        return {name: job.result().parent for name, job in jobs.items()}


def test_there_is_an_assignment_per_chapter():
    assert [n[:4] for n in NAMES] == ["ch01", "ch02", "ch03", "ch04", "ch05"]


@pytest.mark.parametrize("name", NAMES)
def test_build_writes_student_notebook_and_autograder(built, name):
    folder = built / name
    assert (folder / "autograder" / "autograder.zip").is_file()
    student = nbformat.read(folder / "student" / f"{name}.ipynb", as_version=4)
    source = "\n".join(c.source for c in student.cells)
    assert "BEGIN SOLUTION" not in source and "# HIDDEN" not in source
    assert re.search(r'grader\.check\("q1"\)', source)
    # a CPU runtime: Colab's default, no accelerator (the assignments run on a CPU in seconds)
    assert "accelerator" not in student.metadata and student.metadata["colab"] == {"provenance": []}


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_starts_with_the_colab_cell(built, name):
    student = nbformat.read(built / name / "student" / f"{name}.ipynb", as_version=4)
    first = next(c for c in student.cells if c.cell_type == "code")
    assert first.source == tool.colab_source(ROOT)
    assert 'if "google.colab" in sys.modules:' in first.source and "otter-grader" in first.source


def test_colab_cell_does_nothing_outside_colab(tmp_path):
    """Run here (no google.colab), the cell installs nothing and writes no tests folder."""
    run = subprocess.run(
        [sys.executable, "-c", tool.colab_source(ROOT)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0 and run.stdout == "" and run.stderr == ""
    assert list(tmp_path.iterdir()) == []


def test_hidden_tests_are_only_in_the_autograder(built):
    student = nbformat.read(built / NAMES[0] / "student" / f"{NAMES[0]}.ipynb", as_version=4)
    tests = student.metadata["otter"]["tests"]
    code = "\n".join(case["code"] for test in tests.values() for suite in test["suites"] for case in suite["cases"])
    assert "seed=101" not in code
    assert re.search(r"""feedback\((['"])check_stable_softmax\1, (['"])stable_softmax\2\)""", code), code


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_ends_with_what_to_hand_in(built, name):
    last = nbformat.read(built / name / "student" / f"{name}.ipynb", as_version=4).cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("## What to hand in")
    assert f"`{name}.ipynb`" in last.source and "Restart & Run All" in last.source


@pytest.mark.parametrize("name", NAMES)
def test_every_test_prints_its_hint_instead_of_raising(name):
    """Each Otter test cell of the source calls attn_lib.book.exercises.feedback, which prints (a doctest that raises
    shows a traceback), with the question's function by name (a function never defined gets a hint, not a
    NameError)."""
    cells = re.findall(
        r"# BEGIN TESTS\n```\n(.*?)```\{raw-cell\}\n# END TESTS",
        (ROOT / "assignments" / f"{name}.md").read_text(),
        re.S,
    )
    tests = [block for cell in cells for block in re.findall(r"```\{code-cell\} ipython3\n(.*?)```", cell, re.S)]
    assert tests
    for test in tests:
        lines = [line for line in test.splitlines() if line and line != "# HIDDEN"]
        assert lines[0] == "from attn_lib.book.exercises import feedback", test
        assert all(re.fullmatch(r'feedback\("check_\w+", "\w+"(, seed=\d+)?\)', line) for line in lines[1:]), test


@pytest.mark.parametrize("name", NAMES)
def test_solution_notebook_passes_every_test(graded, name):
    results = _results(graded[name], "solution")
    assert results, "no question graded"
    for question, (score, max_score, output) in results.items():
        assert score == max_score, f"{name} {question}: {output}"


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_fails_every_question(graded, name):
    for question, (score, _, output) in _results(graded[name], "student").items():
        assert score == 0, f"{name} {question} passes with the solution stripped"
        assert "HINT: your function returned None" in output and "replace the `...` by your code" in output
        assert not TRACEBACK.search(output), output


@pytest.mark.parametrize(("name", "fn", "body", "question", "hint"), WRONG_ANSWERS, ids=[w[1] for w in WRONG_ANSWERS])
def test_wrong_answer_fails_with_its_hint(graded, name, fn, body, question, hint):
    """Otter's results.json holds the hint, with the student's value and the expected one, and no traceback."""
    score, _, output = _results(graded[name], f"wrong-{fn}")[question]
    assert score == 0 and hint in output, output
    lines = [line.strip() for line in output.splitlines() if line.strip().startswith("HINT: ")]
    assert lines and all(re.search(r": yours .+, expected .+\.$", line) for line in lines), output
    assert not TRACEBACK.search(output), output


@pytest.mark.parametrize("name", NAMES)
def test_questions_name_the_results_they_practise(name):
    rows = [r for r in exercises.assignment_index(ROOT / "assignments") if r["assignment"] == name]
    assert rows and all(r["results"] for r in rows)


def test_student_notebook_runs_with_solutions_filled_in(built, tmp_path):
    """The chapter 4 student notebook (it uses device="auto"), each `...` replaced by the solution, executed top to
    bottom with nbconvert on this machine: every grader.check cell reports that all its tests passed."""
    name = "ch04_gradient_sensitivity"
    solution = nbformat.read(built / name / "autograder" / f"{name}.ipynb", as_version=4)
    solved = {c.source.splitlines()[0]: c.source for c in solution.cells if c.source.startswith("def ")}
    nb = nbformat.read(built / name / "student" / f"{name}.ipynb", as_version=4)
    filled = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("def ") and "..." in cell.source:
            cell.source = solved[cell.source.splitlines()[0]]
            filled += 1
    assert filled == 3
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    cmd = [str(BIN / "jupyter"), "nbconvert", "--to", "notebook", "--execute", "--inplace", str(path)]
    cmd += ["--ExecutePreprocessor.timeout=120", "--ExecutePreprocessor.kernel_name=python3"]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    executed = nbformat.read(path, as_version=4)
    checks = [c for c in executed.cells if c.cell_type == "code" and c.source.startswith("grader.check(")]
    assert len(checks) == 3
    for cell in checks:
        text = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        assert "All test cases passed" in text, f"{cell.source}: {text}"


def test_grader_check_in_the_student_notebook_shows_the_hint_and_no_traceback(built, tmp_path):
    """What a student sees: the chapter 1 student notebook as handed out, executed with nbconvert; each
    grader.check cell shows the hint for the unanswered question, with no traceback or file path."""
    name = "ch01_vanishing_attention"
    path = tmp_path / f"{name}.ipynb"
    path.write_bytes((built / name / "student" / f"{name}.ipynb").read_bytes())
    cmd = [str(BIN / "jupyter"), "nbconvert", "--to", "notebook", "--execute", "--inplace", "--allow-errors", str(path)]
    cmd += ["--ExecutePreprocessor.timeout=120", "--ExecutePreprocessor.kernel_name=python3"]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    checks = [c for c in nbformat.read(path, as_version=4).cells if c.source.startswith("grader.check(")]
    assert len(checks) == 2
    for cell in checks:
        shown = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in cell.outputs)
        assert "HINT: your function returned None" in shown, shown
        assert not TRACEBACK.search(shown), shown


@pytest.mark.parametrize("name", NAMES)
def test_grade_writes_one_csv_row_per_notebook(graded, name):
    rows = {r["notebook"]: r for r in csv.DictReader((graded[name] / "grades.csv").open())}
    assert {"solution.ipynb", "student.ipynb"} <= set(rows)
    assert float(rows["solution.ipynb"]["total"]) == float(rows["solution.ipynb"]["max"]) > 0
    assert float(rows["student.ipynb"]["total"]) == 0
    assert "q1" in rows["solution.ipynb"]
    numbers = [v for row in rows.values() for k, v in row.items() if k != "notebook"]
    assert numbers and all(re.fullmatch(r"\d+\.\d\d", v) for v in numbers), numbers


def test_grade_takes_notebooks_in_sub_folders_and_names_them_by_their_path(graded):
    name = SUBFOLDER_CLASS
    rows = {r["notebook"]: r for r in csv.DictReader((graded[name] / "grades.csv").open())}
    assert f"alice/{name}.ipynb" in rows and not any("checkpoint" in n for n in rows)
    assert rows[f"alice/{name}.ipynb"]["total"] == "0.00"
    assert _results(graded[name], f"alice/{name}")


def test_submitted_notebooks_skips_checkpoints_and_the_output_folder(tmp_path):
    for rel in ("b.ipynb", "alice/a.ipynb", "alice/.ipynb_checkpoints/a-checkpoint.ipynb", "graded/x.ipynb", "c.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    found = tool.submitted_notebooks(tmp_path, tmp_path / "graded")
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["alice/a.ipynb", "b.ipynb"]


def test_assignment_2_closing_claims_are_what_the_solutions_compute():
    """The text after assignment 2's questions says d~ <= d_max at every N, that both peak strictly between N = 1
    and L - 1 and that d~ = 0 at N = L: run the source's solution and closing cells and read what they print."""
    nb = jupytext.read(ROOT / "assignments" / "ch02_distance_bound.md", fmt="md:myst")
    code = [
        c.source
        for c in nb.cells
        if c.cell_type == "code"
        and "colab-setup" not in c.metadata.get("tags", [])
        and "otter" not in c.source
        and "feedback(" not in c.source
    ]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        namespace: dict = {}
        for source in code:
            exec(source, namespace)
    out = printed.getvalue()
    assert "d~ <= d_max at every N from 1 to 63: True" in out, out
    peaks = re.search(r"d~ peaks at N = (\d+), d_max at N = (\d+) \(of 1 to 63\)", out)
    assert peaks and all(1 < int(n) < 63 for n in peaks.groups()), out
    assert "at N = L = 64: d~ = 0\n" in out, out
    text = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "both fall to 0" not in text and "strictly between $1$ and $L-1$" in text


def test_build_is_idempotent(built, tmp_path):
    """Building again writes the same student and solution notebooks (stable cell ids)."""
    name = NAMES[0]
    again = tool.build(ROOT / "assignments" / f"{name}.md", tmp_path, ROOT)
    for part in ("student", "autograder"):
        first = (built / name / part / f"{name}.ipynb").read_text()
        assert (again / part / f"{name}.ipynb").read_text() == first


def test_master_notebook_needs_the_colab_cell_first(tmp_path):
    src = (ROOT / "assignments" / f"{NAMES[0]}.md").read_text()
    broken = tmp_path / "ch09_broken.md"
    broken.write_text(src.replace(":tags: [colab-setup]", ":tags: [other]"))
    with pytest.raises(ValueError, match="the first code cell must be the only one tagged 'colab-setup'"):
        tool.master_notebook(broken, ROOT)


def test_cli_rejects_an_unknown_assignment(capsys):
    assert tool.main(["build", "ch99_nope"]) == 2
    assert "unknown ch99_nope" in capsys.readouterr().err


def test_cli_grade_needs_name_and_folder(capsys):
    assert tool.main(["grade", NAMES[0]]) == 2
    assert "grade needs NAME FOLDER" in capsys.readouterr().err


def test_grade_rejects_a_folder_without_notebooks(tmp_path):
    with pytest.raises(ValueError, match="submissions must be a folder holding .ipynb files"):
        tool.grade(tmp_path / "autograder.zip", tmp_path, tmp_path / "out")


def test_grade_names_the_notebook_otter_could_not_grade(built, tmp_path):
    """Every notebook of a class is graded in one process; a failure still names its notebook and shows Otter's
    output, and the notebooks before it were graded."""
    subs = tmp_path / "submissions"
    (subs / "bob").mkdir(parents=True)
    name = NAMES[0]
    (subs / "alice.ipynb").write_bytes((built / name / "student" / f"{name}.ipynb").read_bytes())
    (subs / "bob" / "broken.ipynb").write_text("this is not a notebook")
    with pytest.raises(RuntimeError, match=r"otter run failed on bob/broken\.ipynb:\n(.|\n)*Traceback"):
        tool.grade(built / name / "autograder" / "autograder.zip", subs, tmp_path / "graded")
    assert (tmp_path / "graded" / "alice" / "results.json").is_file()
