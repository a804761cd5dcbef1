"""Build the autograded assignments: ``assignments/chNN_*.md`` (MyST Markdown in Otter's assignment format, the only
files anyone edits) -> ``_build/assignments/<name>/`` with Otter's student notebook and autograder.

    python tools/assignments.py build [NAME ...] [--out DIR]   # what `make assignments` runs (all by default)
    python tools/assignments.py list                          # the assignment names
    python tools/assignments.py grade NAME FOLDER [--out DIR] [--time-limit S] [--memory-limit MIB] [--jobs N]
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

``grade`` does not use Otter (``tools/autograde.py`` says how and what it protects against): it reads the tests from
``assignments/<NAME>.md``, runs each notebook in its own child process under a time, CPU and memory limit
(``--time-limit`` seconds of wall clock per notebook, default 120; ``--memory-limit`` MiB, default 2048; ``--jobs``
notebooks at once, default 1), judges the answers in its own process against references it computes itself, and
writes ``FOLDER/graded/grades.csv`` (``--out`` elsewhere) with a row, and a ``status``, for every notebook, broken,
endless or crashing ones included. A submission still runs as the grading user: for untrusted classes, grade as an
unprivileged user or in a container. Bad input (an unknown assignment, a missing or empty folder, an option out of
range) gives one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import os
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


def colab_source(root: Path = ROOT) -> str:
    """The assignments' Colab set-up cell, with ``repository.url`` and ``repository.ref`` of ``_config.yml`` filled
    in."""
    url, ref = _repository.read_url(root), _repository.read_ref(root)
    template = (root / "assignments" / "_colab_setup.py").read_text(encoding="utf-8")
    return _repository.fill_template(template, url, ref).rstrip("\n")


def master_notebook(md: Path, root: Path = ROOT) -> nbformat.NotebookNode:
    """The master notebook of ``md``: the Colab cell and metadata set, no jupytext metadata, no outputs."""
    nb = jupytext.read(md, fmt="md:myst")
    colab = [c for c in nb.cells if c.cell_type == "code" and COLAB_TAG in c.metadata.get("tags", [])]
    code = [c for c in nb.cells if c.cell_type == "code"]
    if len(colab) != 1 or code[0] is not colab[0]:
        raise ValueError(f"{md.name}: the first code cell must be the only one tagged {COLAB_TAG!r}")
    colab[0].source = colab_source(root)
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


def build(md: Path, out: Path = OUT, root: Path = ROOT) -> Path:
    """Build one assignment into ``out/<name>`` (removed first). Returns that folder."""
    name = md.stem
    dest = out / name
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "source").mkdir(parents=True)
    master = dest / "source" / f"{name}.ipynb"
    nbformat.write(master_notebook(md, root), master)
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


def grade(
    source: Path,
    submissions: Path,
    out: Path,
    *,
    time_limit: float = _autograde.TIME_LIMIT_S,
    memory_mib: int = _autograde.MEMORY_LIMIT_MIB,
    jobs: int = 1,
) -> Path:
    """Grade every notebook of ``submissions`` (sub-folders included) against the tests of the assignment source
    ``source`` (``assignments/<name>.md``), each notebook in its own child process under a time and memory limit,
    judged in this process against references it computes itself (:func:`autograde.grade`, whose module says how).

    A notebook is identified by its path relative to ``submissions`` (``alice/ch04_gradient_sensitivity.ipynb``
    for a folder per student, ``alice.ipynb`` for a file per student). Writes ``out/<that path without
    .ipynb>/results.json`` per notebook and ``out/grades.csv``: one row per notebook, its path, the score of each
    question, the total and the maximum, every number with two decimals, and its status (``ok`` or why it was not
    graded). Returns the CSV's path.
    """
    return _autograde.grade(source, submissions, out, time_limit=time_limit, memory_mib=memory_mib, jobs=jobs)


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
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT.relative_to(ROOT)})")
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
        dest = build(found[name], args.out.resolve())
        print(f"assignments: {name} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
