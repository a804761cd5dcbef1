"""A bare install: attn_lib's wheel in a clean virtual environment holding only its declared dependencies.

The wheel of this checkout (``pip wheel --no-deps``) goes into a fresh venv (no ``--system-site-packages``, nothing
of ``.venv``) with ``pip install``, which brings exactly the dependencies ``pyproject.toml`` declares (torch first
at ``TORCH_SPEC``, the Makefile's, so that pip takes the local CPU wheel). In that venv, offline:

* every module of the package imports (:func:`pkgutil.walk_packages`; ``__main__`` is the command line), the book's
  helpers included;
* ``python -m attn_lib reproduce --profile quick`` runs on a random-init GPT-2 saved to a folder (the stand-in model
  comes from a package the library does not declare; the torch path, so that no kernel is compiled) and writes ``report.md``, ``results.json`` and the figures.

A module that imports a package nobody declared (as ``tabulate`` was) fails here, not on a user's machine. The
venv lives in ``.cache/bare-install`` (rebuilt each run); building it takes a minute or two, most of it pip waiting on
downloads and the disk (about a third of its wall time is CPU). So it is built in the background: as soon as a session
has collected these tests, :func:`start_background` starts ``python tests/test_bare_install.py build`` once per run
(``tests/conftest.py``; under pytest-xdist once for all workers, keyed by the run's ``testrunuid``), these tests run
after the others, and the ``bare_venv`` fixture waits for the build and fails with pip's output when it failed. The
checks are the same as building it in the fixture; run alone, the tests simply wait from the start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "bare-install"
#: one status file per test run (``<run id>.json``), written when the background build ends, and its log
RUNS = ROOT / ".cache" / "bare-install-runs"
#: how long the tests wait for the build (a slow network or a busy machine, not a hang guard for a healthy run)
BUILD_TIMEOUT_S = 1800
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


def build(status: Path) -> int:
    """Build the venv into :data:`WORK` (the wheel of this checkout, then torch at ``TORCH_SPEC`` and the wheel with
    its declared dependencies) and write ``status``: ``{"ok": true, "python": ...}`` or ``{"ok": false, "error": ...}``
    (the failed command and the tail of its output). Run by :func:`start_background` as a separate process."""
    t0 = time.monotonic()
    try:
        shutil.rmtree(WORK, ignore_errors=True)
        wheels = WORK / "wheel"
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(ROOT)])
        (wheel,) = wheels.glob("attn_lib-*.whl")
        venv = WORK / "venv"
        _run([sys.executable, "-m", "venv", str(venv)])
        python = venv / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--quiet", "--no-compile"]
        _run([*pip, TORCH_SPEC])
        _run([*pip, str(wheel)])
        result = {"ok": True, "python": str(python)}
    except BaseException as exc:  # every failure, an interrupt included, goes to the waiting test
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    result["seconds"] = round(time.monotonic() - t0, 1)
    tmp = status.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(status)  # atomic: a waiting test never reads half a file
    return 0 if result["ok"] else 1


def run_id(config: pytest.Config) -> str:
    """The id of this test run, shared by every pytest-xdist worker (its ``testrunuid``), else one per session."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput:
        return workerinput["testrunuid"]
    if not hasattr(config, "_attn_lib_run_id"):
        config._attn_lib_run_id = uuid.uuid4().hex
    return config._attn_lib_run_id


def start_background(config: pytest.Config) -> Path:
    """Start this run's build once (the first caller of any worker claims it) and return its status file."""
    RUNS.mkdir(parents=True, exist_ok=True)
    uid = run_id(config)
    status = RUNS / f"{uid}.json"
    try:
        fd = os.open(RUNS / f"{uid}.started", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return status  # started already, by this process or another worker
    for old in RUNS.iterdir():  # earlier runs' files
        if not old.name.startswith(uid) and time.time() - old.stat().st_mtime > 3600:
            old.unlink(missing_ok=True)
    with open(RUNS / f"{uid}.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "build", str(status)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            # no PYTHONPATH: with the checkout on it, pip would take the checkout's attn_lib.egg-info for an
            # installed attn_lib and skip the wheel
            env={k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
        )
    os.write(fd, str(proc.pid).encode())
    os.close(fd)
    _BUILDS[uid] = proc
    return status


_BUILDS: dict[str, subprocess.Popen] = {}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"  # a zombie (ended, not yet reaped) is not alive


def wait_for_build(config: pytest.Config, timeout: float = BUILD_TIMEOUT_S) -> Path:
    """The venv's Python once this run's build has ended; fails with the build's error and log otherwise."""
    status = start_background(config)  # a no-op when collection started it
    uid = run_id(config)
    started = RUNS / f"{uid}.started"
    deadline = time.monotonic() + timeout
    while not status.exists():
        proc = _BUILDS.get(uid)
        if proc is not None:
            proc.poll()  # reap it if it ended here
        pid = started.read_text().strip()
        if pid and not _alive(int(pid)) and not status.exists():
            pytest.fail(f"the bare-install build (pid {pid}) ended without a status; its log:\n{_log_tail(uid)}")
        if time.monotonic() > deadline:
            pytest.fail(f"the bare-install build took over {timeout:.0f} s; its log:\n{_log_tail(uid)}")
        time.sleep(0.5)
    result = json.loads(status.read_text())
    assert result["ok"], f"the bare-install build failed: {result['error']}\n{_log_tail(uid)}"
    return Path(result["python"])


def _log_tail(uid: str) -> str:
    log = RUNS / f"{uid}.log"
    return log.read_text()[-3000:] if log.exists() else "(no log)"


@pytest.fixture(scope="module")
def bare_venv(request) -> Path:
    return wait_for_build(request.config)


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


if __name__ == "__main__":  # python tests/test_bare_install.py build STATUS_FILE (what start_background runs)
    if sys.argv[1:2] != ["build"] or len(sys.argv) != 3:
        sys.exit("usage: python tests/test_bare_install.py build STATUS_FILE")
    sys.exit(build(Path(sys.argv[2])))
