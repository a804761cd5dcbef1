"""The child process of ``tools/autograde.py``: run ONE submitted notebook and write its answers, as data only.

    python tools/grade_notebook.py JOB_DIR OUT_DIR

Started by the grader in a process group of its own, in a fresh temporary folder holding a copy of the notebook,
under a time, CPU and memory limit; the grader kills the whole group when the time is up. This process never sees
an expected value or the checking code: ``JOB_DIR`` holds ``job.json`` (the code cells, the functions to call, the
per-call time limit) and ``args.pkl`` (written by the grader: for each test, the arguments and the ``where`` text of
each case). It

1. reads both before any of the student's code runs;
2. installs a stand-in ``otter`` module (``otter.Notebook(...)`` and its ``check`` do nothing: the student's own
   checks are not what is graded), a ``get_ipython()`` whose magics and shell commands do nothing, and ``display``;
3. executes every code cell in order (IPython's syntax, ``%magic`` and ``!command``, transformed first), recording
   what each failing cell raised (``SystemExit`` included) and going on with the next cell;
4. for each test, looks its function up by name and calls it on each case's arguments with
   :func:`attn_lib.book.exercises.harness.call` (the per-call time limit), converting each result with
   :func:`~attn_lib.book.exercises.harness.as_array` inside that limit; the first hint of a test (an error, a
   timeout, ``None``, not numbers) ends that test;
5. writes ``OUT_DIR/answers.npz`` (``np.savez``: float64 arrays, no pickle) and then ``OUT_DIR/status.json`` (the
   cells' errors, each test's number of answers and its hint), and leaves with ``os._exit(0)`` (no ``atexit``
   handler or thread of the student's delays it).

The grader trusts none of it: it loads the answers with ``allow_pickle=False``, checks their sizes and judges them
against the references it computed itself.
"""

from __future__ import annotations

import builtins
import json
import os
import pickle
import signal
import sys
import types
from pathlib import Path

#: Longest text kept from an error message or a hint.
TEXT_MAX = 2000


def _text(value: object) -> str:
    """``str(value)``, shortened; a value whose ``str`` fails gives a placeholder."""
    try:
        text = str(value)
    except BaseException:  # the student's __str__ may raise anything
        text = "(the message could not be printed)"
    return text if len(text) <= TEXT_MAX else text[: TEXT_MAX - 3] + "..."


def _error(exc: BaseException) -> str:
    try:
        name = type(exc).__name__
    except BaseException:
        name = "an exception"
    return _text(f"{name}: {_text(exc)}")


class _Notebook:
    """Stand-in for ``otter.Notebook``: every method (``check``, ``check_all``, ``export``, ...) does nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class _Shell:
    """Stand-in for ``get_ipython()``: line and cell magics, ``!`` commands and the rest do nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class _Hint:
    def __init__(self, text: str):
        self.text = text


def _install_otter() -> None:
    otter = types.ModuleType("otter")
    otter.Notebook = _Notebook
    sys.modules["otter"] = otter


def _converted(fn, where, as_array):
    """``fn`` followed by ``as_array``, so that converting the result (a slow ``__array__``) runs inside the per-call
    time limit; a hint of ``as_array`` comes back as a :class:`_Hint` (``harness.call`` would wrap it)."""

    def answer(*args):
        out = fn(*args)
        try:
            return as_array(out, where)
        except AssertionError as exc:
            return _Hint(_text(exc))

    return answer


def main(job_dir: Path, out_dir: Path) -> None:
    job = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    import numpy as np
    from IPython.core.inputtransformer2 import TransformerManager

    from attn_lib.book.exercises import harness

    with open(job_dir / "args.pkl", "rb") as f:  # written by the grader, read before any student code runs
        args_by_test = pickle.load(f)
    status: dict = {"cells": [], "tests": []}

    _install_otter()
    runner = sys.modules["__main__"]  # noqa: F841 - this script's module stays alive while the notebook runs
    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(__builtins__=builtins, get_ipython=_Shell, display=lambda *a, **k: None)
    sys.modules["__main__"] = main_module
    namespace = main_module.__dict__
    transform = TransformerManager().transform_cell
    for index, source in job["cells"]:
        try:
            code = compile(transform(source), f"<cell {index}>", "exec")
            exec(code, namespace)
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included: next cell
            status["cells"].append({"cell": index, "error": _error(exc)})

    # what a cell may have left armed: an interval timer, an alarm handler
    try:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    except BaseException:
        pass
    harness.TIME_LIMIT_S = float(job["call_limit"])
    answers = {}
    for t, (test, items) in enumerate(zip(job["tests"], args_by_test)):
        name, hint, count = test["function"], None, 0
        if name not in namespace:
            hint = f"HINT: {name} is not defined: run the cell that defines it (and keep its name, {name})"
        elif not callable(namespace[name]):
            kind = _text(type(namespace[name]).__name__)
            hint = f"HINT: {name} must be a function, but it is a {kind}: define it with `def {name}(...)`"
        else:
            fn = namespace[name]
            for c, (args, where) in enumerate(items):
                try:
                    got = harness.call(_converted(fn, where, harness.as_array), where, *args)
                except BaseException as exc:  # harness.call's hints, and anything past them
                    hint = _text(exc) if isinstance(exc, AssertionError) else f"HINT: {_error(exc)} ({where})"
                    break
                if isinstance(got, _Hint):
                    hint = got.text
                    break
                answers[f"t{t}_c{c}"] = np.array(got, dtype=np.float64, copy=True)
                count += 1
        status["tests"].append({"answers": count, "hint": hint})

    np.savez(out_dir / "answers.npz", **answers)
    tmp = out_dir / "status.json.tmp"
    tmp.write_text(json.dumps(status), encoding="utf-8")
    os.replace(tmp, out_dir / "status.json")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("grade_notebook: usage: python tools/grade_notebook.py JOB_DIR OUT_DIR", file=sys.stderr)
        sys.exit(2)
    try:
        main(Path(sys.argv[1]), Path(sys.argv[2]))
    except BaseException as exc:  # the grader reads the exit status
        try:
            print(f"grade_notebook: {_error(exc)}", file=sys.stderr, flush=True)
        finally:
            os._exit(3)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)
