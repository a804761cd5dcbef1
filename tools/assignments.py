"""Build the autograded assignments: ``assignments/chNN_*.md`` (MyST Markdown in Otter's assignment format, the only
files anyone edits) -> ``_build/assignments/<name>/`` with Otter's student notebook and autograder.

    python tools/assignments.py build [NAME ...] [--out DIR]   # what `make assignments` runs (all by default)
    python tools/assignments.py list                          # the assignment names
    python tools/assignments.py grade NAME FOLDER [--out DIR]  # grade FOLDER's notebooks (sub-folders too), as `otter run`
    python tools/assignments.py time [NAME ...]               # run each built solution notebook, print the times

For each assignment, ``build`` writes

* ``<out>/<name>/source/<name>.ipynb``: the master notebook (solutions and tests), with the Colab set-up cell of
  ``assignments/_colab_setup.py`` and the Colab CPU metadata filled in;
* ``<out>/<name>/student/<name>.ipynb``: what students get (``otter assign``: solutions replaced by ``...``,
  ``grader.check("qN")`` cells, the public tests in the notebook's metadata);
* ``<out>/<name>/autograder/<name>.ipynb`` (the solution notebook) and ``<out>/<name>/autograder/autograder.zip``
  (public and hidden tests, for ``otter run`` / ``otter grade``).

The folder ``<out>/<name>`` is rebuilt from scratch, so the build is idempotent; ``otter assign`` runs offline.
"""

from __future__ import annotations

import argparse
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

OUT = ROOT / "_build" / "assignments"
COLAB_TAG = "colab-setup"
#: Notebook metadata that makes Colab open the notebook on a CPU runtime (its default): every assignment runs on a
#: CPU in seconds (tools/chapters.py gives the model chapters a GPU).
COLAB_METADATA = {"colab": {"provenance": []}}


def sources(root: Path = ROOT) -> list[Path]:
    """The assignment sources ``assignments/chNN_*.md``, sorted."""
    return sorted((root / "assignments").glob("ch[0-9][0-9]_*.md"))


def colab_source(root: Path = ROOT) -> str:
    """The assignments' Colab set-up cell, with ``repository.url`` of ``_config.yml`` filled in."""
    url = _repository.read_url(root)
    template = (root / "assignments" / "_colab_setup.py").read_text(encoding="utf-8")
    return _repository.fill_template(template, url).rstrip("\n")


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
    ``out`` (where the grades go, ``submissions/graded`` by default) are left out."""
    out = out.resolve()
    found = []
    for path in sorted(submissions.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts or path.resolve().is_relative_to(out):
            continue
        found.append(path)
    return found


def _score(value: float) -> str:
    """Every number of grades.csv in one format: fixed point, two decimals."""
    return f"{float(value):.2f}"


def grade(autograder: Path, submissions: Path, out: Path) -> Path:
    """Grade every notebook of ``submissions`` (sub-folders included) with ``otter run`` (no Docker) against
    ``autograder`` (the zip).

    A notebook is identified by its path relative to ``submissions`` (``alice/ch04_gradient_sensitivity.ipynb``
    for a folder per student, ``alice.ipynb`` for a file per student). Writes ``out/<that path without
    .ipynb>/results.json`` per notebook and ``out/grades.csv``: one row per notebook, its path, the score of each
    question, the total and the maximum, every number with two decimals. Returns the CSV's path.
    """
    notebooks = submitted_notebooks(submissions, out)
    if not notebooks:
        raise ValueError(
            f"submissions must be a folder holding .ipynb files (found none in {submissions} or its sub-folders)"
        )
    rels = [nb.relative_to(submissions) for nb in notebooks]
    dests = [out / rel.with_suffix("") for rel in rels]
    for dest in dests:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "results.json").unlink(missing_ok=True)
    _otter_run(autograder, list(zip(notebooks, dests)), rels)
    rows, questions = [], []
    for rel, dest in zip(rels, dests):
        tests = json.loads((dest / "results.json").read_text())["tests"]
        scores = {t["name"]: (t["score"], t["max_score"]) for t in tests if "max_score" in t}
        questions += [q for q in scores if q not in questions]
        rows.append((rel.as_posix(), scores))
    path = out / "grades.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["notebook", *questions, "total", "max"])
        for name, scores in rows:
            total = sum(s for s, _ in scores.values())
            maximum = sum(m for _, m in scores.values())
            w.writerow([name, *(_score(scores.get(q, (0, 0))[0]) for q in questions), _score(total), _score(maximum)])
    return path


#: What ``otter run`` does for one notebook, for every notebook of a class in one process: Otter is imported once
#: (2 s each time, as much as grading a short notebook; the history of ``benchmarks/README.md``). Each notebook still runs in its own
#: fresh kernel, as with the command. argv: the autograder zip and the failure marker; stdin: JSON
#: ``[[notebook, output folder], ...]``. On the first failure it prints the marker and the notebook's index on a line
#: of stderr (the kernels write there too), then Otter's output, and exits with status 3.
_OTTER_RUN = r"""
import contextlib, io, json, sys, traceback
from otter.run import main as otter_run

autograder, failed = sys.argv[1:3]
for i, (notebook, dest) in enumerate(json.loads(sys.stdin.read())):
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            otter_run(notebook, autograder=autograder, output_dir=dest, no_logo=True)
    except Exception:
        print(file=sys.stderr)  # the marker on a line of its own, whatever a kernel wrote before it
        print(f"{failed}{i}", file=sys.stderr)
        print(log.getvalue() + traceback.format_exc(), file=sys.stderr)
        sys.exit(3)
"""
_FAILED = "attn_lib-otter-run-failed: notebook "


def _otter_run(autograder: Path, jobs: list[tuple[Path, Path]], rels: list[Path]) -> None:
    """``otter run --no-logo -a autograder -o dest notebook`` for every ``(notebook, dest)`` of ``jobs``, in one
    process; a ``RuntimeError`` naming the notebook (its path in ``rels``) and holding Otter's output if one fails."""
    payload = json.dumps([[str(nb), str(dest)] for nb, dest in jobs])
    cmd = [sys.executable, "-c", _OTTER_RUN, str(autograder), _FAILED]
    run = subprocess.run(cmd, input=payload, capture_output=True, text=True)
    if run.returncode == 0:
        return
    found = re.search(rf"^{re.escape(_FAILED)}(\d+)$", run.stderr, flags=re.M) if run.returncode == 3 else None
    which = rels[int(found.group(1))].as_posix() if found else "a notebook (the grading process failed)"
    raise RuntimeError(f"otter run failed on {which}:\n{run.stdout}\n{run.stderr}")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "list", "grade", "time"])
    parser.add_argument("names", nargs="*", help="assignments (default: all); for grade: NAME FOLDER")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    found = {md.stem: md for md in sources()}
    if args.command == "list":
        print("\n".join(found))
        return 0
    if args.command == "grade":
        if len(args.names) != 2 or args.names[0] not in found:
            print(f"assignments: grade needs NAME FOLDER (NAME one of {', '.join(found)})", file=sys.stderr)
            return 2
        name, folder = args.names
        autograder = OUT / name / "autograder" / "autograder.zip"
        if not autograder.is_file():
            print(f"assignments: {autograder} is missing (run make assignments first)", file=sys.stderr)
            return 2
        out = args.out if args.out != OUT else Path(folder) / "graded"
        print(f"assignments: grades in {grade(autograder, Path(folder), out.resolve())}")
        return 0
    unknown = [n for n in args.names if n not in found]
    if unknown:
        print(f"assignments: unknown {', '.join(unknown)} (known: {', '.join(found)})", file=sys.stderr)
        return 2
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
