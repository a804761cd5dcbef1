"""nbval's execution of the chapters, kept for the book build (``make test`` executes each chapter once).

``make test`` runs ``pytest --nbval-lax book`` and then the warnings-as-errors book build. When the environment
variable ``ATTN_LIB_EXECUTED_CACHE`` names a folder, each chapter whose cells all passed under nbval is stored there
as an executed notebook -- nbval's outputs of every code cell, and the state of the widgets the chapter left, as
nbclient would have stored it -- in a jupyter-cache (the cache that Jupyter Book's ``execute_notebooks: cache`` reads).
The book build of ``make test`` then reads the chapters from that cache instead of executing them again
(``book/_ext/executed.py``), and warns, hence fails under ``-W``, for any chapter it had to execute itself.

The cached notebook is the chapter as the book build reads it (its ``.md`` source through MyST-NB's reader), so its
jupyter-cache key (kernelspec and code cells) is the build's. Code cells are matched by position, and a chapter
whose ``.md`` and ``.ipynb`` code differ is not cached (``tools/chapters.py check`` fails on it anyway).

Without the variable (``pytest --nbval-lax book`` by hand), nothing is written.

Either way, the terminal summary ends with each chapter's time (the sum of its cells' setup, call and teardown,
the kernel's start included), so that a slow ``make test`` says which chapter it spent its time on.
"""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import pytest

CACHE_ENV = "ATTN_LIB_EXECUTED_CACHE"
_WIDGET_MIME = "application/vnd.jupyter.widget-state+json"
# evaluated in the chapter's kernel after its last cell: the live widgets' state, in the embed format nbclient stores
_WIDGET_STATE = (
    "__import__('json').dumps(__import__('ipywidgets').Widget.get_manager_state(drop_defaults=False)) "
    "if 'ipywidgets' in __import__('sys').modules else ''"
)


class _Run:
    """What nbval did in one chapter: its code cells' outputs, by cell number, and whether each passed."""

    def __init__(self) -> None:
        self.outputs: dict[int, list] = {}
        self.failed = False
        self.start = time.perf_counter()


def _is_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and hasattr(item, "cell_num")


def _run_of(item) -> _Run:
    run = getattr(item.parent, "_attn_lib_run", None)
    if run is None:
        run = _Run()
        item.parent._attn_lib_run = run
    return run


#: Seconds per chapter (its file name), summed over its cells' phases; printed by :func:`pytest_terminal_summary`.
_SECONDS: dict[str, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if not _is_cell(item):
        return
    report = outcome.get_result()
    name = Path(str(item.parent.fspath)).name
    _SECONDS[name] = _SECONDS.get(name, 0.0) + report.duration
    if not os.environ.get(CACHE_ENV):
        return
    run = _run_of(item)
    if report.failed or report.skipped:
        run.failed = True
    elif call.when == "call":
        run.outputs[item.cell_num] = list(item.test_outputs or [])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """After a chapter's last cell, before nbval stops its kernel: store the chapter if every cell passed."""
    folder = os.environ.get(CACHE_ENV)
    if not folder or not _is_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
        return
    run = _run_of(item)
    n_cells = sum(1 for c in item.parent.nb.cells if c.cell_type == "code")
    if run.failed or len(run.outputs) != n_cells:
        return
    source = Path(str(item.parent.fspath)).with_suffix(".md")
    kernel = item.parent.kernel
    nb = _executed_notebook(source, run, _widget_state(kernel), _language_info(kernel))
    if nb is not None:
        _store(Path(folder), source, nb, time.perf_counter() - run.start)


def _widget_state(kernel) -> dict | None:
    """The widgets' state in the chapter's kernel (``None`` when it has none, or when it cannot be read)."""
    try:
        msg_id = kernel.kc.execute("", store_history=False, user_expressions={"state": _WIDGET_STATE})
        reply = kernel.kc.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kernel.kc.get_shell_msg(timeout=60)
        value = reply["content"]["user_expressions"]["state"]
        text = ast.literal_eval(value["data"]["text/plain"]) if value.get("status") == "ok" else ""
    except Exception as exc:  # a chapter whose state cannot be read is executed by the build instead
        print(f"{CACHE_ENV}: widget state not read ({exc!r}); the book build will execute the chapter")
        return None
    import json

    state = json.loads(text) if text else {}
    return state if state.get("state") else {}


def _language_info(kernel) -> dict:
    """The kernel's ``language_info`` (nbclient stores it in the notebook; the build picks the highlighter from it)."""
    try:
        return kernel.kc.kernel_info(reply=True, timeout=60)["content"].get("language_info", {})
    except Exception:  # without it the build highlights code as plain Python
        return {}


def _executed_notebook(source: Path, run: _Run, widgets: dict | None, language_info: dict):
    """The chapter ``source`` as the book build reads it, with nbval's outputs in its code cells."""
    if widgets is None:
        return None
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    nb = read_myst_markdown_notebook(source.read_text(encoding="utf-8"), config=MdParserConfig(), path=str(source))
    code = [c for c in nb.cells if c.cell_type == "code"]
    if len(code) != len(run.outputs):
        return None
    for count, cell in enumerate(code, start=1):
        cell.outputs = run.outputs[count - 1]
        cell.execution_count = count
        for out in cell.outputs:
            if out.get("output_type") == "execute_result":
                out["execution_count"] = count
    if language_info:
        nb.metadata["language_info"] = language_info
    if widgets:
        nb.metadata["widgets"] = {_WIDGET_MIME: widgets}
    return nb


def _store(folder: Path, source: Path, nb, seconds: float) -> None:
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    folder.mkdir(parents=True, exist_ok=True)
    bundle = CacheBundleIn(nb, str(source.resolve()), data={"execution_seconds": seconds, "executed_by": "nbval"})
    get_cache(str(folder)).cache_notebook_bundle(bundle, check_validity=False, overwrite=True)


def pytest_terminal_summary(terminalreporter):
    if _SECONDS:
        terminalreporter.section("seconds per chapter")
        for name, seconds in _SECONDS.items():
            terminalreporter.write_line(f"{seconds:8.1f} s  {name}")
