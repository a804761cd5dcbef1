"""Grade a class's notebooks for one assignment, without Otter and without letting a submission steer its grade or
stop the grading: what ``python tools/assignments.py grade NAME FOLDER`` runs.

How it works:

1. **The tests come from the pristine source**, ``assignments/<NAME>.md`` (:func:`read_questions`), never from the
   student's folder: each question's name and points (the raw cell ``# BEGIN QUESTION``), and in its
   ``# BEGIN TESTS`` ... ``# END TESTS`` block each ``feedback("check_x", "function"[, seed=N])`` call (read with
   :mod:`ast`, not run; a cell starting ``# HIDDEN`` holds a hidden test; the seed defaults to
   :data:`attn_lib.book.exercises.harness.SEED`).
2. **Every notebook is read into memory and validated first** (:func:`read_notebook`): a regular file (a symbolic
   link only to a file inside the submissions folder), at most :data:`NOTEBOOK_MAX_MIB` MiB, UTF-8 JSON in notebook
   format 4 that ``nbformat.validate`` accepts. Anything else gets its own row with the reason and zero scores.
3. **The grader computes the references itself**, ``CASES[check](seed)``, before any student code runs, and hands a
   child process only the ARGUMENTS of each case (pickled by the grader), never an expected value or a listed
   mistake. Each notebook runs in its own child (``tools/grade_notebook.py``): a new session (process group), a fresh
   temporary folder holding a copy of the notebook as its working folder, the limits of :func:`_limits` (CPU time,
   memory, file size, no core files) set before it starts, only the environment variables of :func:`_child_env`,
   and a wall-clock limit per notebook after which the grader kills the whole process group. The child runs the code cells (``otter`` is a stand-in that does nothing;
   the cell tagged ``colab-setup`` is skipped), calls each test's function on each case under the per-call limit of
   ``harness.call`` and writes the answers as data only: ``status.json`` and float64 arrays in ``answers.npz``.
4. **The grader judges in its own process**: it reads the answers with ``allow_pickle=False`` (checking types, sizes
   and shapes first) and runs ``harness.run`` on a function that replays them against its own cases. No student
   code runs in the grader. A question scores ``points x passed tests / tests``.
5. **A submission that does not finish is one row**: stopped at the time limit, killed (CPU or memory), ended with
   ``os._exit()`` or a crash, or wrote nothing readable: zero scores and a ``status`` that says why; every other
   notebook is graded.

Writes ``OUT/<notebook path without .ipynb>/results.json`` per notebook and ``OUT/grades.csv`` (notebook, each
question, total, max, status; a text cell starting with ``= + - @``, a tab or a carriage return gets a leading
``'`` so that a spreadsheet shows it as text).

What this does NOT protect against (the instructor guide says it too): a submission still runs as the grading
user, so it can read and write every file that user can (other students' notebooks: the grader reads them all into
memory before the first one runs, which limits that; this checkout; the output folder) and start processes that
leave the process group (they keep only the CPU limit); and it may call ``attn_lib``'s own reference functions to
answer. For real isolation run the grader as an unprivileged user or in a container.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import os
import pickle
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import numpy as np
import yaml

from attn_lib.book.exercises import harness
from attn_lib.book.exercises.grading import CASES

ROOT = Path(__file__).resolve().parents[1]
#: The script each notebook runs in.
CHILD = Path(__file__).resolve().with_name("grade_notebook.py")
#: The child's exit status, and the start of its last line on stderr, when it fails itself (not the notebook).
CHILD_FAILED = 3
CHILD_MARK = "grade_notebook: "
COLAB_TAG = "colab-setup"

#: Seconds of wall clock one notebook may take, start-up and imports included (``--time-limit``).
TIME_LIMIT_S = 120.0
#: What ``--time-limit`` accepts.
TIME_LIMIT_RANGE = (1.0, 3600.0)
#: Address space for the child's data (``RLIMIT_DATA``: heap and private writable mappings), MiB. A child that
#: imports numpy, attn_lib and torch and runs an assignment uses about 230 MiB (``RLIMIT_DATA`` peak 181-231 MiB,
#: measured). ``RLIMIT_AS`` is not used: it also counts the libraries' reserved, unused address space, which grows
#: with the number of threads and with CUDA builds of torch (512 MiB of ``RLIMIT_AS`` already fails ``import torch``).
MEMORY_LIMIT_MIB = 2048
#: What ``memory_mib`` accepts.
MEMORY_LIMIT_RANGE = (256, 1 << 20)
#: Seconds one call of a student's function may take (the checks' own limit), at most a quarter of the notebook's.
CALL_LIMIT_S = float(harness.TIME_LIMIT_S)
#: Largest notebook read, MiB.
NOTEBOOK_MAX_MIB = 50
#: Largest file the child may write (``RLIMIT_FSIZE``), bytes: bounds its answers and its stderr.
FILE_MAX_BYTES = 256 << 20
#: Largest ``status.json`` read back, bytes.
STATUS_MAX_BYTES = 4 << 20
#: Most notebooks graded at once (``--jobs``).
JOBS_RANGE = (1, 64)
#: How a spreadsheet recognises a formula: a text cell starting with one of these gets a leading ``'``.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Test:
    """One ``feedback(check, function, seed=...)`` call of a question's tests."""

    question: str
    check: str
    function: str
    seed: int
    hidden: bool


@dataclass(frozen=True)
class Question:
    name: str
    points: float
    tests: tuple[Test, ...]


# --------------------------------------------------------------------------------------------------------------------
# the tests, from the assignment's source


def _literal(node: ast.AST, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"{where}: feedback's arguments must be literals") from None


def _tests_of_cell(source: str, question: str, where: str) -> list[Test]:
    """The ``feedback(...)`` calls of one test cell; anything else in the cell but imports is an error."""
    lines = [line.strip() for line in source.strip().splitlines()]
    hidden = bool(lines) and lines[0] == "# HIDDEN"
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"{where}: a test cell of {question} is not Python ({exc.msg}, line {exc.lineno})") from None
    tests = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        func = getattr(call, "func", None)
        name = getattr(func, "id", None) or getattr(func, "attr", None)
        if not isinstance(call, ast.Call) or name != "feedback":
            raise ValueError(
                f'{where}: a test cell of {question} may only import and call feedback("check_...", "function"'
                f"[, seed=N]) (line {stmt.lineno})"
            )
        args = [_literal(a, where) for a in call.args]
        kwargs = {k.arg: _literal(k.value, where) for k in call.keywords}
        params = dict(zip(("check", "name", "seed"), args))
        if len(args) > 3 or set(kwargs) - {"check", "name", "seed"} or set(params) & set(kwargs):
            raise ValueError(f"{where}: feedback(check, name[, seed]) in {question} has other arguments")
        params.update(kwargs)
        check, function, seed = params.get("check"), params.get("name"), params.get("seed", harness.SEED)
        if check not in CASES:
            raise ValueError(f"{where}: {question} calls an unknown check {check!r} (known: {', '.join(CASES)})")
        if not isinstance(function, str) or not function.isidentifier():
            raise ValueError(f"{where}: {question}'s test names no function ({function!r})")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"{where}: {question}'s seed must be a non-negative integer (got {seed!r})")
        tests.append(Test(question, check, function, seed, hidden))
    return tests


def read_questions(md: Path) -> list[Question]:
    """The questions of the assignment source ``md`` (MyST Markdown in Otter's format), with their tests.

    Raises ``ValueError`` naming the file when a question has no name, no valid points or no tests, or a test cell
    holds anything but imports and ``feedback(...)`` calls.
    """
    try:
        nb = jupytext.read(md, fmt="md:myst")
    except OSError as exc:
        raise ValueError(f"cannot read the assignment {md}: {exc.strerror or exc}") from None
    questions: list[Question] = []
    current: dict | None = None
    in_tests = False
    for cell in nb.cells:
        src = cell.source.strip()
        first = src.splitlines()[0].strip() if src else ""
        if cell.cell_type == "raw" and first == "# BEGIN QUESTION":
            if current is not None:
                raise ValueError(f"{md.name}: question {current['name']} has no # END QUESTION")
            try:
                config = yaml.safe_load(src.partition("\n")[2]) or {}
            except yaml.YAMLError:
                config = None
            if not isinstance(config, dict) or not isinstance(config.get("name"), str) or not config["name"]:
                raise ValueError(f"{md.name}: a # BEGIN QUESTION cell names no question (name: q1)")
            points = config.get("points")
            if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 <= points < math.inf:
                raise ValueError(f"{md.name}: question {config['name']} needs points: a number >= 0")
            current = {"name": config["name"], "points": float(points), "tests": []}
        elif cell.cell_type == "raw" and first == "# END QUESTION":
            if current is None:
                raise ValueError(f"{md.name}: # END QUESTION without # BEGIN QUESTION")
            if not current["tests"]:
                raise ValueError(f"{md.name}: question {current['name']} has no tests")
            if any(q.name == current["name"] for q in questions):
                raise ValueError(f"{md.name}: two questions are named {current['name']}")
            questions.append(Question(current["name"], current["points"], tuple(current["tests"])))
            current = None
        elif cell.cell_type == "raw" and first in ("# BEGIN TESTS", "# END TESTS"):
            if current is None:
                raise ValueError(f"{md.name}: {first} outside a question")
            in_tests = first == "# BEGIN TESTS"
        elif cell.cell_type == "code" and in_tests:
            current["tests"] += _tests_of_cell(cell.source, current["name"], md.name)
    if current is not None:
        raise ValueError(f"{md.name}: question {current['name']} has no # END QUESTION")
    if not questions:
        raise ValueError(f"{md.name} holds no question (# BEGIN QUESTION)")
    return questions


# --------------------------------------------------------------------------------------------------------------------
# the submissions


def submitted_notebooks(submissions: Path, out: Path) -> list[Path]:
    """Every ``.ipynb`` in ``submissions`` and its sub-folders, sorted; Jupyter's checkpoints and anything under
    ``out`` (where the grades go) are left out, and symbolic links to folders are not followed."""
    out = out.resolve()
    found = []
    for dirpath, dirnames, filenames in os.walk(submissions):
        here = Path(dirpath)
        if here.resolve().is_relative_to(out):
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in dirnames if d != ".ipynb_checkpoints"]
        for name in filenames:
            path = here / name
            if name.endswith(".ipynb") and not path.resolve().is_relative_to(out):
                found.append(path)
    return sorted(found)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def read_notebook(path: Path, submissions: Path) -> tuple[nbformat.NotebookNode | None, bytes, str | None]:
    """``(notebook, its bytes, None)`` for a valid submission, ``(None, b"", reason)`` for any other file."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None, b"", "not graded: a broken symbolic link"
    if not target.is_relative_to(submissions.resolve()):
        return None, b"", "not graded: a symbolic link to a file outside the submissions folder"
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, b"", f"not graded: unreadable ({exc.strerror})"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, b"", "not graded: not a regular file"
        if info.st_size > NOTEBOOK_MAX_MIB << 20:
            return None, b"", f"not graded: larger than {NOTEBOOK_MAX_MIB} MiB"
        try:
            data = f.read((NOTEBOOK_MAX_MIB << 20) + 1)
        except OSError as exc:
            return None, b"", f"not graded: unreadable ({exc.strerror})"
    if len(data) > NOTEBOOK_MAX_MIB << 20:
        return None, b"", f"not graded: larger than {NOTEBOOK_MAX_MIB} MiB"
    if not data.strip():
        return None, b"", "not graded: an empty file"
    try:
        text = data.decode("utf-8")
        raw = json.loads(text)
    except UnicodeDecodeError:
        return None, b"", "not graded: not a notebook (not UTF-8 text)"
    except (ValueError, RecursionError) as exc:
        return None, b"", f"not graded: not a notebook (invalid JSON, a truncated file?: {_first_line(exc)})"
    if not isinstance(raw, dict) or not ("cells" in raw or "worksheets" in raw):
        return None, b"", "not graded: JSON, but not a Jupyter notebook"
    version = raw.get("nbformat")
    if version != 4 or isinstance(version, bool):
        return (
            None,
            b"",
            (
                f"not graded: a notebook in format {version!r}; the grader reads format 4 (open it in Jupyter or Colab "
                "and save it again)"
            ),
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
            nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several kinds; all mean "not a valid notebook"
        return None, b"", f"not graded: not a valid notebook (format 4): {_first_line(exc)}"
    return nb, data, None


# --------------------------------------------------------------------------------------------------------------------
# running one notebook


def check_time_limit(value: Any) -> float:
    """``value`` as the seconds one notebook may take; ``ValueError`` outside :data:`TIME_LIMIT_RANGE`."""
    lo, hi = TIME_LIMIT_RANGE
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not lo <= seconds <= hi:
        raise ValueError(f"the time limit must be a number of seconds from {lo:g} to {hi:g} (got {value!r})")
    return seconds


def _check_int(name: str, value: Any, bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer from {lo} to {hi} (got {value!r})")
    return value


def _limits(time_limit: float, memory_mib: int) -> dict[int, int]:
    """The resource limits of a child (soft = hard, so its code cannot raise them again): CPU seconds twice the wall
    clock plus 5 (the wall clock stops the child; the CPU limit also stops a process that left its group), the data
    limit, the largest file it may write, no core files. Each at most the grader's own hard limit."""
    wanted = {
        resource.RLIMIT_CPU: int(math.ceil(2 * time_limit)) + 5,
        resource.RLIMIT_DATA: memory_mib << 20,
        resource.RLIMIT_FSIZE: FILE_MAX_BYTES,
        resource.RLIMIT_CORE: 0,
    }
    limits = {}
    for kind, value in wanted.items():
        hard = resource.getrlimit(kind)[1]
        limits[kind] = value if hard == resource.RLIM_INFINITY else min(value, hard)
    return limits


#: The grader's environment variables a child gets: these names, and the names starting with
#: :data:`CHILD_ENV_PREFIXES` (what Python, the libraries and the locale need). The rest (tokens, keys, passwords the
#: grading user may hold) stays out.
CHILD_ENV_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "VIRTUAL_ENV")
CHILD_ENV_PREFIXES = ("LC_", "PYTHON", "NUMBA_", "ATTN_LIB_", "CONDA_", "SSL_CERT_")


def _child_env(own_python: bool = True) -> dict:
    """The child's environment: the variables of :data:`CHILD_ENV_NAMES` and :data:`CHILD_ENV_PREFIXES`, this
    checkout first on ``PYTHONPATH`` (with ``own_python``; for another environment's Python, no ``PYTHONPATH`` and no
    ``VIRTUAL_ENV``: it imports attn_lib from its own installation), no downloads, no accelerator, one thread per
    library, matplotlib's Agg."""
    env = {k: v for k, v in os.environ.items() if k in CHILD_ENV_NAMES or k.startswith(CHILD_ENV_PREFIXES)}
    if own_python:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    else:
        for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
            env.pop(name, None)
    env.update(
        ATTN_LIB_OFFLINE="1",  # grading downloads nothing
        CUDA_VISIBLE_DEVICES="",  # on the CPU: the memory limit cannot bound an accelerator's memory
        MPLBACKEND="Agg",
        OMP_NUM_THREADS="1",  # one thread: CPU time stays close to wall time
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


@dataclass
class _Run:
    """One notebook's child: its folder, process and deadline."""

    index: int
    tmp: Path
    proc: subprocess.Popen | None = None
    started: float = 0.0
    deadline: float = 0.0
    timed_out: bool = False
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


def _start(
    index: int,
    nb_bytes: bytes,
    nb_name: str,
    cells: list,
    tests: list[Test],
    args_blob: bytes,
    time_limit: float,
    memory_mib: int,
    python: str | None = None,
) -> _Run:
    tmp = Path(tempfile.mkdtemp(prefix="attn_lib-grade-"))
    run = _Run(index, tmp)
    for part in ("job", "work", "out"):
        (tmp / part).mkdir()
    (tmp / "work" / nb_name).write_bytes(nb_bytes)
    call_limit = min(CALL_LIMIT_S, time_limit / 4)
    job = {"cells": cells, "tests": [{"function": t.function} for t in tests], "call_limit": call_limit}
    (tmp / "job" / "job.json").write_text(json.dumps(job), encoding="utf-8")
    (tmp / "job" / "args.pkl").write_bytes(args_blob)
    limits = _limits(time_limit, memory_mib)

    def apply_limits():  # in the child, between fork and exec: no student code has run yet
        for kind, value in limits.items():
            resource.setrlimit(kind, (value, value))

    stderr = open(tmp / "stderr.txt", "wb")  # noqa: SIM115 - closed below, once the child has it
    try:
        run.proc = subprocess.Popen(
            [python or sys.executable, str(CHILD), str(tmp / "job"), str(tmp / "out")],
            cwd=tmp / "work",
            env=_child_env(own_python=python is None),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=apply_limits,  # the grader starts children from its one thread
        )
    finally:
        stderr.close()
    run.started = time.monotonic()
    run.deadline = run.started + time_limit
    return run


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the child's whole process group (it leads its own session), then reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_child_file(out: Path, name: str, limit: int) -> bytes | None:
    """The child's file ``out/name`` if it is a regular file of at most ``limit`` bytes (no link followed)."""
    try:
        dfd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


def _stderr_tail(tmp: Path, size: int = 2000) -> str:
    """The last ``size`` bytes the child wrote to its stderr, as text."""
    try:
        fd = os.open(tmp / "stderr.txt", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        f.seek(max(0, os.fstat(f.fileno()).st_size - size))
        return f.read(size).decode("utf-8", errors="replace")


def _signal_reason(sig: int) -> str:
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    why = {
        "SIGXCPU": "its CPU time limit",
        "SIGKILL": "the CPU or memory limit, or its own code",
        "SIGXFSZ": f"writing a file larger than {FILE_MAX_BYTES >> 20} MiB",
        "SIGSEGV": "a crash",
    }.get(name, "a signal")
    return f"not graded: killed by {name} ({why})"


def _status(run: _Run, time_limit: float, n_cases: list[int]) -> tuple[dict | None, str | None]:
    """The child's validated ``status.json``, or the reason the notebook is not graded."""
    if run.timed_out:
        return None, f"not graded: stopped at the time limit of {time_limit:g} s (an endless loop?)"
    code = run.proc.returncode
    if code < 0:
        return None, _signal_reason(-code)
    raw = _read_child_file(run.tmp / "out", "status.json", STATUS_MAX_BYTES)
    if code != 0 or raw is None:
        return None, (
            f"not graded: its process ended (exit status {code}) before writing its answers "
            "(os._exit() or a crash in a cell?)"
        )
    try:
        status = json.loads(raw.decode("utf-8"))
        cells, tests = status["cells"], status["tests"]
        ok = isinstance(cells, list) and isinstance(tests, list) and len(tests) == len(n_cases)
        ok = ok and all(
            isinstance(c, dict) and type(c.get("cell")) is int and isinstance(c.get("error"), str) for c in cells
        )
        for test, n in zip(tests if ok else [], n_cases):
            answers, hint = test.get("answers"), test.get("hint")
            ok = ok and type(answers) is int and 0 <= answers <= n and (hint is None) == (answers == n)
            ok = ok and (hint is None or isinstance(hint, str))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        ok = False
    if not ok:
        return None, "not graded: its answers are not in the grader's format"
    return status, None


def _answers(run: _Run, status: dict, cases: list[list[harness.Case]]) -> tuple[list, str | None]:
    """Per test: ``("hint", text)`` or ``("arrays", [float64 arrays])`` read from ``answers.npz``; or a reason."""
    data = _read_child_file(run.tmp / "out", "answers.npz", FILE_MAX_BYTES)
    if data is None:
        return [], "not graded: it wrote no readable answers"
    out = []
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            for t, (test, test_cases) in enumerate(zip(status["tests"], cases)):
                if test["hint"] is not None:
                    out.append(("hint", test["hint"][:2000]))
                    continue
                arrays, hint = [], None
                for c, case in enumerate(test_cases):
                    with npz.zip.open(f"t{t}_c{c}.npy") as f:
                        version = np.lib.format.read_magic(f)
                        header = (
                            np.lib.format.read_array_header_1_0(f)
                            if version == (1, 0)
                            else np.lib.format.read_array_header_2_0(f)
                        )
                    shape, _, dtype = header
                    if dtype != np.dtype(np.float64):
                        return [], "not graded: its answers are not in the grader's format"
                    if tuple(shape) != tuple(case.shape):  # harness.run's hint, without reading the numbers
                        hint = (
                            f"HINT: your function returned shape {tuple(shape)} {case.where}, expected "
                            f"{tuple(case.shape)} ({case.what})"
                        )
                        break
                    arrays.append(npz[f"t{t}_c{c}"])
                out.append(("hint", hint) if hint else ("arrays", arrays))
    except Exception:  # a damaged or forged archive: not the grader's format
        return [], "not graded: its answers are not in the grader's format"
    return out, None


def _judge(cases: list[harness.Case], arrays: list[np.ndarray]) -> str | None:
    """``harness.run`` on a function that replays the recorded answers, in order: ``None`` or the hint."""
    recorded = iter(arrays)

    def replay(*args):
        return next(recorded)

    try:
        harness.run(replay, cases)
    except AssertionError as exc:
        return str(exc)
    except Exception as exc:  # never expected; the answer is then not accepted
        return f"HINT: the grader could not judge this answer ({type(exc).__name__})"
    return None


# --------------------------------------------------------------------------------------------------------------------
# the class


def _safe_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a leading ``'`` before a formula's first character."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _score(value: float) -> str:
    """Every number of grades.csv in one format: fixed point, two decimals."""
    return f"{float(value):.2f}"


def _report(
    rel: str,
    questions: list[Question],
    verdicts: list[str | None] | None,
    status: str,
    cells: list[dict],
    nb: nbformat.NotebookNode | None,
    wall_s: float | None,
    limits: dict,
) -> dict:
    """The ``results.json`` of one notebook (``verdicts``: per test ``None`` = passed or the hint; ``None`` for a
    notebook that was not graded)."""
    report_tests, t = [], 0
    for q in questions:
        n = len(q.tests)
        entries, passed, hints = [], 0, []
        for test in q.tests:
            hint = verdicts[t] if verdicts is not None else status
            ok = verdicts is not None and hint is None
            passed += ok
            if hint:
                hints.append(hint)
            entries.append(
                {
                    "check": test.check,
                    "function": test.function,
                    "seed": test.seed,
                    "hidden": test.hidden,
                    "score": q.points / n if ok else 0.0,
                    "max_score": q.points / n,
                    "hint": hint,
                }
            )
            t += 1
        report_tests.append(
            {
                "name": q.name,
                "score": q.points * passed / n,
                "max_score": q.points,
                "output": "\n".join(dict.fromkeys(hints)),
                "tests": entries,
            }
        )
    sources = {i: c.source for i, c in enumerate(nb.cells, 1)} if nb is not None else {}
    return {
        "notebook": rel,
        "status": status,
        "score": sum(q["score"] for q in report_tests),
        "max_score": sum(q.points for q in questions),
        "tests": report_tests,
        "cell_errors": [
            {
                "cell": c["cell"],
                "first_line": (sources.get(c["cell"], "").splitlines() or [""])[0][:200],
                "error": c["error"][:2000],
            }
            for c in cells
        ],
        "wall_s": None if wall_s is None else round(wall_s, 2),
        "limits": limits,
    }


def grade(
    source: Path,
    submissions: Path,
    out: Path,
    *,
    time_limit: float = TIME_LIMIT_S,
    memory_mib: int = MEMORY_LIMIT_MIB,
    jobs: int = 1,
    python: str | os.PathLike | None = None,
) -> Path:
    """Grade every notebook of ``submissions`` (sub-folders included) against the tests of the assignment source
    ``source`` (``assignments/<name>.md``), each notebook in its own limited child process (see the module).

    ``python`` is the interpreter the children run, by default this one with this checkout first on its path;
    another environment's Python runs the notebooks with that environment's packages, attn_lib included
    (``tools/colab_env.py`` grades the solutions so under Google Colab's versions). The judging stays here.

    A notebook is identified by its path relative to ``submissions``. Writes ``out/<that path without
    .ipynb>/results.json`` per notebook and ``out/grades.csv``: one row per notebook, its path, the score of each
    question, the total and the maximum (two decimals each), and its status (``ok``, ``ok: N cells raised an
    error``, or ``not graded: <why>``). Returns the CSV's path.

    Raises ``ValueError`` for a limit out of range, a source the grader cannot read, or a folder without notebooks.
    """
    time_limit = check_time_limit(time_limit)
    memory_mib = _check_int("the memory limit (MiB)", memory_mib, MEMORY_LIMIT_RANGE)
    jobs = _check_int("the number of jobs", jobs, JOBS_RANGE)
    if python is not None:
        if not (Path(python).is_file() and os.access(python, os.X_OK)):
            raise ValueError(f"python must be an executable Python interpreter (got {str(python)!r})")
        python = str(python)
    submissions, out = Path(submissions), Path(out)
    if not submissions.is_dir():
        raise ValueError(f"submissions must be a folder holding .ipynb files ({submissions} is not a folder)")
    questions = read_questions(Path(source))
    notebooks = submitted_notebooks(submissions, out)
    if not notebooks:
        raise ValueError(
            f"submissions must be a folder holding .ipynb files (found none in {submissions} or its sub-folders)"
        )
    tests = [t for q in questions for t in q.tests]
    # the references, computed before any student code runs; the children get the arguments only
    cases = [CASES[t.check](t.seed) for t in tests]
    args_blob = pickle.dumps([[(c.args, c.where) for c in test_cases] for test_cases in cases])
    n_cases = [len(c) for c in cases]
    # every notebook read into memory before the first one runs
    loaded = []
    for path in notebooks:
        nb, data, reason = read_notebook(path, submissions)
        loaded.append((path.relative_to(submissions).as_posix(), nb, data, reason))
    limits = {"time_s": time_limit, "memory_mib": memory_mib, "call_s": min(CALL_LIMIT_S, time_limit / 4)}
    out.mkdir(parents=True, exist_ok=True)
    reports: list[dict | None] = [None] * len(loaded)

    def finish(run: _Run) -> None:
        rel, nb = loaded[run.index][0], loaded[run.index][1]
        status, reason = _status(run, time_limit, n_cases)
        verdicts, cells = None, []
        if status is not None:
            answers, reason = _answers(run, status, cases)
            if reason is None:
                cells = status["cells"]
                verdicts = [text if kind == "hint" else _judge(c, text) for (kind, text), c in zip(answers, cases)]
        stderr = ""
        if reason is None:
            reason = "ok" if not cells else f"ok: {len(cells)} cell{'s' * (len(cells) > 1)} raised an error"
        else:  # what the child printed last: the notebook's own output, or why the child itself failed
            stderr = _stderr_tail(run.tmp)
            last = (stderr.strip().splitlines() or [""])[-1]
            if not run.timed_out and run.proc.returncode == CHILD_FAILED and last.startswith(CHILD_MARK):
                reason = f"not graded: the grader's child process failed ({last[len(CHILD_MARK) :]})"
        reports[run.index] = _report(rel, questions, verdicts, reason, cells, nb, run.wall_s, limits)
        if stderr:
            reports[run.index]["stderr"] = stderr

    pending = deque(i for i, item in enumerate(loaded) if item[3] is None)
    running: list[_Run] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                i = pending.popleft()
                cells = [
                    [k, c.source]
                    for k, c in enumerate(loaded[i][1].cells, 1)
                    if c.cell_type == "code" and COLAB_TAG not in c.metadata.get("tags", [])
                ]
                running.append(
                    _start(
                        i,
                        loaded[i][2],
                        f"{Path(source).stem}.ipynb",
                        cells,
                        tests,
                        args_blob,
                        time_limit,
                        memory_mib,
                        python,
                    )
                )
            time.sleep(0.05)
            for run in list(running):
                now = time.monotonic()
                if run.proc.poll() is None and now < run.deadline:
                    continue
                run.timed_out = run.proc.poll() is None
                run.wall_s = now - run.started
                _kill_group(run.proc)  # the stragglers of a finished child too
                running.remove(run)
                try:
                    finish(run)
                finally:
                    shutil.rmtree(run.tmp, ignore_errors=True)
    finally:
        for run in running:
            _kill_group(run.proc)
            shutil.rmtree(run.tmp, ignore_errors=True)
    for i, (rel, _, _, reason) in enumerate(loaded):
        if reason is not None:
            reports[i] = _report(rel, questions, None, reason, [], None, None, limits)

    for (rel, *_), report in zip(loaded, reports):
        dest = out / Path(rel).with_suffix("")
        if dest == out / "grades.csv":
            dest = out / rel
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "results.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    path = out / "grades.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([_safe_cell(h) for h in ["notebook", *(q.name for q in questions), "total", "max", "status"]])
        for report in reports:
            scores = [_score(q["score"]) for q in report["tests"]]
            w.writerow(
                [
                    _safe_cell(report["notebook"]),
                    *scores,
                    _score(report["score"]),
                    _score(report["max_score"]),
                    _safe_cell(report["status"]),
                ]
            )
    return path
