"""The autograded assignments (assignments/, tools/assignments.py): built with `otter assign` into a temporary
folder, then graded with `tools/assignments.py grade` (tools/autograde.py: each notebook in its own limited child
process, judged by the grader against the tests of the assignment's source). The solution notebooks pass every
test, the generated student notebooks fail every question, typical wrong answers fail with the hint that names the
mistake, and a student notebook with its solutions filled in runs top to bottom under `jupyter nbconvert
--execute`. A class of cheating, endless and broken submissions is graded within its limits (issue 35).
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
    (  # no listed mistake: the slip "twice the right answer" of issue 36, named by the grader too
        "ch02_distance_bound",
        "d_max",
        "    L = len(alpha)\n    top = np.argsort(-alpha, kind='stable')[:N]\n    rest = np.setdiff1d(np.arange(L), top)\n"
        "    abar = alpha[top].sum()\n    d1 = np.linalg.norm(X[rest][:, None, :] - X[top][None, :, :], axis=-1).max()\n"
        "    return 2 * float((1 - abar) * d1 + ((L - N) * abar - (1 - abar)) * np.linalg.norm(X[top], axis=1).max())",
        "q2",
        "your answer is exactly twice the right one",
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
    """``{question: (score, max_score, output)}`` from the grader's report of one graded notebook (``stem``: its path
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
    """Each assignment's class, graded with tools/assignments.py grade (each notebook in its own child process, two
    at a time): the solution notebook, the untouched student notebook and the wrong answers of WRONG_ANSWERS.
    ``{name: folder with grades.csv and <notebook>/results.json}``."""
    work = tmp_path_factory.mktemp("classes")
    for name in NAMES:
        subs = work / name / "submissions"
        subs.mkdir(parents=True)
        (subs / "solution.ipynb").write_bytes((built / name / "autograder" / f"{name}.ipynb").read_bytes())
        (subs / "student.ipynb").write_bytes((built / name / "student" / f"{name}.ipynb").read_bytes())
    for i, (name, fn, body, _, _) in enumerate(WRONG_ANSWERS):
        nb = nbformat.read(built / name / "autograder" / f"{name}.ipynb", as_version=4)
        nbformat.write(_replace_solution(nb, fn, body), work / name / "submissions" / f"wrong{i}-{fn}.ipynb")
    # a class handed in as one folder per student, with a Jupyter checkpoint that must not be graded
    name = SUBFOLDER_CLASS
    (work / name / "submissions" / "alice" / ".ipynb_checkpoints").mkdir(parents=True)
    student = (built / name / "student" / f"{name}.ipynb").read_bytes()
    (work / name / "submissions" / "alice" / f"{name}.ipynb").write_bytes(student)
    (work / name / "submissions" / "alice" / ".ipynb_checkpoints" / f"{name}-checkpoint.ipynb").write_bytes(student)
    return {
        n: tool.grade(ROOT / "assignments" / f"{n}.md", work / n / "submissions", work / n / "graded", jobs=2).parent
        for n in NAMES
    }


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
    """The grader's results.json holds the hint, with the student's value and the expected one, and no traceback."""
    i = WRONG_ANSWERS.index((name, fn, body, question, hint))
    score, _, output = _results(graded[name], f"wrong{i}-{fn}")[question]
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
    grader.check cell shows the hint for the unanswered question first, with no traceback or file path."""
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
        # the first line under the cell is the hint (shown above Otter's report, which ends with it)
        first = cell.outputs[0]
        assert first.output_type == "display_data", cell.outputs
        assert first.data["text/plain"].startswith("HINT: your function returned None"), first
        assert first.data["text/plain"].strip() in cell.outputs[-1].data["text/plain"], cell.outputs


@pytest.mark.parametrize("name", NAMES)
def test_grade_writes_one_csv_row_per_notebook(graded, name):
    rows = {r["notebook"]: r for r in csv.DictReader((graded[name] / "grades.csv").open())}
    assert {"solution.ipynb", "student.ipynb"} <= set(rows)
    assert float(rows["solution.ipynb"]["total"]) == float(rows["solution.ipynb"]["max"]) > 0
    assert float(rows["student.ipynb"]["total"]) == 0
    assert "q1" in rows["solution.ipynb"]
    assert all(row["status"].startswith("ok") for row in rows.values())
    numbers = [v for row in rows.values() for k, v in row.items() if k not in ("notebook", "status")]
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
        tool.grade(ROOT / "assignments" / f"{NAMES[0]}.md", tmp_path, tmp_path / "out")


# --------------------------------------------------------------------------------------------------------------------
# Grading a class that tries to cheat, or to stop the grading (issue 35): each submission in its own child process,
# judged by the grader against the tests of the pristine source. The three cheats below each scored 4/4 with nothing
# answered under the former `otter run` grading, and the endless, broken and os._exit notebooks stopped it.

HOSTILE = "ch01_vanishing_attention"
#: seconds per notebook while grading the hostile class (the honest notebook takes about one)
HOSTILE_LIMIT_S = 10
#: (a) replace the feedback function the tests call with a no-op; nothing answered
CHEAT_FEEDBACK = """import attn_lib.book.exercises as _ex
import attn_lib.book.exercises.grading as _gr

_ex.feedback = _gr.feedback = lambda *args, **kwargs: None"""
#: (b) answer with the expected value, read from the checker's call stack (this also passed the hidden tests)
CHEAT_STACK = """import sys


def _from_stack():
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("case", "expected"):
            value = frame.f_locals.get(name)
            if value is not None:
                return getattr(value, "expected", value)
        frame = frame.f_back
    return None


def stable_softmax(logits, T=1.0):
    return _from_stack()


def lemma1_bounds(a, L, T=1.0):
    return _from_stack()"""
#: (c) rewrite the test files it finds (Otter's tests/*.py, next to the notebook) into tests that always pass
_PASSING = {
    "points": 2,
    "suites": [
        {
            "cases": [{"code": ">>> 1\n1\n", "hidden": False, "locked": False}],
            "scored": True,
            "setup": "",
            "teardown": "",
            "type": "doctest",
        }
    ],
}
CHEAT_TESTS = f"""import glob
import os

for path in glob.glob("tests/*.py") + glob.glob("*/tests/*.py"):
    test = dict({_PASSING!r}, name=os.path.basename(path)[:-3])
    with open(path, "w") as f:
        f.write("OK_FORMAT = True\\n\\ntest = " + repr(test) + "\\n")"""
#: a function that catches the per-call limit's exception, forever
CATCH_ALL = """def stable_softmax(logits, T=1.0):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass"""
#: a function that disarms the per-call limit's alarm, then never returns
DISARM = """import signal


def lemma1_bounds(a, L, T=1.0):
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        pass"""
#: a function whose result takes forever to become numbers
SLOW_ARRAY = """class Slow:
    def __array__(self, dtype=None, copy=None):
        import time

        time.sleep(10**6)


def stable_softmax(logits, T=1.0):
    return Slow()"""
FORMULA_NAME = '=HYPERLINK("http:evil";"click").ipynb'


def _with_cell(nb: nbformat.NotebookNode, source: str, after: str) -> nbformat.NotebookNode:
    """``nb`` with a code cell ``source`` inserted after the first cell whose source starts with ``after``."""
    at = next(i for i, c in enumerate(nb.cells) if c.source.startswith(after))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source))
    return nb


@pytest.fixture(scope="module")
def hostile(built, tmp_path_factory) -> dict:
    """Assignment 1's class: one honest notebook (the solution), the three cheats, an endless cell, a truncated
    file, os._exit(), nbformat 3, a memory hog, a function catching BaseException in a loop, one disarming the
    alarm, one returning a slow ``__array__`` and a notebook named like a spreadsheet formula, graded two at a time
    with a 10 s limit.
    ``{"rows": grades.csv by notebook, "graded": the output folder, "seconds": the grading's wall clock}``."""
    import time

    subs = tmp_path_factory.mktemp("hostile") / "submissions"
    subs.mkdir()
    name = HOSTILE
    solution = (built / name / "autograder" / f"{name}.ipynb").read_bytes()
    student = lambda: nbformat.read(built / name / "student" / f"{name}.ipynb", as_version=4)  # noqa: E731
    (subs / "honest.ipynb").write_bytes(solution)
    nbformat.write(_with_cell(student(), CHEAT_FEEDBACK, "import math"), subs / "cheat-feedback.ipynb")
    unanswered = student()
    unanswered.cells = [c for c in unanswered.cells if not c.source.startswith("def ")]
    nbformat.write(_with_cell(unanswered, CHEAT_STACK, "import math"), subs / "cheat-stack.ipynb")
    nbformat.write(_with_cell(student(), CHEAT_TESTS, "import math"), subs / "cheat-tests.ipynb")
    nbformat.write(_with_cell(student(), "while True:\n    pass", "import math"), subs / "endless.ipynb")
    (subs / "broken.ipynb").write_bytes(solution[: len(solution) // 2])
    nbformat.write(_with_cell(student(), "import os\n\nos._exit(0)", "import math"), subs / "exit.ipynb")
    v3 = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[nbformat.v3.new_code_cell("x = 1")])])
    (subs / "v3.ipynb").write_text(nbformat.writes(v3, version=3))
    nbformat.write(_with_cell(student(), "hog = bytearray(64 * 2**30)", "import math"), subs / "memory.ipynb")
    nbformat.write(_with_cell(student(), CATCH_ALL, "def stable_softmax"), subs / "catch-all.ipynb")
    nbformat.write(_with_cell(student(), SLOW_ARRAY, "def stable_softmax"), subs / "slow-array.ipynb")
    nbformat.write(_with_cell(student(), DISARM, "def lemma1_bounds"), subs / "disarm.ipynb")
    (subs / FORMULA_NAME).write_bytes(solution)
    t0 = time.perf_counter()
    csv_path = tool.grade(
        ROOT / "assignments" / f"{name}.md", subs, subs / "graded", time_limit=HOSTILE_LIMIT_S, jobs=2
    )
    seconds = time.perf_counter() - t0
    rows = {r["notebook"]: r for r in csv.DictReader(csv_path.open(encoding="utf-8"))}
    return {"rows": rows, "graded": csv_path.parent, "seconds": seconds, "csv": csv_path.read_text(encoding="utf-8")}


def test_hostile_class_finishes_within_its_limits(hostile):
    """Three notebooks run into the 10 s limit (the endless cell, the catch-all function, the disarmed alarm),
    graded two at a time with the others: the whole class takes about 25 s."""
    assert len(hostile["rows"]) == 13
    assert hostile["seconds"] < 6 * HOSTILE_LIMIT_S, hostile["seconds"]


def test_honest_submission_gets_full_marks(hostile):
    row = hostile["rows"]["honest.ipynb"]
    assert row["status"] == "ok" and row["total"] == row["max"] == "4.00", row


@pytest.mark.parametrize("cheat", ["cheat-feedback", "cheat-stack", "cheat-tests"])
def test_cheats_get_no_marks(hostile, cheat):
    """The no-op feedback, the expected value read from the call stack and rewritten test files score nothing:
    the tests come from assignments/<name>.md, the child that runs the notebook never holds an expected value, and
    the grader judges the answers in its own process."""
    row = hostile["rows"][f"{cheat}.ipynb"]
    assert row["status"].startswith("ok") and row["q1"] == row["q2"] == row["total"] == "0.00", row
    for question, (score, _, output) in _results(hostile["graded"], cheat).items():
        assert score == 0 and "HINT: your function returned None" in output, (question, output)


@pytest.mark.parametrize(
    ("notebook", "reason"),
    [
        ("endless", f"not graded: stopped at the time limit of {HOSTILE_LIMIT_S} s"),
        ("catch-all", f"not graded: stopped at the time limit of {HOSTILE_LIMIT_S} s"),
        ("disarm", f"not graded: stopped at the time limit of {HOSTILE_LIMIT_S} s"),
        ("broken", "not graded: not a notebook (invalid JSON, a truncated file?"),
        ("exit", "not graded: its process ended (exit status 0) before writing its answers"),
        ("v3", "not graded: a notebook in format 3; the grader reads format 4"),
    ],
)
def test_broken_endless_and_crashing_submissions_get_their_own_rows(hostile, notebook, reason):
    row = hostile["rows"][f"{notebook}.ipynb"]
    assert row["status"].startswith(reason) and row["total"] == "0.00" and row["max"] == "4.00", row
    report = json.loads((hostile["graded"] / notebook / "results.json").read_text())
    assert report["status"] == row["status"] and report["score"] == 0


def test_slow_array_is_stopped_by_the_per_call_limit(hostile):
    """Turning the result into numbers runs inside the per-call limit: the question gets the time-out hint, the
    notebook is graded."""
    row = hostile["rows"]["slow-array.ipynb"]
    assert row["status"].startswith("ok") and row["q1"] == "0.00", row
    output = _results(hostile["graded"], "slow-array")["q1"][2]
    assert "HINT: your function did not return within" in output, output


def test_memory_limit_turns_a_huge_allocation_into_a_cell_error(hostile):
    row = hostile["rows"]["memory.ipynb"]
    assert row["status"] == "ok: 2 cells raised an error", row
    errors = json.loads((hostile["graded"] / "memory" / "results.json").read_text())["cell_errors"]
    assert errors[0]["first_line"] == "hog = bytearray(64 * 2**30)" and errors[0]["error"].startswith("MemoryError")


def test_grades_csv_is_safe_to_open_in_a_spreadsheet(hostile):
    """A notebook named like a formula is shown as text: its cell starts with a quote, not with =."""
    assert f"'{FORMULA_NAME}" in hostile["rows"], list(hostile["rows"])
    assert hostile["rows"][f"'{FORMULA_NAME}"]["total"] == "4.00"
    cells = [cell for row in csv.reader(io.StringIO(hostile["csv"])) for cell in row]
    assert not any(cell.startswith(tool._autograde.FORMULA_STARTS) for cell in cells), cells


def test_invalid_files_get_their_own_rows(built, tmp_path):
    """Files that are not notebooks are rows with a reason, next to a graded notebook; no child runs for them."""
    subs = tmp_path / "submissions"
    subs.mkdir()
    (subs / "good.ipynb").write_bytes((built / HOSTILE / "student" / f"{HOSTILE}.ipynb").read_bytes())
    (subs / "empty.ipynb").write_bytes(b"")
    (subs / "list.ipynb").write_text("[1, 2]")
    (subs / "latin1.ipynb").write_bytes(b'{"nbformat": 4, "x": "\xe9"}')
    (subs / "invalid.ipynb").write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"x": 1}]}')
    outside = tmp_path / "passwords.txt"
    outside.write_text("secret")
    (subs / "link-out.ipynb").symlink_to(outside)
    (subs / "dangling.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    (subs / "link-in.ipynb").symlink_to(subs / "good.ipynb")
    csv_path = tool.grade(ROOT / "assignments" / f"{HOSTILE}.md", subs, tmp_path / "graded", time_limit=20)
    status = {r["notebook"]: r["status"] for r in csv.DictReader(csv_path.open(encoding="utf-8"))}
    assert status == {
        "dangling.ipynb": "not graded: a broken symbolic link",
        "empty.ipynb": "not graded: an empty file",
        "good.ipynb": "ok: 1 cell raised an error",
        "invalid.ipynb": status["invalid.ipynb"],
        "latin1.ipynb": "not graded: not a notebook (not UTF-8 text)",
        "link-in.ipynb": "ok: 1 cell raised an error",
        "link-out.ipynb": "not graded: a symbolic link to a file outside the submissions folder",
        "list.ipynb": "not graded: JSON, but not a Jupyter notebook",
    }, status
    assert status["invalid.ipynb"].startswith("not graded: not a valid notebook (format 4): ")


def test_read_questions_reads_the_tests_of_the_pristine_source():
    """Assignment 1: two questions of 2 points, each a public test at the default seed and a hidden one."""
    questions = tool._autograde.read_questions(ROOT / "assignments" / f"{HOSTILE}.md")
    assert [(q.name, q.points) for q in questions] == [("q1", 2.0), ("q2", 2.0)]
    assert [(t.check, t.function, t.seed, t.hidden) for t in questions[0].tests] == [
        ("check_stable_softmax", "stable_softmax", exercises.SEED, False),
        ("check_stable_softmax", "stable_softmax", 101, True),
    ]
    for name in NAMES:
        assert all(
            q.tests and q.points > 0 for q in tool._autograde.read_questions(ROOT / "assignments" / f"{name}.md")
        )


def test_read_questions_refuses_a_test_cell_it_does_not_understand(tmp_path):
    src = (ROOT / "assignments" / f"{HOSTILE}.md").read_text()
    broken = tmp_path / "ch09_broken.md"
    broken.write_text(src.replace('feedback("check_stable_softmax", "stable_softmax")', "print('hello')", 1))
    with pytest.raises(ValueError, match=r"a test cell of q1 may only import and call feedback"):
        tool._autograde.read_questions(broken)


def test_grade_runs_the_children_on_another_python_with_its_own_packages(tmp_path, monkeypatch):
    """tools/colab_env.py grades under Colab's versions: the children run that venv's Python, which imports attn_lib
    from its own installation (no PYTHONPATH of this checkout or of the grader); a missing interpreter is refused."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("VIRTUAL_ENV", str(ROOT / ".venv"))
    own, other = tool._autograde._child_env(), tool._autograde._child_env(own_python=False)
    assert own["PYTHONPATH"].split(os.pathsep)[0] == str(tool._autograde.ROOT)
    assert "PYTHONPATH" not in other and "VIRTUAL_ENV" not in other and other["ATTN_LIB_OFFLINE"] == "1"
    with pytest.raises(ValueError, match="python must be an executable Python interpreter"):
        tool._autograde.grade(ROOT / "assignments" / f"{HOSTILE}.md", tmp_path, tmp_path / "out", python="/no/python")


@pytest.mark.parametrize("value", [0, 0.5, 3601, float("nan"), float("inf"), "abc", None, True])
def test_grade_refuses_a_time_limit_out_of_range(tmp_path, value):
    with pytest.raises(ValueError, match="the time limit must be a number of seconds from 1 to 3600"):
        tool.grade(ROOT / "assignments" / f"{HOSTILE}.md", tmp_path, tmp_path / "out", time_limit=value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["grade", HOSTILE, "{missing}"], "is not a folder"),
        (["grade", HOSTILE, "{empty}"], "submissions must be a folder holding .ipynb files"),
        (["grade", HOSTILE, "{empty}", "--time-limit", "0"], "the time limit must be a number of seconds"),
        (["grade", HOSTILE, "{empty}", "--time-limit", "soon"], "--time-limit must be a number"),
        (["grade", HOSTILE, "{empty}", "--jobs", "0"], "the number of jobs must be an integer from 1 to 64"),
        (["grade", HOSTILE, "{empty}", "--memory-limit", "1"], "the memory limit (MiB) must be an integer"),
        (["grade", "ch99_nope", "{empty}"], "grade needs NAME FOLDER"),
        (["grade", HOSTILE, "{empty}", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["publish"], "invalid choice: 'publish'"),
    ],
)
def test_cli_prints_one_line_for_bad_input(tmp_path, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    argv = [a.format(missing=tmp_path / "missing", empty=tmp_path / "empty") for a in argv]
    assert tool.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("assignments: ") and message in err and err.count("\n") == 1, err


def test_cli_grade_on_an_empty_folder_prints_no_traceback(tmp_path):
    """The command itself, in a process: one line on stderr, exit status 2."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "assignments.py"), "grade", HOSTILE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert run.returncode == 2 and run.stdout == "", run
    assert run.stderr.count("\n") == 1 and "found none in" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_child_gets_no_secrets_from_the_environment(monkeypatch):
    """A submission runs with the environment variables Python and the library need, not the grader's tokens."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = tool._autograde._child_env()
    assert "GITHUB_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["LC_ALL"] == "C.UTF-8" and env["PATH"] == os.environ["PATH"] and env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


def test_a_failing_child_is_named_in_the_status(built, tmp_path, monkeypatch):
    """When the child process itself fails (here a stand-in that cannot import what it needs), the row says so, with
    its last line, and results.json keeps the end of its stderr."""
    child = tmp_path / "child.py"
    child.write_text(
        "import sys\nprint('some output', file=sys.stderr)\n"
        "print('grade_notebook: ModuleNotFoundError: No module named attn_lib', file=sys.stderr)\nsys.exit(3)\n"
    )
    monkeypatch.setattr(tool._autograde, "CHILD", child)
    subs = tmp_path / "submissions"
    subs.mkdir()
    (subs / "a.ipynb").write_bytes((built / HOSTILE / "autograder" / f"{HOSTILE}.ipynb").read_bytes())
    csv_path = tool.grade(ROOT / "assignments" / f"{HOSTILE}.md", subs, tmp_path / "graded", time_limit=20)
    row = next(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert (
        row["status"]
        == ("not graded: the grader's child process failed (ModuleNotFoundError: No module named attn_lib)")
        and row["total"] == "0.00"
    ), row
    report = json.loads((tmp_path / "graded" / "a" / "results.json").read_text())
    assert report["stderr"].startswith("some output\n"), report
