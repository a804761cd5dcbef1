"""Build the autograded assignments: ``assignments/chNN_*.md`` (MyST Markdown in Otter's assignment format, the only
files anyone edits) -> ``_build/assignments/<name>/`` with Otter's student notebook and autograder.

    python tools/assignments.py build [NAME ...] [--out DIR] [--wheel-url URL]
                                                              # what `make assignments` runs (all by default)
    python tools/assignments.py list                          # the assignment names
    python tools/assignments.py grade NAME FOLDER [--out DIR] [--time-limit S] [--memory-limit MIB] [--jobs N]
                                    [--credit per-test|all-or-nothing] [--hidden-hints] [--report-library]
                                                              # grade FOLDER's notebooks (sub-folders too)
    python tools/assignments.py time [NAME ...]               # run each built solution notebook, print the times

For each assignment, ``build`` writes

* ``<out>/<name>/source/<name>.ipynb``: the master notebook (solutions and tests), with the Colab set-up cell of
  ``assignments/_colab_setup.py`` and the Colab CPU metadata filled in;
* ``<out>/<name>/student/<name>.ipynb``: what students get (``otter assign``: solutions replaced by ``...``,
  ``grader.check("qN")`` cells, the public tests in the notebook's metadata);
* ``<out>/<name>/autograder/<name>.ipynb`` (the solution notebook) and ``<out>/<name>/autograder/autograder.zip``
  (public and hidden tests, for Otter's own ``otter run`` / ``otter grade``; ``grade`` below reads the tests from
  the source instead).

The folder ``<out>/<name>`` is rebuilt from scratch, so the build is idempotent; ``otter assign`` runs offline.
``--wheel-url URL`` (a private course, whose repository Colab cannot install from) makes the notebooks' Colab cell
install ``attn_lib`` from that wheel (``https://.../attn_lib-....whl``, optionally ending ``#sha256=<hex>``, which pip
checks) instead of ``git+`` the repository.

``grade`` does not use Otter (``tools/autograde.py`` says how and what it protects against): it reads the tests from
``assignments/<NAME>.md``, runs each notebook in its own child process under a time, CPU and memory limit
(``--time-limit`` seconds of wall clock per notebook, default 120; ``--memory-limit`` MiB, default 2048; ``--jobs``
notebooks at once, default 1), judges the answers in its own process against references it computes itself, and
writes ``FOLDER/graded/grades.csv`` (``--out`` elsewhere) with a row, and a ``status``, for every notebook, broken,
endless or crashing ones included, and next to each notebook's ``results.json`` a ``feedback.md`` to return to its
student (:func:`feedback_text`). Credit (``--credit``): ``per-test`` (the default) gives each test of a question an
equal share of its points; ``all-or-nothing`` gives a question its points only when all its tests pass. A hidden
test's hint (it quotes the hidden inputs and the expected values) is left out of ``feedback.md`` unless
``--hidden-hints``. ``--report-library`` names, in the status, the ``attn_lib`` functions a notebook uses that the
assignment itself does not (:func:`library_use`: read from the code, never run). A submission still runs as the
grading user: for untrusted classes, grade as an unprivileged user or in a container. Bad input (an unknown assignment, a missing or empty folder, an option out of
range) gives one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import ast
import copy
import csv
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import repository_url as _repository  # noqa: E402  (the one validated reading of repository.url)

sys.path.insert(0, str(ROOT / "tools"))
import autograde as _autograde  # noqa: E402  (grading: each notebook in a limited child, judged here)

OUT = ROOT / "_build" / "assignments"
COLAB_TAG = "colab-setup"
#: Notebook metadata that makes Colab open the notebook on a CPU runtime (its default): every assignment runs on a
#: CPU in seconds (tools/chapters.py gives the model chapters a GPU).
COLAB_METADATA = {"colab": {"provenance": []}}


def sources(root: Path = ROOT) -> list[Path]:
    """The assignment sources ``assignments/chNN_*.md``, sorted."""
    return sorted((root / "assignments").glob("ch[0-9][0-9]_*.md"))


#: A course's wheel of attn_lib (``--wheel-url``): an https URL of a ``.whl`` file, optionally with pip's hash check.
WHEEL_URL = re.compile(
    r"https://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9._~/%+-]*\.whl(?:#sha256=[0-9a-f]{64})?", re.ASCII
)
#: The requirement the Colab cell of ``assignments/_colab_setup.py`` installs attn_lib with (``git+`` the repository).
_GIT_REQUIREMENT = re.compile(r'f"attn_lib @ git\+\{REPO\}[^"\n]*"')


def check_wheel_url(url: object) -> str:
    """``url`` if it is a wheel URL :data:`WHEEL_URL` accepts, else ``ValueError`` naming ``--wheel-url``."""
    if not isinstance(url, str) or not WHEEL_URL.fullmatch(url):
        raise ValueError(
            "--wheel-url must be https://HOST/PATH/attn_lib-VERSION-py3-none-any.whl in ASCII, optionally ending "
            f"#sha256=<64 hex digits> (got {url!r})"
        )
    return url


def colab_source(root: Path = ROOT, wheel_url: str | None = None) -> str:
    """The assignments' Colab set-up cell, with ``repository.url`` and ``repository.ref`` of ``_config.yml`` filled
    in; with ``wheel_url`` (:func:`check_wheel_url`) it installs ``attn_lib`` from that wheel instead of ``git+`` the
    repository."""
    url, ref = _repository.read_url(root), _repository.read_ref(root)
    template = (root / "assignments" / "_colab_setup.py").read_text(encoding="utf-8")
    source = _repository.fill_template(template, url, ref).rstrip("\n")
    if wheel_url is not None:
        literal = json.dumps(check_wheel_url(wheel_url))
        if not url:  # the cell stops on Colab when it names no repository, whatever it installs
            raise ValueError(
                "--wheel-url needs repository.url set first (python tools/chapters.py set-repository URL REF)"
            )
        source, found = _GIT_REQUIREMENT.subn(lambda _: literal, source)
        if found != 1:
            raise ValueError(
                "assignments/_colab_setup.py installs attn_lib otherwise than from git+REPO: --wheel-url "
                "cannot replace it"
            )
    return source


def master_notebook(md: Path, root: Path = ROOT, wheel_url: str | None = None) -> nbformat.NotebookNode:
    """The master notebook of ``md``: the Colab cell and metadata set, no jupytext metadata, no outputs."""
    nb = jupytext.read(md, fmt="md:myst")
    colab = [c for c in nb.cells if c.cell_type == "code" and COLAB_TAG in c.metadata.get("tags", [])]
    code = [c for c in nb.cells if c.cell_type == "code"]
    if len(colab) != 1 or code[0] is not colab[0]:
        raise ValueError(f"{md.name}: the first code cell must be the only one tagged {COLAB_TAG!r}")
    colab[0].source = colab_source(root, wheel_url)
    nb.metadata.pop("jupytext", None)
    nb.metadata.update(copy.deepcopy(COLAB_METADATA))
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    _stable_ids(nb)
    nbformat.validate(nb)
    return nb


def build(md: Path, out: Path = OUT, root: Path = ROOT, wheel_url: str | None = None) -> Path:
    """Build one assignment into ``out/<name>`` (removed first); ``wheel_url``: see :func:`colab_source`. Returns that
    folder."""
    name = md.stem
    dest = out / name
    nb = master_notebook(md, root, wheel_url)  # bad input fails here, before the old build is removed
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "source").mkdir(parents=True)
    master = dest / "source" / f"{name}.ipynb"
    nbformat.write(nb, master)
    cmd = [sys.executable, "-m", "otter", "assign", "--no-pdfs", str(master), str(dest)]
    run = subprocess.run(cmd, cwd=dest, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"otter assign failed for {name}:\n{run.stdout}\n{run.stderr}")
    zips = sorted((dest / "autograder").glob("*.zip"))
    if len(zips) != 1:
        raise RuntimeError(f"otter assign wrote {len(zips)} autograder zips for {name}, expected one")
    zips[0].rename(dest / "autograder" / "autograder.zip")  # Otter's name carries a timestamp
    for path in (dest / "student" / f"{name}.ipynb", dest / "autograder" / f"{name}.ipynb"):
        nb = nbformat.read(path, as_version=4)
        if nb.metadata.get("colab") != COLAB_METADATA["colab"] or "accelerator" in nb.metadata:
            raise RuntimeError(f"{name}: {path.parent.name} notebook lost the Colab CPU metadata")
        _stable_ids(nb)
        nbformat.write(nb, path)
    return dest


def _stable_ids(nb: nbformat.NotebookNode) -> None:
    """Cell ids from the cell's position and source (Otter draws random ones): the same build, the same files."""
    for i, cell in enumerate(nb.cells):
        cell["id"] = hashlib.sha1(f"{i}\n{cell.source}".encode()).hexdigest()[:8]


def _bin(name: str) -> str:
    """The console script ``name`` of this Python's environment (``otter``, ``jupyter``)."""
    return str(Path(sys.executable).parent / name)


def submitted_notebooks(submissions: Path, out: Path) -> list[Path]:
    """Every ``.ipynb`` in ``submissions`` and its sub-folders, sorted; Jupyter's checkpoints and anything under
    ``out`` (where the grades go, ``submissions/graded`` by default) are left out (:mod:`autograde`)."""
    return _autograde.submitted_notebooks(submissions, out)


#: How a question's points are shared among its tests (``--credit``; the first is the default).
CREDIT = ("per-test", "all-or-nothing")
#: The attn_lib names a submission may use without being named by ``--report-library``: the tests' ``feedback`` (the
#: checks themselves and their cases, which compute the expected values, are named).
LIBRARY_ALLOWED = ("attn_lib.book.exercises.feedback",)


def grade(
    source: Path,
    submissions: Path,
    out: Path,
    *,
    time_limit: float = _autograde.TIME_LIMIT_S,
    memory_mib: int = _autograde.MEMORY_LIMIT_MIB,
    jobs: int = 1,
    credit: str = "per-test",
    hidden_hints: bool = False,
    report_library: bool = False,
) -> Path:
    """Grade every notebook of ``submissions`` (sub-folders included) against the tests of the assignment source
    ``source`` (``assignments/<name>.md``), each notebook in its own child process under a time and memory limit,
    judged in this process against references it computes itself (:func:`autograde.grade`, whose module says how).

    A notebook is identified by its path relative to ``submissions`` (``alice/ch04_gradient_sensitivity.ipynb``
    for a folder per student, ``alice.ipynb`` for a file per student). Writes, per notebook, ``out/<that path without
    .ipynb>/results.json`` (every test's score and hint, the cells' errors) and ``feedback.md`` next to it (the same in
    plain words, for the student: :func:`feedback_text`), and ``out/grades.csv``: one row per notebook, its path, the
    score of each question, the total and the maximum, every number with two decimals, and its status (``ok`` or why
    it was not graded). Returns the CSV's path.

    ``credit``: ``"per-test"`` (each test of a question earns ``points / tests``: a question with a public and a
    hidden test gives half its points for one of them) or ``"all-or-nothing"`` (a question earns its points only when
    every test passes). ``hidden_hints``: also put the hints of failed hidden tests into ``feedback.md`` (they quote
    the hidden inputs and expected values; ``results.json`` always has them). ``report_library``: add to the status
    and the feedback the ``attn_lib`` names the notebook uses that the assignment's own source does not
    (:func:`library_use`), for the instructor to review.
    """
    if credit not in CREDIT:
        raise ValueError(f"credit must be one of {', '.join(CREDIT)} (got {credit!r})")
    submissions, out = Path(submissions), Path(out)
    path = _autograde.grade(source, submissions, out, time_limit=time_limit, memory_mib=memory_mib, jobs=jobs)
    questions = _autograde.read_questions(Path(source))
    expected = library_use(master_notebook(Path(source))) if report_library else set()
    reports = []
    for notebook in submitted_notebooks(submissions, out):  # the grader's order: that of grades.csv
        rel = notebook.relative_to(submissions).as_posix()
        dest = out / Path(rel).with_suffix("")
        if dest == out / "grades.csv":  # where autograde puts the report of a notebook named grades.csv.ipynb
            dest = out / rel
        report = json.loads((dest / "results.json").read_text(encoding="utf-8"))
        _apply_credit(report, credit)
        if report_library:
            nb = _autograde.read_notebook(notebook, submissions)[0]
            used = sorted(library_use(nb) - expected) if nb is not None else []
            report["library_use"] = used
            if used:
                report["status"] += f"; uses attn_lib's {', '.join(used)} (review it)"
        (dest / "results.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        (dest / "feedback.md").write_text(feedback_text(report, Path(source).stem, hidden_hints), encoding="utf-8")
        reports.append(report)
    with path.open("w", newline="", encoding="utf-8") as f:  # grades.csv again, with the credit and status above
        w = csv.writer(f)
        cell, score = _autograde._safe_cell, _autograde._score
        w.writerow([cell(h) for h in ["notebook", *(q.name for q in questions), "total", "max", "status"]])
        for r in reports:
            scores = [score(q["score"]) for q in r["tests"]]
            w.writerow([cell(r["notebook"]), *scores, score(r["score"]), score(r["max_score"]), cell(r["status"])])
    return path


def _apply_credit(report: dict, credit: str) -> None:
    """Set each question's and test's score of a ``results.json`` by ``credit`` (a test passed when it has no hint;
    the grader gives every test of a question ``points / tests``, the per-test credit)."""
    report["credit"] = credit
    for q in report["tests"]:
        passed = [t["hint"] is None for t in q["tests"]]
        if credit == "all-or-nothing":
            for t in q["tests"]:
                t["score"] = t["max_score"] if all(passed) else 0.0
        q["score"] = sum(t["score"] for t in q["tests"])
    report["score"] = sum(q["score"] for q in report["tests"])


def _num(value: float) -> str:
    return f"{float(value):.2f}"


def feedback_text(report: dict, assignment: str, hidden_hints: bool = False) -> str:
    """The feedback on one graded notebook in plain words (Markdown), from its ``results.json`` ``report``: the total,
    the status, each question's score and each test's result with the hint of a failed one (a hidden test's hint only
    with ``hidden_hints``), the cells that raised an error, and the ``attn_lib`` names it used (``library_use``)."""
    lines = [
        f"# Feedback on {assignment}",
        "",
        f"Notebook: {report['notebook']}",
        f"Score: {_num(report['score'])} out of {_num(report['max_score'])}",
        f"Status: {report['status']}",
        "",
    ]
    graded = not report["status"].startswith("not graded")
    if not graded:
        lines += ["Your notebook was not graded, so every question scores 0: the status above says why.", ""]
    elif report.get("credit") == "all-or-nothing":
        lines += ["A question earns its points only when all its tests pass.", ""]
    else:
        lines += ["Each test of a question earns an equal share of its points.", ""]
    for q in report["tests"]:
        lines += [f"## Question {q['name']}: {_num(q['score'])} out of {_num(q['max_score'])}", ""]
        public_failed = any(not t["hidden"] and t["hint"] is not None for t in q["tests"])
        for t in q["tests"]:
            kind = "hidden test (other inputs)" if t["hidden"] else "public test (what grader.check runs)"
            if not graded:
                lines.append(f"- {kind} of {t['function']}: not run")
                continue
            verdict = "passed" if t["hint"] is None else "failed"
            if report.get("credit") != "all-or-nothing":  # all-or-nothing: a test earns no points of its own
                verdict += f" ({_num(t['score'])} of {_num(t['max_score'])})"
            lines.append(f"- {kind} of {t['function']}: {verdict}")
            if t["hint"] is not None and (hidden_hints or not t["hidden"]):
                lines += [f"  {line}" for line in t["hint"].splitlines()]
            elif t["hint"] is not None and public_failed:
                lines.append("  (the hint of a hidden test is not shown: it would give its inputs away; start with")
                lines.append("  the public test's hint above)")
            elif t["hint"] is not None:
                lines.append("  (the hint of a hidden test is not shown: it would give its inputs away; your function")
                lines.append("  is right on the public inputs only: try it on others)")
        lines.append("")
    if report.get("cell_errors"):
        lines += ["## Cells that raised an error", ""]
        for c in report["cell_errors"]:
            lines.append(f"- cell {c['cell']} (starting {c['first_line']!r}): {c['error']}")
        lines.append("")
    if report.get("library_use"):
        lines += ["## attn_lib functions your notebook uses", ""]
        lines.append(f"- {', '.join(report['library_use'])}: the assignment asks you to write these yourself; your")
        lines.append("  instructor will read how you used them.")
        lines.append("")
    return "\n".join(lines)


def library_use(nb: nbformat.NotebookNode) -> set[str]:
    """The ``attn_lib`` names the code cells of ``nb`` import or reach by attribute (``attn_lib.theory``,
    ``attn_lib.theory.softmax_np``, the module of a ``from attn_lib.theory import *``), the Colab set-up cell and
    :data:`LIBRARY_ALLOWED` left out. Read from the code with :mod:`ast` (IPython's ``%`` and ``!`` lines transformed
    first), never run: a name reached otherwise (``importlib``, ``__import__``, ``getattr``, ``exec`` of a string, a
    module of its own that imports attn_lib) is not found, so this flags submissions to read, it proves nothing."""
    from IPython.core.inputtransformer2 import TransformerManager

    transform = TransformerManager().transform_cell
    trees = []
    for cell in nb.cells:
        if cell.cell_type == "code" and COLAB_TAG not in cell.metadata.get("tags", []):
            try:
                trees.append(ast.parse(transform(cell.source)))
            except (SyntaxError, ValueError):
                continue
    names: set[str] = set()
    aliases: dict[str, str] = {}  # the notebook's names bound to attn_lib's, over all cells (a later cell uses them)
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "attn_lib":
                    names.add(a.name)
                    aliases[a.asname or "attn_lib"] = a.name if a.asname else "attn_lib"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "attn_lib" and not node.level:
            for a in node.names:
                full = node.module if a.name == "*" else f"{node.module}.{a.name}"
                names.add(full)
                aliases[a.asname or a.name] = full
    for node in (n for tree in trees for n in ast.walk(tree)):  # theory.softmax_np -> attn_lib.theory.softmax_np
        if isinstance(node, ast.Attribute):
            parts, base = [], node
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                names.add(".".join([aliases[base.id], *reversed(parts)]))
    specific = {n for n in names if not any(m.startswith(n + ".") for m in names)}  # attn_lib.theory.x, not theory
    return specific - set(LIBRARY_ALLOWED)


def time_solutions(names: list[str], out: Path = OUT) -> list[dict]:
    """Execute each built solution notebook top to bottom (``jupyter nbconvert --execute``, a fresh kernel).

    Returns one dict per assignment: ``name``, ``wall_s`` (wall clock, kernel start included) and ``cpu_s`` (user +
    system time of the kernel and nbconvert).
    """
    rows = []
    for name in names:
        nb = out / name / "autograder" / f"{name}.ipynb"
        if not nb.is_file():
            raise ValueError(f"{name} is not built (run python tools/assignments.py build {name})")
        with tempfile.TemporaryDirectory() as tmp:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            cmd = [_bin("jupyter"), "nbconvert", "--to", "notebook", "--execute", "--output-dir", tmp, str(nb)]
            subprocess.run(cmd, check=True, capture_output=True, cwd=nb.parent, env=dict(os.environ))
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rows.append({"name": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)})
    return rows


class _UsageError(Exception):
    """A bad command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints the usage and exits; one line here instead
        raise _UsageError(f"{message} (see --help)")


def _number(kind: type, text: str, what: str):
    try:
        return kind(text)
    except ValueError:
        raise _UsageError(f"{what} must be a {'whole ' if kind is int else ''}number (got {text!r})") from None


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "list", "grade", "time"])
    parser.add_argument("names", nargs="*", help="assignments (default: all); for grade: NAME FOLDER")
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT,
        help=f"output folder (default: {OUT.relative_to(ROOT)}; for grade: FOLDER/graded)",
    )
    lo, hi = _autograde.TIME_LIMIT_RANGE
    parser.add_argument(
        "--time-limit",
        default=str(_autograde.TIME_LIMIT_S),
        metavar="SECONDS",
        help=f"grade: wall clock per notebook, {lo:g} to {hi:g} s (default {_autograde.TIME_LIMIT_S:g})",
    )
    parser.add_argument(
        "--memory-limit",
        default=str(_autograde.MEMORY_LIMIT_MIB),
        metavar="MIB",
        help=f"grade: data memory per notebook, MiB (default {_autograde.MEMORY_LIMIT_MIB})",
    )
    parser.add_argument("--jobs", default="1", metavar="N", help="grade: notebooks graded at once (default 1)")
    parser.add_argument(
        "--credit",
        choices=CREDIT,
        default=CREDIT[0],
        help="grade: each test of a question earns its share of the points (per-test, the default), or a question "
        "earns its points only when all its tests pass (all-or-nothing)",
    )
    parser.add_argument(
        "--hidden-hints", action="store_true", help="grade: feedback.md shows the hints of failed hidden tests too"
    )
    parser.add_argument(
        "--report-library",
        action="store_true",
        help="grade: the status names the attn_lib functions a notebook uses that the assignment does not",
    )
    parser.add_argument("--wheel-url", metavar="URL", help="build: the Colab cell installs attn_lib from this wheel")
    try:
        return _main(parser, parser.parse_args(argv))
    except (_UsageError, ValueError, OSError) as exc:
        text = " ".join(str(exc).split()) if not isinstance(exc, OSError) else f"{exc.strerror}: {exc.filename}"
        print(f"assignments: {text}", file=sys.stderr)
        return 2


def _main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    found = {md.stem: md for md in sources()}
    if args.command == "list":
        print("\n".join(found))
        return 0
    if args.command == "grade":
        if len(args.names) != 2 or args.names[0] not in found:
            raise _UsageError(f"grade needs NAME FOLDER (NAME one of {', '.join(found)})")
        name, folder = args.names
        if not Path(folder).is_dir():
            raise _UsageError(f"{folder} is not a folder (grade needs NAME FOLDER, FOLDER holding the notebooks)")
        out = args.out if args.out != OUT else Path(folder) / "graded"
        path = grade(
            found[name],
            Path(folder),
            out.resolve(),
            time_limit=_autograde.check_time_limit(_number(float, args.time_limit, "--time-limit")),
            memory_mib=_number(int, args.memory_limit, "--memory-limit"),
            jobs=_number(int, args.jobs, "--jobs"),
            credit=args.credit,
            hidden_hints=args.hidden_hints,
            report_library=args.report_library,
        )
        print(f"assignments: grades in {path}")
        return 0
    unknown = [n for n in args.names if n not in found]
    if unknown:
        raise _UsageError(f"unknown {', '.join(unknown)} (known: {', '.join(found)})")
    if args.command == "time":
        print("| assignment | wall clock (s) | CPU time (s) |\n|---|---|---|")
        for row in time_solutions(args.names or list(found), args.out.resolve()):
            print(f"| {row['name']} | {row['wall_s']} | {row['cpu_s']} |")
        return 0
    for name in args.names or list(found):
        dest = build(found[name], args.out.resolve(), wheel_url=args.wheel_url)
        print(f"assignments: {name} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
