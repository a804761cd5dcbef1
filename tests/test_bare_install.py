"""A bare install: attn_lib's wheel in a clean virtual environment holding only its declared dependencies.

The wheel of this checkout (``pip wheel --no-deps``) goes into a fresh venv (no ``--system-site-packages``, nothing
of ``.venv``) with ``pip install``, which brings exactly the dependencies ``pyproject.toml`` declares (torch first
at ``TORCH_SPEC``, the Makefile's, so that pip takes the local CPU wheel). In that venv, offline:

* every module of the package imports (:func:`pkgutil.walk_packages`; ``__main__`` is the command line), the book's
  helpers included;
* ``python -m attn_lib reproduce --profile quick`` runs on a random-init GPT-2 saved to a folder (the stand-in model
  comes from a package the library does not declare; the torch path, so that no kernel is compiled) and writes ``report.md``, ``results.json`` and the figures.

A module that imports a package nobody declared (as ``tabulate`` was) fails here, not on a user's machine. The
venv lives in ``.cache/bare-install`` (rebuilt each run); the test takes a minute or two, most of it installing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "bare-install"
TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")

IMPORT_ALL = r"""
import importlib, pkgutil, sys
import attn_lib
assert attn_lib.__file__.startswith(sys.prefix), attn_lib.__file__  # the installed wheel, not the checkout
names = [m.name for m in pkgutil.walk_packages(attn_lib.__path__, "attn_lib.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    run = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert run.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> Path:
    shutil.rmtree(WORK, ignore_errors=True)
    wheels = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(ROOT)])
    (wheel,) = wheels.glob("attn_lib-*.whl")
    _run([sys.executable, "-m", "venv", str(WORK)])
    python = WORK / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-compile"]
    _run([*pip, TORCH_SPEC])
    _run([*pip, str(wheel)])
    return python


def _offline_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "ATTN_LIB_"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ATTN_LIB_OFFLINE="1", ATTN_LIB_CACHE_DIR=str(tmp))
    return env


def test_every_module_imports_from_the_declared_dependencies_alone(bare_venv, tmp_path):
    run = _run([str(bare_venv), "-c", IMPORT_ALL], cwd=tmp_path, env=_offline_env(tmp_path))
    assert int(run.stdout.split()[-1]) > 40


def test_reproduce_runs_offline_on_a_model_folder(bare_venv, tmp_path, tiny_gpt2):
    model = tmp_path / "model"
    tiny_gpt2.model.save_pretrained(model)
    tiny_gpt2.tokenizer.save_pretrained(model)
    out = tmp_path / "out"
    cmd = [str(bare_venv), "-m", "attn_lib", "reproduce", "--profile", "quick", "--model", str(model)]
    env = _offline_env(tmp_path / "cache") | {"ATTN_LIB_ENGINE": "torch"}  # no kernels to compile: the torch path
    _run([*cmd, "--device", "cpu", "--out", str(out), "-q"], cwd=tmp_path, env=env)
    report = (out / "report.md").read_text()
    assert "## Claims against measurements" in report and "## Figures" in report and str(model) in report
    assert json.loads((out / "results.json").read_text())["meta"]["model"]
    assert len(list(out.glob("fig*.png"))) == len(list(out.glob("fig*.svg"))) >= 7
