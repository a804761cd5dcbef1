"""Local Sphinx extension: build the book from the chapters nbval has just executed (``make test``).

With the environment variable ``ATTN_LIB_EXECUTED_CACHE`` naming a folder (``make test`` sets it for its nbval run and
its book build), the build reads each chapter's outputs from the jupyter-cache in that folder, where
``book/conftest.py`` stored nbval's execution, instead of executing the chapter again (MyST-NB's ``cache`` mode,
with that folder as its cache). A chapter missing from the cache -- its nbval run failed, or its code changed since
-- is executed by the build as usual and then reported by a warning, so that the warnings-as-errors build of
``make test`` fails rather than silently executing a chapter twice. Pages without an ``.ipynb`` twin, which nbval
does not run (the instructor guide), are executed by the build, once, as before.

Without the variable (``make book``), nothing changes: ``execute_notebooks: force`` of ``_config.yml`` executes every
chapter.
"""

from __future__ import annotations

import os
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util import logging

CACHE_ENV = "ATTN_LIB_EXECUTED_CACHE"
logger = logging.getLogger(__name__)


def _folder() -> Path | None:
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).resolve() if value else None


def _config_inited(app: Sphinx, config: Config) -> None:
    folder = _folder()
    if folder is None:
        return
    config.nb_execution_mode = "cache"
    config.nb_execution_cache_path = str(folder)


def _check_cache(app: Sphinx, env) -> None:
    """Warn for every chapter that the build executed itself (its cache record was not written by nbval)."""
    folder = _folder()
    if folder is None or not folder.exists():
        return
    from jupyter_cache import get_cache

    for record in get_cache(str(folder)).list_cache_records():
        # nbval runs the chapters' .ipynb twins; a page without one (the instructor guide) is the build's to execute
        if not Path(record.uri).with_suffix(".ipynb").exists():
            continue
        if (record.data or {}).get("executed_by") != "nbval":
            logger.warning(
                f"{record.uri} was executed by the book build: it is not in nbval's cache ({CACHE_ENV}={folder}), "
                "so make test executed it twice (did its nbval run fail, or did its code change since?)"
            )


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _config_inited)
    app.connect("env-updated", _check_cache)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
